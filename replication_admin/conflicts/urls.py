"""URLs of the conflict inbox and the resolver editors."""

from django.urls import path

from replication_admin.conflicts import resolver_views as resolvers
from replication_admin.conflicts import views as conflicts

TRX = {"kind": resolvers.TRANSACTIONAL}

urlpatterns = [
    path("publications/<int:pk>/resolvers/", resolvers.resolver_page, name="publications-resolvers"),
    path("publications/<int:pk>/resolvers/add/", resolvers.resolver_add, name="publications-resolvers-add"),
    path("publications/<int:pk>/resolvers/dry-run/", resolvers.resolver_dry_run, name="publications-dry-run"),
    path("publications/resolvers/<int:pk>/edit/", resolvers.resolver_edit, name="publications-resolver-edit"),
    path("publications/resolvers/<int:pk>/move/", resolvers.resolver_move, name="publications-resolver-move"),
    path("publications/resolvers/<int:pk>/remove/", resolvers.resolver_remove, name="publications-resolver-remove"),
    # The same editor over an updateable transactional publication's table (SYS_REPL_CR).
    path("publications/trx/items/<int:pk>/resolvers/", resolvers.resolver_page, TRX, name="trx-items-resolvers"),
    path("publications/trx/items/<int:pk>/resolvers/add/", resolvers.resolver_add, TRX, name="trx-items-resolvers-add"),
    path(
        "publications/trx/items/<int:pk>/resolvers/dry-run/", resolvers.resolver_dry_run, TRX, name="trx-items-dry-run"
    ),
    path("publications/trx/resolvers/<int:pk>/edit/", resolvers.resolver_edit, TRX, name="trx-resolver-edit"),
    path("publications/trx/resolvers/<int:pk>/move/", resolvers.resolver_move, TRX, name="trx-resolver-move"),
    path("publications/trx/resolvers/<int:pk>/remove/", resolvers.resolver_remove, TRX, name="trx-resolver-remove"),
    path("conflicts/", conflicts.conflict_list, name="conflicts"),
    path("conflicts/statistics/", conflicts.conflict_statistics_page, name="conflicts-statistics"),
    path("conflicts/retention/", conflicts.conflict_retention, name="conflicts-retention"),
    path("conflicts/export.csv", conflicts.conflict_export, name="conflicts-export"),
    path("conflicts/bulk/", conflicts.conflict_bulk, name="conflicts-bulk"),
    path("conflicts/<int:pk>/", conflicts.conflict_detail, name="conflicts-detail"),
    path("conflicts/<int:pk>/reapply/", conflicts.conflict_reapply, name="conflicts-reapply"),
    path("conflicts/<int:pk>/decide/", conflicts.conflict_decide, name="conflicts-decide"),
]
