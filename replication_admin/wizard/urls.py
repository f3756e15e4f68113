"""URLs of the setup wizard."""

from django.urls import path

from replication_admin.wizard import views as wizard

urlpatterns = [
    path("setup/", wizard.setup_start, name="setup"),
    path("setup/start-over/", wizard.setup_reset, name="setup-reset"),
    path("setup/started/", wizard.setup_started, name="setup-started"),
    path("setup/<str:step>/", wizard.setup_step, name="setup-step"),
]
