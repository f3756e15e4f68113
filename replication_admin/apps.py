import logging

from django.apps import AppConfig
from django.conf import settings
from django.contrib.auth.signals import user_login_failed

log = logging.getLogger("replication_admin")


class ReplicationAdminConfig(AppConfig):
    name = "replication_admin"
    verbose_name = "Replication"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The receivers need the app registry, which is ready only now.
        from axes.signals import user_locked_out  # noqa: PLC0415 - imports axes' models: needs the registry

        from replication_admin.console import logins  # noqa: PLC0415 - imports the catalog's models: same

        user_login_failed.connect(logins.audit_login_failed, dispatch_uid="replication_admin.login_failed")
        user_locked_out.connect(logins.audit_locked_out, dispatch_uid="replication_admin.locked_out")
        if settings.DEBUG:
            log.warning(
                "DEBUG is on (REPLADMIN_DEBUG): development settings, not for production — error pages show "
                "settings and code, and cookies are sent without TLS"
            )
