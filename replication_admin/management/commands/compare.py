from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from replication_admin.compare.actions import do_start_compare
from replication_admin.compare.selectors import compare_result
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, Server


class Command(BaseCommand):
    help = "Compare two tables by primary key: SERVER TABLE SERVER TABLE. Runs here unless --queue."

    def add_arguments(self, parser):
        parser.add_argument("left_server")
        parser.add_argument("left_table")
        parser.add_argument("right_server")
        parser.add_argument("right_table")
        parser.add_argument("--queue", action="store_true", help="hand the job to the django-q2 workers")

    def handle(self, *args, **opts):
        servers = {s.name: s for s in Server.objects.filter(name__in=[opts["left_server"], opts["right_server"]])}
        for key in ("left_server", "right_server"):
            if opts[key] not in servers:
                raise CommandError(f"server {opts[key]!r} is not registered")
        with override_settings(JOBS_SYNC=not opts["queue"]):
            job = do_start_compare(
                Actor.command(),
                servers[opts["left_server"]],
                opts["left_table"],
                servers[opts["right_server"]],
                opts["right_table"],
            )
        job = JobRun.objects.get(pk=job.pk)
        if opts["queue"]:
            self.stdout.write(f"queued job #{job.pk}")
            return
        if job.state != JobRun.State.SUCCEEDED:
            raise CommandError(f"job #{job.pk} {job.state}: {job.error}")
        result = compare_result(job)
        assert result is not None  # a succeeded compare stores its result
        stored = result.as_json()
        self.stdout.write(json.dumps({k: v for k, v in stored.items() if k != "rows"}, indent=2))
        if not result.equal:
            self.stdout.write(json.dumps(stored["rows"], indent=2, ensure_ascii=False))
