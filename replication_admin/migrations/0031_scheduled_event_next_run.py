"""SE_NEXT_RUN: when each scheduled event is next due (engine/schedule.py due_from), indexed, so a scheduler tick
reads only the due rows; filled in for the events that exist."""

from django.db import migrations, models


def fill_next_run(apps, schema_editor):
    from replication_admin.engine.schedule import EventTimes, due_from

    events = apps.get_model("replication_admin", "ScheduledEvent")
    for event in events.objects.all():
        times = EventTimes(
            name=event.name, start=event.start, interval=event.interval, last_completed=event.last_completed,
            disabled=event.disabled, last_slot=event.last_slot, last_started=event.last_started,
            failed=bool(event.last_error),
        )  # fmt: skip
        events.objects.filter(pk=event.pk).update(next_run=due_from(times))


class Migration(migrations.Migration):
    dependencies = [
        ("replication_admin", "0030_process_kind_spark"),
    ]

    operations = [
        migrations.AddField(
            model_name="scheduledevent",
            name="next_run",
            field=models.DateTimeField(blank=True, db_column="SE_NEXT_RUN", db_index=True, editable=False, null=True),
        ),
        migrations.RunPython(fill_next_run, migrations.RunPython.noop),
    ]
