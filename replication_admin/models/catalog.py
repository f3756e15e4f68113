"""The replication catalog: Django models over Virtuoso's system tables.

Table and column names are Virtuoso's (db_table / db_column). Where Virtuoso has a composite primary
key, the Django admin needs a single-column key, so the table gets a surrogate `id` column and the
Virtuoso key becomes a unique constraint with the same columns (see docs/catalog.md). Extra columns our
system needs carry the table's prefix and are listed in docs/catalog.md with their purpose.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.urls import reverse

from replication_admin.engine import dialects
from replication_admin.engine.resolvers import CONFLICT_TYPES
from replication_admin.engine.schedule import EventTimes, due_from

ITEM_TYPES = [(1, "WebDAV collection"), (2, "table"), (3, "procedure")]
CR_TYPES = [(t.code, t.label) for t in CONFLICT_TYPES.values()]
INIT_STATES = [("none", "not copied"), ("staging", "staging"), ("copying", "copying"), ("done", "copied")]
ON_ERROR = [("halt", "halt and retry"), ("skip", "skip and record the gap")]


def dialect_choices() -> list[tuple[str, str]]:
    """The dialects a server may be registered with: the registry's live ones (engine/dialects), read when asked."""
    return [(name, dialects.get(name).label) for name in dialects.live_names()]


class DialectField(models.CharField):
    """A dialect's name, one of the registry's live dialects (validated against it: full_clean, forms).

    The choices are read from the registry when asked and left out of migrations: adding a dialect is its
    module and its registry line, never a migration."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["choices"] = dialect_choices
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        kwargs.pop("choices", None)
        return name, "django.db.models.CharField", args, kwargs


class Server(models.Model):
    """SYS_SERVERS: servers this console knows, and how to reach them."""

    name = models.CharField("server", max_length=128, unique=True, db_column="SERVER")
    db_address = models.CharField(max_length=512, blank=True, db_column="DB_ADDRESS")
    repl_address = models.CharField(max_length=300, blank=True, db_column="REPL_ADDRESS")
    # Extra columns: the fields the addresses are derived from.
    dialect = DialectField(max_length=20, db_column="SRV_DIALECT")
    host = models.CharField(max_length=253, blank=True, db_column="SRV_HOST")
    port = models.PositiveIntegerField(null=True, blank=True, db_column="SRV_PORT")
    database = models.CharField("database or file path", max_length=1024, blank=True, db_column="SRV_DATABASE")
    schema = models.CharField(max_length=128, blank=True, db_column="SRV_SCHEMA")
    user = models.CharField(max_length=128, blank=True, db_column="SRV_USER")
    password_encrypted = models.TextField(blank=True, db_column="SRV_PASSWORD_ENC")
    odbc_dsn = models.CharField("ODBC DSN", max_length=128, blank=True, db_column="SRV_ODBC_DSN")
    description = models.CharField(max_length=300, blank=True, db_column="SRV_DESCRIPTION")
    last_check_at = models.DateTimeField(null=True, blank=True, db_column="SRV_CHECKED_AT")
    last_check_ok = models.BooleanField(null=True, db_column="SRV_CHECK_OK")
    last_check_error = models.TextField(blank=True, db_column="SRV_CHECK_ERROR")
    last_check_version = models.CharField(max_length=200, blank=True, db_column="SRV_VERSION")
    created_at = models.DateTimeField(auto_now_add=True, db_column="SRV_CREATED_AT")
    updated_at = models.DateTimeField(auto_now=True, db_column="SRV_UPDATED_AT")

    class Meta:
        db_table = "SYS_SERVERS"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(port__isnull=True) | Q(port__gte=1, port__lte=65535),
                name="sys_servers_port_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # No check constraint lists the dialects (adding one would need a migration): a server is stored only with
        # a live dialect of the registry, whoever saves it.
        if self.dialect not in dialects.live_names():
            raise ValidationError(
                {"dialect": f"{self.dialect!r} is not a valid choice: one of {', '.join(dialects.live_names())}"}
            )
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("servers-detail", args=[self.name])

    @property
    def location(self) -> str:
        """Where the server is, for people (never includes the password)."""
        if self.odbc_dsn:
            return f"DSN {self.odbc_dsn}"
        if dialects.get(self.dialect).file_based:
            return self.database
        return f"{self.user}@{self.host}:{self.port}/{self.database}" + (f" ({self.schema})" if self.schema else "")


class Snapshot(models.Model):
    """SYS_SNAPSHOT: one row per snapshot (its destination table)."""

    name = models.CharField(max_length=255, primary_key=True, db_column="SN_NAME")
    query = models.TextField(db_column="SN_QUERY")
    last_ts = models.DateTimeField(null=True, blank=True, db_column="SN_LAST_TS")
    is_incremental = models.IntegerField(null=True, blank=True, db_column="SN_IS_INCREMENTAL")
    source_table = models.CharField(max_length=255, null=True, blank=True, db_column="SN_SOURCE_TABLE")
    last_upd_bm = models.CharField(max_length=255, null=True, blank=True, db_column="SN_LAST_UPD_BM")
    # Extra columns: where source and destination live, and the parts of an incremental definition.
    source_server = models.ForeignKey(
        Server,
        on_delete=models.PROTECT,
        related_name="snapshots_from",
        db_column="SN_SOURCE_SERVER",
        to_field="name",
        null=True,
        blank=True,
    )
    dest_server = models.ForeignKey(
        Server,
        on_delete=models.PROTECT,
        related_name="snapshots_to",
        db_column="SN_DEST_SERVER",
        to_field="name",
    )
    dest_table = models.CharField(max_length=255, db_column="SN_DEST_TABLE")
    source_columns = models.TextField(blank=True, db_column="SN_COLUMNS")
    condition = models.TextField(blank=True, db_column="SN_CONDITION")
    # An incremental snapshot's source table as last followed (engine.schema_changes' column rows): a refresh
    # compares the live table with it and brings the destination along (docs/schema-changes.md).
    definition = models.JSONField(default=list, blank=True, db_column="SN_DEFINITION")
    created_at = models.DateTimeField(auto_now_add=True, db_column="SN_CREATED_AT")

    class Meta:
        db_table = "SYS_SNAPSHOT"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["dest_server", "dest_table"], name="sys_snapshot_one_per_destination"),
            models.CheckConstraint(
                condition=Q(is_incremental__isnull=True) | Q(source_table__isnull=False),
                name="sys_snapshot_incremental_has_source",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class SnapshotLog(models.Model):
    """SYS_SNAPSHOT_LOG: a snapshot log (RLOG_ table + triggers) on a source table."""

    source = models.CharField(max_length=320, primary_key=True, db_column="SNL_SOURCE")
    rlog = models.CharField(max_length=320, db_column="SNL_RLOG")
    rplog = models.CharField(max_length=320, unique=True, db_column="SNL_RPLOG")
    server = models.ForeignKey(
        Server,
        on_delete=models.PROTECT,
        related_name="snapshot_logs",
        db_column="SNL_SERVER",
        to_field="name",
    )
    table = models.CharField(max_length=255, db_column="SNL_TABLE")
    created_at = models.DateTimeField(auto_now_add=True, db_column="SNL_CREATED_AT")

    class Meta:
        db_table = "SYS_SNAPSHOT_LOG"
        ordering = ["source"]
        constraints = [models.UniqueConstraint(fields=["server", "table"], name="sys_snapshot_log_one_per_table")]

    def __str__(self) -> str:
        return self.source


class SnapshotPublication(models.Model):
    """SYS_SNAPSHOT_PUB: items published for bi-directional snapshot replication."""

    item = models.CharField(max_length=320, db_column="SP_ITEM")
    type = models.IntegerField(choices=ITEM_TYPES[:2], default=2, db_column="SP_TYPE")
    last_ts = models.DateTimeField(null=True, blank=True, db_column="SP_LAST_TS")
    server = models.ForeignKey(
        Server,
        on_delete=models.PROTECT,
        related_name="snapshot_publications",
        db_column="SP_SERVER",
        to_field="name",
        null=True,
        blank=True,
    )
    # Extra columns: the published table's name on its server, and the last sync's outcome.
    table = models.CharField(max_length=255, blank=True, db_column="SP_TABLE")
    # The publisher's table as its subscribers last followed it (engine.schema_changes' column rows).
    definition = models.JSONField(default=list, blank=True, db_column="SP_DEFINITION")
    last_sync_at = models.DateTimeField(null=True, blank=True, db_column="SP_LAST_SYNC_AT")
    last_sync_error = models.TextField(blank=True, db_column="SP_LAST_SYNC_ERROR")
    created_at = models.DateTimeField(auto_now_add=True, db_column="SP_CREATED_AT")

    class Meta:
        db_table = "SYS_SNAPSHOT_PUB"
        ordering = ["item"]
        constraints = [
            models.UniqueConstraint(fields=["item", "type"], name="sys_snapshot_pub_pk"),
            models.CheckConstraint(condition=Q(type__in=[1, 2]), name="sys_snapshot_pub_type"),
        ]

    def __str__(self) -> str:
        return self.item

    def get_absolute_url(self) -> str:
        return reverse("publications-detail", args=[self.pk])


class SnapshotSubscription(models.Model):
    """SYS_SNAPSHOT_SUB: subscribers of a bi-directional snapshot publication."""

    server = models.CharField(max_length=128, db_column="SS_SERVER")
    item = models.CharField(max_length=320, db_column="SS_ITEM")
    type = models.IntegerField(choices=ITEM_TYPES[:2], default=2, db_column="SS_TYPE")
    last_pull_ts = models.DateTimeField(null=True, blank=True, db_column="SS_LAST_PULL_TS")
    last_push_ts = models.DateTimeField(null=True, blank=True, db_column="SS_LAST_PUSH_TS")
    # Extra columns: the initial copy's state and progress (REPL_INIT_SNAPSHOT), the last sync's outcome.
    init_state = models.CharField(max_length=10, choices=INIT_STATES, default="none", db_column="SS_INIT_STATE")
    init_rows_done = models.BigIntegerField(default=0, db_column="SS_INIT_ROWS_DONE")
    init_rows_total = models.BigIntegerField(null=True, blank=True, db_column="SS_INIT_ROWS_TOTAL")
    init_rows_per_commit = models.IntegerField(default=100, db_column="SS_INIT_ROWS_PER_COMMIT")
    init_started_at = models.DateTimeField(null=True, blank=True, db_column="SS_INIT_STARTED_AT")
    init_bookmark = models.BigIntegerField(default=-1, db_column="SS_INIT_BOOKMARK")
    last_sync_at = models.DateTimeField(null=True, blank=True, db_column="SS_LAST_SYNC_AT")
    last_error = models.TextField(blank=True, db_column="SS_LAST_ERROR")
    created_at = models.DateTimeField(auto_now_add=True, db_column="SS_CREATED_AT")

    class Meta:
        db_table = "SYS_SNAPSHOT_SUB"
        ordering = ["item", "server"]
        constraints = [
            models.UniqueConstraint(fields=["server", "item", "type"], name="sys_snapshot_sub_pk"),
            models.CheckConstraint(
                condition=Q(init_state__in=[s for s, _ in INIT_STATES]), name="sys_snapshot_sub_init_state"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.server}: {self.item}"


class ConflictResolverBase(models.Model):
    """Common columns of SYS_SNAPSHOT_CR and SYS_REPL_CR."""

    id = models.AutoField(primary_key=True, db_column="CR_ID")
    table_name = models.CharField(max_length=320, db_column="CR_TABLE_NAME")
    type = models.CharField(max_length=1, choices=CR_TYPES, db_column="CR_TYPE")
    proc = models.CharField(max_length=320, db_column="CR_PROC")
    order = models.IntegerField(default=0, db_column="CR_ORDER")
    # Extra columns: the generated class, its column, and a custom expression (see docs/catalog.md).
    resolver_class = models.CharField(max_length=20, blank=True, db_column="CR_CLASS")
    column = models.CharField(max_length=255, blank=True, db_column="CR_COLUMN")
    expression = models.TextField(blank=True, db_column="CR_EXPRESSION")
    assignments = models.JSONField(default=dict, blank=True, db_column="CR_ASSIGNMENTS")
    notify = models.CharField(max_length=254, blank=True, db_column="CR_NOTIFY")

    class Meta:
        abstract = True
        ordering = ["table_name", "type", "order"]

    def __str__(self) -> str:
        return f"{self.table_name} {self.type} #{self.order}: {self.proc}"


class SnapshotConflictResolver(ConflictResolverBase):
    assignments_text: str  # not a column: the resolver editor sets it for its table

    class Meta(ConflictResolverBase.Meta):
        db_table = "SYS_SNAPSHOT_CR"
        constraints = [
            models.CheckConstraint(condition=Q(type__in=["I", "U", "D"]), name="sys_snapshot_cr_type"),
            models.UniqueConstraint(fields=["table_name", "proc"], name="sys_snapshot_cr_proc_unique"),
        ]


class TransactionalConflictResolver(ConflictResolverBase):
    class Meta(ConflictResolverBase.Meta):
        db_table = "SYS_REPL_CR"
        constraints = [
            models.CheckConstraint(condition=Q(type__in=["I", "U", "D"]), name="sys_repl_cr_type"),
            models.UniqueConstraint(fields=["table_name", "proc"], name="sys_repl_cr_proc_unique"),
        ]


class ReplAccount(models.Model):
    """SYS_REPL_ACCOUNTS: transactional publications (published here or subscribed to)."""

    server = models.CharField(max_length=128, db_column="SERVER")
    account = models.CharField(max_length=128, db_column="ACCOUNT")
    nth = models.IntegerField(default=0, db_column="NTH")
    level = models.IntegerField(default=0, db_column="LEVEL")
    is_mandatory = models.IntegerField(default=0, db_column="IS_MANDATORY")
    is_updateable = models.IntegerField(default=0, db_column="IS_UPDATEABLE")
    sync_user = models.CharField(max_length=128, null=True, blank=True, db_column="SYNC_USER")
    p_month = models.IntegerField(null=True, blank=True, db_column="P_MONTH")
    p_day = models.IntegerField(null=True, blank=True, db_column="P_DAY")
    p_wday = models.IntegerField(null=True, blank=True, db_column="P_WDAY")
    p_time = models.TimeField(null=True, blank=True, db_column="P_TIME")
    # Extra columns: the log (its tables live in the publisher's database) and its state.
    log_file = models.CharField(max_length=255, blank=True, db_column="ACC_LOG_FILE")
    log_started_at = models.DateTimeField(null=True, blank=True, db_column="ACC_LOG_STARTED_AT")
    log_start_level = models.IntegerField(default=0, db_column="ACC_LOG_START_LEVEL")
    count = models.BigIntegerField(default=0, db_column="ACC_COUNT")  # LEVEL without wrapping
    purged_upto = models.BigIntegerField(default=0, db_column="ACC_PURGED_UPTO")
    last_purge_at = models.DateTimeField(null=True, blank=True, db_column="ACC_LAST_PURGE_AT")
    max_backlog = models.IntegerField(null=True, blank=True, db_column="ACC_MAX_BACKLOG")
    # Without P_TIME: purge every this many minutes (a new publication's default; NULL with no P_TIME: never).
    purge_every = models.IntegerField(null=True, blank=True, db_column="ACC_PURGE_EVERY")
    alert_lag = models.IntegerField(null=True, blank=True, db_column="ACC_ALERT_LAG")  # alert over this lag
    # Alert (and call a subscriber "lagging") when its oldest unapplied transaction is older than this many
    # seconds; empty: the global REPLADMIN_LAG_ALERT_SECONDS (60).
    alert_lag_seconds = models.IntegerField(null=True, blank=True, db_column="ACC_ALERT_LAG_SECONDS")
    created_at = models.DateTimeField(null=True, blank=True, db_column="ACC_CREATED_AT")

    class Capture(models.TextChoices):
        TRIGGERS = "triggers", "triggers"
        WAL = "wal", "the write-ahead log"

    # How the publisher captures changes (chosen at REPL_PUBLISH) and why that way.
    capture = models.CharField(
        max_length=16, choices=Capture.choices, default=Capture.TRIGGERS, db_column="ACC_CAPTURE"
    )
    capture_note = models.CharField(max_length=255, blank=True, default="", db_column="ACC_CAPTURE_NOTE")

    class AckPolicy(models.TextChoices):
        NONE = "none", "none: the commit is enough"
        ONE = "one", "one in-sync subscriber"
        QUORUM = "quorum", "a majority of the in-sync subscribers"
        ALL = "all", "every in-sync subscriber"

    # What REPL_WAIT waits for after a commit, and for how long at most (docs/durability.md).
    ack_policy = models.CharField(
        max_length=8, choices=AckPolicy.choices, default=AckPolicy.NONE, db_column="ACC_ACK_POLICY"
    )
    ack_timeout = models.FloatField(default=30.0, db_column="ACC_ACK_TIMEOUT")  # seconds

    class OnConflict(models.TextChoices):
        RESOLVE = "resolve", "decide each conflict with the resolvers (REPL_ADD_CR)"
        REINITIALIZE = "reinitialize", "the publisher wins and the subscriber is copied again"

    # An updateable publication's answer to a subscriber change that conflicts (SQL Server's queued-update
    # options): resolve it, or keep the publisher's rows and re-initialise the subscriber.
    on_conflict = models.CharField(
        max_length=16, choices=OnConflict.choices, default=OnConflict.RESOLVE, db_column="ACC_ON_CONFLICT"
    )

    class SchemaPolicy(models.TextChoices):
        AUTO = "auto", "applied on the subscribers as soon as it is seen"
        APPROVE = "approve", "held until an admin approves it"

    # What happens to a schema change of a published table (ALTER TABLE on the publisher): docs/schema-changes.md.
    schema_policy = models.CharField(
        max_length=8, choices=SchemaPolicy.choices, default=SchemaPolicy.AUTO, db_column="ACC_SCHEMA_CHANGES"
    )

    class Meta:
        db_table = "SYS_REPL_ACCOUNTS"
        ordering = ["server", "account"]
        constraints = [
            models.UniqueConstraint(fields=["server", "account"], name="sys_repl_accounts_pk"),
            models.CheckConstraint(
                condition=Q(p_month__isnull=True) | Q(p_month__gte=1, p_month__lte=12),
                name="sys_repl_accounts_month",
            ),
            models.CheckConstraint(
                condition=Q(p_day__isnull=True) | Q(p_day__gte=1, p_day__lte=31), name="sys_repl_accounts_day"
            ),
            models.CheckConstraint(
                condition=Q(p_wday__isnull=True) | Q(p_wday__gte=1, p_wday__lte=7),
                name="sys_repl_accounts_wday",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.server}/{self.account}"

    def get_absolute_url(self) -> str:
        return reverse("trx-publications-detail", args=[self.server, self.account])


def subscription_label(subscriber: str, server: str, account: str) -> str:
    """How alerts, jobs and the audit log name a transactional subscription: `subscriber <- publisher/account`."""
    return f"{subscriber} <- {server}/{account}"


class ReplSubscriber(models.Model):
    """SYS_REPL_SUBSCRIBERS: subscribers of a publication, their level and validity. With one console
    for every server, a row is also the subscription itself (what Virtuoso keeps on the subscriber)."""

    OFF, SYNCING, IN_SYNC, DISCONNECTED = 0, 1, 2, 3
    STATES = [(OFF, "OFF"), (SYNCING, "SYNCING"), (IN_SYNC, "IN SYNC"), (DISCONNECTED, "DISCONNECTED")]

    server = models.CharField(max_length=128, db_column="RS_SERVER")
    account = models.CharField(max_length=128, db_column="RS_ACCOUNT")
    subscriber = models.CharField(max_length=128, db_column="RS_SUBSCRIBER")
    level = models.IntegerField(default=0, db_column="RS_LEVEL")
    valid = models.IntegerField(default=1, db_column="RS_VALID")
    # Extra columns: the subscription's state as this console sees it.
    state = models.IntegerField(choices=STATES, default=OFF, db_column="RS_STATE")
    count = models.BigIntegerField(default=0, db_column="RS_COUNT")  # applied, without wrapping
    follow = models.BooleanField(default=False, db_column="RS_FOLLOW")  # in-sync mode wanted
    init_state = models.CharField(max_length=10, choices=INIT_STATES, default="none", db_column="RS_INIT_STATE")
    init_at = models.DateTimeField(null=True, blank=True, db_column="RS_INIT_AT")
    last_sync_at = models.DateTimeField(null=True, blank=True, db_column="RS_LAST_SYNC_AT")
    last_error = models.TextField(blank=True, db_column="RS_LAST_ERROR")
    last_error_at = models.DateTimeField(null=True, blank=True, db_column="RS_LAST_ERROR_AT")
    replay_user = models.CharField(max_length=128, blank=True, db_column="RS_REPLAY_USER")
    # Who the publication's grants (REPL_GRANT) let subscribe: REPL_SUBSCRIBE's replication user, else the name a
    # grant matched then ("": the publication had none). Checked again at every sync and by the follower.
    grantee = models.CharField(max_length=128, blank=True, default="", db_column="RS_GRANTEE")
    dav_user = models.CharField(max_length=128, blank=True, db_column="RS_DAV_USER")
    dav_group = models.CharField(max_length=128, blank=True, db_column="RS_DAV_GROUP")
    subscribed = models.BooleanField(default=True, db_column="RS_SUBSCRIBED")
    created_at = models.DateTimeField(null=True, blank=True, db_column="RS_CREATED_AT")
    # What an apply error that is not retryable does: halt at the failing transaction (level unchanged, retried
    # with backoff until it applies or a person skips it), or skip it and record the gap (Virtuoso's behaviour).
    on_error = models.CharField(max_length=4, choices=ON_ERROR, default="halt", db_column="RS_ON_ERROR")
    # The halt: the failing transaction (count and level), its one-line cause, the keys it touches
    # ([{"table": t, "key": [...]}]), since when, how many applies failed, when the next one is tried.
    halt_count = models.BigIntegerField(null=True, blank=True, db_column="RS_HALT_COUNT")
    halt_level = models.IntegerField(null=True, blank=True, db_column="RS_HALT_LEVEL")
    halt_error = models.TextField(blank=True, db_column="RS_HALT_ERROR")
    halt_keys = models.JSONField(default=list, blank=True, db_column="RS_HALT_KEYS")
    halted_at = models.DateTimeField(null=True, blank=True, db_column="RS_HALTED_AT")
    halt_attempts = models.IntegerField(default=0, db_column="RS_HALT_ATTEMPTS")
    retry_at = models.DateTimeField(null=True, blank=True, db_column="RS_RETRY_AT")
    # The subscription's profile: what it overrides of the publication's and the registry's tuning (empty: theirs;
    # transactional/profile.py reads each with its fallbacks, the subscription's page shows them and their source).
    apply_batch = models.IntegerField(null=True, blank=True, db_column="RS_APPLY_BATCH")  # transactions a commit
    max_backlog = models.IntegerField(null=True, blank=True, db_column="RS_MAX_BACKLOG")  # in sync: cut above it
    alert_lag = models.IntegerField(null=True, blank=True, db_column="RS_ALERT_LAG")  # alert over this many behind
    alert_lag_seconds = models.IntegerField(null=True, blank=True, db_column="RS_ALERT_LAG_SECONDS")
    retry_most = models.IntegerField(null=True, blank=True, db_column="RS_RETRY_MOST")  # halted: longest wait, s
    apply_timeout = models.IntegerField(null=True, blank=True, db_column="RS_APPLY_TIMEOUT")  # a statement's most, s
    validate_every = models.IntegerField(null=True, blank=True, db_column="RS_VALIDATE_EVERY")  # s; 0: never
    validate_slices = models.IntegerField(null=True, blank=True, db_column="RS_VALIDATE_SLICES")  # a table's cut
    # Row filters and column lists by published table: {table: {"condition": WHERE in the publisher's dialect,
    # "columns": [names besides the key]}} (engine.row_filter; empty: every row and column of every table). The
    # ones the publication's items set carry "publication": true (transactional.row_filters keeps them in step);
    # the others are the subscription's own and replace the publication's for their table.
    row_filters = models.JSONField(default=dict, blank=True, db_column="RS_ROW_FILTERS")

    class Meta:
        db_table = "SYS_REPL_SUBSCRIBERS"
        ordering = ["server", "account", "subscriber"]
        constraints = [
            models.UniqueConstraint(fields=["server", "account", "subscriber"], name="sys_repl_subscribers_pk"),
            models.CheckConstraint(condition=Q(valid__in=[0, 1]), name="sys_repl_subscribers_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.subscriber} @ {self.server}/{self.account}"

    def get_absolute_url(self) -> str:
        return reverse("trx-subscriptions-detail", args=[self.subscriber, self.server, self.account])

    @property
    def halted(self) -> bool:
        return self.halt_count is not None

    @property
    def label(self) -> str:
        return subscription_label(self.subscriber, self.server, self.account)


class Validation(models.Model):
    """REPL_VALIDATION: one validation of one table of a transactional subscription (`subscription`), of a
    bi-directional one (`bidir`) or of an incremental snapshot (`snapshot`: its source table), one slice of its rows
    compared with the publisher's (compare/validation.py): the drift trend of the subscription's (publication's,
    snapshot's) page and its alert."""

    EQUAL, DRIFT, INCONCLUSIVE = "equal", "drift", "inconclusive"
    VERDICTS = [(EQUAL, "equal"), (DRIFT, "drift"), (INCONCLUSIVE, "inconclusive")]

    subscription = models.ForeignKey(ReplSubscriber, on_delete=models.CASCADE, db_column="RV_SUBSCRIPTION",
                                     related_name="validations", null=True, blank=True)  # fmt: skip
    bidir = models.ForeignKey(SnapshotSubscription, on_delete=models.CASCADE, db_column="RV_BIDIR",
                              related_name="validations", null=True, blank=True)  # fmt: skip
    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, db_column="RV_SNAPSHOT", to_field="name",
                                 related_name="validations", null=True, blank=True)  # fmt: skip
    table = models.CharField(max_length=256, db_column="RV_TABLE")  # the published table
    job = models.IntegerField(null=True, blank=True, db_column="RV_JOB")  # the job that ran it (its keys, its repair)
    at = models.DateTimeField(db_column="RV_AT")
    slice_index = models.IntegerField(default=0, db_column="RV_SLICE")
    slices = models.IntegerField(default=1, db_column="RV_SLICES")
    slice_text = models.CharField(max_length=200, blank=True, db_column="RV_SLICE_TEXT")
    compared = models.BigIntegerField(default=0, db_column="RV_COMPARED")  # rows of the slice, both sides
    publisher_rows = models.BigIntegerField(null=True, blank=True, db_column="RV_PUBLISHER_ROWS")  # the whole table
    subscriber_rows = models.BigIntegerField(null=True, blank=True, db_column="RV_SUBSCRIBER_ROWS")
    drift = models.IntegerField(default=0, db_column="RV_DRIFT")  # keys that still differ once caught up
    in_flight = models.IntegerField(default=0, db_column="RV_IN_FLIGHT")  # keys that differed, then applied
    verdict = models.CharField(max_length=12, choices=VERDICTS, db_column="RV_VERDICT")
    note = models.TextField(blank=True, db_column="RV_NOTE")

    class Meta:
        db_table = "REPL_VALIDATION"
        ordering = ["-at", "-pk"]
        indexes = [
            models.Index(fields=["subscription", "table", "at"], name="repl_validation_item"),
            models.Index(fields=["bidir", "table", "at"], name="repl_validation_bidir_item"),
            models.Index(fields=["snapshot", "at"], name="repl_validation_snapshot"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(subscription__isnull=False, bidir__isnull=True, snapshot__isnull=True)
                | Q(subscription__isnull=True, bidir__isnull=False, snapshot__isnull=True)
                | Q(subscription__isnull=True, bidir__isnull=True, snapshot__isnull=False),
                name="repl_validation_one_subscription",
            )
        ]

    def __str__(self) -> str:
        return f"{self.subscription or self.bidir or self.snapshot}: {self.table} {self.verdict} ({self.slice_text})"


class DeclaredServer(models.Model):
    """REPL_SERVER: the publishers a server has declared (Virtuoso keeps them in the subscriber's own
    SYS_SERVERS); subscribing needs the declaration."""

    subscriber = models.CharField(max_length=128, db_column="DS_SUBSCRIBER")
    server = models.CharField(max_length=128, db_column="DS_SERVER")
    dsn = models.CharField(max_length=512, blank=True, db_column="DS_DSN")
    address = models.CharField(max_length=300, blank=True, db_column="DS_ADDRESS")
    created_at = models.DateTimeField(auto_now_add=True, db_column="DS_CREATED_AT")

    class Meta:
        db_table = "REPL_DECLARED_SERVER"
        ordering = ["subscriber", "server"]
        constraints = [models.UniqueConstraint(fields=["subscriber", "server"], name="repl_declared_server_pk")]

    def __str__(self) -> str:
        return f"{self.subscriber} knows {self.server}"


class SkippedTransaction(models.Model):
    """A transaction a subscriber could not apply (not a retryable error): logged and skipped, so the
    subscriber's sequence has a gap here."""

    server = models.CharField(max_length=128, db_column="SK_SERVER")
    account = models.CharField(max_length=128, db_column="SK_ACCOUNT")
    subscriber = models.CharField(max_length=128, db_column="SK_SUBSCRIBER")
    level = models.IntegerField(db_column="SK_LEVEL")
    count = models.BigIntegerField(db_column="SK_COUNT")
    error = models.TextField(db_column="SK_ERROR")
    entries = models.JSONField(default=list, db_column="SK_ENTRIES")
    created_at = models.DateTimeField(auto_now_add=True, db_column="SK_CREATED_AT")
    # Who skipped it: a person's user name, or "" when the subscription's on_error = skip policy did.
    skipped_by = models.CharField(max_length=150, blank=True, db_column="SK_SKIPPED_BY")
    # The keys it touches ([{"table": t, "key": [...]}]) and when "repair these keys" made them equal again.
    keys = models.JSONField(default=list, blank=True, db_column="SK_KEYS")
    repaired_at = models.DateTimeField(null=True, blank=True, db_column="SK_REPAIRED_AT")

    class Meta:
        db_table = "REPL_SKIPPED_TX"
        ordering = ["server", "account", "subscriber", "count"]
        constraints = [
            models.UniqueConstraint(fields=["server", "account", "subscriber", "count"], name="repl_skipped_tx_once")
        ]

    def __str__(self) -> str:
        return f"{self.subscriber} skipped {self.server}/{self.account} level {self.level}"


class LevelSample(models.Model):
    """A subscriber's level and lag at one moment, for the level and lag charts."""

    server = models.CharField(max_length=128, db_column="LS_SERVER")
    account = models.CharField(max_length=128, db_column="LS_ACCOUNT")
    subscriber = models.CharField(max_length=128, db_column="LS_SUBSCRIBER")
    at = models.DateTimeField(db_column="LS_AT")
    level = models.IntegerField(db_column="LS_LEVEL")
    publisher_level = models.IntegerField(db_column="LS_PUBLISHER_LEVEL")
    lag = models.BigIntegerField(db_column="LS_LAG")

    class Meta:
        db_table = "REPL_LEVEL_HISTORY"
        ordering = ["server", "account", "subscriber", "at"]
        indexes = [models.Index(fields=["server", "account", "subscriber", "at"], name="repl_level_history_at")]

    def __str__(self) -> str:
        return f"{self.subscriber} @ {self.server}/{self.account}: level {self.level} at {self.at:%Y-%m-%d %H:%M:%S}"


class Tracer(models.Model):
    """A tracer token: a marker written into a transactional publication's log, timed until each subscriber has
    applied it (REPL_TRACER_ARRIVAL). Latency = applied_at - posted_at, both on the console's clock."""

    server = models.CharField(max_length=128, db_column="TR_SERVER")
    account = models.CharField(max_length=128, db_column="TR_ACCOUNT")
    posted_at = models.DateTimeField(db_column="TR_POSTED_AT")
    posted_by = models.CharField(max_length=150, db_column="TR_POSTED_BY")
    error = models.TextField(blank=True, default="", db_column="TR_ERROR", help_text="Why it could not be posted")

    class Meta:
        db_table = "REPL_TRACER"
        ordering = ["-posted_at", "-id"]
        indexes = [models.Index(fields=["server", "account", "posted_at"], name="repl_tracer_posted")]

    def __str__(self) -> str:
        return f"tracer #{self.pk} {self.server}/{self.account} at {self.posted_at:%Y-%m-%d %H:%M:%S}"


class TracerArrival(models.Model):
    """When a subscriber's apply committed a tracer token (recorded right after that commit)."""

    tracer = models.ForeignKey(Tracer, on_delete=models.CASCADE, related_name="arrivals", db_column="TA_TRACER")
    subscriber = models.CharField(max_length=128, db_column="TA_SUBSCRIBER")
    applied_at = models.DateTimeField(db_column="TA_APPLIED_AT")

    class Meta:
        db_table = "REPL_TRACER_ARRIVAL"
        constraints = [models.UniqueConstraint(fields=["tracer", "subscriber"], name="repl_tracer_arrival_once")]

    def __str__(self) -> str:
        return f"tracer #{self.tracer_id} at {self.subscriber}"

    @property
    def latency(self) -> float:
        return (self.applied_at - self.tracer.posted_at).total_seconds()


class TpItem(models.Model):
    """SYS_TP_ITEM: items of a transactional publication."""

    server = models.CharField(max_length=128, db_column="TI_SERVER")
    acct = models.CharField(max_length=128, db_column="TI_ACCT")
    type = models.IntegerField(choices=ITEM_TYPES, db_column="TI_TYPE")
    item = models.CharField(max_length=320, db_column="TI_ITEM")
    options = models.IntegerField(
        null=True, blank=True, choices=[(1, "calls"), (2, "definition"), (3, "both")], db_column="TI_OPTIONS"
    )
    is_copy = models.IntegerField(default=0, db_column="TI_IS_COPY")
    dav_user = models.CharField(max_length=128, null=True, blank=True, db_column="TI_DAV_USER")
    dav_group = models.CharField(max_length=128, null=True, blank=True, db_column="TI_DAV_GROUP")
    # A table item's definition as replication knows it (engine.schema_changes' column rows, the publisher's
    # dialect); the live table is compared with it to see a schema change.
    definition = models.JSONField(default=list, blank=True, db_column="TI_DEFINITION")
    # Column-level conflicts (an updateable publication's table, opt-in): a subscriber's update conflicts only in the
    # columns the publisher changed too since the version it was made on; its other columns merge.
    column_conflicts = models.BooleanField(default=False, db_column="TI_COLUMN_CONFLICTS")
    # The publication's row filter and column list of a table item (engine.row_filter.FilterSpec as JSON; empty:
    # every row and column): what each subscriber's copy holds unless its subscription has a filter of its own.
    row_filter = models.JSONField(default=dict, blank=True, db_column="TI_ROW_FILTER")

    class Meta:
        db_table = "SYS_TP_ITEM"
        ordering = ["server", "acct", "type", "item"]
        constraints = [
            models.UniqueConstraint(fields=["server", "acct", "type", "item"], name="sys_tp_item_pk"),
            models.CheckConstraint(condition=Q(type__in=[1, 2, 3]), name="sys_tp_item_type"),
        ]

    def __str__(self) -> str:
        return f"{self.server}/{self.acct}: {self.item}"


class TpGrant(models.Model):
    """SYS_TP_GRANT: who may subscribe to a publication."""

    acct = models.CharField(max_length=128, db_column="TPG_ACCT")
    grantee = models.CharField(max_length=128, db_column="TPG_GRANTEE")

    class Meta:
        db_table = "SYS_TP_GRANT"
        ordering = ["acct", "grantee"]
        constraints = [models.UniqueConstraint(fields=["acct", "grantee"], name="sys_tp_grant_pk")]

    def __str__(self) -> str:
        return f"{self.acct} -> {self.grantee}"


# The columns engine/schedule.py's rule reads: a write to any of them moves SE_NEXT_RUN.
SCHEDULE_COLUMNS = frozenset({"start", "interval", "disabled", "last_slot", "last_started", "last_error"})


class ScheduledEventQuerySet(models.QuerySet["ScheduledEvent"]):
    """Keeps SE_NEXT_RUN right through every write: an `update()` of a column the rule reads computes the
    rows' next run again (in the same transaction), unless the caller gives it; `bulk_create` computes it."""

    def update(self, **kwargs) -> int:
        if "next_run" in kwargs or not SCHEDULE_COLUMNS & kwargs.keys():
            return super().update(**kwargs)
        with transaction.atomic(using=self.db):
            names = list(self.values_list("pk", flat=True))
            changed = super().update(**kwargs)
            moved = [e for e in ScheduledEvent.objects.filter(pk__in=names) if e.next_run != e.due_from()]
            for event in moved:
                models.QuerySet.update(ScheduledEvent.objects.filter(pk=event.pk), next_run=event.due_from())
        return changed

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        for event in objs:
            event.next_run = event.due_from()
        return super().bulk_create(objs, *args, **kwargs)


class ScheduledEvent(models.Model):
    """SYS_SCHEDULED_EVENT: statements run by the scheduler every SE_INTERVAL minutes."""

    name = models.CharField(max_length=255, primary_key=True, db_column="SE_NAME")
    start = models.DateTimeField(db_column="SE_START")
    sql = models.TextField(db_column="SE_SQL")
    last_completed = models.DateTimeField(null=True, blank=True, db_column="SE_LAST_COMPLETED")
    interval = models.IntegerField(db_column="SE_INTERVAL")
    last_error = models.TextField(null=True, blank=True, db_column="SE_LAST_ERROR")
    enable_notify = models.IntegerField(default=0, db_column="SE_ENABLE_NOTIFY")
    notify = models.CharField(max_length=254, null=True, blank=True, db_column="SE_NOTIFY")
    notification_sent = models.IntegerField(default=0, db_column="SE_NOTIFICATION_SENT")
    disabled = models.IntegerField(default=0, db_column="SE_DISABLED")
    # Extra column: the server the statements run on (their context), for subscriber-side statements.
    server = models.CharField(max_length=128, blank=True, default="", db_column="SE_SERVER")
    # Extra columns (engine/schedule.py): the scheduled time the last run was handed out for (a slot
    # SE_START + k * SE_INTERVAL, or a failed run's retry), and when that run really began.
    last_slot = models.DateTimeField(null=True, blank=True, db_column="SE_LAST_SLOT")
    last_started = models.DateTimeField(null=True, blank=True, db_column="SE_LAST_STARTED")
    # Extra column: when the event is next due (engine/schedule.py due_from; None: never), kept by every write
    # (save, the queryset's update and bulk_create), so a scheduler tick reads only the rows whose time has
    # come and its sleep is one MIN() (core/events.py).
    next_run = models.DateTimeField(null=True, blank=True, db_index=True, db_column="SE_NEXT_RUN", editable=False)

    objects = ScheduledEventQuerySet.as_manager()

    class Meta:
        db_table = "SYS_SCHEDULED_EVENT"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(interval__gte=0), name="sys_scheduled_event_interval"),
            models.CheckConstraint(condition=Q(disabled__in=[0, 1]), name="sys_scheduled_event_disabled"),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.next_run = self.due_from()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "next_run" not in update_fields:
            kwargs["update_fields"] = [*update_fields, "next_run"]
        super().save(*args, **kwargs)

    def times(self) -> EventTimes:
        """The columns the scheduler's rule reads."""
        return EventTimes(
            name=self.name, start=self.start, interval=self.interval, last_completed=self.last_completed,
            disabled=self.disabled, last_slot=self.last_slot, last_started=self.last_started,
            failed=bool(self.last_error),
        )  # fmt: skip

    def due_from(self) -> datetime | None:
        """When the event is next due, from its columns (what SE_NEXT_RUN holds)."""
        return due_from(self.times())


class AppliedConflicts(models.Manager["ConflictBackup"]):
    """Conflict backups whose decision has been applied (what the inbox, the dashboard and the API show)."""

    def get_queryset(self) -> models.QuerySet[ConflictBackup]:
        return super().get_queryset().filter(pending=False)


class ConflictBackup(models.Model):
    """REPL_CONFLICT: one conflict met while replaying a change on the publisher, with every row version
    involved. The losing version is kept whatever the decision, so it can be inspected and re-applied.

    A change is identified by its source server and its log row guid (RLOG_ROWGUID), so a sync that is
    run again after a failure updates the same row instead of recording the conflict twice.

    A backup is written `pending` before the transaction that applies its decision, and becomes visible
    only once that transaction has committed (the sync that wrote it, or the next one, which finds the
    change in the target's replay log or level); a decision that was never applied is deleted. The
    default manager (`objects`) shows only applied backups; `with_pending` is for the syncs."""

    DECISIONS = [
        (1, "subscriber wins"),
        (2, "subscriber wins, origin changed"),
        (3, "publisher wins"),
        (4, "held for a person to decide"),
        (5, "ignored"),
    ]
    HELD = 4
    # What a person may pick for a held conflict (the decision it becomes).
    CHOICES = [(3, "the publisher's version"), (1, "the subscriber's version"), (2, "an edited version")]
    KINDS = [("snapshot", "bi-directional snapshot"), ("transactional", "transactional")]

    kind = models.CharField(max_length=20, choices=KINDS, default="snapshot", db_column="RC_KIND")
    item = models.CharField(max_length=320, db_column="RC_ITEM")
    table_name = models.CharField(max_length=320, db_column="RC_TABLE")
    publisher = models.CharField(max_length=128, db_column="RC_PUBLISHER")
    source = models.CharField(max_length=128, db_column="RC_SOURCE")
    change_guid = models.CharField(max_length=300, db_column="RC_CHANGE_GUID")
    origin = models.CharField(max_length=128, db_column="RC_ORIGIN")
    primary_key = models.JSONField(db_column="RC_PK")
    conflict_type = models.CharField(max_length=1, choices=CR_TYPES, db_column="RC_TYPE")
    operation = models.CharField(max_length=1, choices=CR_TYPES, db_column="RC_OPERATION")
    decision = models.IntegerField(choices=DECISIONS, db_column="RC_DECISION")
    resolver_id = models.IntegerField(null=True, blank=True, db_column="RC_RESOLVER_ID")
    resolver = models.CharField(max_length=320, db_column="RC_RESOLVER")
    publisher_row = models.JSONField(null=True, blank=True, db_column="RC_PUBLISHER_ROW")
    incoming_row = models.JSONField(null=True, blank=True, db_column="RC_INCOMING_ROW")
    old_rowguid = models.CharField(max_length=300, null=True, blank=True, db_column="RC_OLD_ROWGUID")
    winning_row = models.JSONField(null=True, blank=True, db_column="RC_WINNING_ROW")
    losing_row = models.JSONField(null=True, blank=True, db_column="RC_LOSING_ROW")
    # The rows' column names in the table's order, as first recorded: a PostgreSQL catalog keeps JSON objects
    # as jsonb, which does not keep the order of their keys.
    columns = models.JSONField(default=list, blank=True, db_column="RC_COLUMNS")
    # A column-level conflict's versions: {"conflicted": {column: {"old", "publisher", "incoming", "kept"}},
    # "merged": [the subscriber's columns taken without conflict]} (empty: a whole-row conflict).
    column_versions = models.JSONField(default=dict, blank=True, db_column="RC_COLUMN_VERSIONS")
    note = models.TextField(blank=True, db_column="RC_NOTE")
    job = models.ForeignKey(
        "replication_admin.JobRun", null=True, blank=True, on_delete=models.SET_NULL, db_column="RC_JOB"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True, db_column="RC_CREATED_AT")
    reapplied_at = models.DateTimeField(null=True, blank=True, db_column="RC_REAPPLIED_AT")
    reapplied_by = models.CharField(max_length=150, blank=True, db_column="RC_REAPPLIED_BY")
    notified = models.BooleanField(default=False, db_column="RC_NOTIFIED")
    # Dismissed from the inbox without applying: seen and handled by a person, kept for the record.
    dismissed_at = models.DateTimeField(null=True, blank=True, db_column="RC_DISMISSED_AT")
    dismissed_by = models.CharField(max_length=150, blank=True, db_column="RC_DISMISSED_BY")
    pending = models.BooleanField(default=False, db_column="RC_PENDING")
    # A held conflict (decision 4) decided by a person: what was picked (CHOICES), the edited version, who, when.
    # Bi-directional: the next sync carries it out (the change waits in the subscriber's log until then).
    chosen = models.IntegerField(null=True, blank=True, choices=CHOICES, db_column="RC_CHOSEN")
    chosen_row = models.JSONField(null=True, blank=True, db_column="RC_CHOSEN_ROW")
    decided_at = models.DateTimeField(null=True, blank=True, db_column="RC_DECIDED_AT")
    decided_by = models.CharField(max_length=150, blank=True, db_column="RC_DECIDED_BY")

    with_pending = models.Manager()
    objects = AppliedConflicts()

    class Meta:
        db_table = "REPL_CONFLICT"
        default_manager_name = "objects"
        base_manager_name = "with_pending"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "source", "change_guid"], name="repl_conflict_one_per_change"),
            models.CheckConstraint(condition=Q(decision__in=[1, 2, 3, 4, 5]), name="repl_conflict_decision"),
        ]
        indexes = [
            models.Index(fields=["item", "conflict_type", "decision"], name="repl_conflict_filter"),
            # The inbox sorts and filters by table and by source; without these each page sorts every conflict.
            models.Index(fields=["table_name"], name="repl_conflict_table"),
            models.Index(fields=["source"], name="repl_conflict_source"),
        ]

    def __str__(self) -> str:
        return f"{self.item} {self.conflict_type} conflict from {self.source}: {self.get_decision_display()}"

    def save(self, *args, **kwargs) -> None:
        if not self.columns:
            rows = (self.winning_row, self.losing_row, self.publisher_row, self.incoming_row)
            self.columns = list(dict.fromkeys(name for row in rows if row for name in row))
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("conflicts-detail", args=[self.pk])

    def in_column_order(self, names: list[str]) -> list[str]:
        """`names` in the table's column order (names it never recorded last, as given)."""
        rank = {name: n for n, name in enumerate(self.columns or [])}
        return sorted(names, key=lambda name: rank.get(name, len(rank)))


class SchemaChange(models.Model):
    """A published table's change of shape (ALTER TABLE on the publisher), pending or applied."""

    class State(models.TextChoices):
        PENDING = "pending", "pending approval"
        APPLIED = "applied", "applied"

    class Kind(models.TextChoices):
        TRANSACTIONAL = "trx", "transactional publication"
        SNAPSHOT = "snapshot", "snapshot source"
        BIDIR = "bidir", "bi-directional publication"

    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.TRANSACTIONAL, db_column="SC_KIND")
    server = models.CharField(max_length=128, db_column="SC_SERVER")
    account = models.CharField(max_length=128, blank=True, db_column="SC_ACCOUNT")
    table = models.CharField(max_length=320, db_column="SC_TABLE")
    # The snapshot (its name) or bi-directional publication (its item) whose copies followed.
    snapshot = models.CharField(max_length=320, blank=True, db_column="SC_ITEM")
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING, db_column="SC_STATE")
    before = models.JSONField(default=list, db_column="SC_BEFORE")  # column rows (engine.schema_changes)
    after = models.JSONField(default=list, db_column="SC_AFTER")
    changes = models.JSONField(default=list, db_column="SC_CHANGES")  # [{kind, column, new_name, text}]
    # True where the publisher logs each change in place (a PostgreSQL event trigger); False where it was
    # seen by comparing the live table with the catalog (MariaDB, SQLite).
    in_place = models.BooleanField(default=False, db_column="SC_IN_PLACE")
    # The publication's count when it was seen: its 'S' entries up to there are what an approval lets through.
    log_count = models.BigIntegerField(default=0, db_column="SC_LOG_COUNT")
    detected_at = models.DateTimeField(db_column="SC_DETECTED_AT")
    decided_at = models.DateTimeField(null=True, blank=True, db_column="SC_DECIDED_AT")
    decided_by = models.CharField(max_length=150, blank=True, db_column="SC_DECIDED_BY")

    class Meta:
        db_table = "REPL_SCHEMA_CHANGE"
        ordering = ["-detected_at"]
        indexes = [models.Index(fields=["server", "account", "table", "state"], name="repl_schema_change_state")]

    def __str__(self) -> str:
        return f"{self.server}/{self.account} {self.table}: " + "; ".join(c["text"] for c in self.changes)

    def get_absolute_url(self) -> str:
        if self.kind == self.Kind.SNAPSHOT:
            return reverse("snapshots-detail", args=[self.snapshot])
        if self.kind == self.Kind.BIDIR:
            publication = SnapshotPublication.objects.filter(item=self.snapshot).first()
            return publication.get_absolute_url() if publication else reverse("publications")
        return reverse("trx-publications-detail", args=[self.server, self.account]) + "#schema-changes"
