from django.apps import AppConfig


class ReplicationAdminConfig(AppConfig):
    name = "replication_admin"
    verbose_name = "Replication"
    default_auto_field = "django.db.models.BigAutoField"
