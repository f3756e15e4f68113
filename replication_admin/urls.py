from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from replication_admin.views import audit, catalog, dashboard, jobs, servers, snapshots

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("servers/", servers.server_list, name="servers"),
    path("servers/add/", servers.server_add, name="servers-add"),
    path("servers/test/", servers.server_test_form, name="servers-test"),
    path("servers/<str:name>/", servers.server_detail, name="servers-detail"),
    path("servers/<str:name>/edit/", servers.server_edit, name="servers-edit"),
    path("servers/<str:name>/delete/", servers.server_delete, name="servers-delete"),
    path("servers/<str:name>/check/", servers.server_check, name="servers-check"),
    path("servers/<str:name>/tables/", servers.server_tables, name="servers-tables"),
    path("servers/<str:name>/tables/<path:table>/", servers.server_table, name="servers-table"),
    path("snapshots/", snapshots.snapshot_list, name="snapshots"),
    path("snapshots/new/", snapshots.snapshot_create, name="snapshots-new"),
    path("snapshots/new/columns/", jobs.column_options, name="snapshots-columns"),
    path("snapshots/logs/<str:server>/", snapshots.snapshot_logs, name="snapshots-logs"),
    path("snapshots/logs/<str:server>/ddl/<path:table>/", snapshots.snapshot_log_ddl, name="snapshots-log-ddl"),
    path("snapshots/logs/<str:server>/<str:action>/", snapshots.snapshot_log_action, name="snapshots-log-action"),
    path("snapshots/<path:name>/refresh/", snapshots.snapshot_refresh, name="snapshots-refresh"),
    path("snapshots/<path:name>/compare/", snapshots.snapshot_compare, name="snapshots-compare"),
    path("snapshots/<path:name>/repair/", snapshots.snapshot_repair, name="snapshots-repair"),
    path("snapshots/<path:name>/schedule/", snapshots.snapshot_schedule, name="snapshots-schedule"),
    path("snapshots/<path:name>/drop/", snapshots.snapshot_drop, name="snapshots-drop"),
    path("snapshots/<path:name>/", snapshots.snapshot_detail, name="snapshots-detail"),
    path("statements/", snapshots.statement_console, name="statements"),
    path("publications/", catalog.publications, name="publications"),
    path("subscriptions/", catalog.subscriptions, name="subscriptions"),
    path("conflicts/", catalog.conflicts, name="conflicts"),
    path("scheduler/", catalog.scheduler, name="scheduler"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/compare/", jobs.compare_start, name="jobs-compare"),
    path("jobs/compare/tables/", jobs.table_options, name="jobs-compare-tables"),
    path("jobs/<int:pk>/", jobs.job_detail, name="jobs-detail"),
    path("jobs/<int:pk>/cancel/", jobs.job_cancel, name="jobs-cancel"),
    path("audit/", audit.audit_list, name="audit"),
    path("admin/", admin.site.urls),
]
