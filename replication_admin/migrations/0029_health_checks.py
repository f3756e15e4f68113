from django.db import migrations

BEFORE = "replication_admin.console.health.check_health"
AFTER = "replication_admin.health.checks.check_health"


def point(old: str, new: str):
    def run(apps, schema_editor):
        apps.get_model("django_q", "Schedule").objects.using(schema_editor.connection.alias).filter(func=old).update(
            func=new
        )

    return run


class Migration(migrations.Migration):
    """The periodic health check lives in replication_admin.health.checks: its django-q2 schedule (0012_status)
    names it there."""

    dependencies = [
        ("replication_admin", "0028_server_dialect_from_the_registry"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(point(BEFORE, AFTER), point(AFTER, BEFORE))]
