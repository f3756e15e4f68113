"""The console's three roles as auth groups: viewer (reads only), operator (runs replication), editor (also
creates and drops what is replicated). Superusers hold every permission whatever their groups."""

from django.db import migrations

# The same codenames and names as RegistryEntry.Meta.permissions. On a fresh database Django creates them only
# after every migration has run (post_migrate), so this migration creates them itself when they are missing.
PERMISSIONS = {
    "operate": "Can run replication: refresh, sync, compare, initial copy, mark valid",
    "edit": "Can create and drop servers, snapshots, publications, resolvers and statements",
}
ROLES = {
    "viewer": [],
    "operator": ["operate"],
    "editor": ["operate", "edit"],
}


def create_roles(apps, schema_editor):
    db = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.using(db).get_or_create(app_label="replication_admin", model="registryentry")
    permissions = {}
    for codename, name in PERMISSIONS.items():
        permissions[codename], _ = Permission.objects.using(db).get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )
    for role, codenames in ROLES.items():
        group, _ = Group.objects.using(db).get_or_create(name=role)
        group.permissions.set([permissions[codename] for codename in codenames])


def remove_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.using(schema_editor.connection.alias).filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("replication_admin", "0006_transactional"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunPython(create_roles, remove_roles),
    ]
