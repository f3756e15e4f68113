from django.db import migrations

FUNC = "replication_admin.tasks.scheduler_round"


def create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.get_or_create(
        func=FUNC,
        defaults={"name": "replication scheduler", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(func=FUNC).delete()


class Migration(migrations.Migration):
    """The scheduler round runs every minute in the django-q2 cluster (Virtuoso's SchedulerInterval)."""

    dependencies = [("replication_admin", "0003_repl_lock"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [migrations.RunPython(create, remove)]
