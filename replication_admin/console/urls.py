"""URLs of the dashboard, jobs, the statement console, the publications and subscriptions pages, the alerts and
their notification channels, the scheduler, the audit log, login lockouts, API tokens, the status API and metrics."""

from django.urls import path

from replication_admin.console import (
    alert_list,
    dashboard,
    favicon,
    jobs,
    lists,
    logins,
    notification_channels,
    statement_console,
    tokens,
)
from replication_admin.console import audit_log as audit
from replication_admin.console import scheduler as catalog
from replication_admin.console import status_api as api

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("favicon.ico", favicon.favicon, name="favicon"),
    path("dashboard/charts/", dashboard.dashboard_charts, name="dashboard-charts"),
    path("topology/", dashboard.topology_page, name="topology"),
    path("alerts/", alert_list.alert_list, name="alerts"),
    path("alerts/<int:pk>/acknowledge/", dashboard.alert_acknowledge, name="alerts-acknowledge"),
    path("alerts/channels/", notification_channels.channel_list, name="alerts-channels"),
    path("alerts/channels/<int:pk>/change/", notification_channels.channel_change, name="alerts-channels-change"),
    path("alerts/channels/<int:pk>/test/", notification_channels.channel_test, name="alerts-channels-test"),
    path("alerts/channels/<int:pk>/delete/", notification_channels.channel_delete, name="alerts-channels-delete"),
    path("snapshots/new/columns/", jobs.column_options, name="snapshots-columns"),
    path("statements/", statement_console.statement_console, name="statements"),
    path("publications/", lists.publication_list, name="publications"),
    path("subscriptions/", lists.subscription_list, name="subscriptions"),
    path("scheduler/", catalog.scheduler, name="scheduler"),
    path("scheduler/events/<path:name>/run/", catalog.event_run_now, name="scheduler-run"),
    path("scheduler/events/<path:name>/pause/", catalog.event_pause, name="scheduler-pause"),
    path("scheduler/events/<path:name>/resume/", catalog.event_resume, name="scheduler-resume"),
    path("scheduler/events/<path:name>/interval/", catalog.event_interval, name="scheduler-interval"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<int:pk>/", jobs.job_detail, name="jobs-detail"),
    path("jobs/<int:pk>/cancel/", jobs.job_cancel, name="jobs-cancel"),
    path("jobs/<int:pk>/retry/", jobs.job_retry, name="jobs-retry"),
    path("audit/", audit.audit_list, name="audit"),
    path("logins/", logins.login_list, name="logins"),
    path("logins/unlock/", logins.login_unlock, name="logins-unlock"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="tokens-revoke"),
    path("api/status", api.status, name="api-status"),
    path("metrics", api.metrics, name="metrics"),
]
