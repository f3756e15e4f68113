"""URLs of transactional publications and subscriptions."""

from django.urls import path

from replication_admin.transactional import views as trx

# A publication is named by its publisher and account, a subscription also by its subscriber.
TRX_PUB = "publications/trx/<str:server>/<str:account>/"
TRX_SUB = "subscriptions/trx/<str:subscriber>/<str:server>/<str:account>/"

urlpatterns = [
    path("publications/trx/new/", trx.publication_create, name="trx-publications-new"),
    path(TRX_PUB, trx.publication_detail, name="trx-publications-detail"),
    path(TRX_PUB + "items/add/", trx.publication_add_item, name="trx-publications-add-item"),
    path(TRX_PUB + "items/remove/", trx.publication_remove_item, name="trx-publications-remove-item"),
    path(
        TRX_PUB + "items/column-conflicts/", trx.publication_column_conflicts, name="trx-publications-column-conflicts"
    ),
    path(TRX_PUB + "items/row-filter/", trx.publication_row_filter, name="trx-publications-row-filter"),
    path(TRX_PUB + "grant/", trx.publication_grant, name="trx-publications-grant"),
    path(TRX_PUB + "revoke/", trx.publication_revoke, name="trx-publications-revoke"),
    path(TRX_PUB + "new-log/", trx.publication_new_log, name="trx-publications-new-log"),
    path(TRX_PUB + "purger/", trx.publication_purger, name="trx-publications-purger"),
    path(TRX_PUB + "ack/", trx.publication_ack, name="trx-publications-ack"),
    path(TRX_PUB + "lag-alert/", trx.publication_lag_alert, name="trx-publications-lag-alert"),
    path(TRX_PUB + "on-conflict/", trx.publication_on_conflict, name="trx-publications-on-conflict"),
    path(TRX_PUB + "tracer/", trx.publication_tracer, name="trx-publications-tracer"),
    path(TRX_PUB + "tracer/schedule/", trx.publication_tracer_schedule, name="trx-publications-tracer-schedule"),
    path(TRX_PUB + "schema-changes/", trx.publication_schema_policy, name="trx-publications-schema-policy"),
    path("schema-changes/<int:pk>/approve/", trx.schema_change_approve, name="trx-schema-change-approve"),
    path(TRX_PUB + "purge/", trx.publication_purge, name="trx-publications-purge"),
    path(TRX_PUB + "drop/", trx.publication_drop, name="trx-publications-drop"),
    path("subscriptions/trx/new/", trx.subscription_create, name="trx-subscriptions-new"),
    path(TRX_SUB, trx.subscription_detail, name="trx-subscriptions-detail"),
    path(TRX_SUB + "valid/", trx.subscription_valid, name="trx-subscriptions-valid"),
    path(TRX_SUB + "init/", trx.subscription_init, name="trx-subscriptions-init"),
    path(TRX_SUB + "reload/", trx.subscription_reload, name="trx-subscriptions-reload"),
    path(TRX_SUB + "sync/", trx.subscription_sync, name="trx-subscriptions-sync"),
    path(TRX_SUB + "follow/", trx.subscription_follow, name="trx-subscriptions-follow"),
    path(TRX_SUB + "schedule/", trx.subscription_schedule, name="trx-subscriptions-schedule"),
    path(TRX_SUB + "profile/", trx.subscription_profile, name="trx-subscriptions-profile"),
    path(TRX_SUB + "row-filter/", trx.subscription_row_filter, name="trx-subscriptions-row-filter"),
    path(TRX_SUB + "drop/", trx.subscription_drop, name="trx-subscriptions-drop"),
    path(TRX_SUB + "skip/", trx.subscription_skip, name="trx-subscriptions-skip"),
    path(TRX_SUB + "repair/", trx.subscription_repair, name="trx-subscriptions-repair"),
]
