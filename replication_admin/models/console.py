"""Console-side tables: the replication registry, background job runs, the audit log, alerts and API tokens."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

REGISTRY_DEFAULTS = {
    # Minutes subtracted from SN_LAST_TS before reading a snapshot log (longest source transaction).
    "snp_repl_tolerance_offset": "15",
    # Minutes subtracted from MIN(SN_LAST_TS) before replay-log rows are purged.
    "snp_repl_purge_offset": "30",
    # The name this console replicates under (REPL_SERVER_NAME / REPL_THIS_SERVER).
    "repl_server_name": "console",
    # Transactions a publisher lets an in-sync subscriber fall behind before cutting its feed.
    "repl_max_backlog": "10000",
    # Transactions a transactional sync applies per subscriber transaction (each stays whole).
    "repl_apply_batch": "500",
    # Seconds an apply statement on a subscriber may run (a wait for an application's row lock included) before it is
    # cancelled, its transaction rolled back and tried again; 0: no bound but the server's own.
    "repl_apply_timeout": "0",
    # Seconds between two validations of a transactional subscription's tables (each compares one slice of every
    # table with the publisher's rows; a subscription's profile may say otherwise) and of a bi-directional
    # subscription's table; 0: never on a schedule.
    "repl_validate_every": "3600",
    # Slices a validated table is cut into by its key: each validation compares the next one, so a cycle of this
    # many validations compares every row (24 at one an hour: each row once a day).
    "repl_validate_slices": "24",
    # Days a decided conflict's backup is kept (0: kept for ever); held conflicts wait for a person whatever their
    # age. The conflict statistics reach as far back as the backups kept.
    "conflict_retention_days": "90",
    # Who is e-mailed about conflicts decided by the default rule (no resolver decided them; Virtuoso's default
    # resolver notifies its `_notify_email`); empty: nobody. Resolvers name their own owner (CR_NOTIFY).
    "conflict_notify_email": "",
}


class RegistryEntry(models.Model):
    """Virtuoso's registry variables that replication reads (registry_get / registry_set)."""

    key = models.CharField(max_length=128, primary_key=True, db_column="R_KEY")
    value = models.TextField(db_column="R_VALUE")

    class Meta:
        db_table = "REPL_REGISTRY"
        ordering = ["key"]
        verbose_name_plural = "registry entries"
        permissions = [
            ("operate", "Can run replication: refresh, sync, compare, initial copy, mark valid"),
            ("edit", "Can create and drop servers, snapshots, publications, resolvers and statements"),
        ]

    def __str__(self) -> str:
        return f"{self.key} = {self.value}"

    @classmethod
    def get_value(cls, key: str) -> str:
        row = cls.objects.filter(key=key).first()
        return row.value if row else REGISTRY_DEFAULTS[key]

    @classmethod
    def get_int(cls, key: str) -> int:
        return int(cls.get_value(key))


class JobRun(models.Model):
    """One background run: what it works on, where it is, what it logged, how it ended."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # Its worker stopped renewing the lease (died, was cut off or shut down); a retry was queued.
        LOST = "lost"
        # A scheduled run whose item was busy with another job: not needed, not a failure.
        SKIPPED = "skipped"

    class Trigger(models.TextChoices):
        PERSON = "person"  # the console, a command or the API
        SCHEDULER = "scheduler"  # a SYS_SCHEDULED_EVENT
        RETRY = "retry"  # the reaper, after the previous attempt was lost

    FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED, State.LOST, State.SKIPPED)

    # Not stored: whether this run happens inside the requesting process (a command without --queue, the
    # scheduler) rather than on a worker; such a run waits for a busy item instead of going back to the queue.
    runs_inline = True

    kind = models.CharField(max_length=40)
    target = models.CharField(max_length=500, help_text="What the job works on, for people")
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED, db_index=True)
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    message = models.CharField(max_length=500, blank=True)
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    timings = models.JSONField(default=dict, blank=True, help_text="Seconds per phase, measured in the task")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.IntegerField(default=0, help_text="Which attempt of the chain this run is (1 = the first)")
    worker_pid = models.IntegerField(null=True, blank=True)
    # The lease: the worker holding a running job renews it every few seconds; an expired lease means the
    # worker is gone and the reaper takes the job back.
    worker_host = models.CharField(max_length=255, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(max_length=12, choices=Trigger.choices, default=Trigger.PERSON)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries",
        help_text="The lost attempt this run repeats",
    )  # fmt: skip
    # A person's run of a failed or cancelled job again, with the same parameters (the attempts of one
    # request stay on retry_of; this links two requests).
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns",
        help_text="The failed or cancelled job a person ran again",
    )  # fmt: skip
    item = models.CharField(
        max_length=500, blank=True, db_index=True, help_text="The object the job works on, e.g. 'snapshot wh.copy'"
    )
    # A queued job waiting behind the job applying its item is handed to a worker when that one ends.
    waiting_for = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="waiters")
    not_before = models.DateTimeField(null=True, blank=True, help_text="A retry's backoff: not handed out before")
    sent_at = models.DateTimeField(null=True, blank=True, help_text="Last handed to the task broker")

    class Meta:
        db_table = "REPL_JOB_RUN"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(progress_done__gte=0), name="job_run_progress_nonnegative"),
        ]
        indexes = [
            # The jobs list filters by kind, and each snapshot's latest refresh is found among one kind's rows.
            models.Index(fields=["kind"], name="repl_job_run_kind"),
            # The dashboard and the status API count the jobs finished lately by state from the index alone.
            models.Index(fields=["finished_at", "state"], name="repl_job_run_finished"),
            # The reaper looks for running jobs whose lease has expired.
            models.Index(fields=["state", "lease_expires_at"], name="repl_job_run_lease"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.target}"

    @property
    def finished(self) -> bool:
        return self.state in self.FINISHED

    @property
    def percent(self) -> int:
        if self.state == self.State.SUCCEEDED:
            return 100
        if not self.progress_total:
            return 0
        return max(0, min(100, int(100 * self.progress_done / self.progress_total)))

    @property
    def duration(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class AuditEntry(models.Model):
    """Every admin action: who, what, on what, when, and how it ended."""

    class Outcome(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        DENIED = "denied"
        REFUSED = "refused"  # a failed or throttled login
        SKIPPED = "skipped"  # a scheduled run not needed: the same work was still running

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    username = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted")
    action = models.CharField(max_length=80, db_index=True)
    target = models.CharField(max_length=500, blank=True)
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.OK)
    detail = models.JSONField(default=dict, blank=True)
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    via = models.CharField(max_length=20, default="web", help_text="web, command, scheduler, api")

    class Meta:
        db_table = "REPL_AUDIT"
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username or '-'} {self.action} {self.target} {self.outcome}"


class StatementRun(models.Model):
    """A script run in the statement console, kept so its user can put it back in the editor (their history).
    What each statement did is in the audit log; this is the text as typed."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="statement_runs")
    text = models.TextField()
    server = models.CharField(max_length=128, blank=True, help_text="The context server chosen")
    ok = models.BooleanField(help_text="Every statement parsed and succeeded")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "REPL_STATEMENT_HISTORY"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["user", "-at"], name="repl_statement_history_user")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.at:%Y-%m-%d %H:%M:%S} {self.text[:60]}"


class ReplLock(models.Model):
    """One apply per item at a time: a redelivered or concurrent job waits or gives up, never doubles."""

    name = models.CharField(max_length=400, primary_key=True, db_column="L_NAME")
    job = models.ForeignKey(JobRun, null=True, blank=True, on_delete=models.SET_NULL, db_column="L_JOB")
    pid = models.IntegerField(db_column="L_PID")
    host = models.CharField(max_length=255, db_column="L_HOST")
    acquired_at = models.DateTimeField(auto_now=True, db_column="L_ACQUIRED_AT")
    # A lease renewed by the holder's heartbeat; past it, the holder is gone wherever it ran.
    expires_at = models.DateTimeField(null=True, blank=True, db_column="L_EXPIRES_AT")

    class Meta:
        db_table = "REPL_LOCK"

    def __str__(self) -> str:
        return f"{self.name} held by pid {self.pid}@{self.host}"


class Alert(models.Model):
    """Something an admin should know about: a failed job, an invalid subscriber, a lag over its
    threshold, a failing scheduled event, an unreachable server. E-mailed when it is raised, open until its
    cause clears (resolved: a later job of the same kind and target succeeded, the event completed, the server
    answered, the lag fell under its threshold) or an operator acknowledges it; while open, the same alert
    raised again only counts up. Closed alerts stay as history; the same trouble later opens a new one."""

    class Kind(models.TextChoices):
        JOB_FAILED = "job_failed", "job failed"
        SUBSCRIBER_INVALID = "subscriber_invalid", "subscriber invalid"
        LAG = "lag", "lag over threshold"
        EVENT_ERROR = "event_error", "scheduled event failed"
        SERVER_UNREACHABLE = "server_unreachable", "server unreachable"
        SCHEMA_CHANGE = "schema_change", "schema change awaiting approval"
        CONFLICT_HELD = "conflict_held", "conflict held for a person"
        APPLY_HALTED = "apply_halted", "apply halted"
        TRANSACTION_SKIPPED = "trx_skipped", "transaction skipped"
        FOLLOWER_DOWN = "follower_down", "follower down"
        COMPONENT_DOWN = "component_down", "component down"
        SLOT_WAL = "slot_wal", "replication slot holds WAL"
        ITEM_BROKEN = "item_broken", "replication broken"
        NOTIFY_FAILED = "notify_failed", "notification not delivered"
        VALIDATION_DRIFT = "validation_drift", "copy differs from the publisher"

    kind = models.CharField(max_length=24, choices=Kind.choices, db_column="AL_KIND")
    target = models.CharField(max_length=300, db_column="AL_TARGET")
    message = models.TextField(db_column="AL_MESSAGE")
    url = models.CharField(max_length=500, blank=True, db_column="AL_URL")
    count = models.IntegerField(default=1, db_column="AL_COUNT")
    created_at = models.DateTimeField(auto_now_add=True, db_column="AL_CREATED_AT")
    last_seen_at = models.DateTimeField(db_column="AL_LAST_SEEN_AT")
    emailed_at = models.DateTimeField(null=True, blank=True, db_column="AL_EMAILED_AT")
    acknowledged_at = models.DateTimeField(null=True, blank=True, db_column="AL_ACKNOWLEDGED_AT")
    acknowledged_by = models.CharField(max_length=150, blank=True, db_column="AL_ACKNOWLEDGED_BY")
    resolved_at = models.DateTimeField(null=True, blank=True, db_column="AL_RESOLVED_AT")
    resolution = models.CharField(max_length=300, blank=True, db_column="AL_RESOLUTION",
                                  help_text="How the cause cleared, e.g. 'job #12 succeeded'")  # fmt: skip

    class Meta:
        db_table = "REPL_ALERT"
        ordering = ["-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "target"],
                condition=Q(acknowledged_at__isnull=True, resolved_at__isnull=True),
                name="repl_alert_one_open",
            )
        ]
        indexes = [models.Index(fields=["resolved_at"], name="repl_alert_resolved")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.target}"

    @property
    def closed_at(self):
        return self.resolved_at or self.acknowledged_at

    @property
    def open_seconds(self) -> float:
        """How long the alert was (or has been, while open) open."""
        end = self.closed_at or timezone.now()
        return max(0.0, (end - self.created_at).total_seconds())


class ApiToken(models.Model):
    """A bearer token for the read-only status API (`/api/status`) and the Prometheus metrics (`/metrics`), made in
    the console. Only the SHA-256 of the token is kept: the token itself is shown once, when it is made. Its
    first characters (`prefix`, not secret) tell tokens apart in the list and the audit log."""

    class Scope(models.TextChoices):
        STATUS = "status", "status (/api/status)"
        METRICS = "metrics", "metrics (/metrics)"

    # "ra_" and 40 URL-safe characters (240 random bits): hashed without salt, as nobody can guess it.
    MARK = "ra_"
    PREFIX_LENGTH = len(MARK) + 8

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex")
    scopes = models.JSONField(default=list, help_text='"status", "metrics" or both')
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    # Written at most once a minute per token, so a scraper polling every few seconds costs no write each time.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True)

    class Meta:
        db_table = "REPL_API_TOKEN"
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def new_secret() -> str:
        return ApiToken.MARK + secrets.token_urlsafe(30)

    @staticmethod
    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        return self.active and scope in self.scopes

    @property
    def scope_labels(self) -> list[str]:
        return [scope for scope in self.Scope.values if scope in self.scopes]


class ProcessHeartbeat(models.Model):
    """A process the product depends on, renewed every few seconds while it lives: a worker host (qcluster), a
    follower (replfollow, with the subscriptions it holds), the scheduler. One that stops renewing is shown down
    on the Health page and in /api/status, with an alert; a follower's subscriptions then read "follower down"."""

    class Kind(models.TextChoices):
        WORKER = "worker", "worker host"
        FOLLOWER = "follower", "follower"
        SCHEDULER = "scheduler", "scheduler"
        SPARK = "spark", "Spark service"  # manage.py spark_service: its master, executors and cores

    kind = models.CharField(max_length=10, choices=Kind.choices, db_column="PH_KIND")
    host = models.CharField(max_length=255, db_column="PH_HOST")
    pid = models.IntegerField(db_column="PH_PID")
    started_at = models.DateTimeField(db_column="PH_STARTED_AT")
    renewed_at = models.DateTimeField(db_column="PH_RENEWED_AT")
    # What it holds now: a follower's subscription ids ("subscriptions"), a worker's running job ids ("jobs"),
    # the scheduler's last tick ("tick") ...
    details = models.JSONField(default=dict, blank=True, db_column="PH_DETAILS")
    stopped_at = models.DateTimeField(null=True, blank=True, db_column="PH_STOPPED_AT")  # a clean exit

    class Meta:
        db_table = "REPL_PROCESS"
        ordering = ["kind", "host", "pid"]
        constraints = [models.UniqueConstraint(fields=["kind", "host", "pid"], name="repl_process_once")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.pid}@{self.host}"


class FollowLease(models.Model):
    """A follower's lease on one followed subscription (core/follow_leases.py): only its holder follows it while the
    lease is unexpired. The holder renews its leases with its heartbeat; a follower that dies stops renewing and
    another takes its subscriptions once their leases have expired (at once when it ran on the taker's own host and
    its pid is gone). The subscription's item lock, not the lease, keeps two applies apart."""

    subscription = models.OneToOneField(
        "replication_admin.ReplSubscriber", on_delete=models.CASCADE, primary_key=True, db_column="RFL_SUBSCRIPTION",
        related_name="follow_lease",
    )  # fmt: skip
    holder = models.CharField(max_length=300, db_column="RFL_HOLDER")  # host/pid/token of the follower
    host = models.CharField(max_length=255, db_column="RFL_HOST")
    pid = models.IntegerField(db_column="RFL_PID")
    taken_at = models.DateTimeField(db_column="RFL_TAKEN_AT")
    expires_at = models.DateTimeField(db_index=True, db_column="RFL_EXPIRES_AT")

    class Meta:
        db_table = "REPL_FOLLOW_LEASE"
        ordering = ["subscription"]
        indexes = [models.Index(fields=["holder"], name="repl_follow_lease_holder")]

    def __str__(self) -> str:
        return f"subscription #{self.subscription_id} -> {self.holder}"


class NotificationChannel(models.Model):
    """Where alerts and conflict notices go besides e-mail: an Apprise URL (`json://` a generic JSON webhook,
    `slack://`, `msteams://`, `mailto://` and the rest Apprise knows), made in the console by an editor. The URL
    often holds a secret (a webhook token), so it is kept encrypted (core.crypto); `hint` is the part shown."""

    class Event(models.TextChoices):
        ALERTS = "alerts", "alerts (when one opens)"
        CONFLICTS = "conflicts", "conflicts (each batch a sync decided)"

    name = models.CharField(max_length=100, unique=True)
    url_encrypted = models.TextField()
    hint = models.CharField(max_length=200, help_text="The service and host: what the list shows of the URL")
    events = models.JSONField(default=list, help_text='"alerts", "conflicts" or both')
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "REPL_NOTIFY_CHANNEL"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def event_labels(self) -> list[str]:
        labels = dict(self.Event.choices)
        return [labels.get(event, event) for event in self.events]


class Notification(models.Model):
    """One message to send, to a channel or to e-mail addresses: written in the transaction that decides to
    notify (an outbox), sent by the scheduler's rounds and at the end of a sync, retried with backoff until it
    is sent or has failed `MAX_ATTEMPTS` times. A send that dies after the message left may send it again (at
    least once): a claim is held for `CLAIM_SECONDS`."""

    class State(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    MAX_ATTEMPTS = 8
    CLAIM_SECONDS = 120

    channel = models.ForeignKey(NotificationChannel, null=True, blank=True, on_delete=models.CASCADE)
    emails = models.JSONField(default=list, blank=True, help_text="Addresses, when not sent to a channel")
    event = models.CharField(max_length=20, choices=NotificationChannel.Event.choices)
    subject = models.CharField(max_length=250)
    body = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "REPL_NOTIFICATION"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="repl_notification_due")]

    def __str__(self) -> str:
        return f"{self.subject} → {self.destination}"

    @property
    def destination(self) -> str:
        return self.channel.name if self.channel_id and self.channel else ", ".join(self.emails)
