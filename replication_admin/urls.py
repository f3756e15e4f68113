"""The console's URLs: each feature's own, included in an order where a longer route of one feature comes before
a catch-all of another (a snapshot's compare before the snapshot pages' snapshots/<path:name>/)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("replication_admin.console.urls")),
    path("", include("replication_admin.compare.urls")),
    path("", include("replication_admin.health.urls")),
    path("", include("replication_admin.wizard.urls")),
    path("", include("replication_admin.servers.urls")),
    path("", include("replication_admin.snapshots.urls")),
    path("", include("replication_admin.bidir.urls")),
    path("", include("replication_admin.transactional.urls")),
    path("", include("replication_admin.conflicts.urls")),
]
