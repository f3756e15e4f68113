"""Tracer tokens: a marker written into a transactional publication's log (on demand, by statement, or on a
schedule), timed until each subscriber's apply has committed it; the rows are untouched, each arrival is recorded
once, and the publication page lists and charts the latencies."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.engine.statements import PostTracer, ScheduleTracer, parse_one
from replication_admin.models import AuditEntry, ReplAccount, ReplSubscriber, ScheduledEvent, Tracer, TracerArrival
from replication_admin.tasks import run_event
from replication_admin.transactional import tracers
from replication_admin.transactional.lookups import TrxError
from tests.bidir.test_bidir_sync import same
from tests.engine.test_trx_statements import refused as refused_text
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.live_db]


def published(make_server, subscribers: dict[str, str], publisher: str = "postgresql"):
    """`pub` (PostgreSQL unless said) publishes `stock`; the `subscribers` (name: dialect) subscribe, copied to its
    level."""
    pub = make_server(publisher, "pub")
    subs = [make_server(dialect, name) for name, dialect in subscribers.items()]
    sql(pub, "CREATE TABLE stock (id integer PRIMARY KEY, qty integer)", "INSERT INTO stock VALUES (1, 10), (2, 20)")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'stock', 2, 0, null)")
    for sub in subs:
        run(
            sub, "REPL_SERVER ('pub', 'localhost:1111'); REPL_SUBSCRIBE ('pub', 'acct'); REPL_INIT_COPY ('pub', 'acct')"
        )
    return pub, subs


@pytest.fixture
def publication(make_server, jobs_sync):
    """A MariaDB and a SQLite subscriber."""
    return published(make_server, {"my": "mysql", "lite": "sqlite"})


@pytest.fixture
def small_publication(make_server, jobs_sync):
    """A SQLite publisher (its log is numbered by the console's sequencer) and a SQLite subscriber."""
    return published(make_server, {"lite": "sqlite"}, publisher="sqlite")


def level_of(sub) -> int:
    return ReplSubscriber.objects.get(subscriber=sub.name).level


def test_a_tracer_is_timed_to_each_subscriber_once_and_changes_no_row(publication):
    pub, subs = publication
    sql(pub, "UPDATE stock SET qty = 11 WHERE id = 1")
    tracer_id = run(pub, "REPL_TRACER ('acct')")[0].details["tracer"]
    sql(pub, "UPDATE stock SET qty = 21 WHERE id = 2")
    my, lite = subs
    before = level_of(my)
    run(my, "REPL_SYNC ('pub', 'acct')")
    # Only MariaDB has applied it: its time is recorded, SQLite's is not yet.
    assert list(TracerArrival.objects.values_list("tracer_id", "subscriber")) == [(tracer_id, "my")]
    assert level_of(my) == before + 3  # the tracer is a transaction of its own, between the two updates
    run(lite, "REPL_SYNC ('pub', 'acct')")
    arrivals = {a.subscriber: a for a in TracerArrival.objects.select_related("tracer")}
    assert set(arrivals) == {"my", "lite"}
    tracer = Tracer.objects.get(pk=tracer_id)
    for arrival in arrivals.values():
        assert (
            arrival.applied_at >= tracer.posted_at
            and arrival.latency == (arrival.applied_at - tracer.posted_at).total_seconds()
        )
    # The rows are the publisher's, nothing more: the marker wrote nothing on the subscribers.
    for sub in subs:
        assert same(pub, sub, "stock")["equal"]
        assert value(sub, "SELECT COUNT(*) FROM stock") == 2
    # A second sync, and the same transactions applied again, record nothing twice.
    run(my, "REPL_SYNC ('pub', 'acct')")
    tracers.record_arrivals("my", [tracer_id])
    assert TracerArrival.objects.count() == 2
    assert AuditEntry.objects.filter(action="trx.tracer", target="pub/acct").count() == 1


def test_tracers_run_on_a_schedule_and_bad_schedules_are_refused_in_one_line(small_publication):
    pub, subs = small_publication
    run(pub, "REPL_TRACER_SCHEDULE ('acct', 5)")
    event = ScheduledEvent.objects.get(name=tracers.tracer_event_name(ReplAccount.objects.get(account="acct")))
    assert (event.interval, event.server, event.sql) == (5, "pub", "REPL_TRACER ('acct')")
    run_event(event.name)
    assert list(Tracer.objects.values_list("posted_by", flat=True)) == [Actor.scheduler().username]
    for sub in subs:
        run(sub, "REPL_SYNC ('pub', 'acct')")
    assert TracerArrival.objects.count() == 1
    assert "minutes must be" in refused_text("REPL_TRACER_SCHEDULE ('acct', -1)")
    assert "minutes must be" in refused_text("REPL_TRACER_SCHEDULE ('acct', 99999)")
    with pytest.raises(TrxError, match="the interval must be 0"):
        tracers.do_schedule_tracer(Actor.command(), ReplAccount.objects.get(account="acct"), 99999)
    assert ScheduledEvent.objects.get(name=event.name).interval == 5  # unchanged
    run(pub, "REPL_TRACER_SCHEDULE ('acct', 0)")
    assert not ScheduledEvent.objects.filter(name=event.name).exists()


def test_a_viewer_may_not_post_a_tracer_and_a_log_that_cannot_be_written_is_named(small_publication, viewer_client):
    pub, _subs = small_publication
    account = ReplAccount.objects.get(account="acct")
    with pytest.raises(PermissionDenied):
        tracers.do_post_tracer(Actor(user=None, via="web"), account)
    response = viewer_client.post(reverse("trx-publications-tracer", args=["pub", "acct"]))
    assert response.status_code == 403 and not Tracer.objects.exists()
    assert AuditEntry.objects.filter(action="trx.tracer", outcome=AuditEntry.Outcome.DENIED).exists()
    sql(pub, 'ALTER TABLE "RTTX_acct" RENAME TO "RTTX_gone"')  # the publication's log cannot be written
    message = refused(pub, "REPL_TRACER ('acct')")
    assert message.startswith("the tracer could not be written on pub:") and "\n" not in message
    assert Tracer.objects.get().error == message


def test_the_publication_page_lists_and_charts_the_latencies(publication, operator_client):
    _pub, subs = publication
    page = reverse("trx-publications-detail", args=["pub", "acct"])
    response = operator_client.post(reverse("trx-publications-tracer", args=["pub", "acct"]))
    assert response.status_code == 302
    run(subs[0], "REPL_SYNC ('pub', 'acct')")
    body = operator_client.get(page).content.decode()
    cells = dict(re.findall(r'data-subscriber="(\w+)">(.*?)</td>', body))
    assert re.fullmatch(r"\d+\.\d{3} s", cells["my"]) and "waiting" in cells["lite"]
    figure = json.loads(html.unescape(re.search(r'id="trx-tracer-figure"[^>]*>(.*?)</script>', body, re.S).group(1)))
    [trace] = figure["data"]
    assert trace["name"] == "my" and len(trace["y"]) == 1 and trace["y"][0] >= 0
    # the chart's table view holds the same latency
    table = body[body.index('id="trx-tracer-table"') :]
    assert "Tracer latency of each subscriber" in table and f">{trace['y'][0]}<" in table.replace(" ", "")
    sub_page = operator_client.get(reverse("trx-subscriptions-detail", args=["my", "pub", "acct"])).content.decode()
    assert f'{cells["my"]} <span class="muted">(tracer #' in sub_page
    response = operator_client.post(reverse("trx-publications-tracer-schedule", args=["pub", "acct"]),
                                    {"every_minutes": "-3"})  # fmt: skip
    assert response.status_code == 302 and not ScheduledEvent.objects.filter(name__startswith="repl_tracer").exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("REPL_TRACER ('acct')", PostTracer(account="acct")),
     ("repl_tracer_schedule ('acct', 15)", ScheduleTracer(account="acct", minutes=15))],
)  # fmt: skip
def test_the_tracer_statements_parse(text, expected):
    assert parse_one(text) == expected


def test_bad_tracer_statements_are_refused_with_the_reason():
    assert "repl_tracer takes 1 argument" in refused_text("REPL_TRACER ()")
    assert "minutes must be" in refused_text("REPL_TRACER_SCHEDULE ('acct', 'often')")
