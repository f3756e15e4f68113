"""URLs of snapshots and snapshot logs."""

from django.urls import path

from replication_admin.snapshots import views as snapshots

urlpatterns = [
    path("snapshots/", snapshots.snapshot_list, name="snapshots"),
    path("snapshots/new/", snapshots.snapshot_create, name="snapshots-new"),
    path("snapshots/logs/<str:server>/", snapshots.snapshot_logs, name="snapshots-logs"),
    path("snapshots/logs/<str:server>/ddl/<path:table>/", snapshots.snapshot_log_ddl, name="snapshots-log-ddl"),
    path("snapshots/logs/<str:server>/<str:action>/", snapshots.snapshot_log_action, name="snapshots-log-action"),
    path("snapshots/<path:name>/refresh/", snapshots.snapshot_refresh, name="snapshots-refresh"),
    path("snapshots/<path:name>/repair/", snapshots.snapshot_repair, name="snapshots-repair"),
    path("snapshots/<path:name>/schedule/", snapshots.snapshot_schedule, name="snapshots-schedule"),
    path("snapshots/<path:name>/drop/", snapshots.snapshot_drop, name="snapshots-drop"),
    path("snapshots/<path:name>/", snapshots.snapshot_detail, name="snapshots-detail"),
]
