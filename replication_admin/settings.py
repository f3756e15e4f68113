"""Settings for replication_admin: one file, everything tunable from the environment.

Environment variables are read with the small typed helpers below. For development and the demo, a file of
KEY=VALUE lines (`var/dev.env`, written by scripts/setup.sh, never committed) supplies the secret key, the
Fernet key and DEBUG, but only when REPLADMIN_ENV_FILE names it: the Makefile, scripts/ and the test suite set
it; a production process never reads a development file by accident. Real environment variables always win
over that file.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from replication_admin.engine.dialects import DIALECTS
from replication_admin.env_file import load_env_file, named_env_file

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("REPLADMIN_VAR_DIR", BASE_DIR / "var"))


# --- development env file: read only when REPLADMIN_ENV_FILE names it ------------------------------------------
try:
    ENV_FILE = str(named_env_file() or "")
except FileNotFoundError as missing:
    raise ImproperlyConfigured(str(missing)) from None
if ENV_FILE:
    load_env_file(Path(ENV_FILE))
# --- end of the development env file ---------------------------------------------------------------------------


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_optional_bool(name: str) -> bool | None:
    value = os.environ.get(name, "").strip()
    return env_bool(name, False) if value else None


def env_spark_conf(name: str) -> dict[str, str]:
    """ "spark.a=1 spark.b=x" (spaces, commas or new lines between) -> {"spark.a": "1", "spark.b": "x"}."""
    conf: dict[str, str] = {}
    for item in os.environ.get(name, "").replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("spark."):
            raise ImproperlyConfigured(f"{name}: {item!r} is not spark.<setting>=<value>")
        conf[key] = value
    return conf


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = env_bool("REPLADMIN_DEBUG", False)

SECRET_KEY = env_str("REPLADMIN_SECRET_KEY")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "REPLADMIN_SECRET_KEY is not set. Export it, or for development run scripts/setup.sh (writes var/dev.env) "
        "and set REPLADMIN_ENV_FILE=var/dev.env."
    )

# Fernet keys that encrypt server passwords at rest. Comma-separated: the first encrypts, all decrypt,
# so a key can be rotated by prepending a new one (then `manage.py rotate_server_keys`).
FERNET_KEYS = env_list("REPLADMIN_FERNET_KEYS", [])
if not FERNET_KEYS:
    raise ImproperlyConfigured(
        "REPLADMIN_FERNET_KEYS is not set. Export it, or for development run scripts/setup.sh (writes var/dev.env) "
        "and set REPLADMIN_ENV_FILE=var/dev.env."
    )

ALLOWED_HOSTS = env_list("REPLADMIN_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("REPLADMIN_CSRF_TRUSTED_ORIGINS", [])
# Bearer tokens for the read-only status API (/api/status) and Prometheus metrics (/metrics), good for both;
# comma-separated. Tokens made on the console's API tokens page work beside them; with neither, both endpoints
# answer 403 "not enabled".
STATUS_TOKENS = env_list("REPLADMIN_STATUS_TOKENS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "axes",
    # Before django_q: replication_admin's qcluster command (the cluster plus its runtime thread) wins.
    "replication_admin",
    "django_q",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files straight after the security headers and HTTPS redirect, before sessions and logins.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "replication_admin.middleware.BrowserTimeZoneMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes requires: turns a locked-out login into the console's lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "replication_admin.urls"
WSGI_APPLICATION = "replication_admin.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "replication_admin.console.context.console",
                "replication_admin.core.web.may",
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    }
]

# The console's own catalog. SQLite by default (WAL so the worker and the web process share it);
# REPLADMIN_DB_ENGINE=postgresql switches to a PostgreSQL catalog.
DB_ENGINE = env_str("REPLADMIN_DB_ENGINE", "sqlite")
CATALOG_DATABASES = {
    "sqlite": lambda: {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": env_str("REPLADMIN_DB_PATH", str(VAR_DIR / "console.sqlite3")),
        "OPTIONS": {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        "TEST": {"NAME": env_str("REPLADMIN_TEST_DB_PATH", str(VAR_DIR / "test-console.sqlite3"))},
    },
    # Shared by every worker host, the console and replfollow. Connections persist for
    # REPLADMIN_DB_CONN_MAX_AGE seconds (0: one per request or task) and are checked before reuse, so a
    # catalog restart costs a reconnect, not a failed job. The test suite's database is
    # REPLADMIN_TEST_DB_NAME (created and dropped by pytest-django).
    "postgresql": lambda: {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": env_str("REPLADMIN_DB_NAME", "replication_admin"),
        "USER": env_str("REPLADMIN_DB_USER", "root"),
        "PASSWORD": env_str("REPLADMIN_DB_PASSWORD"),
        "HOST": env_str("REPLADMIN_DB_HOST", "127.0.0.1"),
        "PORT": env_str("REPLADMIN_DB_PORT", "5432"),
        "CONN_MAX_AGE": env_int("REPLADMIN_DB_CONN_MAX_AGE", 300),
        "CONN_HEALTH_CHECKS": True,
        # TCP keepalives as on every server connection (engine/dialects/base.py KEEPALIVE_*): a catalog host that
        # vanished, or a link that black-holes, ends the connection in about a minute instead of never.
        "OPTIONS": {
            "connect_timeout": env_int("REPLADMIN_DB_CONNECT_TIMEOUT", 10),
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
            "tcp_user_timeout": 60_000,
        },
        "TEST": {"NAME": env_str("REPLADMIN_TEST_DB_NAME", "test_replication_admin")},
    },
}
if DB_ENGINE not in CATALOG_DATABASES:
    raise ImproperlyConfigured(f"REPLADMIN_DB_ENGINE must be sqlite or postgresql, got {DB_ENGINE!r}")
DATABASES = {"default": CATALOG_DATABASES[DB_ENGINE]()}
# How a connection to the catalog waits at most `ms` for a lock another transaction holds: the lease heartbeat
# waits half a beat, never behind a long transaction (core/leases.py).
CATALOG_BRIEF_WAIT_SQL = {"sqlite": "PRAGMA busy_timeout = {ms}", "postgresql": "SET lock_timeout = {ms}"}[DB_ENGINE]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# --- login throttling (django-axes) ----------------------------------------------------------------------------
# A user name tried from one address is locked out from that address (only) after REPLADMIN_LOGIN_FAILURE_LIMIT
# failed logins in a row, and an address is locked out for every user name after
# REPLADMIN_LOGIN_ADDRESS_FAILURE_LIMIT failures over all names (a password sprayed over many), each for
# REPLADMIN_LOGIN_COOLOFF_MINUTES after the last failure (each attempt while locked out starts the wait again).
# The address is the peer's; behind a trusted proxy (REPLADMIN_TRUSTED_PROXIES; loopback with
# REPLADMIN_BEHIND_PROXY=1) the client's as the proxy appended it to X-Forwarded-For (console/logins.py).
# Failures and lockouts are audited (login.failed, login.locked_out); an admin unlocks on the Logins page, in the
# Django admin (Access attempts) or with `manage.py unlock_login USER [--address ADDR]`.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("REPLADMIN_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("REPLADMIN_LOGIN_COOLOFF_MINUTES", 15))
LOGIN_ADDRESS_FAILURE_LIMIT = env_int("REPLADMIN_LOGIN_ADDRESS_FAILURE_LIMIT", 20)
LOGIN_TRUSTED_PROXIES = env_list(
    "REPLADMIN_TRUSTED_PROXIES", ["127.0.0.1", "::1"] if env_bool("REPLADMIN_BEHIND_PROXY", False) else []
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "replication_admin.console.logins.LoginThrottle"  # each of the two with its own limit
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "replication_admin.console.logins.lockout_response"
AXES_CLIENT_IP_CALLABLE = "replication_admin.console.logins.client_address"
AXES_VERBOSE = False  # the audit log records every failure and lockout
# --- end of login throttling -----------------------------------------------------------------------------------

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("REPLADMIN_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Where `manage.py collectstatic` gathers the static files for production (scripts/serve.sh runs it).
STATIC_ROOT = Path(env_str("REPLADMIN_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# The console serves its static files itself (whitenoise; no web server needed in front). In production
# collectstatic stores each file under a name carrying a hash of its content, with compressed copies, and pages link
# to those names: whitenoise sends them with a ten-year Cache-Control (immutable), so a browser fetches a file once
# per version. With DEBUG on, whitenoise serves straight from the source folders (finders): no collectstatic.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "replication_admin.static_storage.ConsoleStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG
# Looked up per request then (edited files show at once, and no STATIC_ROOT is read): as decided here, not by the
# DEBUG a test runner sets later.
WHITENOISE_AUTOREFRESH = DEBUG

# Secure defaults outside DEBUG; each can be relaxed from the environment behind a TLS proxy.
SECURE_SSL_REDIRECT = env_bool("REPLADMIN_SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("REPLADMIN_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("REPLADMIN_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("REPLADMIN_HSTS_PRELOAD", not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("REPLADMIN_BEHIND_PROXY", False) else None
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# --- Content-Security-Policy (django-csp) ----------------------------------------------------------------------
# Scripts only from the console's own static files (no inline script, no eval); styles from its stylesheets
# (htmx's indicator styles and plotly's rules are in static CSS, see base.html). Inline style *attributes* stay
# allowed: plotly's SVG and the progress bars set them, and an attribute cannot run script or select elements.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# --- end of Content-Security-Policy ----------------------------------------------------------------------------

EMAIL_BACKEND = env_str("REPLADMIN_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("REPLADMIN_FROM_EMAIL", "replication_admin@localhost")
# Who gets alert e-mails (failed jobs, invalid subscribers, lag over threshold, failing events).
ALERT_RECIPIENTS = env_list("REPLADMIN_ALERT_EMAILS", [])
# The console's address, for links in e-mails.
CONSOLE_URL = env_str("REPLADMIN_CONSOLE_URL", "http://127.0.0.1:8000")

# Background jobs: django-q2 with the ORM broker by default, Redis when REPLADMIN_REDIS_URL is set.
# One worker process keeps one warm SparkSession, so `recycle` is high; `retry` > `timeout`: the ORM broker
# offers a task again only once no run of it can still be going, and that late copy finds its job no longer
# queued (core.jobs claims a job once). What a dead worker held is re-queued by the leases (core/reaper.py),
# with either broker; see docs/scale-out.md.
Q_CLUSTER = {
    "name": "replication_admin",
    "workers": env_int("REPLADMIN_WORKERS", 2),
    "recycle": 1000,
    "timeout": env_int("REPLADMIN_JOB_TIMEOUT", 3600),
    "retry": env_int("REPLADMIN_JOB_TIMEOUT", 3600) + 300,
    "max_attempts": 1,
    "poll": 0.2,
    # Take one task per free worker: a task prefetched by a cluster that then dies is handed out again by
    # the reaper (core/reaper.py) within a minute, whatever the broker.
    "queue_limit": env_int("REPLADMIN_WORKERS", 2),
    "catch_up": False,
    "save_limit": 1000,
    "label": "Background tasks",
}
# Seconds a job waits for an item another job is applying (a sync queued behind its initial copy) before
# it fails as busy.
LOCK_WAIT = env_int("REPLADMIN_LOCK_WAIT", 600)
# Leases (core/leases.py): a running job and an item lock are renewed every LEASE_SECONDS / 5 by their
# holder; past LEASE_SECONDS without renewal the reaper takes the job back and queues its next attempt,
# at most JOB_ATTEMPTS attempts in all. The reaper runs every REAP_INTERVAL seconds in each worker host.
LEASE_SECONDS = env_int("REPLADMIN_LEASE_SECONDS", 20)
JOB_ATTEMPTS = env_int("REPLADMIN_JOB_ATTEMPTS", 5)
REAP_INTERVAL = env_int("REPLADMIN_REAP_INTERVAL", 5)
# This process's worker host identity in job leases and item locks (default: the machine's host name). Two
# worker processes on one machine with different identities act as two hosts: each takes the other's jobs
# back only when their leases expire, never because a pid of the other identity is not running here.
HOST_IDENTITY = env_str("REPLADMIN_HOST").strip()
# Seconds the qcluster command gives its workers after SIGTERM before it hands their jobs back and stops them.
SHUTDOWN_GRACE = env_int("REPLADMIN_SHUTDOWN_GRACE", 6)
# Process heartbeats (core/heartbeats.py): worker hosts, followers and the scheduler renew theirs every few seconds;
# one not renewed for HEARTBEAT_STALE_SECONDS is down (the scheduler's limit is at least 90 s), and the in-sync
# subscriptions no live follower serves read "follower down".
HEARTBEAT_STALE_SECONDS = env_int("REPLADMIN_HEARTBEAT_STALE_SECONDS", 15)
# The in-sync follower (manage.py replfollow, transactional/sync.py) applies each subscription on its own: up to
# FOLLOW_THREADS subscriptions' steps at once, so a subscriber that stops answering holds only its own (0: one
# after another in the follower's loop, where one stalled subscriber holds them all).
FOLLOW_THREADS = env_int("REPLADMIN_FOLLOW_THREADS", 8)
# A transactional apply batch (repl_apply_batch transactions) is cut, between whole transactions, once it holds
# more than TRX_BATCH_ROWS log entries or TRX_BATCH_BYTES of row images (a transaction larger than that is read
# alone): a large backlog is read and applied in bounded windows, not held in memory at once. A window costs about
# ten times its image text once decoded (each row a tuple, a dict, its values): 10,000 entries or 8 MB of images keep
# one window within tens of MB, so a follower stays within 300 MB (docs/scale-out.md, "What one follower sustains").
TRX_BATCH_ROWS = env_int("REPLADMIN_TRX_BATCH_ROWS", 10000)
TRX_BATCH_BYTES = env_int("REPLADMIN_TRX_BATCH_BYTES", 8 * 1024 * 1024)
# A sync reads the log's next window on a thread of its own while the subscriber applies the current one
# (capture.ReadAhead): reading and applying overlap. Off: one after the other.
TRX_READ_AHEAD = env_bool("REPLADMIN_TRX_READ_AHEAD", True)
# A sync applying a WAL publication's slot straight to its only subscriber streams the slot (the replication
# protocol: the server decodes the next changes while the subscriber applies these) when it holds at least this
# many bytes of WAL; a smaller backlog is read by SQL (a peek), which costs no second connection. 0: never streamed.
WAL_STREAM_BYTES = env_int("REPLADMIN_WAL_STREAM_BYTES", 4 * 1024 * 1024)
# An apply on a subscriber whose server can commit one transaction without waiting for its flush to disk
# (PostgreSQL's synchronous_commit = off, as its own logical replication's apply workers do) commits that way: the
# level moves in the same transaction, so a crash of the subscriber loses the rows and the level together and the
# next apply takes them again from the publisher's log. What lets the publisher forget a transaction (a purge, the
# WAL straight-from-the-slot apply, an acknowledged REPL_WAIT) first makes the subscriber's level durable
# (positions.durable_position). MariaDB has no per-transaction way: its applies stay as the server is configured.
APPLY_ASYNC_COMMIT = env_bool("REPLADMIN_APPLY_ASYNC_COMMIT", True)
# A MariaDB publication's log is versioned by transaction, so the server registers each captured transaction in
# mysql.transaction_registry and never deletes those rows (a DELETE there is refused). With this set, a purge
# empties the registry (TRUNCATE, which needs DROP on it) when no other table of the server is versioned by
# transaction: the product itself never reads it. Off by default: a system table is the DBA's to clear.
MARIADB_REGISTRY_TRUNCATE = env_bool("REPLADMIN_MARIADB_REGISTRY_TRUNCATE", False)
# Network faults: lost connections, failed connects, deadlocks and serialisation failures are retried (a step
# again on a new connection, then the whole job from its start) with exponential backoff and jitter, for at
# most RETRY_SECONDS in all per job; a pooled connection idle longer than CONNECTION_CHECK_AFTER seconds is
# pinged before it is used again.
RETRY_SECONDS = env_int("REPLADMIN_RETRY_SECONDS", 60)
CONNECTION_CHECK_AFTER = env_int("REPLADMIN_CONNECTION_CHECK_AFTER", 5)
# A link that stops forwarding without closing must not hold a job or a follower step for ever: a connect to a
# registered server gives up after CONNECT_TIMEOUT seconds, and a statement whose server sends nothing for
# READ_TIMEOUT seconds fails as a lost connection (then retried as above; 0: no read bound). READ_TIMEOUT bounds
# the control plane's and the followers' ODBC statements, whose longest legitimate silences are an index build
# or a merge of a staged copy; BULK_READ_TIMEOUT bounds Spark's JDBC statements (a sorted read of a whole
# table, a bulk insert batch), which are given as long as their job may run.
CONNECT_TIMEOUT = env_int("REPLADMIN_CONNECT_TIMEOUT", 10)
READ_TIMEOUT = env_int("REPLADMIN_READ_TIMEOUT", 900)
BULK_READ_TIMEOUT = env_int("REPLADMIN_BULK_READ_TIMEOUT", env_int("REPLADMIN_JOB_TIMEOUT", 3600))
# --- scheduler (engine/schedule.py, tasks.scheduler_loop) ---
# Each qcluster's scheduler thread wakes at every event's next run and at least every SCHEDULER_TICK
# seconds (to see new and changed events); the django-q2 schedule every minute is its fallback.
SCHEDULER_TICK = env_int("REPLADMIN_SCHEDULER_TICK", 5)
# A scheduler tick claims the due events (SE_NEXT_RUN <= now) this many at a time, each batch one transaction
# (PostgreSQL: SELECT … FOR UPDATE SKIP LOCKED, so ticks on several hosts take different rows; core/events.py).
SCHEDULER_BATCH = env_int("REPLADMIN_SCHEDULER_BATCH", 100)
# --- end scheduler ---
# --- lag and replication slots (health/checks.py check_lag, run by the scheduler thread every LAG_CHECK_SECONDS) ---
# A transactional subscription is lagging, and a lag alert opens, when its oldest unapplied transaction is older
# than LAG_ALERT_SECONDS (a publication's ACC_ALERT_LAG_SECONDS overrides it).
LAG_ALERT_SECONDS = env_int("REPLADMIN_LAG_ALERT_SECONDS", 60)
LAG_CHECK_SECONDS = env_int("REPLADMIN_LAG_CHECK_SECONDS", 20)
# A validation that found a slice different waits this long for the subscriber to apply what the publisher had
# committed before it compares again (compare/validation.py); still behind then: inconclusive, never drift.
VALIDATE_WAIT_SECONDS = env_int("REPLADMIN_VALIDATE_WAIT", 60)
# A WAL publication's slot alerts when it keeps more than this many bytes of WAL on its publisher (or its
# wal_status is unreserved or lost).
SLOT_WAL_ALERT_BYTES = env_int("REPLADMIN_SLOT_WAL_ALERT_BYTES", 1024**3)
# --- end lag ---
# Run jobs inside the requesting process (django-q2's sync mode): tests and one-off commands.
JOBS_SYNC = env_bool("REPLADMIN_JOBS_SYNC", False)
REDIS_URL = env_str("REPLADMIN_REDIS_URL")
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# --- Spark (jobs/session.py, replication_admin/core/spark.py, docs/scale-out.md) ---
# The shared Spark service (`manage.py spark_service`) that workers, replsql and the console connect to, as
# sc://host:port; empty: each process starts an embedded session of its own (the fallback for a lone command).
SPARK_REMOTE = env_str("REPLADMIN_SPARK_REMOTE")
# The master the service (or an embedded session) runs its executors under: local[*], or spark://host:7077.
SPARK_MASTER = env_str("REPLADMIN_SPARK_MASTER", "local[*]")
SPARK_DRIVER_MEMORY = env_str("REPLADMIN_SPARK_DRIVER_MEMORY", "2g")
# Where the service listens for clients (loopback unless the workers are on other hosts).
SPARK_CONNECT_HOST = env_str("REPLADMIN_SPARK_CONNECT_HOST", "127.0.0.1")
SPARK_CONNECT_PORT = env_int("REPLADMIN_SPARK_CONNECT_PORT", 15002)
# The address executors reach the driver at, and the interface the driver binds (a cluster on other hosts
# needs a routable address here).
SPARK_DRIVER_HOST = env_str("REPLADMIN_SPARK_DRIVER_HOST", "127.0.0.1")
SPARK_BIND_ADDRESS = env_str("REPLADMIN_SPARK_BIND_ADDRESS", "127.0.0.1")
# Any spark.* setting, applied last: "spark.cores.max=4 spark.executor.memory=2g" (spaces or commas between).
SPARK_CONF = env_spark_conf("REPLADMIN_SPARK_CONF")
# How long a client retries an unreachable service before the job fails with one line.
SPARK_CONNECT_RETRY_SECONDS = env_int("REPLADMIN_SPARK_CONNECT_RETRY_SECONDS", 30)
# The standalone master's web UI port (its JSON says whether it is alive, its workers and cores), on each master
# host of REPLADMIN_SPARK_MASTER.
SPARK_MASTER_UI_PORT = env_int("REPLADMIN_SPARK_MASTER_UI_PORT", 8080)
# `manage.py spark_service` supervises its Connect server: the port of the driver's status API (its web UI,
# read-only, on the service's bind address; 0: a free port at each start), and how long the service may have no
# executor on a standalone master (a master restarted without recovery forgets the application) before the
# server is restarted, which registers a new application; running jobs retry on the new one.
SPARK_STATUS_PORT = env_int("REPLADMIN_SPARK_STATUS_PORT", 0)
SPARK_NO_EXECUTORS_SECONDS = env_int("REPLADMIN_SPARK_NO_EXECUTORS_SECONDS", 30)
# The job watchdog (core/reaper.py): a running job whose progress (Spark's tasks, its steps, its log) has not moved
# for this long is interrupted (its Spark session), taken back and retried; 0 turns the watchdog off.
SPARK_STALL_SECONDS = env_int("REPLADMIN_SPARK_STALL_SECONDS", 600)
# SQLite files are opened by Spark's executors: on a local master they are on this host; on a cluster only
# when every executor sees the file at the same path (then set 1). Unset: decided from the master.
SPARK_SQLITE_SHARED = env_optional_bool("REPLADMIN_SPARK_SQLITE_SHARED")
# 1: staging writes into PostgreSQL and MariaDB go through their bulk loaders (COPY, LOAD DATA, one per Spark
# partition; jobs/native_load.py) instead of Spark's JDBC batches. Off by default: on a host whose cores the
# databases share, handing the rows to Python costs more than it saves (docs/design-notes.md has the figures).
NATIVE_LOAD = env_bool("REPLADMIN_NATIVE_LOAD", False)
# Every registered dialect's JDBC driver jars (engine/dialects: each Dialect names its own).
JDBC_JARS = env_list("REPLADMIN_JDBC_JARS", list(dict.fromkeys(j for d in DIALECTS.values() for j in d.jdbc_jars)))

# Incremental refreshes whose log window has at most this many rows are applied by the control plane
# without Spark (a Spark job's fixed cost dominates small windows); 0 sends every window to Spark.
REFRESH_SMALL_WINDOW = env_int("REPLADMIN_REFRESH_SMALL_WINDOW", 20000)

# How full copies (a snapshot's full refresh, initial copies) move rows: "auto" streams them natively between
# PostgreSQL and MariaDB when nothing needs Spark (core.native_copy.copy_path), "spark" always through Spark,
# "stream" always natively (a copy that cannot stream then fails, saying why).
FULL_COPY_PATH = env_str("REPLADMIN_FULL_COPY_PATH", "auto")
# How many connections one Spark job holds at once on one server, reading or writing (its partitions are
# capped to it; SQLite is written by one writer whatever it says).
MAX_CONNECTIONS_PER_SERVER = env_int("REPLADMIN_MAX_CONNECTIONS_PER_SERVER", 4)
# Cores Spark jobs size their partitions for; 0: the Spark service's (or embedded session's) task slots.
SPARK_CORES = env_int("REPLADMIN_SPARK_CORES", 0)

# Registry defaults (Virtuoso's registry variables), in minutes.
SNP_REPL_TOLERANCE_OFFSET = 15
SNP_REPL_PURGE_OFFSET = 30

# Where REPL_PUB_INIT_IMAGE writes publication images and REPL_INIT_COPY reads them (plain names only).
IMAGE_DIR = Path(env_str("REPLADMIN_IMAGE_DIR", str(VAR_DIR / "images")))

# Files the console may use for SQLite servers must live under one of these folders.
SQLITE_ALLOWED_DIRS = env_list("REPLADMIN_SQLITE_DIRS", [str(VAR_DIR)])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("REPLADMIN_LOG_LEVEL", "INFO")},
    "loggers": {
        "py4j": {"level": "WARNING"},
        "axes": {"level": "ERROR"},  # failed logins and lockouts are in the audit log
        "django.db.backends": {"level": "INFO"},
    },
}
