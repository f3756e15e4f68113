"""URLs of compares: start one, the tables of a server, a snapshot's compare, and on a finished compare the repair
of chosen keys and compare again; a transactional or bi-directional subscription's validation and a snapshot's, now
and again."""

from django.urls import path

from replication_admin.compare import views

urlpatterns = [
    path("snapshots/<path:name>/compare/", views.snapshot_compare, name="snapshots-compare"),
    path("snapshots/<path:name>/validate/", views.snapshot_validate, name="snapshots-validate"),
    path("jobs/compare/", views.compare_start, name="jobs-compare"),
    path("jobs/compare/tables/", views.table_options, name="jobs-compare-tables"),
    path("jobs/<int:pk>/repair/", views.compare_repair, name="jobs-compare-repair"),
    path("jobs/<int:pk>/compare-again/", views.compare_again, name="jobs-compare-again"),
    path("jobs/<int:pk>/validate-again/", views.validate_again, name="jobs-validate-again"),
    path("subscriptions/<int:pk>/validate/", views.bidir_subscription_validate, name="subscriptions-validate"),
    path(
        "subscriptions/trx/<str:subscriber>/<str:server>/<str:account>/validate/",
        views.subscription_validate,
        name="trx-subscriptions-validate",
    ),
]
