"""URLs of the conflict inbox and the resolver editors."""

from django.urls import path

from replication_admin.conflicts import resolver_views as resolvers
from replication_admin.conflicts import views as conflicts

urlpatterns = [
    path("publications/<int:pk>/resolvers/", resolvers.resolver_page, name="publications-resolvers"),
    path("publications/<int:pk>/resolvers/add/", resolvers.resolver_add, name="publications-resolvers-add"),
    path("publications/<int:pk>/resolvers/dry-run/", resolvers.resolver_dry_run, name="publications-dry-run"),
    path("publications/resolvers/<int:pk>/edit/", resolvers.resolver_edit, name="publications-resolver-edit"),
    path("publications/resolvers/<int:pk>/move/", resolvers.resolver_move, name="publications-resolver-move"),
    path("publications/resolvers/<int:pk>/remove/", resolvers.resolver_remove, name="publications-resolver-remove"),
    path("conflicts/", conflicts.conflict_list, name="conflicts"),
    path("conflicts/export.csv", conflicts.conflict_export, name="conflicts-export"),
    path("conflicts/<int:pk>/", conflicts.conflict_detail, name="conflicts-detail"),
    path("conflicts/<int:pk>/reapply/", conflicts.conflict_reapply, name="conflicts-reapply"),
]
