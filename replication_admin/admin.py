"""Django admin for every catalog table; each change made here is also written to the audit log."""

from __future__ import annotations

from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.contrib import admin

from replication_admin import models
from replication_admin.core.audit import Actor, record


class AuditedAdmin(admin.ModelAdmin):
    def _audit(self, request, action: str, obj) -> None:
        actor = Actor(user=request.user, via="admin", remote_addr=request.META.get("REMOTE_ADDR"))
        record(actor, f"admin.{obj._meta.db_table}.{action}", str(obj))

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        self._audit(request, "change" if change else "add", obj)

    def delete_model(self, request, obj):
        label = str(obj)
        super().delete_model(request, obj)
        actor = Actor(user=request.user, via="admin", remote_addr=request.META.get("REMOTE_ADDR"))
        record(actor, f"admin.{obj._meta.db_table}.delete", label)

    def delete_queryset(self, request, queryset):
        labels = [str(o) for o in queryset]
        table = queryset.model._meta.db_table
        super().delete_queryset(request, queryset)
        actor = Actor(user=request.user, via="admin", remote_addr=request.META.get("REMOTE_ADDR"))
        for label in labels:
            record(actor, f"admin.{table}.delete", label)


@admin.register(models.Server)
class ServerAdmin(AuditedAdmin):
    list_display = ("name", "dialect", "db_address", "repl_address", "last_check_ok", "last_check_at")
    list_filter = ("dialect", "last_check_ok")
    search_fields = ("name", "host", "database")
    # The encrypted password never leaves the server: not shown, not editable (the console's server form sets it).
    exclude = ("password_encrypted",)
    readonly_fields = (
        "db_address",
        "repl_address",
        "last_check_at",
        "last_check_ok",
        "last_check_error",
        "last_check_version",
    )


@admin.register(models.Snapshot)
class SnapshotAdmin(AuditedAdmin):
    list_display = ("name", "is_incremental", "source_table", "last_ts", "dest_server", "dest_table")
    search_fields = ("name", "source_table")


@admin.register(models.SnapshotLog)
class SnapshotLogAdmin(AuditedAdmin):
    list_display = ("source", "rlog", "rplog", "server", "table")


@admin.register(models.SnapshotPublication)
class SnapshotPublicationAdmin(AuditedAdmin):
    list_display = ("item", "type", "last_ts", "server")


@admin.register(models.SnapshotSubscription)
class SnapshotSubscriptionAdmin(AuditedAdmin):
    list_display = ("server", "item", "type", "last_pull_ts", "last_push_ts")


@admin.register(models.SnapshotConflictResolver)
class SnapshotConflictResolverAdmin(AuditedAdmin):
    list_display = ("id", "table_name", "type", "order", "proc", "resolver_class")
    list_filter = ("type", "resolver_class")


@admin.register(models.TransactionalConflictResolver)
class TransactionalConflictResolverAdmin(AuditedAdmin):
    list_display = ("id", "table_name", "type", "order", "proc", "resolver_class")
    list_filter = ("type", "resolver_class")


@admin.register(models.ReplAccount)
class ReplAccountAdmin(AuditedAdmin):
    list_display = ("server", "account", "level", "is_updateable", "sync_user", "p_time")


@admin.register(models.ReplSubscriber)
class ReplSubscriberAdmin(AuditedAdmin):
    list_display = ("server", "account", "subscriber", "level", "valid", "state", "last_sync_at")
    list_filter = ("valid", "state")


@admin.register(models.DeclaredServer)
class DeclaredServerAdmin(AuditedAdmin):
    list_display = ("subscriber", "server", "dsn", "address")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records replication writes (gaps, level history): readable here, never edited."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(models.SkippedTransaction)
class SkippedTransactionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "server", "account", "subscriber", "level", "error")
    search_fields = ("server", "account", "subscriber", "error")


@admin.register(models.LevelSample)
class LevelSampleAdmin(ReadOnlyAdmin):
    list_display = ("at", "server", "account", "subscriber", "level", "publisher_level", "lag")


@admin.register(models.Tracer)
class TracerAdmin(ReadOnlyAdmin):
    list_display = ("posted_at", "server", "account", "posted_by", "error")


@admin.register(models.TracerArrival)
class TracerArrivalAdmin(ReadOnlyAdmin):
    list_display = ("tracer", "subscriber", "applied_at")


@admin.register(models.TpItem)
class TpItemAdmin(AuditedAdmin):
    list_display = ("server", "acct", "type", "item", "options", "is_copy")


@admin.register(models.TpGrant)
class TpGrantAdmin(AuditedAdmin):
    list_display = ("acct", "grantee")


@admin.register(models.ScheduledEvent)
class ScheduledEventAdmin(AuditedAdmin):
    list_display = ("name", "start", "interval", "last_started", "last_completed", "disabled", "last_error")
    list_filter = ("disabled",)


@admin.register(models.RegistryEntry)
class RegistryEntryAdmin(AuditedAdmin):
    list_display = ("key", "value")


@admin.register(models.JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "target",
        "state",
        "progress_done",
        "progress_total",
        "created_at",
        "finished_at",
    )
    list_filter = ("state", "kind")
    readonly_fields = [f.name for f in models.JobRun._meta.fields]


@admin.register(models.ConflictBackup)
class ConflictBackupAdmin(admin.ModelAdmin):
    """Conflict backups are evidence: readable here, changed only by re-applying from the inbox."""

    list_display = ("id", "created_at", "item", "source", "conflict_type", "decision", "resolver", "reapplied_at")
    list_filter = ("conflict_type", "decision", "kind")
    search_fields = ("item", "source", "change_guid")
    readonly_fields = [f.name for f in models.ConflictBackup._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.Alert)
class AlertAdmin(admin.ModelAdmin):
    """Alerts are acknowledged from the dashboard (audited); here they are read."""

    list_display = ("last_seen_at", "kind", "target", "count", "emailed_at", "acknowledged_at", "acknowledged_by")
    list_filter = ("kind",)
    search_fields = ("target", "message")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(models.AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "username", "action", "target", "outcome", "via")
    list_filter = ("outcome", "via")
    search_fields = ("username", "action", "target")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens are made and revoked on the console's API tokens page (audited); here they are read."""

    list_display = ("name", "prefix", "scopes", "created_at", "created_by", "last_used_at", "revoked_at")
    exclude = ("token_hash",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# Deleting an access attempt lifts that login lockout: audited as the console's Unlock button is.
admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class AuditedAccessAttemptAdmin(AccessAttemptAdmin):
    def _unlocked(self, request, attempt) -> None:
        actor = Actor(user=request.user, via="admin", remote_addr=request.META.get("REMOTE_ADDR"))
        target = f"{attempt.username} from {attempt.ip_address}"
        record(actor, "login.unlock", target, detail={"username": attempt.username, "address": attempt.ip_address})

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        self._unlocked(request, obj)

    def delete_queryset(self, request, queryset):
        attempts = list(queryset)
        super().delete_queryset(request, queryset)
        for attempt in attempts:
            self._unlocked(request, attempt)
