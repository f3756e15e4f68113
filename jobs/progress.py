"""Live progress of Spark work: a thread that reads the status tracker while a job runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pyspark.sql import SparkSession


class StageProgress:
    """Reports finished tasks / all tasks of the running stages every `interval` seconds."""

    def __init__(
        self,
        spark: SparkSession,
        report: Callable[[int, int], None],
        interval: float = 0.5,
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.report = report
        self.on_exit = on_exit
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def _run(self) -> None:
        try:
            self._poll()
        finally:
            if self.on_exit is not None:
                self.on_exit()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            done = total = 0
            for stage_id in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                try:
                    self.report(done, total)
                except Exception:  # progress must never break the job
                    return

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
