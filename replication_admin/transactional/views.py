"""Transactional replication: publications (SYS_REPL_ACCOUNTS) with their items, grants, log and purger, and
subscriptions (SYS_REPL_SUBSCRIBERS) with their level, lag, validity, gaps, schedule and in-sync mode."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import pyodbc
from django.conf import settings
from django.contrib import messages
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.core.audit import Actor
from replication_admin.core.connections import ConnectionFailed
from replication_admin.core.errors import ReplicationError
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.web import Chart, chart_table, is_htmx, line_chart, local_stamp, requires
from replication_admin.models import (
    JobRun,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    SchemaChange,
    Server,
    SkippedTransaction,
    TpGrant,
    TpItem,
    subscription_label,
)
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import durability, profile, tracers
from replication_admin.transactional import lookups as trx_lookups
from replication_admin.transactional import schema as trx_schema
from replication_admin.transactional.forms import (
    AckPolicyForm,
    AddTableForm,
    GrantForm,
    LagAlertForm,
    NewLogForm,
    OnConflictForm,
    PublishForm,
    PurgerForm,
    RemoveItemForm,
    SchemaPolicyForm,
    SubScheduleForm,
    SubscribeForm,
    SubscriptionProfileForm,
    TracerScheduleForm,
)
from replication_admin.transactional.selectors import (
    capture_summary,
    event_next_run,
    item_filters_of,
    lag_limit_seconds,
    live_lags,
    purger_summary,
    row_filters_of,
    size_text,
    slot_problem,
    slots,
    subscriber_states,
    validation_panel,
)

ACTION_ERRORS = (ReplicationError, ConnectionFailed, pyodbc.Error)
SAMPLES_PER_SUBSCRIBER = 500
PUBLICATION_TEMPLATE = "replication_admin/transactional/publication_detail.html"
SUBSCRIPTION_TEMPLATE = "replication_admin/transactional/subscription_detail.html"


# --- helpers ---------------------------------------------------------------------------------------------


def _attempt(request: HttpRequest, call: Callable[[Actor], str | None]) -> HttpResponse | None:
    """Run an action as the signed-in user: its note or its error becomes a message; a 403 if refused."""
    try:
        note = call(Actor.from_request(request))
    except ACTION_ERRORS as exc:
        messages.error(request, str(exc))
    else:
        if note:
            messages.success(request, note)
    return None


def _form_errors(form) -> str:
    """A form's errors on one line, each after its field's label (for a message)."""
    parts = []
    for name, errors in form.errors.items():
        field = form.fields.get(name)
        parts.append(f"{field.label}: {' '.join(errors)}" if field is not None else " ".join(errors))
    return "; ".join(parts)


def _account(server: str, account: str) -> ReplAccount:
    return get_object_or_404(ReplAccount, server=server, account=account)


def _subscription(subscriber: str, server: str, account: str) -> ReplSubscriber:
    return get_object_or_404(ReplSubscriber, subscriber=subscriber, server=server, account=account)


def _acct_target(account: ReplAccount) -> str:
    return f"{account.server}/{account.account}"


# How a refused request names what it was for in the audit log (from the URL's arguments).


def _acct_label(request: HttpRequest, server: str, account: str) -> str:
    return f"{server}/{account}"


def _sub_label(request: HttpRequest, subscriber: str, server: str, account: str) -> str:
    return subscription_label(subscriber, server, account)


def _schema_change_label(request: HttpRequest, pk: int) -> str:
    return str(SchemaChange.objects.filter(pk=pk).first() or f"schema change #{pk}")


def _removed_item_target(request: HttpRequest, server: str, account: str) -> str:
    form = RemoveItemForm(request.POST)
    pk = form.cleaned_data["item"] if form.is_valid() else None
    item = TpItem.objects.filter(pk=pk, server=server, acct=account).first() if pk is not None else None
    return f"{server}/{account}: {item.item if item else ''}"


def _chosen(field: str, on: str, off: str) -> Callable[..., str]:
    """The action of a switch posted as `field` = 1 (on) or 0 (off)."""
    return lambda request, *args, **kwargs: on if request.POST.get(field) == "1" else off


def level_figures(server: str, account: str, subscribers: Iterable[str]) -> tuple[dict, dict]:
    """The level chart (one line per subscriber, and the publisher's level) and the lag chart, from the
    latest REPL_LEVEL_HISTORY samples of each subscriber."""
    level_traces: list[dict] = []
    lag_traces: list[dict] = []
    publisher: dict[str, int] = {}
    names = list(subscribers)
    latest = (
        LevelSample.objects.filter(server=server, account=account, subscriber__in=names)
        .annotate(recency=Window(RowNumber(), partition_by=F("subscriber"), order_by=F("at").desc()))
        .filter(recency__lte=SAMPLES_PER_SUBSCRIBER)
        .order_by("at")
    )  # one query for all the subscribers, not one each
    samples_of: dict[str, list[LevelSample]] = defaultdict(list)
    for sample in latest:
        samples_of[sample.subscriber].append(sample)
    for name in names:
        samples = samples_of[name]
        if not samples:
            continue
        x = [local_stamp(s.at) for s in samples]
        line = {"type": "scatter", "mode": "lines+markers", "name": name, "x": x}
        level_traces.append({**line, "y": [s.level for s in samples]})
        lag_traces.append({**line, "y": [s.lag for s in samples]})
        publisher.update(zip(x, (s.publisher_level for s in samples), strict=True))
    if publisher:
        xs = sorted(publisher)
        level_traces.append({
            "type": "scatter", "mode": "lines", "name": f"{server} (publisher)", "x": xs,
            "y": [publisher[x] for x in xs], "line": {"dash": "dot"},
        })  # fmt: skip
    return line_chart(level_traces, "level"), line_chart(lag_traces, "lag (transactions)")


def _jobs(subs: list[ReplSubscriber]) -> list[JobRun]:
    """The latest initial copies, table reloads and syncs of these subscriptions, newest first."""
    if not subs:
        return []
    return list(
        JobRun.objects.filter(
            kind__in=["trx_init", "trx_reload", "trx_sync"], params__subscription__in=[s.pk for s in subs]
        ).order_by("-id")[:20]
    )


def _gaps(subs: list[ReplSubscriber]) -> dict[str, list[SkippedTransaction]]:
    """The skipped transactions of each subscriber of one publication, in one query (not one per subscriber)."""
    gaps: dict[str, list[SkippedTransaction]] = {sub.subscriber: [] for sub in subs}
    if subs:
        for gap in SkippedTransaction.objects.filter(server=subs[0].server, account=subs[0].account,
                                                     subscriber__in=list(gaps)):  # fmt: skip
            gaps[gap.subscriber].append(gap)
    return gaps


def _subscriber_rows(account: ReplAccount, subs: list[ReplSubscriber], jobs: list[JobRun]) -> list[dict]:
    latest: dict[int, JobRun] = {}
    for job in jobs:
        latest.setdefault(job.params.get("subscription"), job)
    gaps = _gaps(subs)
    states = subscriber_states(s.pk for s in subs)  # the state every page shows, read once for the rows
    rows = []
    for sub in subs:
        rows.append({
            "sub": sub, "lag": trx_actions.lag_of(sub, account), "status": states.get(sub.pk),
            "gaps": gaps[sub.subscriber], "job": latest.get(sub.pk),
        })  # fmt: skip
    return rows


# --- list pages (their sections on /publications/ and /subscriptions/) -------------------------------------


# --- publications ----------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@requires(EDIT, "trx.publish", lambda request: f"{request.POST.get('server', '')}/{request.POST.get('account', '')}")
def publication_create(request: HttpRequest) -> HttpResponse:
    form = PublishForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            account = trx_actions.do_publish(
                Actor.from_request(request), d["server"], d["account"], d["log_file"].strip() or None,
                d["updateable"], d["sync_user"].strip() or None, capture=d["capture"] or "auto",
            )  # fmt: skip
        except ACTION_ERRORS as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Published {account.account} on {account.server}. Add its tables next.")
            return redirect(account)
    return render(
        request, "replication_admin/transactional/publication_form.html", {"form": form, "section": "publications"}
    )


def _publication_context(request: HttpRequest, account: ReplAccount) -> dict:
    subs = list(ReplSubscriber.objects.filter(server=account.server, account=account.account).order_by("subscriber"))
    jobs = _jobs(subs)
    event = ScheduledEvent.objects.filter(name=trx_actions.purge_event_name(account)).first()
    level_figure, lag_figure = level_figures(account.server, account.account, [s.subscriber for s in subs])
    taken = {s.subscriber for s in subs if s.subscribed}
    items = list(TpItem.objects.filter(server=account.server, acct=account.account))
    return {
        "section": "publications",
        "htmx": is_htmx(request),
        "account": account,
        "items": items,
        "item_filters": [] if account.is_updateable else item_filters_of(items, subs),
        "grants": TpGrant.objects.filter(acct=account.account),
        "rows": _subscriber_rows(account, subs, jobs),
        "jobs": jobs,
        "active": any(not j.finished for j in jobs),
        "purge_event": event,
        "capture": capture_summary(account),
        "purge_next": event_next_run(event),
        "purger": purger_summary(account),
        "level_figure": level_figure,
        "lag_figure": lag_figure,
        "level_table": chart_table(level_figure),
        "lag_table": chart_table(lag_figure),
        "add_form": AddTableForm(),
        "grant_form": GrantForm(),
        "new_log_form": NewLogForm(),
        "on_conflict_form": OnConflictForm(initial={"on_conflict": account.on_conflict}),
        "schema_form": SchemaPolicyForm(initial={"schema_policy": account.schema_policy}),
        "schema_changes": _schema_changes(account, [s for s in subs if s.subscribed]),
        "ack_form": AckPolicyForm(initial={"ack_policy": account.ack_policy, "ack_timeout": account.ack_timeout}),
        "ack_voters": durability.voter_names(account),
        "lag_alert_form": LagAlertForm(
            initial={"alert_lag": account.alert_lag, "alert_lag_seconds": account.alert_lag_seconds}
        ),
        "lag_limit_seconds": lag_limit_seconds(account),
        **_slot_context(account),
        **_tracer_context(account),
        "purger_form": PurgerForm(
            initial=PurgerForm.initial_for(
                account.p_month, account.p_day, account.p_wday, account.p_time, account.purge_every
            )
        ),
        "candidates": Server.objects.exclude(name=account.server).exclude(name__in=taken),
    }


def _slot_context(account: ReplAccount) -> dict:
    """A WAL publication's replication slot, read live: the WAL it keeps, its wal_status and what it still holds."""
    if account.capture != ReplAccount.Capture.WAL:
        return {"slot": None}
    read = slots([(account.server, account.account)]).get((account.server, account.account))
    if read is None or not read.ok:
        return {"slot": {"error": read.error if read else "not read"}}
    b = read.value
    return {"slot": {
        "name": b.slot, "retained": b.retained_bytes, "retained_text": size_text(b.retained_bytes or 0),
        "wal_status": b.wal_status or "gone", "safe": None if b.safe_wal_size is None else size_text(b.safe_wal_size),
        "active": b.active, "pending": b.pending, "complete": b.complete, "oldest": b.oldest_pending_at,
        "note": b.note, "problem": slot_problem(b, settings.SLOT_WAL_ALERT_BYTES),
    }}  # fmt: skip


def _tracer_context(account: ReplAccount) -> dict:
    """The tracer tokens panel: the latest tracers with each subscriber's latency, the chart and the schedule."""
    event = ScheduledEvent.objects.filter(name=tracers.tracer_event_name(account)).first()
    series = tracers.latency_series(account)
    traces = [
        {"type": "scatter", "mode": "lines+markers", "name": name, "x": [x for x, _ in points],
         "y": [y for _, y in points]}
        for name, points in sorted(series.items())
    ]  # fmt: skip
    recent = tracers.recent(account)
    figure = line_chart(traces, "latency (s)")
    return {
        "tracers": recent,
        "tracer_subscribers": [c["subscriber"] for c in recent[0]["cells"]] if recent else [],
        "tracer_event": event,
        "tracer_form": TracerScheduleForm(initial={"every_minutes": event.interval if event else 0}),
        "tracer_figure": figure,
        "tracer_table": chart_table(figure),
    }


def _schema_changes(account: ReplAccount, subs: list[ReplSubscriber]) -> list[dict]:
    """The publication's schema changes, newest first; a pending one with the DDL each subscriber will run."""
    out = []
    for change in SchemaChange.objects.filter(server=account.server, account=account.account)[:10]:
        ddl = []
        if change.state == SchemaChange.State.PENDING:
            for sub in subs:
                try:
                    statements = trx_schema.subscriber_ddl(change, trx_lookups.server_named(sub.subscriber))
                except ACTION_ERRORS as exc:
                    statements = [f"-- {sub.subscriber} did not answer: {str(exc).splitlines()[0]}"]
                ddl.append((sub.subscriber, statements))
        out.append({"change": change, "ddl": ddl})
    return out


def _publication_page(request: HttpRequest, account: ReplAccount) -> HttpResponse:
    template = f"{PUBLICATION_TEMPLATE}#subscribers" if is_htmx(request) else PUBLICATION_TEMPLATE
    return render(request, template, _publication_context(request, account))


@require_GET
def publication_detail(request: HttpRequest, server: str, account: str) -> HttpResponse:
    return _publication_page(request, _account(server, account))


@require_POST
@requires(EDIT, "trx.pub_add", lambda request, server, account: f"{server}/{account}: {request.POST.get('item', '')}")
def publication_add_item(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    form = AddTableForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not added: {_form_errors(form)}")
        return redirect(acct)
    d = form.cleaned_data

    def add(actor: Actor) -> str:
        row = trx_actions.do_pub_add(actor, acct, d["item"], trx_actions.TABLE, 1 if d["is_copy"] else 0, None)
        return f"Added the table {row.item} to {acct.account}; its changes are logged from now on."

    return _attempt(request, add) or redirect(acct)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "trx.pub_remove", _removed_item_target)
def publication_remove_item(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    if request.method == "GET":
        return _remove_item_confirm(request, acct)
    item = _posted_item(request, acct)
    if item is None:
        return redirect(acct)
    return _attempt(request, lambda actor: trx_actions.do_pub_remove(actor, acct, item)) or redirect(acct)


def _posted_item(request: HttpRequest, acct: ReplAccount) -> TpItem | None:
    """The publication's item the form posted (its SYS_TP_ITEM id); None, with a message, when it is not one."""
    form = RemoveItemForm(request.POST)
    pk = form.cleaned_data["item"] if form.is_valid() else None
    item = TpItem.objects.filter(pk=pk, server=acct.server, acct=acct.account).first() if pk is not None else None
    if item is None:
        messages.error(request, "That item is not part of the publication.")
    return item


@require_POST
@requires(
    EDIT,
    "trx.column_conflicts",
    lambda request, server, account: f"{server}/{account}: item #{request.POST.get('item', '')}",
)
def publication_column_conflicts(request: HttpRequest, server: str, account: str) -> HttpResponse:
    """Decide one table's conflicts column by column, or for whole rows again (REPL_COLUMN_CONFLICTS)."""
    acct = _account(server, account)
    item = _posted_item(request, acct)
    if item is None:
        return redirect(acct)
    on = request.POST.get("on") == "1"
    return _attempt(request, lambda actor: trx_actions.do_set_column_conflicts(actor, acct, item.item, on)) or redirect(
        acct
    )


@require_POST
@requires(
    EDIT,
    "trx.pub_row_filter",
    lambda request, server, account: f"{server}/{account}: {request.POST.get('table', '')}",
)
def publication_row_filter(request: HttpRequest, server: str, account: str) -> HttpResponse:
    """Set (or clear) the publication's row filter and column list of one of its tables (REPL_PUB_ROW_FILTER)."""
    acct = _account(server, account)
    table = request.POST.get("table", "")
    condition, columns = request.POST.get("condition", ""), request.POST.get("columns", "")

    def save(actor: Actor) -> str:
        message, jobs = trx_actions.do_set_pub_row_filter(actor, acct, table, condition, columns)
        if not jobs:
            return f"{message}."
        queued = ", ".join(f"#{job.pk}" for job in jobs)
        return f"{message}; the copies made already are reloaded with it (job{'s' if len(jobs) > 1 else ''} {queued})."

    return _attempt(request, save) or redirect(acct)


def _remove_item_confirm(request: HttpRequest, acct: ReplAccount) -> HttpResponse:
    """GET: the confirmation page of removing the item `?item=` (its SYS_TP_ITEM id) from the publication."""
    form = RemoveItemForm(request.GET)
    pk = form.cleaned_data["item"] if form.is_valid() else None
    item = TpItem.objects.filter(pk=pk, server=acct.server, acct=acct.account).first() if pk is not None else None
    if item is None:
        messages.error(request, "That item is not part of the publication.")
        return redirect(acct)
    body = (
        f"{item.item} is removed from {acct.account} on {acct.server}: its SYS_TP_ITEM row is deleted and the "
        f"triggers that log its changes are dropped, so its changes are no longer sent to the subscribers. The "
        f"table and its rows stay, on {acct.server} and on the subscribers."
    )
    return render(request, "replication_admin/confirm.html", {
        "section": "publications",
        "title": f"Remove {item.item} from the publication {acct.account} on {acct.server}?",
        "body": body,
        "action": "Remove item",
        "cancel_url": acct.get_absolute_url(),
        "hidden": {"item": item.pk},
    })  # fmt: skip


@require_POST
@requires(EDIT, "trx.grant", lambda request, server, account: f"{account} -> {request.POST.get('grantee', '')}")
def publication_grant(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    form = GrantForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Name the server or user to grant the publication to.")
        return redirect(acct)
    return _attempt(request, lambda a: trx_actions.do_grant(a, acct, form.cleaned_data["grantee"])) or redirect(acct)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "trx.revoke", lambda request, server, account: f"{account} -> {request.POST.get('grantee', '')}")
def publication_revoke(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    if request.method == "GET":
        return _revoke_confirm(request, acct)
    form = GrantForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Name the grantee to revoke.")
        return redirect(acct)
    return _attempt(request, lambda a: trx_actions.do_revoke(a, acct, form.cleaned_data["grantee"])) or redirect(acct)


def _revoke_confirm(request: HttpRequest, acct: ReplAccount) -> HttpResponse:
    """GET: the confirmation page of revoking the grant of `?grantee=`."""
    grant = TpGrant.objects.filter(acct=acct.account, grantee=request.GET.get("grantee", "").strip()).first()
    if grant is None:
        messages.error(request, "That grantee has no grant on the publication.")
        return redirect(acct)
    others = TpGrant.objects.filter(acct=acct.account).exclude(pk=grant.pk).exists()
    body = (
        f"The SYS_TP_GRANT row of {grant.grantee} on {acct.account} is deleted: {grant.grantee} may no longer "
        "subscribe to it"
        + ("" if others else " (with no grant left, any server may subscribe)")
        + ". A subscription it already has stays."
    )
    return render(request, "replication_admin/confirm.html", {
        "section": "publications",
        "title": f"Revoke the grant of {grant.grantee} on {acct.account} ({acct.server})?",
        "body": body,
        "action": "Revoke grant",
        "cancel_url": acct.get_absolute_url(),
        "hidden": {"grantee": grant.grantee},
    })  # fmt: skip


@require_POST
@requires(EDIT, "trx.new_log", _acct_label)
def publication_new_log(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    form = NewLogForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Name the new log file.")
        return redirect(acct)
    return _attempt(request, lambda a: trx_actions.do_new_log(a, acct, form.cleaned_data["log_file"])) or redirect(acct)


def _publication_setting(
    request: HttpRequest,
    server: str,
    account: str,
    form_class,
    what: str,
    call: Callable,
) -> HttpResponse:
    """A publication's setting saved from its form (the view `requires` its permission): the form's errors as a
    message, else `call(actor, publication, cleaned data)`'s note or error."""
    acct = _account(server, account)
    form = form_class(request.POST)
    if not form.is_valid():
        messages.error(request, f"{what} not saved: {_form_errors(form)}")
        return redirect(acct)
    return _attempt(request, lambda a: call(a, acct, form.cleaned_data)) or redirect(acct)


@require_POST
@requires(EDIT, "trx.ack_policy", _acct_label)
def publication_ack(request: HttpRequest, server: str, account: str) -> HttpResponse:
    return _publication_setting(
        request, server, account, AckPolicyForm, "Acknowledgement",
        lambda a, acct, d: trx_actions.do_set_ack_policy(a, acct, d["ack_policy"], d["ack_timeout"]),
    )  # fmt: skip


@require_POST
@requires(EDIT, "trx.lag_alert", _acct_label)
def publication_lag_alert(request: HttpRequest, server: str, account: str) -> HttpResponse:
    return _publication_setting(
        request, server, account, LagAlertForm, "Lag alert",
        lambda a, acct, d: trx_actions.do_set_lag_alert(a, acct, transactions=d["alert_lag"],
                                                        seconds=d["alert_lag_seconds"]),
    )  # fmt: skip


@require_POST
@requires(OPERATE, "trx.tracer", _acct_label)
def publication_tracer(request: HttpRequest, server: str, account: str) -> HttpResponse:
    """Post a tracer token now (operate)."""
    acct = _account(server, account)

    def post(actor: Actor) -> str:
        tracer = tracers.do_post_tracer(actor, acct)
        return f"Tracer #{tracer.pk} written into the log of {acct.account}: each subscriber's time shows below."

    return _attempt(request, post) or redirect(acct)


@require_POST
@requires(OPERATE, "trx.tracer_schedule", _acct_label)
def publication_tracer_schedule(request: HttpRequest, server: str, account: str) -> HttpResponse:
    """A tracer token every N minutes (operate: it writes no definition)."""
    return _publication_setting(
        request, server, account, TracerScheduleForm, "Tracer schedule",
        lambda a, acct, d: tracers.do_schedule_tracer(a, acct, d["every_minutes"]),
    )  # fmt: skip


@require_POST
@requires(EDIT, "trx.schema_policy", _acct_label)
def publication_schema_policy(request: HttpRequest, server: str, account: str) -> HttpResponse:
    return _publication_setting(
        request, server, account, SchemaPolicyForm, "Schema change policy",
        lambda a, acct, d: trx_actions.do_set_schema_policy(a, acct, d["schema_policy"]),
    )  # fmt: skip


@require_POST
@requires(EDIT, "trx.on_conflict", _acct_label)
def publication_on_conflict(request: HttpRequest, server: str, account: str) -> HttpResponse:
    return _publication_setting(
        request, server, account, OnConflictForm, "Answer to conflicts",
        lambda a, acct, d: trx_actions.do_set_on_conflict(a, acct, d["on_conflict"]),
    )  # fmt: skip


@require_POST
@requires(EDIT, "trx.schema_apply", _schema_change_label)
def schema_change_approve(request: HttpRequest, pk: int) -> HttpResponse:
    change = get_object_or_404(SchemaChange, pk=pk)
    _attempt(request, lambda a: trx_actions.do_approve_schema_change(a, change))
    return redirect(change)


@require_POST
@requires(EDIT, "trx.purger", _acct_label)
def publication_purger(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    form = PurgerForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Purger not saved: {_form_errors(form)}")
        return redirect(acct)
    d = form.cleaned_data

    def save(actor: Actor) -> str:
        event = trx_actions.do_set_purger(
            actor, acct, d["p_month"], d["p_day"], d["p_wday"], d["p_time"], purge_every=d["purge_every"]
        )
        if event is None:
            return f"The log of {acct.account} is no longer purged on a schedule."
        acct.refresh_from_db()
        return f"The log of {acct.account} is purged {purger_summary(acct)}; next run {local_stamp(event.start)}."

    return _attempt(request, save) or redirect(acct)


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "trx.purge", _acct_label)
def publication_purge(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    if request.method == "GET":
        body = (
            f"The logged transactions of {acct.account} on {acct.server} that every valid subscriber has applied "
            "(and those too far behind the publisher for any subscriber to ask for) are deleted from its log. "
            "A subscriber marked invalid that still needs them will have to be re-initialised."
        )
        return render(request, "replication_admin/confirm.html", {
            "section": "publications",
            "title": f"Purge the log of {acct.account} on {acct.server}?",
            "body": body,
            "action": "Purge now",
            "cancel_url": acct.get_absolute_url(),
            "hidden": {},
        })  # fmt: skip

    def purge(actor: Actor) -> str:
        deleted = trx_actions.do_purge(actor, acct)
        return f"Purged {deleted} transaction(s) from the log of {acct.account}."

    return _attempt(request, purge) or redirect(acct)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "trx.unpublish", _acct_label)
def publication_drop(request: HttpRequest, server: str, account: str) -> HttpResponse:
    acct = _account(server, account)
    if request.method == "POST":
        if response := _attempt(request, lambda actor: trx_actions.do_unpublish(actor, acct)):
            return response
        return redirect(acct) if ReplAccount.objects.filter(pk=acct.pk).exists() else redirect("publications")
    count = ReplSubscriber.objects.filter(server=acct.server, account=acct.account).count()
    body = (
        f"{acct.account} stops being published on {acct.server}: the triggers on its tables and its log "
        f"(RTSEQ_, RTTX_, RTLOG_) are dropped, with its items, grants and purger"
        + (f", and its {count} subscriber(s) are unsubscribed" if count else "")
        + ". The tables on the publisher and the subscribers' copies stay, with their rows."
    )
    return render(request, "replication_admin/confirm.html", {
        "section": "publications",
        "title": f"Unpublish {acct.account} on {acct.server}?",
        "body": body,
        "action": "Unpublish",
        "cancel_url": acct.get_absolute_url(),
        "hidden": {},
    })  # fmt: skip


# --- subscriptions ---------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@requires(
    EDIT,
    "trx.subscribe",
    lambda request: (
        f"{request.POST.get('subscriber', '')} <- {request.POST.get('publisher', '')}/{request.POST.get('account', '')}"
    ),
)
def subscription_create(request: HttpRequest) -> HttpResponse:
    form = SubscribeForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        actor = Actor.from_request(request)
        try:
            trx_actions.do_declare_server(actor, d["subscriber"], d["publisher"].name, d["publisher"].name, None)
            sub = trx_actions.do_subscribe(actor, d["subscriber"], d["publisher"].name, d["account"])
        except ACTION_ERRORS as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"{sub.subscriber} subscribes to {sub.server}/{sub.account}. "
                                      "Run its initial copy next.")  # fmt: skip
            return redirect(sub)
    context = {"form": form, "section": "subscriptions", "accounts": ReplAccount.objects.all()}
    return render(request, "replication_admin/transactional/subscription_form.html", context)


def _subscription_context(request: HttpRequest, sub: ReplSubscriber) -> dict:
    account = ReplAccount.objects.filter(server=sub.server, account=sub.account).first()
    jobs = _jobs([sub])
    event = ScheduledEvent.objects.filter(name=trx_actions.schedule_event_name(sub.subscriber, sub)).first()
    level_figure, lag_figure = level_figures(sub.server, sub.account, [sub.subscriber])
    fields = {"server": sub.server, "account": sub.account, "subscriber": sub.subscriber, "count": sub.count,
              "init_state": sub.init_state, "last_sync_at": sub.last_sync_at}  # fmt: skip
    counts = {(sub.server, sub.account): account.count} if account else None
    live = live_lags([fields], timezone.now(), counts)[(sub.server, sub.account, sub.subscriber)]
    return {
        "live": live,
        "tracer": tracers.latest_arrival(sub),
        "section": "subscriptions",
        "htmx": is_htmx(request),
        "sub": sub,
        "account": account,
        "lag": trx_actions.lag_of(sub, account) if account else None,
        "status": subscriber_states([sub.pk]).get(sub.pk),
        "gaps": _gaps([sub])[sub.subscriber],
        "jobs": jobs,
        "active": any(not j.finished for j in jobs),
        "event": event,
        "next_run": event_next_run(event),
        "schedule_form": SubScheduleForm(initial={"minutes": event.interval if event else 0}),
        "profile": profile.settings_of(sub, account),
        "published_tables": (
            published := [trx_lookups.item_table(i.item) for i in trx_lookups.table_items(account)] if account else []
        ),
        "profile_form": SubscriptionProfileForm(initial={name: getattr(sub, name) for name in profile.FIELDS}),
        "row_filters": row_filters_of(sub, published),
        "validation": (panel := validation_panel(sub)),
        "drift_chart": Chart(panel.figure),
        "level_figure": level_figure,
        "lag_figure": lag_figure,
        "level_table": chart_table(level_figure),
        "lag_table": chart_table(lag_figure),
    }


def _subscription_page(request: HttpRequest, sub: ReplSubscriber) -> HttpResponse:
    template = f"{SUBSCRIPTION_TEMPLATE}#status" if is_htmx(request) else SUBSCRIPTION_TEMPLATE
    return render(request, template, _subscription_context(request, sub))


@require_GET
def subscription_detail(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    return _subscription_page(request, _subscription(subscriber, server, account))


def _back(request: HttpRequest, sub: ReplSubscriber) -> HttpResponse:
    """Where a subscription's button was pressed: its publication's page or its own (htmx: only the part)."""
    if request.POST.get("back") == "publication":
        account = ReplAccount.objects.filter(server=sub.server, account=sub.account).first()
        if account is not None:
            return _publication_page(request, account) if is_htmx(request) else redirect(account)
    if not ReplSubscriber.objects.filter(pk=sub.pk).exists():
        return redirect("subscriptions")
    sub.refresh_from_db()
    return _subscription_page(request, sub) if is_htmx(request) else redirect(sub)


@require_POST
@requires(OPERATE, _chosen("valid", "trx.mark_valid", "trx.mark_invalid"), _sub_label)
def subscription_valid(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)
    if request.POST.get("valid") not in ("0", "1"):
        return HttpResponseBadRequest("valid is 0 or 1")
    valid = request.POST["valid"] == "1"
    return _attempt(request, lambda actor: trx_actions.do_mark_valid(actor, sub, valid)) or _back(request, sub)


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "job.trx_init", _sub_label)
def subscription_init(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)
    if request.method == "GET":
        tables = list(TpItem.objects.filter(server=sub.server, acct=sub.account, type=trx_actions.TABLE)
                      .values_list("item", flat=True))  # fmt: skip
        body = (
            f"The published tables of {sub.server}/{sub.account} ({', '.join(tables) or 'none yet'}) are copied "
            f"to {sub.subscriber} again: the content of each copy on {sub.subscriber} is replaced with the "
            f"publisher's rows (rows only {sub.subscriber} has are deleted) and its level is set to the "
            "publisher's. Changes made on the subscriber that no sync has sent yet are lost."
        )
        return render(request, "replication_admin/confirm.html", {
            "section": "subscriptions",
            "title": f"Re-initialise {sub.subscriber} from {sub.server}/{sub.account}?",
            "body": body,
            "action": "Re-initialise",
            "cancel_url": sub.get_absolute_url(),
            "hidden": {"back": request.GET.get("back", "")},
        })  # fmt: skip

    def start(actor: Actor) -> str:
        job = trx_actions.do_init_copy(actor, sub)
        return f"Initial copy of {sub.server}/{sub.account} to {sub.subscriber} started (job #{job.pk})."

    return _attempt(request, start) or _back(request, sub)


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "job.trx_reload", _sub_label)
def subscription_reload(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    """Reload one published table of the subscription (REPL_RELOAD_TABLE): asked first, then queued."""
    sub = _subscription(subscriber, server, account)
    table = (request.POST if request.method == "POST" else request.GET).get("table", "")
    if request.method == "GET":
        body = (
            f"{table} is copied from {sub.server} to {sub.subscriber} again and swapped in whole: rows only "
            f"{sub.subscriber} has are deleted, the others take the publisher's values. The subscription's level and "
            f"its other tables are kept; its syncs wait for the copy, then resume after the level and replay what "
            f"{sub.server} changed meanwhile. The publication's other subscribers are not held up."
        )
        return render(request, "replication_admin/confirm.html", {
            "section": "subscriptions",
            "title": f"Reload {table} on {sub.subscriber} from {sub.server}/{sub.account}?",
            "body": body,
            "action": "Reload",
            "cancel_url": sub.get_absolute_url(),
            "hidden": {"table": table},
        })  # fmt: skip

    def start(actor: Actor) -> str:
        job = trx_actions.do_reload_table(actor, sub, table)
        return f"Reload of {table} on {sub.subscriber} started (job #{job.pk})."

    return _attempt(request, start) or _back(request, sub)


@require_POST
@requires(OPERATE, "job.trx_sync", _sub_label)
def subscription_sync(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)

    def start(actor: Actor) -> str:
        job = trx_actions.do_sync(actor, sub)
        return f"Sync of {sub.subscriber} from {sub.server}/{sub.account} started (job #{job.pk})."

    return _attempt(request, start) or _back(request, sub)


@require_POST
@requires(OPERATE, _chosen("follow", "trx.follow", "trx.disconnect"), _sub_label)
def subscription_follow(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)
    if request.POST.get("follow") not in ("0", "1"):
        return HttpResponseBadRequest("follow is 0 or 1")
    follow = request.POST["follow"] == "1"

    def change(actor: Actor) -> str:
        trx_actions.do_follow(actor, sub, follow)
        if follow:
            job = trx_actions.do_sync(actor, sub)
            return f"{sub.subscriber} follows {sub.server}/{sub.account} in sync (catching up: job #{job.pk})."
        return f"{sub.subscriber} is disconnected from {sub.server}/{sub.account}; it syncs only when asked."

    return _attempt(request, change) or _back(request, sub)


@require_POST
@requires(OPERATE, "trx.schedule", _sub_label)
def subscription_schedule(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)
    form = SubScheduleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The interval is a whole number of minutes, 0 to 525600 (0 removes the schedule).")
        return _back(request, sub)
    minutes = form.cleaned_data["minutes"]
    return _attempt(request, lambda actor: trx_actions.do_sub_schedule(actor, sub, minutes)) or _back(request, sub)


@require_POST
@requires(EDIT, "trx.profile", _sub_label)
def subscription_profile(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)
    form = SubscriptionProfileForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"The profile was not saved: {_form_errors(form)}")
        return _back(request, sub)
    values = {name: form.cleaned_data[name] for name in profile.FIELDS}
    return _attempt(request, lambda actor: trx_actions.do_set_subscription_profile(actor, sub, **values)) or _back(
        request, sub
    )


@require_POST
@requires(EDIT, "trx.row_filter", _sub_label)
def subscription_row_filter(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    """Set (or clear) the row filter and column list of one table of the subscription (REPL_ROW_FILTER)."""
    sub = _subscription(subscriber, server, account)
    table = request.POST.get("table", "")
    condition, columns = request.POST.get("condition", ""), request.POST.get("columns", "")

    def save(actor: Actor) -> str:
        message, job = trx_actions.do_set_row_filter(actor, sub, table, condition, columns)
        return f"{message}; its copy is reloaded with it (job #{job.pk})." if job else f"{message}."

    return _attempt(request, save) or _back(request, sub)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "trx.unsubscribe", _sub_label)
def subscription_drop(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    sub = _subscription(subscriber, server, account)
    if request.method == "POST":
        if response := _attempt(request, lambda actor: trx_actions.do_unsubscribe(actor, sub)):
            return response
        return redirect(sub) if ReplSubscriber.objects.filter(pk=sub.pk).exists() else redirect("subscriptions")
    body = (
        f"{sub.subscriber} stops receiving the transactions of {sub.server}/{sub.account}; its schedule is removed. "
        f"The tables on {sub.subscriber} stay, with their rows."
    )
    return render(request, "replication_admin/confirm.html", {
        "section": "subscriptions",
        "title": f"Unsubscribe {sub.subscriber} from {sub.server}/{sub.account}?",
        "body": body,
        "action": "Unsubscribe",
        "cancel_url": reverse("trx-subscriptions-detail", args=[sub.subscriber, sub.server, sub.account]),
        "hidden": {},
    })  # fmt: skip


@require_http_methods(["GET", "POST"])
@requires(EDIT, "trx.skip_transaction", _sub_label)
def subscription_skip(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    """Skip the transaction the subscription is halted at (a person's decision, confirmed first)."""
    sub = _subscription(subscriber, server, account)
    if request.method == "POST":
        skip = trx_actions.do_skip_halted_transaction
        return _attempt(request, lambda actor: skip(sub, actor=actor)) or _back(request, sub)
    if sub.halt_count is None:
        messages.error(request, f"{sub.label} is not halted: there is no transaction to skip.")
        return redirect(sub)
    keys = ", ".join(f"{k.get('table')} {k.get('key')}" for k in (sub.halt_keys or [])[:20]) or "no row keys"
    body = (
        f"{sub.subscriber} stops at level {sub.halt_level} of {sub.server}/{sub.account}: {sub.halt_error} "
        f"Skipping it moves {sub.subscriber} past exactly this transaction without applying it; it is recorded as a "
        f"gap, and the rows of its keys ({keys}) may differ from the publisher's until they are repaired."
    )
    return render(request, "replication_admin/confirm.html", {
        "section": "subscriptions",
        "title": f"Skip the halted transaction of {sub.subscriber}?",
        "body": body,
        "action": "Skip this transaction",
        "cancel_url": sub.get_absolute_url(),
        "hidden": {},
    })  # fmt: skip


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "trx.repair_keys", _sub_label)
def subscription_repair(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    """Repair these keys: of one gap (`gap`) or of all the subscription's unrepaired gaps (confirmed first)."""
    sub = _subscription(subscriber, server, account)
    gap = (request.POST if request.method == "POST" else request.GET).get("gap") or None
    if gap is not None and not gap.isdigit():
        return HttpResponseBadRequest("gap is a gap's id")
    chosen = int(gap) if gap is not None else None
    if request.method == "POST":
        repair = trx_actions.do_repair_gaps
        return _attempt(request, lambda actor: repair(sub, actor=actor, gap=chosen)) or _back(request, sub)
    open_gaps = SkippedTransaction.objects.filter(server=sub.server, account=sub.account, subscriber=sub.subscriber,
                                                  repaired_at__isnull=True)  # fmt: skip
    gaps = list(open_gaps.filter(pk=chosen) if chosen is not None else open_gaps)
    if not gaps:
        messages.error(request, f"{sub.label} has no unrepaired gap to repair.")
        return redirect(sub)
    keys = [k for g in gaps for k in (g.keys or [])]
    listed = ", ".join(f"{k.get('table')} {k.get('key')}" for k in keys[:20]) + (" …" if len(keys) > 20 else "")
    listed = listed or "the keys their entries touch"
    body = (
        f"The rows of the keys of {len(gaps)} skipped transaction(s) on {sub.subscriber} ({listed}) are written "
        f"again from {sub.server}'s current rows, in one transaction: updated or inserted where {sub.server} has the "
        "row, deleted where it does not. No other row changes."
    )
    return render(request, "replication_admin/confirm.html", {
        "section": "subscriptions",
        "title": f"Repair the keys of {sub.subscriber}'s gaps from {sub.server}/{sub.account}?",
        "body": body,
        "action": "Repair these keys",
        "cancel_url": sub.get_absolute_url(),
        "hidden": {"gap": str(chosen)} if chosen is not None else {},
    })  # fmt: skip
