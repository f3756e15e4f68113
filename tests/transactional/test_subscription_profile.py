"""A transactional subscription's profile: its own apply batch, in-sync backlog limit and lag alert limits win over
its publication's and the registry's, act on real syncs and lag checks (PostgreSQL → MariaDB), are shown on its page
with where each comes from, and are set by editors only, in bounds, audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.alerts import open_alerts
from replication_admin.core.audit import Actor
from replication_admin.health.checks import check_lag
from replication_admin.models import Alert, AuditEntry, ReplAccount, ReplSubscriber
from replication_admin.statements import execute
from replication_admin.transactional import profile
from replication_admin.transactional.actions import do_set_subscription_profile
from replication_admin.transactional.lookups import TrxError
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql


@pytest.fixture
def subscribed(make_server, jobs_sync, spark):
    pub, my, pg = make_server("postgresql", "pub"), make_server("mysql", "my"), make_server("postgresql", "pg")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    for sub in (my, pg):
        run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    return pub, my, pg


def subscription(name: str) -> ReplSubscriber:
    return ReplSubscriber.objects.get(subscriber=name)


def write(pub, transactions: int, start: int = 1) -> None:
    for n in range(start, start + transactions):
        sql(pub, f"INSERT INTO items VALUES ({n}, 'item {n}')")


def test_the_subscriptions_apply_batch_wins_over_the_registrys_and_commits_that_many_transactions_at_a_time(
    subscribed,
):
    pub, my, pg = subscribed
    write(pub, 7)
    do_set_subscription_profile(Actor.command(), subscription("my"), apply_batch=2)
    mine = run(my, "REPL_SYNC ('pub', 'shop')")[0].details
    theirs = run(pg, "REPL_SYNC ('pub', 'shop')")[0].details
    assert (mine["applied"], mine["batches"]) == (7, 4)  # 2 + 2 + 2 + 1
    assert (theirs["applied"], theirs["batches"]) == (7, 1)  # the registry's 500
    assert same(pub, my, "items")["equal"] and same(pub, pg, "items")["equal"]


def test_the_subscriptions_lag_limit_alerts_for_it_alone_and_resolves_when_it_catches_up(subscribed):
    pub, my, _pg = subscribed
    do_set_subscription_profile(Actor.command(), subscription("my"), alert_lag=2)
    write(pub, 3)
    check_lag()
    lagging = open_alerts().filter(kind="lag")
    assert list(lagging.values_list("target", flat=True)) == [subscription("my").label]
    assert "3 transactions behind (alert above 2)" in lagging.get().message
    run(my, "REPL_SYNC ('pub', 'shop')")
    check_lag()
    assert not open_alerts().filter(kind="lag").exists()

    # The publication's own limit applies to the subscriptions without one.
    ReplAccount.objects.filter(server="pub", account="shop").update(alert_lag=1)
    write(pub, 2, start=10)
    cache.clear()  # the publication's count read a few seconds ago is kept that long (core.live)
    check_lag()
    assert list(open_alerts().filter(kind="lag").values_list("target", flat=True)) == [subscription("pg").label]


def test_a_lag_check_right_after_the_sync_that_caught_up_does_not_reopen_its_alert(subscribed):
    pub, my, _pg = subscribed
    do_set_subscription_profile(Actor.command(), subscription("my"), alert_lag=2)
    write(pub, 3)
    check_lag()  # reads (and keeps a few seconds) the subscriber's level before the sync
    assert open_alerts().filter(kind="lag", target=subscription("my").label).exists()
    run(my, "REPL_SYNC ('pub', 'shop')")
    assert not open_alerts().filter(kind="lag").exists()  # the sync resolved it
    check_lag()  # no cache.clear(): the level kept from before the sync is read again
    assert not open_alerts().filter(kind="lag").exists()
    assert Alert.objects.filter(kind="lag").count() == 1  # opened once, never reopened


def test_the_profile_says_where_each_setting_comes_from(subscribed):
    ReplAccount.objects.filter(server="pub", account="shop").update(max_backlog=700)
    sub = subscription("my")
    account = ReplAccount.objects.get(server="pub", account="shop")
    shown = {s.name: (s.value, s.source) for s in profile.settings_of(sub, account)}
    assert shown == {
        "apply_batch": (500, "the registry (repl_apply_batch)"),
        "max_backlog": (700, "the publication"),
        "alert_lag": (None, "none set"),
        "alert_lag_seconds": (60.0, "the environment (REPLADMIN_LAG_ALERT_SECONDS)"),
        "retry_most": (300.0, "the default (300 s)"),
        "apply_timeout": (None, "the registry (repl_apply_timeout)"),
        "validate_every": (3600, "the registry (repl_validate_every)"),
        "validate_slices": (24, "the registry (repl_validate_slices)"),
    }
    do_set_subscription_profile(Actor.command(), sub, max_backlog=50, alert_lag_seconds=5, validate_every=0)
    sub.refresh_from_db()
    shown = {s.name: (s.value, s.source) for s in profile.settings_of(sub, account)}
    assert shown["max_backlog"] == (50, "this subscription")
    assert shown["alert_lag_seconds"] == (5.0, "this subscription")
    assert shown["validate_every"] == (0, "this subscription")  # its own "never", not the registry's hour
    assert profile.max_backlog(sub, account) == 50 and profile.lag_limit_seconds(sub, account) == 5.0


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"apply_batch": 0}, "apply_batch must be 1 to 100000"),
        ({"alert_lag_seconds": 10**9}, "alert_lag_seconds must be 1 to 2592000"),
        ({"retry": 5}, "retry is not a setting"),
    ],
)
def test_a_setting_out_of_bounds_is_refused_in_one_line_and_nothing_changes(subscribed, values, says):
    sub = subscription("my")
    with pytest.raises(TrxError, match=says):
        do_set_subscription_profile(Actor.command(), sub, **values)
    sub.refresh_from_db()
    assert all(getattr(sub, name) is None for name in profile.FIELDS)
    assert AuditEntry.objects.get(action="trx.profile").outcome == "error"


def test_an_editor_sets_the_profile_on_the_subscriptions_page_and_a_viewer_may_not(
    subscribed, editor_client, viewer_client
):
    sub = subscription("my")
    address = reverse("trx-subscriptions-profile", args=[sub.subscriber, sub.server, sub.account])
    page = editor_client.get(sub.get_absolute_url()).content.decode()
    assert 'id="trx-profile-rows"' in page and "the registry (repl_apply_batch)" in page
    response = editor_client.post(address, {"apply_batch": "25", "alert_lag": "", "max_backlog": "",
                                            "alert_lag_seconds": "30"}, follow=True)  # fmt: skip
    assert "apply_batch 25, alert_lag_seconds 30" in response.content.decode()
    sub.refresh_from_db()
    assert (sub.apply_batch, sub.alert_lag, sub.max_backlog, sub.alert_lag_seconds) == (25, None, None, 30)
    assert "this subscription" in editor_client.get(sub.get_absolute_url()).content.decode()
    entry = AuditEntry.objects.get(action="trx.profile", outcome="ok")
    assert entry.detail["before"]["apply_batch"] is None and entry.detail["after"]["apply_batch"] == 25

    refused = viewer_client.post(address, {"apply_batch": "1"})
    assert refused.status_code == 403
    sub.refresh_from_db()
    assert sub.apply_batch == 25
    assert AuditEntry.objects.filter(action="trx.profile", outcome="denied").exists()


def test_a_halted_subscription_is_tried_again_within_its_own_retry_window(subscribed):
    pub, my, _pg = subscribed
    sql(my, "ALTER TABLE items ADD CONSTRAINT small_keys CHECK (id < 100)")  # the subscriber refuses key 200
    do_set_subscription_profile(Actor.command(), subscription("my"), retry_most=20)
    sql(pub, "INSERT INTO items VALUES (200, 'too big for my')")
    outcomes = execute(Actor.command(), "REPL_SYNC ('pub', 'shop')", context=my)
    assert not outcomes[-1].ok and "halted" in outcomes[-1].message
    ReplSubscriber.objects.filter(subscriber="my").update(halt_attempts=9)  # it has failed many times already
    before = timezone.now()
    outcomes = execute(Actor.command(), "REPL_SYNC ('pub', 'shop')", context=my)
    halted = subscription("my")
    assert halted.halt_attempts == 10 and halted.halt_count is not None
    # The tenth wait would be 5 s · 2⁹; the window keeps it at 20 s (± the jitter's 20 %).
    assert halted.retry_at - before <= timedelta(seconds=24)
    shown = {s.name: (s.value, s.source) for s in profile.settings_of(halted, None)}
    assert shown["retry_most"] == (20.0, "this subscription")

    do_set_subscription_profile(Actor.command(), halted, retry_most=None)
    ReplSubscriber.objects.filter(subscriber="my").update(halt_attempts=9)
    before = timezone.now()
    execute(Actor.command(), "REPL_SYNC ('pub', 'shop')", context=my)
    assert subscription("my").retry_at - before >= timedelta(seconds=240)  # the default window, 300 s
