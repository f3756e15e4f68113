"""URLs of the Health page."""

from django.urls import path

from replication_admin.health import views

urlpatterns = [
    path("health/", views.health_page, name="health"),
]
