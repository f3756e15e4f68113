"""Item locks: a job that finds its item busy waits behind the running job instead of failing; a lock left by
a dead process is taken over; past the wait, or with no wait, busy is a clear refusal."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from django.db import connection

from replication_admin.core.leases import HOST
from replication_admin.core.locks import LockBusy, item_lock
from replication_admin.models import JobRun, ReplLock, ReplSubscriber
from replication_admin.transactional.sync import wait_for_initial_copy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_holder():
    """A live process of this host that holds the item for a running job."""
    proc = subprocess.Popen(["sleep", "60"])
    holder = JobRun.objects.create(kind="trx_init", target="copy", state=JobRun.State.RUNNING)
    ReplLock.objects.create(name="trx:sub:pub:acct", job=holder, pid=proc.pid, host=_host())
    yield holder
    proc.kill()
    proc.wait()


def _host() -> str:
    return HOST


def _release_later(name: str, seconds: float) -> threading.Thread:
    def release() -> None:
        time.sleep(seconds)
        ReplLock.objects.filter(name=name).delete()
        connection.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_a_job_finding_its_item_busy_waits_for_it_and_then_applies(live_holder):
    waiting = JobRun.objects.create(kind="trx_sync", target="sync", state=JobRun.State.RUNNING)
    releaser = _release_later("trx:sub:pub:acct", 1.0)
    with item_lock("trx:sub:pub:acct", waiting, wait=60):
        lock = ReplLock.objects.get(name="trx:sub:pub:acct")
        assert lock.job_id == waiting.pk
        waiting.refresh_from_db()
        assert waiting.message == f"waiting for job #{live_holder.pk}, which is applying trx:sub:pub:acct"
    releaser.join()
    assert not ReplLock.objects.filter(name="trx:sub:pub:acct").exists()
    assert JobRun.objects.get(pk=live_holder.pk).state == JobRun.State.RUNNING  # the holder was not disturbed


def test_with_no_wait_a_busy_item_is_refused_naming_the_job_that_holds_it(live_holder):
    busy = rf"trx:sub:pub:acct is being applied by job #{live_holder.pk} "
    with pytest.raises(LockBusy, match=busy), item_lock("trx:sub:pub:acct", None, wait=0):
        pytest.fail("the item was taken while another job applied it")
    assert ReplLock.objects.get(name="trx:sub:pub:acct").job_id == live_holder.pk


def test_a_cancelled_job_stops_waiting(live_holder):
    waiting = JobRun.objects.create(kind="trx_sync", target="sync", state=JobRun.State.CANCELLED)
    with pytest.raises(LockBusy), item_lock("trx:sub:pub:acct", waiting, wait=60):
        pytest.fail("a cancelled job took the item")


def test_a_lock_left_by_a_dead_process_is_taken_over_and_its_job_taken_back_and_retried():
    proc = subprocess.Popen(["true"])
    proc.wait()
    dead = JobRun.objects.create(kind="trx_sync", target="sync", state=JobRun.State.RUNNING)
    ReplLock.objects.create(name="snapshot:s", job=dead, pid=proc.pid, host=_host())
    taker = JobRun.objects.create(kind="trx_sync", target="sync", state=JobRun.State.RUNNING)
    with item_lock("snapshot:s", taker, wait=0):
        assert ReplLock.objects.get(name="snapshot:s").job_id == taker.pk
    dead.refresh_from_db()
    assert dead.state == JobRun.State.LOST and "its worker stopped while applying snapshot:s" in dead.error
    retry = JobRun.objects.get(retry_of=dead)
    assert retry.state == JobRun.State.QUEUED and retry.trigger == JobRun.Trigger.RETRY
    assert f"attempt 2 was queued as job #{retry.pk}" in dead.error


def test_a_sync_waits_for_the_initial_copy_requested_before_it():
    sub = ReplSubscriber.objects.create(subscriber="s", server="p", account="a", subscribed=True)
    # Copied once already: now only a copy requested before the sync is waited for, not a later one.
    JobRun.objects.create(kind="trx_init", target="copy", params={"subscription": sub.pk}, state="succeeded")
    copy = JobRun.objects.create(kind="trx_init", target="copy", params={"subscription": sub.pk})
    sync = JobRun.objects.create(kind="trx_sync", target="sync", params={"subscription": sub.pk})
    later_copy = JobRun.objects.create(kind="trx_init", target="copy", params={"subscription": sub.pk})

    def copy_finishes() -> None:
        time.sleep(1.0)
        JobRun.objects.filter(pk=copy.pk).update(state=JobRun.State.SUCCEEDED)
        connection.close()

    thread = threading.Thread(target=copy_finishes)
    thread.start()
    wait_for_initial_copy(sub, sync)
    thread.join()
    assert JobRun.objects.get(pk=copy.pk).state == JobRun.State.SUCCEEDED
    sync.refresh_from_db()
    assert sync.message == f"waiting for the initial copy (job #{copy.pk})"
    # A copy requested after the sync is not waited for (it is still queued here).
    assert JobRun.objects.get(pk=later_copy.pk).state == JobRun.State.QUEUED


def test_a_sync_of_a_subscription_never_copied_waits_even_for_a_copy_requested_after_it():
    sub = ReplSubscriber.objects.create(subscriber="s", server="p", account="a", subscribed=True)
    sync = JobRun.objects.create(kind="trx_sync", target="sync", params={"subscription": sub.pk})
    copy = JobRun.objects.create(kind="trx_init", target="copy", params={"subscription": sub.pk})
    sync.runs_inline = False  # queued: it goes back to the queue behind the copy, without a worker
    with pytest.raises(LockBusy) as busy:
        wait_for_initial_copy(sub, sync)
    assert busy.value.holder_job_id == copy.pk
    assert busy.value.waiting == f"waiting for the initial copy (job #{copy.pk})"
