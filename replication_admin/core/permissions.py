"""The console's permissions, named once: every action's `require`, every view's `requires` and every page's
`may.<name>` read these (a permission is never written out anywhere else)."""

from __future__ import annotations

from typing import Final

# The two roles' permissions (Meta.permissions of the catalog's registry, granted by the roles migration).
EDIT: Final = "replication_admin.edit"  # create and drop servers, snapshots, publications, resolvers, statements
OPERATE: Final = "replication_admin.operate"  # run replication: refresh, sync, compare, initial copy, mark valid
# Django's own: lifting login lockouts is managing users.
UNLOCK_LOGINS: Final = "auth.change_user"

# How a refusal names the missing permission, and the role that holds it.
DESCRIPTIONS: Final = {
    EDIT: "the edit permission (the editor role)",
    OPERATE: "the operate permission (the operator or editor role)",
    UNLOCK_LOGINS: "the permission to change users",
}

# What pages ask (`{% if may.operate %}`), by the name they ask it.
BY_NAME: Final = {"edit": EDIT, "operate": OPERATE, "unlock_logins": UNLOCK_LOGINS}
