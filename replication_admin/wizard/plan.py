"""The setup wizard's plan: what the admin chose, checked, and turned into statements of the statement language.

Nothing here changes anything until `do_run_plan`: the choices live in the session (a plain dict), each step is
checked against the live servers (connections, tables, keys, conditions, resolvers) and the review shows the
exact statements `do_run_plan` will run, grouped by the context server they run on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.db import transaction

from replication_admin.bidir import actions as bidir_actions
from replication_admin.conflicts import actions as resolver_actions
from replication_admin.core import connections, crypto
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.introspection import lookup_table
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.engine import dialects, row_filter
from replication_admin.engine import statements as st
from replication_admin.engine.queries import QueryError, check_column_list, check_condition
from replication_admin.engine.resolvers import CONFLICT_TYPES, RESOLVER_CLASSES, ResolverError
from replication_admin.engine.schema import TableInfo
from replication_admin.models import (
    ReplAccount,
    Server,
    Snapshot,
    SnapshotConflictResolver,
    SnapshotLog,
    SnapshotPublication,
    TransactionalConflictResolver,
)
from replication_admin.servers.actions import ServerData, do_register_server, record_check, transient_server, validate
from replication_admin.snapshots import actions as snapshot_actions
from replication_admin.snapshots.selectors import snapshot_name
from replication_admin.statements import execute
from replication_admin.transactional import actions as trx_actions

# (key, label, one-line explanation): the order is the one the mode step shows.
MODES = [
    ("noninc", "Non-incremental snapshot",
     "Each refresh copies the whole result of a query again. No log on the publisher; any table works."),
    ("inc", "Incremental snapshot",
     "A snapshot log on the publisher records changed rows; each refresh applies only those. Needs a primary key."),
    ("bidir", "Bi-directional snapshot",
     "Publisher and subscribers all change rows; each sync merges changes both ways and resolvers settle conflicts."),
    ("trx", "Transactional",
     "Every committed transaction on the publisher is replayed in commit order on the subscriber, which only reads."),
    ("trx_upd", "Updateable transactional",
     "Transactional, and the subscriber's own transactions flow back to the publisher; resolvers settle conflicts."),
]  # fmt: skip
MODE_LABELS = {key: label for key, label, _ in MODES}
SNAPSHOT_MODES = ("noninc", "inc")
CONFLICT_MODES = ("bidir", "trx_upd")
KEYED_MODES = ("inc", "bidir", "trx", "trx_upd")
TRANSACTIONAL_MODES = ("trx", "trx_upd")
# How a transactional subscription keeps up: the first is the default, the one a DBA means by "replication".
SYNC_MODES = [
    ("in_sync", "In sync (continuous): the follower applies each transaction within a second of its commit"),
    ("scheduled", "Scheduled: a sync every N minutes"),
    ("manual", "By hand: a sync only when someone asks (REPL_SYNC, or the subscription page)"),
]
# The conflict types in the order the wizard asks about them: updates, the common case, first.
CR_TYPES = tuple((t.code, t.label) for t in sorted(CONFLICT_TYPES.values(), key=lambda t: t.code != "U"))
# The steps in order; "resolvers" only shows for the modes that have conflicts.
STEPS = [
    ("publisher", "Publisher"),
    ("subscriber", "Subscriber"),
    ("mode", "Mode"),
    ("tables", "Tables"),
    ("resolvers", "Resolvers"),
    ("schedule", "Schedule"),
    ("review", "Review"),
]


class PlanError(ValueError):
    """A choice the wizard cannot carry out; the message says which and why, and `field` the form field it is about
    (None: the step as a whole), so the step shows it there."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def default_account(table: str) -> str:
    """A publication name from its first table, when none is given: the table's name in lower case, letters,
    digits and underscores only ("Order Details" is order_details)."""
    name = "".join(ch if ch.isalnum() else "_" for ch in table.lower()).strip("_")
    return name or "publication"


@dataclass
class ServerChoice:
    """A registered server by name, or a new one described by its fields (registered only on confirmation)."""

    existing: str = ""
    new: dict = field(default_factory=dict)  # ServerData fields; the password Fernet-encrypted

    @property
    def name(self) -> str:
        return self.existing or self.new.get("name", "")

    def server(self) -> Server:
        """The Server to connect to: the registered row, or an unsaved one built from the new fields."""
        if self.existing:
            server = Server.objects.filter(name=self.existing).first()
            if server is None:
                raise PlanError(f"server {self.existing!r} is no longer registered; choose it again")
            return server
        data = dict(self.new)
        token = data.pop("password_encrypted", "")
        server = transient_server(ServerData(**data, password=None))
        server.password_encrypted = token
        return server

    def same_as(self, other: ServerChoice) -> bool:
        """The same server (a new one's password is encrypted afresh each time, so it is not compared)."""
        strip = lambda fields: {k: v for k, v in fields.items() if k != "password_encrypted"}  # noqa: E731
        return self.existing == other.existing and strip(self.new) == strip(other.new)

    def server_data(self) -> ServerData:
        data = dict(self.new)
        token = data.pop("password_encrypted", "")
        return ServerData(**data, password=crypto.decrypt(token) if token else "")


def new_server_choice(data: ServerData) -> ServerChoice:
    fields = asdict(data)
    password = fields.pop("password") or ""
    fields["password_encrypted"] = crypto.encrypt(password) if password else ""
    return ServerChoice(new=fields)


@dataclass
class Plan:
    publisher: ServerChoice = field(default_factory=ServerChoice)
    subscriber: ServerChoice = field(default_factory=ServerChoice)
    mode: str = ""
    tables: list[str] = field(default_factory=list)
    dest_table: str = ""  # snapshot modes: the destination's name on the subscriber
    columns: list[str] = field(default_factory=list)  # snapshot modes: non-key columns copied (empty: all)
    condition: str = ""  # snapshot modes, and a transactional subscription's row filter: which rows
    filter_columns: str = ""  # a transactional subscription's column list (REPL_ROW_FILTER)
    account: str = ""  # transactional modes: the publication's name
    rows_per_commit: int = 1000  # bi-directional initial copy
    resolvers: dict[str, dict] = field(default_factory=dict)  # conflict type -> {"cls", "column"}
    schedule_minutes: int = 0
    sync_mode: str = "in_sync"  # transactional modes: in_sync, scheduled or manual (SYNC_MODES)
    done: list[str] = field(default_factory=list)  # steps completed, so a later step can't be reached early

    @classmethod
    def from_session(cls, data: dict | None) -> Plan:
        data = dict(data or {})
        plan = cls(
            **{k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k not in ("publisher", "subscriber")}
        )
        plan.publisher = ServerChoice(**data.get("publisher", {}))
        plan.subscriber = ServerChoice(**data.get("subscriber", {}))
        return plan

    def to_session(self) -> dict:
        return asdict(self)

    @property
    def steps(self) -> list[tuple[str, str]]:
        return [(k, label) for k, label in STEPS if k != "resolvers" or self.mode in CONFLICT_MODES]

    def step_after(self, step: str) -> str:
        keys = [k for k, _ in self.steps]
        return keys[min(keys.index(step) + 1, len(keys) - 1)]

    def step_before(self, step: str) -> str | None:
        keys = [k for k, _ in self.steps]
        index = keys.index(step)
        return keys[index - 1] if index else None

    def first_missing(self, step: str) -> str | None:
        """The first earlier step not completed yet (where the wizard sends an admin who skips ahead)."""
        for key, _ in self.steps:
            if key == step:
                return None
            if key not in self.done:
                return key
        return None

    def complete(self, step: str) -> None:
        if step not in self.done:
            self.done.append(step)

    def forget_after(self, step: str) -> None:
        """A changed choice invalidates the later steps' checks (they are shown again with their values)."""
        keys = [k for k, _ in STEPS]
        later = set(keys[keys.index(step) + 1 :])
        self.done = [d for d in self.done if d not in later]


# --- checks of each step ----------------------------------------------------------------------------------


def check_connection(choice: ServerChoice, role: str) -> connections.CheckResult:
    server = choice.server()
    result = connections.test_connection(server)
    if server.pk is not None:  # a registered server: its status shows this test too
        record_check(server, result, "tested in the setup wizard")
    if not result.ok:
        raise PlanError(f"the {role} {choice.name} cannot be reached: {result.message}")
    return result


def check_new_server(data: ServerData, other: ServerChoice | None) -> ServerData:
    """Field checks of a server to be registered; it may not take the other step's new server's name either."""
    data = validate(data)
    if other is not None and other.new and other.name.lower() == data.name.lower():
        raise PlanError(f"the publisher is already to be registered as {data.name}; give this server another name")
    return data


def check_servers(plan: Plan) -> None:
    if plan.publisher.name.lower() == plan.subscriber.name.lower() and plan.mode not in SNAPSHOT_MODES:
        raise PlanError(
            f"{MODE_LABELS.get(plan.mode, 'this mode')} needs two servers: the publisher and the subscriber are "
            f"both {plan.publisher.name}"
        )
    if plan.mode == "trx_upd":
        # Both sides set ROWGUID in BEFORE triggers (engine.trx.rowguid_objects refuses the others later).
        for role, choice in (("publisher", plan.publisher), ("subscriber", plan.subscriber)):
            dialect = choice.server().dialect
            if not dialects.get(dialect).supports_updateable_publications:
                raise PlanError(
                    f"updateable transactional replication needs PostgreSQL or MariaDB on both sides: the {role} "
                    f"{choice.name} is {dialects.get(dialect).label} (choose transactional, or bi-directional "
                    "snapshot replication)"
                )


def describe(server: Server, table: str) -> TableInfo:
    info = lookup_table(server, table)
    if info is None:
        raise PlanError(f"{server.name} has no table {table!r}")
    return info


def _quoted(table: TableInfo, dialect: str) -> str:
    return dialects.get(dialect).quote(table.name)


def check_tables(plan: Plan) -> list[TableInfo]:
    """The chosen tables as they are on the publisher, refused with the reason when the mode cannot use them."""
    if not plan.tables:
        raise PlanError("choose at least one table")
    if plan.mode in SNAPSHOT_MODES and len(plan.tables) != 1:
        raise PlanError("a snapshot copies one table: choose one (run the wizard again for the next)")
    publisher, subscriber = plan.publisher.server(), plan.subscriber.server()
    infos = [describe(publisher, name) for name in plan.tables]
    for info in infos:
        if plan.mode in KEYED_MODES and not info.primary_key:
            raise PlanError(
                f"table {info.name} has no primary key: {MODE_LABELS[plan.mode]} replication finds rows by their key "
                "(add one, or choose a non-incremental snapshot)"
            )
    if plan.mode in SNAPSHOT_MODES:
        info = infos[0]
        dest = plan.dest_table or info.name
        if plan.publisher.name.lower() == plan.subscriber.name.lower() and dest.lower() == info.name.lower():
            raise PlanError("a snapshot on the publisher itself needs a destination table of another name")
        if plan.columns:
            try:
                check_column_list(", ".join(dialects.get(publisher.dialect).quote(c) for c in plan.columns), info)
            except QueryError as exc:
                raise PlanError(f"columns: {exc}") from None
        if plan.condition:
            if ";" in plan.condition:
                raise PlanError("the condition must be one boolean expression (no ';')")
            try:
                check_condition(plan.condition, publisher.dialect, info)
            except QueryError as exc:
                raise PlanError(f"condition: {exc}") from None
        if (
            plan.subscriber.existing
            and Snapshot.objects.filter(dest_server__name=plan.subscriber.existing, dest_table__iexact=dest).exists()
        ):
            raise PlanError(f"snapshot {plan.subscriber.name}.{dest} already exists")
    elif plan.mode == "trx" and (plan.condition or plan.filter_columns):
        if len(infos) != 1:
            raise PlanError(
                "a row filter and a column list are one table's: choose that table alone (the others can be filtered "
                "later on the subscription's page)"
            )
        try:
            row_filter.checked_spec(infos[0], publisher.dialect, plan.condition, plan.filter_columns)
        except row_filter.FilterError as exc:
            raise PlanError(f"condition: {exc}") from None
    elif plan.columns or plan.condition or plan.filter_columns:
        raise PlanError(f"{MODE_LABELS[plan.mode]} replication copies whole tables: leave columns and condition empty")
    targets = [plan.dest_table or infos[0].name] if plan.mode in SNAPSHOT_MODES else [i.name for i in infos]
    for name in targets:
        if lookup_table(subscriber, name) is not None:
            raise PlanError(
                f"table {name} already exists on the subscriber {plan.subscriber.name}: the initial copy creates "
                "it (drop it there, or choose another table)"
            )
    if plan.mode == "bidir" and plan.publisher.existing:
        for info in infos:
            item = f"{plan.publisher.name}.{info.name}"
            if SnapshotPublication.objects.filter(item__iexact=item).exists():
                raise PlanError(f"{item} is already published bi-directionally; subscribe to it on its page")
    if plan.mode in TRANSACTIONAL_MODES:
        if not plan.account:
            raise PlanError("name the publication (its account)", field="account")
        try:
            st.parse_one(f"REPL_PUBLISH ({_literal(plan.account)}, {_literal(plan.account + '.log')})")
        except st.StatementError as exc:
            raise PlanError(f"publication name: {exc.reason}", field="account") from None
        if ReplAccount.objects.filter(server=plan.publisher.name, account=plan.account).exists():
            raise PlanError(
                f"{plan.publisher.name} already has a publication named {plan.account!r}: choose another name",
                field="account",
            )
    return infos


def resolver_columns(plan: Plan) -> list:
    publisher = plan.publisher.server()
    return [resolver_actions.table_columns(publisher, describe(publisher, t).name) for t in plan.tables]


def check_resolvers(plan: Plan) -> None:
    transactional = plan.mode == "trx_upd"
    for columns_of_table, table in zip(resolver_columns(plan), plan.tables, strict=True):
        for cr_type, choice in plan.resolvers.items():
            cls = choice.get("cls", "")
            if not cls:
                continue
            spec = RESOLVER_CLASSES.get(cls)
            if spec is None or spec.written:
                raise PlanError(
                    f"choose a standard resolver class for {cr_type}; write custom ones on the resolvers page"
                )
            try:
                resolver_actions.check_definition(
                    cls, cr_type, choice.get("column") or None, columns_of_table, transactional
                )
            except ResolverError as exc:
                raise PlanError(f"{dict(CR_TYPES)[cr_type]} resolver on {table}: {exc}") from None


def check_schedule(plan: Plan) -> None:
    if not 0 <= plan.schedule_minutes <= 525_600:
        raise PlanError("the interval is 0 (no schedule) to 525600 minutes")
    if plan.mode in TRANSACTIONAL_MODES:
        if plan.sync_mode not in dict(SYNC_MODES):
            raise PlanError("choose how the subscriber keeps up: in sync, scheduled or by hand")
        if plan.sync_mode == "scheduled" and not plan.schedule_minutes:
            raise PlanError("a scheduled sync needs its interval: 1 minute or more")


def keeps_up(plan: Plan) -> str:
    """What keeps a transactional subscriber current once the wizard has run, for the review."""
    if plan.sync_mode == "in_sync":
        return (
            "In sync: once the initial copy is in, the follower (manage.py replfollow) applies each transaction "
            "on the publisher within a second of its commit."
        )
    if plan.sync_mode == "scheduled":
        return f"A sync every {plan.schedule_minutes} minute(s), with SUB_SCHEDULE above; the first waits for the copy."
    return "No sync runs by itself: sync by hand with REPL_SYNC or from the subscription page."


# --- the statements ---------------------------------------------------------------------------------------


def _literal(value: str) -> str:
    return st.string_literal(value)


def _item(server: str, table: str) -> str:
    return _literal(str(st.Name(table, server)))


@dataclass
class Script:
    context: str  # the context server the statements run on ("" = none needed)
    statements: list[str]

    @property
    def text(self) -> str:
        return ";\n".join(self.statements) + ";"


@dataclass
class Steps:
    scripts: list[Script]
    schedule: str = ""  # what the schedule step adds, when it is not a statement of the language


def _resolver_statements(plan: Plan, function: str, item_server: str, table: str, model) -> list[str]:
    lines = []
    for cr_type, _ in CR_TYPES:
        choice = plan.resolvers.get(cr_type) or {}
        if not choice.get("cls"):
            continue
        table_name = f"{item_server}.{table}"
        suffix = resolver_actions.free_suffix(model, table_name, cr_type, choice["cls"], choice.get("column"))
        args = [_item(item_server, table), _literal(suffix), _literal(cr_type), "10", _literal(choice["cls"])]
        if choice.get("column"):
            args.append(_literal(choice["column"]))
        lines.append(f"{function} ({', '.join(args)})")
    return lines


def build_steps(plan: Plan, infos: list[TableInfo]) -> Steps:
    """The statements the confirmation runs, in order, each group on its context server."""
    pub, sub = plan.publisher.name, plan.subscriber.name
    if plan.mode in SNAPSHOT_MODES:
        info = infos[0]
        dest = str(st.Name(plan.dest_table or info.name, sub))
        quote = dialects.get(plan.publisher.server().dialect).quote
        if plan.mode == "noninc":
            columns = ", ".join(
                quote(c.name) for c in info.columns if not plan.columns or c.pk_position or c.name in plan.columns
            )
            query = f"SELECT {columns} FROM {quote(info.name)}" + (f" WHERE {plan.condition}" if plan.condition else "")
            lines = [f"CREATE NONINCREMENTAL SNAPSHOT {dest} AS {_literal(query)}"]
        else:
            lines = []
            if not SnapshotLog.objects.filter(server_id=pub, table__iexact=info.name).exists():
                lines.append(f"CREATE SNAPSHOT LOG FOR {st.quote_name(info.name)}")
            create = f"CREATE SNAPSHOT {dest} FROM {st.quote_name(info.name)}"
            if plan.columns:
                create += " " + _literal(", ".join(quote(c) for c in plan.columns))
            if plan.condition:
                create += f" WHERE {_literal(plan.condition)}"
            lines.append(create)
        schedule = f"UPDATE SNAPSHOT {dest}" if plan.schedule_minutes else ""
        return Steps([Script(pub, lines)], _every(plan, schedule))
    if plan.mode == "bidir":
        lines = []
        for info in infos:
            lines.append(f"REPL_CREATE_SNAPSHOT_PUB ({_item(pub, info.name)}, 2)")
            lines.append(f"REPL_CREATE_SNAPSHOT_SUB ({_literal(sub)}, {_item(pub, info.name)}, 2)")
            lines += _resolver_statements(plan, "REPL_ADD_SNAPSHOT_CR", pub, info.name, SnapshotConflictResolver)
            lines.append(f"REPL_INIT_SNAPSHOT ({_literal(sub)}, {_item(pub, info.name)}, 2, {plan.rows_per_commit})")
        schedules = "; ".join(f"REPL_UPDATE_SNAPSHOT ({_item(pub, i.name)}, 2)" for i in infos)
        return Steps([Script("", lines)], _every(plan, schedules if plan.schedule_minutes else ""))
    account = _literal(plan.account)
    on_publisher = [
        f"REPL_PUBLISH ({account}, {_literal(plan.account + '.log')}" + (", 1)" if plan.mode == "trx_upd" else ")")
    ]
    for info in infos:
        on_publisher.append(f"REPL_PUB_ADD ({account}, {_literal(info.name)}, 2, 0)")
    if plan.mode == "trx_upd":
        for info in infos:
            on_publisher += _resolver_statements(plan, "REPL_ADD_CR", pub, info.name, TransactionalConflictResolver)
    on_subscriber = [
        f"REPL_SERVER ({_literal(pub)}, {_literal(pub)})",
        f"REPL_SUBSCRIBE ({_literal(pub)}, {account})",
    ]
    if plan.mode == "trx" and (plan.condition or plan.filter_columns):
        on_subscriber.append(
            f"REPL_ROW_FILTER ({_literal(pub)}, {account}, {_literal(infos[0].name)}, {_literal(plan.condition)}, "
            f"{_literal(plan.filter_columns)})"
        )
    # The copy first: the schedule's first sync then finds it queued and waits for it.
    on_subscriber.append(f"REPL_INIT_COPY ({_literal(pub)}, {account})")
    if plan.sync_mode == "scheduled" and plan.schedule_minutes:
        on_subscriber.append(f"SUB_SCHEDULE ({_literal(pub)}, {account}, {plan.schedule_minutes})")
    # In sync mode follows this one subscription (SYNC_REPL would follow every subscription of the subscriber).
    return Steps([Script(pub, on_publisher), Script(sub, on_subscriber)], keeps_up(plan))


def _every(plan: Plan, sql: str) -> str:
    return f"every {plan.schedule_minutes} minute(s): {sql}" if sql else ""


def check_plan(plan: Plan) -> tuple[list[TableInfo], Steps]:
    """Every check again (the servers may have changed since the step was passed) and the statements; each
    statement is parsed, so the review never shows one the confirmation would refuse to read."""
    check_connection(plan.publisher, "publisher")
    check_connection(plan.subscriber, "subscriber")
    check_servers(plan)
    infos = check_tables(plan)
    if plan.mode in CONFLICT_MODES:
        check_resolvers(plan)
    check_schedule(plan)
    steps = build_steps(plan, infos)
    for script in steps.scripts:
        try:
            st.parse(script.text)
        except st.StatementError as exc:  # a bug if it happens: the wizard wrote the text itself
            raise PlanError(f"the statements do not parse: {exc}") from None
    return infos, steps


# --- running it -------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    outcomes: list  # core.statement_handlers.Outcome, in order
    job_ids: list[int]
    registered: list[str]
    ok: bool
    failure: str = ""


def _register(actor: Actor, choice: ServerChoice) -> str | None:
    if not choice.new:
        return None
    if Server.objects.filter(name__iexact=choice.name).exists():
        raise PlanError(f"a server named {choice.name} was registered meanwhile; go back and choose it")
    do_register_server(actor, choice.server_data())
    return choice.name


def do_run_plan(actor: Actor, plan: Plan) -> RunResult:
    """Register the new servers, run the statements in order (the first failure stops the rest), schedule,
    and start the initial copy; returns the outcomes and the jobs to follow."""
    require(actor, EDIT, "wizard.run", f"{plan.publisher.name} -> {plan.subscriber.name}")
    require(actor, OPERATE, "wizard.run", f"{plan.publisher.name} -> {plan.subscriber.name}")
    _, steps = check_plan(plan)
    registered = []
    with transaction.atomic():
        for choice in (plan.publisher, plan.subscriber):
            if (name := _register(actor, choice)) is not None:
                registered.append(name)
    outcomes: list = []
    for script in steps.scripts:
        context = Server.objects.get(name=script.context) if script.context else None
        ran = execute(actor, script.text, context=context, wait=False)
        outcomes += ran
        if not ran or not ran[-1].ok:
            failure = ran[-1].message if ran else "nothing ran"
            record(actor, "wizard.run", plan.mode, detail={"failed": failure, "statements": len(outcomes)})
            return RunResult(outcomes, [o.job_id for o in outcomes if o.job_id], registered, False, failure)
    if plan.schedule_minutes and plan.mode in SNAPSHOT_MODES:
        dest = Server.objects.get(name=plan.subscriber.name)
        snapshot = Snapshot.objects.get(name=snapshot_name(dest, plan.dest_table or plan.tables[0]))
        snapshot_actions.do_schedule_snapshot(actor, snapshot, plan.schedule_minutes)
    if plan.schedule_minutes and plan.mode == "bidir":
        publisher = Server.objects.get(name=plan.publisher.name)
        for table in plan.tables:
            publication = bidir_actions.publication_for(publisher, describe(publisher, table).name)
            bidir_actions.do_schedule_publication(actor, publication, plan.schedule_minutes)
    job_ids = [o.job_id for o in outcomes if o.job_id]
    if plan.mode in TRANSACTIONAL_MODES and plan.sync_mode == "in_sync":
        sub = trx_actions.find_subscription(
            Server.objects.get(name=plan.subscriber.name), plan.publisher.name, plan.account
        )
        trx_actions.do_follow(actor, sub, True)
        job_ids.append(trx_actions.do_sync(actor, sub).pk)  # catches up, then IN SYNC: the follower takes over
    record(actor, "wizard.run", plan.mode,
           detail={"statements": len(outcomes), "registered": registered, "sync_mode": plan.sync_mode})  # fmt: skip
    return RunResult(outcomes, job_ids, registered, True)
