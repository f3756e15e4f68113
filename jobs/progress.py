"""Live progress of Spark work: finished tasks / all tasks of the running stages while a job runs.

On the Spark service the server streams stage progress with each operation's results (a progress handler
of the Connect session, called in the thread that waits for the operation); in an embedded session a
thread reads the driver's status tracker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from jobs.session import is_connect


class StageProgress:
    """Reports finished tasks / all tasks of the running stages, at most every `interval` seconds."""

    def __init__(
        self,
        spark: Any,
        report: Callable[[int, int], None],
        interval: float = 0.5,
    ) -> None:
        self.spark = spark
        self.report = report
        self.interval = interval
        self._stop = threading.Event()
        self._connect = is_connect(spark)
        self._thread = threading.Thread(target=self._poll, name="spark-progress", daemon=True)
        self._owner = threading.get_ident()
        self._last = 0.0
        self._broken = False

    # --- Spark Connect: the server's progress messages ---------------------------------------------------

    def _on_progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        # One session may serve several threads (the console); report only this one's operations.
        if self._broken or threading.get_ident() != self._owner:
            return
        now = time.monotonic()
        if not done and now - self._last < self.interval:
            return
        finished = total = 0
        for stage in stages or ():
            finished += stage.num_completed_tasks
            total += stage.num_tasks
        if total:
            self._last = now
            self._safe_report(finished, total)

    def _safe_report(self, done: int, total: int) -> None:
        try:
            self.report(done, total)
        except Exception:  # progress must never break the job
            self._broken = True

    # --- embedded session: poll the status tracker -------------------------------------------------------

    def _poll(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(self.interval):
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                self._safe_report(done, total)
                if self._broken:
                    return

    def __enter__(self) -> StageProgress:
        if self._connect:
            self.spark.registerProgressHandler(self._on_progress)
        else:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._connect:
            self.spark.removeProgressHandler(self._on_progress)
            return
        self._stop.set()
        self._thread.join(timeout=2)
