"""URLs of bi-directional publications and subscriptions."""

from django.urls import path

from replication_admin.bidir import views as bidir

urlpatterns = [
    path("publications/new/", bidir.publication_create, name="publications-new"),
    path("publications/<int:pk>/", bidir.publication_detail, name="publications-detail"),
    path("publications/<int:pk>/ddl/", bidir.publication_ddl, name="publications-ddl"),
    path("publications/<int:pk>/drop/", bidir.publication_drop, name="publications-drop"),
    path("publications/<int:pk>/sync/", bidir.publication_sync, name="publications-sync"),
    path("publications/<int:pk>/schedule/", bidir.publication_schedule, name="publications-schedule"),
    path("publications/<int:pk>/subscribe/", bidir.publication_subscribe, name="publications-subscribe"),
    path("subscriptions/<int:pk>/init/", bidir.subscription_init, name="subscriptions-init"),
    path("subscriptions/<int:pk>/drop/", bidir.subscription_drop, name="subscriptions-drop"),
]
