"""manage.py qcluster: django-q2's worker cluster plus this host's runtime thread, and a bounded shutdown.

A scheduler thread hands due scheduled events to the workers at their slots (tasks.scheduler_loop).
The runtime thread runs the reaper every REPLADMIN_REAP_INTERVAL seconds (core/reaper.py): jobs whose
worker died anywhere are taken back and retried, expired item locks freed, lost or delayed tasks handed
out again. A heartbeat thread renews this worker host's REPL_PROCESS row every few seconds (the jobs it
runs) and runs the watchdog every 10 s (core/heartbeats.py: follower-down and component-down alerts).
One SIGTERM (or SIGINT) stops the cluster within about 10 s: its workers get REPLADMIN_SHUTDOWN_GRACE
seconds to finish; a job still running then is stopped, its item released and
its next attempt queued at once, so it resumes on another worker host through the lease machinery
(every apply is atomic and idempotent, so stopping one mid-step loses nothing).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time

import psutil
from django.conf import settings
from django.db import connection
from django_q.cluster import Cluster
from django_q.conf import Conf
from django_q.management.commands.qcluster import Command as DjangoQCommand

from replication_admin import tasks
from replication_admin.core import heartbeats, reaper
from replication_admin.core.leases import HOST
from replication_admin.models import JobRun

log = logging.getLogger(__name__)


class Command(DjangoQCommand):
    help = "Start the django-q2 worker cluster with this host's reaper; one SIGTERM stops it within ~10 s."

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018 — signing needs it; fail before forking
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        stopping = threading.Event()
        cluster = Cluster()
        # Replace the cluster's own handlers: its stop waits for running jobs however long they take.
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        connection.close()  # nothing open is shared with the forked sentinel
        cluster.start()
        # The scheduler thread hands due SYS_SCHEDULED_EVENTs to the workers at their slots.
        threading.Thread(target=tasks.scheduler_loop, args=(stopping,), name="scheduler", daemon=True).start()
        threading.Thread(target=self._heartbeat, args=(stopping,), name="host-heartbeat", daemon=True).start()
        if options.get("run_once"):
            stopping.set()
        while not stopping.wait(settings.REAP_INTERVAL):
            reaper.safely_reap()
            if cluster.sentinel is None or not cluster.sentinel.is_alive():
                break
        self._shut_down(cluster)
        heartbeats.stopped(heartbeats.Kind.WORKER)
        heartbeats.stopped(heartbeats.Kind.SCHEDULER)
        connection.close()
        os._exit(0)  # the children are gone; skip multiprocessing's join of them at exit

    @staticmethod
    def _heartbeat(stopping: threading.Event) -> None:
        """This worker host's heartbeat (the jobs running on it) and the watchdog, until the cluster stops."""
        pulse = heartbeats.Pulse(heartbeats.Kind.WORKER, watches=True)
        workers = int(Conf.WORKERS or 0)

        def details() -> dict:
            running = JobRun.objects.filter(state=JobRun.State.RUNNING, worker_host=HOST).order_by("pk")
            return {"jobs": list(running.values_list("pk", flat=True)), "workers": workers}

        while True:
            pulse(details)
            if stopping.wait(heartbeats.beat_every() / 2):
                break
        connection.close()

    def _shut_down(self, cluster: Cluster) -> None:
        me = psutil.Process(os.getpid())
        sentinel = cluster.sentinel
        if cluster.stop_event is not None and sentinel is not None and sentinel.is_alive():
            # The sentinel stops taking tasks and asks its workers to stop. A multiprocessing Event's set()
            # blocks while a waiter that died (a group-wide SIGTERM) is counted as sleeping: set it aside.
            threading.Thread(target=cluster.stop_event.set, daemon=True).start()
        deadline = time.monotonic() + settings.SHUTDOWN_GRACE
        while time.monotonic() < deadline and cluster.sentinel is not None and cluster.sentinel.is_alive():
            time.sleep(0.2)
        children = me.children(recursive=True)
        if not children:
            return
        pids = {p.pid for p in children}
        for process in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(children, timeout=3)
        running = JobRun.objects.filter(state=JobRun.State.RUNNING, worker_host=HOST, worker_pid__in=pids)
        for job_id in running.values_list("pk", flat=True):
            retry = reaper.take_back(job_id, "its worker host was shut down")
            log.warning("job %s handed back at shutdown; next attempt #%s", job_id, retry.pk if retry else "-")
