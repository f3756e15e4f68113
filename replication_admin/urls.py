from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from replication_admin.bidir import views as bidir
from replication_admin.conflicts import resolver_views as resolvers
from replication_admin.conflicts import views as conflicts
from replication_admin.console import audit_log as audit
from replication_admin.console import dashboard, jobs, lists, statement_console
from replication_admin.console import scheduler as catalog
from replication_admin.console import status_api as api
from replication_admin.servers import views as servers
from replication_admin.snapshots import views as snapshots
from replication_admin.transactional import views as trx
from replication_admin.wizard import views as wizard

# A transactional publication is named by its publisher and account, a subscription also by its subscriber.
TRX_PUB = "publications/trx/<str:server>/<str:account>/"
TRX_SUB = "subscriptions/trx/<str:subscriber>/<str:server>/<str:account>/"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("dashboard/charts/", dashboard.dashboard_charts, name="dashboard-charts"),
    path("alerts/<int:pk>/acknowledge/", dashboard.alert_acknowledge, name="alerts-acknowledge"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("setup/", wizard.setup_start, name="setup"),
    path("setup/start-over/", wizard.setup_reset, name="setup-reset"),
    path("setup/started/", wizard.setup_started, name="setup-started"),
    path("setup/<str:step>/", wizard.setup_step, name="setup-step"),
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
    path("snapshots/<path:name>/compare/", jobs.snapshot_compare, name="snapshots-compare"),
    path("snapshots/<path:name>/repair/", snapshots.snapshot_repair, name="snapshots-repair"),
    path("snapshots/<path:name>/schedule/", snapshots.snapshot_schedule, name="snapshots-schedule"),
    path("snapshots/<path:name>/drop/", snapshots.snapshot_drop, name="snapshots-drop"),
    path("snapshots/<path:name>/", snapshots.snapshot_detail, name="snapshots-detail"),
    path("statements/", statement_console.statement_console, name="statements"),
    path("publications/", lists.publication_list, name="publications"),
    path("publications/new/", bidir.publication_create, name="publications-new"),
    path("publications/<int:pk>/", bidir.publication_detail, name="publications-detail"),
    path("publications/<int:pk>/drop/", bidir.publication_drop, name="publications-drop"),
    path("publications/<int:pk>/sync/", bidir.publication_sync, name="publications-sync"),
    path("publications/<int:pk>/schedule/", bidir.publication_schedule, name="publications-schedule"),
    path("publications/<int:pk>/subscribe/", bidir.publication_subscribe, name="publications-subscribe"),
    path("publications/<int:pk>/resolvers/", resolvers.resolver_page, name="publications-resolvers"),
    path("publications/<int:pk>/resolvers/add/", resolvers.resolver_add, name="publications-resolvers-add"),
    path("publications/<int:pk>/resolvers/dry-run/", resolvers.resolver_dry_run, name="publications-dry-run"),
    path("publications/resolvers/<int:pk>/edit/", resolvers.resolver_edit, name="publications-resolver-edit"),
    path("publications/resolvers/<int:pk>/move/", resolvers.resolver_move, name="publications-resolver-move"),
    path("publications/resolvers/<int:pk>/remove/", resolvers.resolver_remove, name="publications-resolver-remove"),
    path("publications/trx/new/", trx.publication_create, name="trx-publications-new"),
    path(TRX_PUB, trx.publication_detail, name="trx-publications-detail"),
    path(TRX_PUB + "items/add/", trx.publication_add_item, name="trx-publications-add-item"),
    path(TRX_PUB + "items/remove/", trx.publication_remove_item, name="trx-publications-remove-item"),
    path(TRX_PUB + "grant/", trx.publication_grant, name="trx-publications-grant"),
    path(TRX_PUB + "revoke/", trx.publication_revoke, name="trx-publications-revoke"),
    path(TRX_PUB + "new-log/", trx.publication_new_log, name="trx-publications-new-log"),
    path(TRX_PUB + "purger/", trx.publication_purger, name="trx-publications-purger"),
    path(TRX_PUB + "purge/", trx.publication_purge, name="trx-publications-purge"),
    path(TRX_PUB + "drop/", trx.publication_drop, name="trx-publications-drop"),
    path("subscriptions/", lists.subscription_list, name="subscriptions"),
    path("subscriptions/trx/new/", trx.subscription_create, name="trx-subscriptions-new"),
    path(TRX_SUB, trx.subscription_detail, name="trx-subscriptions-detail"),
    path(TRX_SUB + "valid/", trx.subscription_valid, name="trx-subscriptions-valid"),
    path(TRX_SUB + "init/", trx.subscription_init, name="trx-subscriptions-init"),
    path(TRX_SUB + "sync/", trx.subscription_sync, name="trx-subscriptions-sync"),
    path(TRX_SUB + "follow/", trx.subscription_follow, name="trx-subscriptions-follow"),
    path(TRX_SUB + "schedule/", trx.subscription_schedule, name="trx-subscriptions-schedule"),
    path(TRX_SUB + "drop/", trx.subscription_drop, name="trx-subscriptions-drop"),
    path("subscriptions/<int:pk>/init/", bidir.subscription_init, name="subscriptions-init"),
    path("subscriptions/<int:pk>/drop/", bidir.subscription_drop, name="subscriptions-drop"),
    path("conflicts/", conflicts.conflict_list, name="conflicts"),
    path("conflicts/export.csv", conflicts.conflict_export, name="conflicts-export"),
    path("conflicts/<int:pk>/", conflicts.conflict_detail, name="conflicts-detail"),
    path("conflicts/<int:pk>/reapply/", conflicts.conflict_reapply, name="conflicts-reapply"),
    path("scheduler/", catalog.scheduler, name="scheduler"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/compare/", jobs.compare_start, name="jobs-compare"),
    path("jobs/compare/tables/", jobs.table_options, name="jobs-compare-tables"),
    path("jobs/<int:pk>/", jobs.job_detail, name="jobs-detail"),
    path("jobs/<int:pk>/cancel/", jobs.job_cancel, name="jobs-cancel"),
    path("audit/", audit.audit_list, name="audit"),
    path("admin/", admin.site.urls),
    path("api/status", api.status, name="api-status"),
    path("metrics", api.metrics, name="metrics"),
]
