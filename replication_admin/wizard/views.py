"""The setup wizard: publisher, subscriber, mode, tables, resolvers, schedule, review; then the initial copy.

The choices are kept in the session until the review's confirmation; nothing is registered, created or
copied before it (replication_admin.wizard.do_run_plan)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from replication_admin.core import connections
from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table, source_tables
from replication_admin.core.permissions import EDIT
from replication_admin.core.web import denied, is_htmx, requires
from replication_admin.models import JobRun, ReplSubscriber, Server, Snapshot, SnapshotPublication
from replication_admin.snapshots.selectors import snapshot_name
from replication_admin.wizard.forms import (
    ModeForm,
    ResolversForm,
    ScheduleStepForm,
    ServerStepForm,
    TablesForm,
    new_server_form,
)
from replication_admin.wizard.plan import (
    MODE_LABELS,
    MODES,
    SNAPSHOT_MODES,
    TRANSACTIONAL_MODES,
    Plan,
    PlanError,
    ServerChoice,
    check_connection,
    check_new_server,
    check_plan,
    check_resolvers,
    check_schedule,
    check_servers,
    check_tables,
    default_account,
    do_run_plan,
    new_server_choice,
)

PLAN_KEY = "setup_wizard"
RESULT_KEY = "setup_wizard_result"
WIZARD_METHODS = ("GET", "POST")  # nothing of the wizard is shown to a user who may not set up replication
# What a step may fail with besides PlanError: servers that went away, tables that can't be read.
STEP_ERRORS = (PlanError, connections.ConnectionFailed, connections.TableNotFound, ReplicationError)


def _plan(request: HttpRequest) -> Plan:
    return Plan.from_session(request.session.get(PLAN_KEY))


def _save(request: HttpRequest, plan: Plan) -> None:
    request.session[PLAN_KEY] = plan.to_session()


def _render(request: HttpRequest, plan: Plan, step: str, context: dict) -> HttpResponse:
    keys = [k for k, _ in plan.steps]
    previous = plan.step_before(step)
    context.update({
        "section": "setup",
        "step": step,
        "plan": plan,
        "mode_label": MODE_LABELS.get(plan.mode, ""),
        "stepper": [
            {"key": k, "label": label, "done": k in plan.done, "current": k == step, "n": i + 1}
            for i, (k, label) in enumerate(plan.steps)
        ],
        "step_number": keys.index(step) + 1,
        "back_url": reverse("setup-step", args=[previous]) if previous else "",
    })  # fmt: skip
    return render(request, "replication_admin/wizard/step.html", context)


def _next(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    plan.complete(step)
    _save(request, plan)
    return redirect("setup-step", step=plan.step_after(step))


@require_http_methods(["GET"])
@requires(EDIT, "wizard", "start", methods=WIZARD_METHODS)
def setup_start(request: HttpRequest) -> HttpResponse:
    plan = _plan(request)
    current = next((k for k, _ in plan.steps if k not in plan.done), "review")
    return redirect("setup-step", step=current)


@require_POST
@requires(EDIT, "wizard", "reset", methods=WIZARD_METHODS)
def setup_reset(request: HttpRequest) -> HttpResponse:
    request.session.pop(PLAN_KEY, None)
    messages.info(request, "The wizard starts over; nothing had been changed.")
    return redirect("setup-step", step="publisher")


@require_http_methods(["GET", "POST"])
@requires(EDIT, "wizard", lambda request, step: step, methods=WIZARD_METHODS)
def setup_step(request: HttpRequest, step: str) -> HttpResponse:
    plan = _plan(request)
    if step not in [k for k, _ in plan.steps]:
        raise Http404(f"the wizard has no step {step!r} for this mode")
    if missing := plan.first_missing(step):
        messages.info(request, "Finish this step first.")
        return redirect("setup-step", step=missing)
    return STEP_VIEWS[step](request, plan, step)


# --- the steps --------------------------------------------------------------------------------------------


def _server_step(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    choice: ServerChoice = getattr(plan, step)
    other: ServerChoice = plan.subscriber if step == "publisher" else plan.publisher
    initial = {"use": "new" if choice.new else "existing", "existing": choice.existing or None}
    new_initial = {k: v for k, v in choice.new.items() if k != "password_encrypted"}
    result, error = None, ""
    if request.method == "GET":
        form, new_form = ServerStepForm(initial=initial), new_server_form(initial=new_initial)
        return _render(request, plan, step, {"form": form, "new_form": new_form})
    form = ServerStepForm(request.POST)
    new_form = new_server_form(request.POST)
    candidate = None
    if form.is_valid():
        if form.cleaned_data["use"] == "existing":
            candidate = ServerChoice(existing=form.cleaned_data["existing"].name)
        elif new_form.is_valid():
            try:
                data = check_new_server(new_form.validated, other if step == "subscriber" else None)
            except PlanError as exc:
                new_form.add_error("name", str(exc))
            else:
                candidate = new_server_choice(data)
                if not data.password and choice.new.get("name") == data.name:  # going back keeps the password
                    candidate.new["password_encrypted"] = choice.new.get("password_encrypted", "")
    if candidate is not None:
        try:
            result = check_connection(candidate, step)
        except STEP_ERRORS as exc:
            error = str(exc)
    if candidate is not None and result is not None and request.POST.get("action") != "test":
        if not candidate.same_as(choice):
            plan.forget_after(step)
        setattr(plan, step, candidate)
        return _next(request, plan, step)
    context = {"form": form, "new_form": new_form, "result": result, "error": error}
    return _render(request, plan, step, context)


def _mode_step(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    form = ModeForm(request.POST or None, initial={"mode": plan.mode or None})
    if request.method == "POST" and form.is_valid():
        mode = form.cleaned_data["mode"]
        candidate = Plan.from_session({**plan.to_session(), "mode": mode})
        try:
            check_servers(candidate)
        except PlanError as exc:
            form.add_error("mode", str(exc))
        else:
            if mode != plan.mode:
                plan.forget_after(step)
                plan.columns, plan.condition, plan.resolvers = [], "", {}
                plan.tables = plan.tables[:1] if mode in SNAPSHOT_MODES else plan.tables
            plan.mode = mode
            return _next(request, plan, step)
    return _render(request, plan, step, {"form": form, "modes": MODES})


def _tables_step(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    error, tables, info = "", [], None
    try:
        publisher = plan.publisher.server()
        tables = source_tables(publisher)
    except STEP_ERRORS as exc:
        error = f"The tables of {plan.publisher.name} cannot be listed: {exc}"
    posted = request.POST.getlist("tables") if request.method == "POST" else []
    shown = request.GET.get("table") or (posted[0] if posted else "") or (plan.tables[0] if plan.tables else "")
    if plan.mode in SNAPSHOT_MODES and shown in tables:
        try:
            info = lookup_table(publisher, shown)
        except STEP_ERRORS as exc:
            error = str(exc)
    initial = {
        "tables": (plan.tables[0] if plan.tables else None) if plan.mode in SNAPSHOT_MODES else plan.tables,
        "dest_table": plan.dest_table, "columns": plan.columns, "condition": plan.condition,
        "filter_columns": plan.filter_columns,
        "account": plan.account or (default_account(plan.tables[0]) if plan.tables else ""),
        "rows_per_commit": plan.rows_per_commit,
    }  # fmt: skip
    if request.GET.get("table"):
        initial["tables"] = shown
    form = TablesForm(request.POST or None, mode=plan.mode, tables=tables, info=info, initial=initial)
    if is_htmx(request) and request.GET.get("table"):  # the column checkboxes of the table just picked
        return render(request, "replication_admin/wizard/step.html#wizard-columns", {"form": form, "plan": plan})
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        candidate = Plan.from_session(plan.to_session())
        candidate.tables = d["tables"]
        candidate.dest_table = (d.get("dest_table") or "").strip()
        candidate.columns = d.get("columns") or []
        candidate.condition = (d.get("condition") or "").strip()
        candidate.filter_columns = (d.get("filter_columns") or "").strip()
        candidate.account = (d.get("account") or "").strip()
        if not candidate.account and plan.mode in TRANSACTIONAL_MODES and candidate.tables:
            candidate.account = default_account(candidate.tables[0])
        candidate.rows_per_commit = d.get("rows_per_commit") or 1000
        try:
            check_tables(candidate)
        except STEP_ERRORS as exc:
            form.add_error(getattr(exc, "field", None), str(exc))
        else:
            if candidate.tables != plan.tables:
                candidate.forget_after(step)
                candidate.resolvers = {}
            return _next(request, candidate, step)
    return _render(request, plan, step, {"form": form, "error": error, "info": info})


def _resolvers_step(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    columns: list[str] = []
    try:
        publisher = plan.publisher.server()
        for table in plan.tables:
            found = lookup_table(publisher, table)
            columns += [c.name for c in (found.columns if found else ()) if c.name not in columns]
    except STEP_ERRORS as exc:
        messages.error(request, str(exc))
    initial = {}
    for cr_type, choice in plan.resolvers.items():
        initial[f"cls_{cr_type}"], initial[f"column_{cr_type}"] = choice.get("cls", ""), choice.get("column", "")
    form = ResolversForm(request.POST or None, columns=columns, initial=initial)
    if request.method == "POST" and form.is_valid():
        plan.resolvers = form.resolvers()
        try:
            check_resolvers(plan)
        except STEP_ERRORS as exc:
            form.add_error(None, str(exc))
        else:
            return _next(request, plan, step)
    return _render(request, plan, step, {"form": form, "resolver_rows": _resolver_rows(form)})


def _resolver_rows(form: ResolversForm) -> list[tuple]:
    return [(form[f"cls_{t}"], form[f"column_{t}"]) for t in ("U", "I", "D")]


def _schedule_step(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    transactional = plan.mode in TRANSACTIONAL_MODES
    initial = {"schedule_minutes": plan.schedule_minutes or (1 if transactional else 0), "sync_mode": plan.sync_mode}
    form = ScheduleStepForm(request.POST or None, initial=initial, transactional=transactional)
    if request.method == "POST" and form.is_valid():
        plan.schedule_minutes = form.cleaned_data["schedule_minutes"] or 0
        if transactional:
            plan.sync_mode = form.cleaned_data["sync_mode"]
        try:
            check_schedule(plan)
        except PlanError as exc:
            form.add_error("schedule_minutes", str(exc))
        else:
            return _next(request, plan, step)
    return _render(request, plan, step, {"form": form})


def _review_step(request: HttpRequest, plan: Plan, step: str) -> HttpResponse:
    error, steps = "", None
    try:
        _, steps = check_plan(plan)
    except STEP_ERRORS as exc:
        error = str(exc)
    if request.method == "POST" and steps is not None:
        actor = Actor.from_request(request)
        try:
            result = do_run_plan(actor, plan)
        except PermissionDenied as exc:
            return denied(request, exc)
        except STEP_ERRORS as exc:
            error = str(exc)
        else:
            request.session[RESULT_KEY] = {
                "mode": plan.mode,
                "ok": result.ok,
                "failure": result.failure,
                "registered": result.registered,
                "outcomes": [
                    {"statement": o.statement, "ok": o.ok, "message": o.message, "job": o.job_id}
                    for o in result.outcomes
                ],
                "jobs": result.job_ids,
                "links": _links(plan),
            }
            request.session.pop(PLAN_KEY, None)
            return redirect("setup-started")
    new_servers = [c for c in (plan.publisher, plan.subscriber) if c.new]
    return _render(request, plan, step, {"error": error, "steps": steps, "new_servers": new_servers})


def _links(plan: Plan) -> list[tuple[str, str]]:
    """(label, url) of what the run made, for the progress page."""
    links = []
    if plan.mode in SNAPSHOT_MODES:
        dest = Server.objects.filter(name=plan.subscriber.name).first()
        if dest is not None:
            name = snapshot_name(dest, plan.dest_table or plan.tables[0])
            if Snapshot.objects.filter(name=name).exists():
                links.append((f"Snapshot {name}", reverse("snapshots-detail", args=[name])))
    elif plan.mode == "bidir":
        for publication in SnapshotPublication.objects.filter(server_id=plan.publisher.name):
            if publication.table.lower() in {t.lower() for t in plan.tables}:
                links.append((f"Publication {publication.item}", reverse("publications-detail", args=[publication.pk])))
    else:
        sub = ReplSubscriber.objects.filter(
            server=plan.publisher.name, account=plan.account, subscriber=plan.subscriber.name
        ).first()
        if sub is not None:
            links.append((f"Publication {plan.publisher.name}/{plan.account}",
                          reverse("trx-publications-detail", args=[plan.publisher.name, plan.account])))  # fmt: skip
            links.append((f"Subscription of {sub.subscriber}", sub.get_absolute_url()))
    return links


STEP_VIEWS = {
    "publisher": _server_step,
    "subscriber": _server_step,
    "mode": _mode_step,
    "tables": _tables_step,
    "resolvers": _resolvers_step,
    "schedule": _schedule_step,
    "review": _review_step,
}


@require_http_methods(["GET"])
@requires(EDIT, "wizard", "started", methods=WIZARD_METHODS)
def setup_started(request: HttpRequest) -> HttpResponse:
    """What the confirmation ran, and the initial copy's progress until every job has finished."""
    result = request.session.get(RESULT_KEY)
    if result is None:
        return redirect("setup")
    jobs = list(JobRun.objects.filter(pk__in=result["jobs"]).order_by("pk"))
    context = {
        "section": "setup",
        "result": result,
        "jobs": jobs,
        "active": any(not j.finished for j in jobs),
        "mode_label": MODE_LABELS.get(result["mode"], ""),
    }
    name = "replication_admin/wizard/started.html"
    return render(request, f"{name}#wizard-progress" if is_htmx(request) else name, context)
