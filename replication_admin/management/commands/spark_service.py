"""manage.py spark_service: run the shared Spark service (a Spark Connect server with the JDBC drivers), or
check one (--ping)."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.session import missing_jars
from replication_admin.core.spark import ping_service, spark_config
from replication_admin.core.spark_service import Supervisor


class Command(BaseCommand):
    help = (
        "Run the Spark service every worker, replsql and console dry run connects to (set "
        "REPLADMIN_SPARK_REMOTE=sc://host:port for them). Its executors run under REPLADMIN_SPARK_MASTER "
        "(local[*], or spark://host:7077 for a standalone cluster); REPLADMIN_SPARK_CONF passes any spark.* "
        "setting. With --ping: check that the configured service answers."
    )

    def add_arguments(self, parser):
        parser.add_argument("--master", help="Spark master (default: REPLADMIN_SPARK_MASTER)")
        parser.add_argument("--host", help="address to listen on (default: REPLADMIN_SPARK_CONNECT_HOST)")
        parser.add_argument("--port", type=int, help="port to listen on (default: REPLADMIN_SPARK_CONNECT_PORT)")
        parser.add_argument("--ping", action="store_true", help="check the service of REPLADMIN_SPARK_REMOTE")
        parser.add_argument("--wait", type=float, default=0, help="with --ping: keep trying this many seconds")
        parser.add_argument("--work-dir", help="the server's files and log (default: var/spark)")
        parser.add_argument(
            "--no-heartbeat", action="store_true", help="write nothing to the catalog (no heartbeat, no alert)"
        )

    def handle(self, *args, **opts):
        if opts["ping"]:
            return self.ping(opts["wait"])
        config = spark_config()
        if opts["master"]:
            config = type(config)(**{**config.__dict__, "master": opts["master"]})
        absent = missing_jars(config)
        if absent:
            raise CommandError(f"JDBC driver jars not found: {', '.join(absent)} (run scripts/setup.sh)")
        host = opts["host"] or settings.SPARK_CONNECT_HOST
        port = opts["port"] or settings.SPARK_CONNECT_PORT
        work_dir = Path(opts["work_dir"]) if opts["work_dir"] else settings.VAR_DIR / "spark"
        work_dir.mkdir(parents=True, exist_ok=True)

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        # This process supervises the server (core/spark_service.py): restarts it when it exits or has no
        # executors, and says what it sees in its heartbeat. SIGTERM stops both.
        supervisor = Supervisor(config, host, port, work_dir, heartbeat=not opts["no_heartbeat"], say=say)
        raise SystemExit(supervisor.run())

    def ping(self, wait: float) -> None:
        if not settings.SPARK_REMOTE:
            raise CommandError("REPLADMIN_SPARK_REMOTE is not set: there is no Spark service to check")
        deadline = time.monotonic() + wait
        while True:
            try:
                info = ping_service()
            except Exception as exc:
                if time.monotonic() >= deadline:
                    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise CommandError(f"Spark service {settings.SPARK_REMOTE} does not answer: {line}") from None
                time.sleep(1.0)
                continue
            self.stdout.write(
                f"Spark service {settings.SPARK_REMOTE} answers: master {info['master']}, "
                f"{info['slots']} task slots, {info['seconds']:.2f} s to a first task"
            )
            return
