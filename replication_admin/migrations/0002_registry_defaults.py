from django.db import migrations

DEFAULTS = {
    "snp_repl_tolerance_offset": "15",
    "snp_repl_purge_offset": "30",
    "repl_server_name": "console",
}


def seed(apps, schema_editor):
    RegistryEntry = apps.get_model("replication_admin", "RegistryEntry")
    for key, value in DEFAULTS.items():
        RegistryEntry.objects.get_or_create(key=key, defaults={"value": value})


def unseed(apps, schema_editor):
    apps.get_model("replication_admin", "RegistryEntry").objects.filter(key__in=DEFAULTS).delete()


class Migration(migrations.Migration):
    dependencies = [("replication_admin", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
