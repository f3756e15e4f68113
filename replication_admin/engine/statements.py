"""The replication statement language: what `manage.py replsql`, the statement console and
SYS_SCHEDULED_EVENT.SE_SQL hold.

Statements are parsed verbatim from Virtuoso's command reference:

    CREATE SNAPSHOT LOG FOR source_table
    DROP SNAPSHOT LOG FOR source_table
    PURGE SNAPSHOT LOG FOR source_table
    CREATE NONINCREMENTAL SNAPSHOT dest_table AS 'query_def'
    CREATE [INCREMENTAL] SNAPSHOT dest_table FROM source_table ['source_column_list'] [WHERE 'condition']
    UPDATE SNAPSHOT snapshot_table_name [AS NONINCREMENTAL]
    DROP SNAPSHOT snapshot_table_name [WITH DELETE]

and the function forms (`repl_create_snapshot_log('Orders')`, optionally after CALL or SELECT).
Several statements are separated by `;`. Keywords are case-insensitive; identifiers follow SQL:
`"ab ""cd"` is the name `ab "cd`, strings are `'it''s'`. Comments are `-- ...` and `/* ... */`.

A table name is `[server.]table`: the server part names a registered server, so source and
destination may be on different servers (the console's counterpart of Virtuoso's attached remote
tables, `"qual"."dsn"."table"`); without it the statement's context server is meant.

Anything else is refused with a `StatementError` giving the line and column; nothing here touches a
database.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from replication_admin.engine.resolvers import CR_TYPES, class_names, conflict_types_text

# --- tokens ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    kind: str  # word, qident, string, number, punct, end
    value: str
    start: int
    end: int


class StatementError(ValueError):
    """A statement that cannot be parsed; carries the position of the problem."""

    def __init__(self, message: str, text: str = "", position: int = 0) -> None:
        self.reason = message
        self.position = position
        self.line = text.count("\n", 0, position) + 1
        self.column = position - (text.rfind("\n", 0, position) + 1) + 1
        line_text = text.splitlines()[self.line - 1] if text and text.splitlines() else ""
        self.excerpt = f"{line_text}\n{' ' * (self.column - 1)}^" if line_text else ""
        super().__init__(f"line {self.line}, column {self.column}: {message}")


class PlainSqlError(StatementError):
    """A statement of plain SQL (a query, an insert...): the statement language runs replication statements only."""

    def __init__(self, text: str, position: int = 0) -> None:
        super().__init__(PLAIN_SQL_MESSAGE, text, position)


PLAIN_SQL_MESSAGE = (
    "this is plain SQL, and only replication statements run here (CREATE SNAPSHOT …, UPDATE SNAPSHOT …, "
    "REPL_* calls); plain SQL never reaches a database from the console, replsql or a scheduled event. "
    "To look at a table, open it from its server's page"
)
# The first words of plain SQL statements, which a replication statement never starts with.
PLAIN_SQL_WORDS = (
    "ALTER", "ANALYZE", "BEGIN", "COMMIT", "COPY", "DELETE", "DESC", "DESCRIBE", "EXPLAIN", "GRANT", "INSERT", "MERGE",
    "PRAGMA", "REPLACE", "REVOKE", "ROLLBACK", "SET", "SHOW", "TABLE", "TRUNCATE", "USE", "VACUUM", "VALUES", "WITH",
)  # fmt: skip


# What a plain CREATE or DROP makes or removes (a replication one makes a SNAPSHOT, a SNAPSHOT LOG...).
PLAIN_SQL_OBJECTS = (
    "DATABASE", "EVENT", "FUNCTION", "INDEX", "MATERIALIZED", "OR", "PROCEDURE", "ROLE", "SCHEMA", "SEQUENCE",
    "TABLE", "TEMP", "TEMPORARY", "TRIGGER", "TYPE", "UNIQUE", "USER", "VIEW",
)  # fmt: skip


_WORD = re.compile(r"[^\W\d]\w*|\$\w*", re.UNICODE)
_NUMBER = re.compile(r"\d+(\.\d+)?")
_SPACE = re.compile(r"\s+")
PUNCTUATION = "(),;.=*"


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            space = _SPACE.match(text, i)
            assert space is not None  # text[i] is a space
            i = space.end()
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise StatementError("comment is not closed (missing */)", text, i)
            i = end + 2
            continue
        if ch in "'\"":
            j, parts = i + 1, []
            while True:
                k = text.find(ch, j)
                if k < 0:
                    what = "string" if ch == "'" else "quoted identifier"
                    raise StatementError(f"{what} is not closed (missing {ch})", text, i)
                parts.append(text[j:k])
                if k + 1 < n and text[k + 1] == ch:  # doubled quote stands for one
                    parts.append(ch)
                    j = k + 2
                    continue
                j = k + 1
                break
            value = "".join(parts)
            if ch == '"' and value == "":
                raise StatementError("a quoted identifier must not be empty", text, i)
            tokens.append(Token("string" if ch == "'" else "qident", value, i, j))
            i = j
            continue
        if ch.isdigit():
            number = _NUMBER.match(text, i)
            assert number is not None  # text[i] is a digit
            tokens.append(Token("number", number.group(), i, number.end()))
            i = number.end()
            continue
        m = _WORD.match(text, i)
        if m:
            tokens.append(Token("word", m.group(), i, m.end()))
            i = m.end()
            continue
        if ch in PUNCTUATION or ch == "-":
            tokens.append(Token("punct", ch, i, i + 1))
            i += 1
            continue
        raise StatementError(f"unexpected character {ch!r}", text, i)
    tokens.append(Token("end", "", n, n))
    return tokens


# --- names and statements ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    """A table name, optionally qualified by a registered server: `server.table`."""

    table: str
    server: str | None = None

    def __str__(self) -> str:
        return f"{quote_name(self.server)}.{quote_name(self.table)}" if self.server else quote_name(self.table)


_BARE = re.compile(r"^[^\W\d]\w*$", re.UNICODE)


def quote_name(part: str) -> str:
    """A name part as it is written in a statement: bare when it can be, else double-quoted."""
    if _BARE.match(part) and part.upper() not in KEYWORDS:
        return part
    return '"' + part.replace('"', '""') + '"'


@dataclass(frozen=True)
class Statement:
    text: str = field(default="", compare=False, repr=False)  # the statement's own source text

    @property
    def verb(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class CreateSnapshotLog(Statement):
    source: Name = Name("")


@dataclass(frozen=True)
class DropSnapshotLog(Statement):
    source: Name = Name("")


@dataclass(frozen=True)
class PurgeSnapshotLog(Statement):
    source: Name = Name("")


@dataclass(frozen=True)
class CreateNonincrementalSnapshot(Statement):
    dest: Name = Name("")
    query: str = ""


@dataclass(frozen=True)
class CreateIncrementalSnapshot(Statement):
    dest: Name = Name("")
    source: Name = Name("")
    columns: str | None = None
    condition: str | None = None


@dataclass(frozen=True)
class UpdateSnapshot(Statement):
    name: Name = Name("")
    nonincremental: bool = False


@dataclass(frozen=True)
class DropSnapshot(Statement):
    name: Name = Name("")
    with_delete: bool = False


@dataclass(frozen=True)
class PurgeReplayLogs(Statement):
    """repl_purge_rplogs(): drop replay-log rows older than MIN(SN_LAST_TS) - snp_repl_purge_offset."""


# --- bi-directional snapshot replication (all run on the publisher's side) ---------------------------------


@dataclass(frozen=True)
class ServerNameOf:
    """REPL_SERVER_NAME('dsn') used as an argument: the replication name of a registered server."""

    dsn: str

    def __str__(self) -> str:
        return f"REPL_SERVER_NAME('{self.dsn}')"


ServerArg = str | ServerNameOf


@dataclass(frozen=True)
class CreateSnapshotPub(Statement):
    item: Name = Name("")
    item_type: int = 2


@dataclass(frozen=True)
class DropSnapshotPub(Statement):
    item: Name = Name("")
    item_type: int = 2


@dataclass(frozen=True)
class SnpServer(Statement):
    """REPL_SNP_SERVER(dsn, uid, pwd): declare a subscriber server; its replication name is returned."""

    dsn: str = ""
    user: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ServerNameStatement(Statement):
    dsn: str = ""


@dataclass(frozen=True)
class CreateSnapshotSub(Statement):
    server: ServerArg = ""
    item: Name = Name("")
    item_type: int = 2


@dataclass(frozen=True)
class DropSnapshotSub(Statement):
    server: ServerArg = ""
    item: Name = Name("")
    item_type: int = 2


@dataclass(frozen=True)
class InitSnapshot(Statement):
    server: ServerArg = ""
    item: Name = Name("")
    item_type: int = 2
    rows_per_commit: int = 100


@dataclass(frozen=True)
class UpdateSnapshotPub(Statement):
    item: Name = Name("")
    item_type: int = 2


@dataclass(frozen=True)
class PurgeUpdateableReplayLogs(Statement):
    """repl_purge_urplogs(): replay-log rows of bi-directional publications no sync can read again."""


@dataclass(frozen=True)
class AddSnapshotCr(Statement):
    table: Name = Name("")
    cr_type: str = ""
    suffix: str = ""
    order: int = 0
    cls: str = ""
    column: str | None = None
    expression: str | None = None


# --- transactional replication (Virtuoso's REPL_* functions) -----------------------------------------------
#
# A publisher groups tables and procedures into a publication ("account") and records every change made to
# them in the account's replication log; subscribers register the publisher (REPL_SERVER), subscribe to the
# account, take an initial copy and then replay the log in commit order, once or on a schedule. A
# publication may be updateable: changes made on a subscriber travel back to the publisher, where conflict
# resolvers (REPL_ADD_CR) decide between rival versions of a row. REPL_TEXT places an arbitrary SQL call
# into the log so that subscribers run it too.


@dataclass(frozen=True)
class Publish(Statement):
    """REPL_PUBLISH(account, log_file, is_updateable, sync_user): start a publication and its log."""

    account: str = ""
    log_file: str | None = None
    updateable: bool = False
    sync_user: str | None = None


@dataclass(frozen=True)
class Unpublish(Statement):
    """REPL_UNPUBLISH(account): end a publication; its items stop being logged."""

    account: str = ""


@dataclass(frozen=True)
class PubAdd(Statement):
    """REPL_PUB_ADD(account, item, type, mode, options): publish a table (2) or a procedure (3).

    `item` is the item's name as written in the reference, e.g. 'DB.DBA.TEST', not SQL-quoted.
    `is_copy` is TI_IS_COPY; `options` (procedures only) is 1 to replicate calls, 2 the definition, 3 both."""

    account: str = ""
    item: str = ""
    item_type: int = 2
    is_copy: int = 0
    options: int | None = None


@dataclass(frozen=True)
class PubRemove(Statement):
    """REPL_PUB_REMOVE(account, item, type, mode): stop publishing an item; `drop` also drops the copies."""

    account: str = ""
    item: str = ""
    item_type: int = 2
    drop: bool = False


@dataclass(frozen=True)
class Grant(Statement):
    """REPL_GRANT(account, grantee): let a user subscribe to a publication."""

    account: str = ""
    grantee: str = ""


@dataclass(frozen=True)
class Revoke(Statement):
    """REPL_REVOKE(account, grantee)."""

    account: str = ""
    grantee: str = ""


@dataclass(frozen=True)
class ReplText(Statement):
    """REPL_TEXT(account, sql_text, arg1, ...): log a SQL call, with its parameters, for subscribers to run."""

    account: str = ""
    sql_text: str = ""
    args: tuple[str | int | float | None, ...] = ()


@dataclass(frozen=True)
class NewLog(Statement):
    """REPL_NEW_LOG(account, file): continue a publication's log in a new file."""

    account: str = ""
    log_file: str = ""


@dataclass(frozen=True)
class ReplServer(Statement):
    """REPL_SERVER(server, dsn, address): register a publisher under its replication name."""

    server: str = ""
    dsn: str = ""
    repl_address: str | None = None


@dataclass(frozen=True)
class Subscribe(Statement):
    """REPL_SUBSCRIBE(server, account, dav_user, dav_group, replication_user, replication_password,
    replaying_user): subscribe to a publisher's publication."""

    server: str = ""
    account: str = ""
    dav_user: str | None = None
    dav_group: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    replay_user: str | None = None


@dataclass(frozen=True)
class Unsubscribe(Statement):
    """REPL_UNSUBSCRIBE(server, account, item): drop a subscription, or one item of it."""

    server: str = ""
    account: str = ""
    item: str | None = None


@dataclass(frozen=True)
class InitCopy(Statement):
    """REPL_INIT_COPY(server, account[, image]): copy a subscription's items from the publisher, or load them
    from a publication image (REPL_PUB_INIT_IMAGE)."""

    server: str = ""
    account: str = ""
    image: str | None = None


@dataclass(frozen=True)
class ReloadTable(Statement):
    """REPL_RELOAD_TABLE(server, account, table): copy one published table of a subscription from the publisher
    again, the subscription's level kept, its other tables untouched; the stream resumes after its level."""

    server: str = ""
    account: str = ""
    table: str = ""


@dataclass(frozen=True)
class ColumnConflicts(Statement):
    """REPL_COLUMN_CONFLICTS(account, table, on): decide an updateable publication's conflicts on one table column
    by column (1) or for whole rows (0, the reference's way)."""

    account: str = ""
    table: str = ""
    on: bool = True


@dataclass(frozen=True)
class SetPubRowFilter(Statement):
    """REPL_PUB_ROW_FILTER(account, table, condition[, columns]): the rows (a WHERE in the publisher's dialect) and
    the columns besides the key every subscriber's copy of one published table holds, unless its subscription has a
    filter of its own; '' and NULL: all of them. The copies made already are reloaded with the new filter."""

    account: str = ""
    table: str = ""
    condition: str = ""
    columns: str = ""


@dataclass(frozen=True)
class SetRowFilter(Statement):
    """REPL_ROW_FILTER(server, account, table, condition[, columns]): the rows (a WHERE in the publisher's dialect)
    and the columns besides the key a subscription's copy of one published table holds, in place of the
    publication's filter; '' and NULL for both: the publication's again; the condition TRUE: every row. A copy made
    already is reloaded with the new filter."""

    server: str = ""
    account: str = ""
    table: str = ""
    condition: str = ""
    columns: str = ""


@dataclass(frozen=True)
class Validate(Statement):
    """REPL_VALIDATE(server, account[, table]): compare the next slice of each published table of a subscription
    (or of the one named) with the publisher's rows; drift is alerted, its keys repaired from the job."""

    server: str = ""
    account: str = ""
    table: str | None = None


@dataclass(frozen=True)
class Sync(Statement):
    """REPL_SYNC(server, account, user, password): replay what the publisher logged since the last sync."""

    server: str = ""
    account: str = ""
    user: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SkipTransaction(Statement):
    """REPL_SKIP_TRANSACTION(server, account[, subscriber]): skip the transaction a halted subscription stopped
    at (recorded as a gap with its keys); the subscriber is the context server unless named."""

    server: str = ""
    account: str = ""
    subscriber: str | None = None


@dataclass(frozen=True)
class RepairKeys(Statement):
    """REPL_REPAIR_KEYS(server, account[, subscriber]): make the rows of the keys of a subscription's unrepaired
    gaps the publisher's rows again."""

    server: str = ""
    account: str = ""
    subscriber: str | None = None


@dataclass(frozen=True)
class SyncAll(Statement):
    """REPL_SYNC_ALL(): sync every subscription."""


@dataclass(frozen=True)
class SyncRepl(Statement):
    """SYNC_REPL(): sync the subscriptions that are out of step (what the scheduler runs)."""


@dataclass(frozen=True)
class Disconnect(Statement):
    """REPL_DISCONNECT(server): stop syncing from a publisher."""

    server: str = ""


@dataclass(frozen=True)
class ThisServer(Statement):
    """REPL_THIS_SERVER(): this server's replication name."""


@dataclass(frozen=True)
class Status(Statement):
    """REPL_STATUS(server, account[, level, stat]): a subscription's level and state."""

    server: str = ""
    account: str = ""


@dataclass(frozen=True)
class Stat(Statement):
    """REPL_STAT(): level and state of every publication and subscription."""


@dataclass(frozen=True)
class Purge(Statement):
    """REPL_PURGE(server, account): drop log files every subscriber has replayed."""

    server: str = ""
    account: str = ""


@dataclass(frozen=True)
class SubSchedule(Statement):
    """SUB_SCHEDULE(server, account, interval): sync a subscription every `interval` minutes (0: never)."""

    server: str = ""
    account: str = ""
    interval: int = 0


@dataclass(frozen=True)
class PubInitImage(Statement):
    """REPL_PUB_INIT_IMAGE(account, file[, bytes_per_file]): the publication's tables at its current level,
    written as an image (in parts of at most bytes_per_file) that REPL_INIT_COPY can load."""

    account: str = ""
    file: str = ""
    bytes_per_file: int | None = None


@dataclass(frozen=True)
class SchedInit(Statement):
    """REPL_SCHED_INIT(): put the scheduler's replication events (log purgers) back from the catalog."""


@dataclass(frozen=True)
class Wait(Statement):
    """REPL_WAIT(account[, level[, timeout]]): after a commit on the publisher, wait until the subscribers its
    acknowledgement policy requires have applied `level` (NULL: the publisher's level now), at most `timeout`
    seconds (NULL: the publication's own)."""

    account: str = ""
    level: int | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class PubAck(Statement):
    """REPL_PUB_ACK(account, policy[, timeout]): the acknowledgement policy REPL_WAIT follows: 'none', 'one',
    'quorum' or 'all' of the in-sync subscribers, and its default wait in seconds."""

    account: str = ""
    policy: str = ""
    timeout: float | None = None


@dataclass(frozen=True)
class PostTracer(Statement):
    """REPL_TRACER(account): write a tracer token into the publication's log now; the console times it until each
    subscriber has applied it (the publication page charts the latencies)."""

    account: str = ""


@dataclass(frozen=True)
class ScheduleTracer(Statement):
    """REPL_TRACER_SCHEDULE(account, minutes): a tracer token every `minutes` through the scheduler (0 stops)."""

    account: str = ""
    minutes: int = 0


@dataclass(frozen=True)
class PubOnConflict(Statement):
    """REPL_PUB_ON_CONFLICT(account, answer): an updateable publication's answer to a subscriber's conflicting
    change: 'resolve' (the REPL_ADD_CR resolvers decide) or 'reinitialize' (the publisher wins and the
    subscriber is copied again, its unpushed changes kept in the conflict inbox)."""

    account: str = ""
    answer: str = ""


@dataclass(frozen=True)
class PubSchemaChanges(Statement):
    """REPL_PUB_SCHEMA_CHANGES(account, policy): what becomes of an ALTER TABLE on a published table: 'auto'
    (the subscribers' copies follow at once) or 'approve' (they wait until an admin approves the change)."""

    account: str = ""
    policy: str = ""


@dataclass(frozen=True)
class AddCr(Statement):
    """REPL_ADD_CR(table, suffix, type, order, class, column, expression): a conflict resolver of an
    updateable publication, as REPL_ADD_SNAPSHOT_CR is for bi-directional snapshots (the earlier order, with the
    type before the suffix, is read too: _suffix_and_type)."""

    table: Name = Name("")
    cr_type: str = ""
    suffix: str = ""
    order: int = 0
    cls: str = ""
    column: str | None = None
    expression: str | None = None


KEYWORDS = {
    "AS", "CALL", "CREATE", "DELETE", "DROP", "FOR", "FROM", "INCREMENTAL", "LOG", "NONINCREMENTAL",
    "NULL", "PURGE", "SELECT", "SNAPSHOT", "UPDATE", "WHERE", "WITH",
}  # fmt: skip

# --- function forms ---------------------------------------------------------------------------------------

Arg = str | int | float | ServerNameOf | None


@dataclass(frozen=True)
class Function:
    params: tuple[str, ...]
    build: Callable[..., Statement]
    optional: int = 0  # how many trailing parameters may be left out
    # any number (up to VARIADIC_LIMIT) of further arguments after params, passed on to build as one tuple;
    # a variadic function takes all its params (optional must be 0)
    variadic: bool = False
    # output variables that may follow params, all or none (REPL_STATUS(server, account, level, stat)): given
    # as bare names or NULL, and ignored
    outputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.variadic and (self.optional or self.outputs):
            raise ValueError("a variadic function has neither optional parameters nor output variables")
        if self.outputs and self.optional:
            raise ValueError("a function with output variables has no optional parameters")


VARIADIC_LIMIT = 100  # further arguments a variadic function (REPL_TEXT) takes at most


def _name_arg(value: Arg, what: str) -> Name:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string naming a table")
    return parse_name(value)


def _source(value: Arg) -> Name:
    return _name_arg(value, "source_table")


def _text_arg(value: Arg) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value if value.strip() else None


def _item_type(value: Arg) -> int:
    if value not in (1, 2):
        raise ValueError("the item type is 2 (a table); 1 (a WebDAV collection) is not replicated by this console")
    if value == 1:
        raise ValueError("WebDAV collections are not replicated by this console; use 2 for a table")
    return 2


def _server_arg(value: Arg) -> ServerArg:
    if isinstance(value, ServerNameOf):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError("the server must be a non-empty string or REPL_SERVER_NAME('dsn')")
    return value


def _int_arg(value: Arg, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} must be a whole number from {low} to {high}")
    return value


def _word_arg(value: Arg, what: str, max_length: int | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    value = value.strip()
    if max_length is not None and len(value) > max_length:
        raise ValueError(f"{what} must be at most {max_length} characters")
    return value


def _suffix_and_type(second: Arg, third: Arg) -> dict[str, str]:
    """A resolver's name suffix and conflict type from the second and third arguments of REPL_ADD_CR /
    REPL_ADD_SNAPSHOT_CR. Virtuoso's procedures take (table, name_suffix, type, ...), as the reference does;
    this product first took (table, type, name_suffix, ...), and scripts written so still run. The type is one
    letter of I, U and D: when only the second argument is one, it is the type (the earlier order); otherwise
    the third is (Virtuoso's order, also when both could be)."""

    def is_type(value: Arg) -> bool:
        return isinstance(value, str) and value.upper() in CR_TYPES

    if is_type(second) and not is_type(third):
        return {"suffix": _word_arg(third, "suffix"), "cr_type": _cr_type(second)}
    return {"suffix": _word_arg(second, "suffix"), "cr_type": _cr_type(third)}


def _cr_type(value: Arg) -> str:
    if not isinstance(value, str) or value.upper() not in CR_TYPES:
        raise ValueError("the conflict type must be " + conflict_types_text(False, quote="'"))
    return value.upper()


# transactional replication

ACCOUNT_MAX_LENGTH = 100  # a publication's name
SERVER_MAX_LENGTH = 128  # a server's replication name
USER_MAX_LENGTH = 128
ITEM_MAX_LENGTH = 320  # a published table's or procedure's name, as written ('DB.DBA.TEST')


def _account(value: Arg) -> str:
    return _word_arg(value, "account", ACCOUNT_MAX_LENGTH)


def _server(value: Arg) -> str:
    return _word_arg(value, "server", SERVER_MAX_LENGTH)


ACK_POLICIES = ("none", "one", "quorum", "all")
MAX_WAIT_SECONDS = 3600


def _seconds(value: Arg, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_WAIT_SECONDS:
        raise ValueError(f"{what} must be NULL or a number of seconds, more than 0 and at most {MAX_WAIT_SECONDS}")
    return float(value)


def _ack_policy(value: Arg) -> str:
    if not isinstance(value, str) or value.strip().lower() not in ACK_POLICIES:
        raise ValueError(f"the policy must be one of {', '.join(repr(p) for p in ACK_POLICIES)}")
    return value.strip().lower()


CONFLICT_ANSWERS = ("resolve", "reinitialize")


def _conflict_answer(value: Arg) -> str:
    if not isinstance(value, str) or value.strip().lower() not in CONFLICT_ANSWERS:
        raise ValueError(f"the answer to conflicts must be {' or '.join(repr(a) for a in CONFLICT_ANSWERS)}")
    return value.strip().lower()


SCHEMA_POLICIES = ("auto", "approve")


def _schema_policy(value: Arg) -> str:
    if not isinstance(value, str) or value.strip().lower() not in SCHEMA_POLICIES:
        raise ValueError(f"the schema change policy must be {' or '.join(repr(a) for a in SCHEMA_POLICIES)}")
    return value.strip().lower()


def _opt_level(value: Arg) -> int | None:
    return None if value is None else _int_arg(value, "the level", 0, 2**31 - 1)


def _table_text(value: Arg) -> str:
    """A published table's name as a text argument (as REPL_PUB_ADD stored it: quotes and all)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("the table must be a non-empty string naming a published table")
    return value.strip()


def _opt_text(value: Arg, what: str) -> str | None:
    """An optional text argument: NULL, or a string (a blank one counts as NULL)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string or NULL")
    return value.strip() or None


def _secret(value: Arg, what: str = "password") -> str | None:
    """A password: NULL, or any string, kept exactly as given."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what} must be a string or NULL")


def _flag(value: Arg, what: str) -> bool:
    """A 0/1 switch given as a whole number (any non-zero number is on); NULL is off."""
    if value is None:
        return False
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be a whole number (0 for no, 1 for yes)")
    return value != 0


def _trx_item_type(value: Arg) -> int:
    if isinstance(value, int) and value == 1:
        raise ValueError(
            "WebDAV collections are not replicated by this console; use 2 for a table or 3 for a procedure"
        )
    if not isinstance(value, int) or isinstance(value, bool) or value not in (2, 3):
        raise ValueError("the item type must be 2 (a table) or 3 (a procedure)")
    return value


def _item(value: Arg) -> str:
    return _word_arg(value, "item", ITEM_MAX_LENGTH)


def _pub_add(account: Arg, item: Arg, item_type: Arg, mode: Arg = 0, options: Arg = None) -> PubAdd:
    acct, name, kind = _account(account), _item(item), _trx_item_type(item_type)
    is_copy = 0 if mode is None else _int_arg(mode, "mode", 0, 1)
    if kind == 2:
        if options is not None:
            raise ValueError("options apply to procedures (type 3) only; give NULL or leave them out for a table")
    elif options is None:
        options = 3
    elif not isinstance(options, int) or isinstance(options, bool) or options not in (1, 2, 3):
        raise ValueError("options must be 1 (replicate calls), 2 (the definition) or 3 (both)")
    return PubAdd(account=acct, item=name, item_type=kind, is_copy=is_copy, options=options)


def placeholder_count(sql: str) -> int:
    """The `?` parameter markers of a SQL text, outside strings, quoted identifiers and comments."""
    count, i, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            j = i + 1
            while True:
                k = sql.find(ch, j)
                if k < 0:
                    raise ValueError(f"sql_text has a {ch}-quoted part that is not closed")
                if k + 1 < n and sql[k + 1] == ch:  # doubled quote stands for one
                    j = k + 2
                    continue
                break
            i = k + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise ValueError("sql_text has a comment that is not closed (missing */)")
            i = end + 2
        else:
            count += ch == "?"
            i += 1
    return count


def _repl_text(account: Arg, sql_text: Arg, args: tuple[Arg, ...]) -> ReplText:
    acct, sql = _account(account), _word_arg(sql_text, "sql_text")
    values: list[str | int | float | None] = []
    for number, value in enumerate(args, start=3):
        if isinstance(value, ServerNameOf):
            raise ValueError(f"argument {number} must be a string, a number or NULL")
        values.append(value)
    markers = placeholder_count(sql)
    if markers != len(args):
        raise ValueError(
            f"sql_text has {markers} '?' placeholder(s) but {len(args)} argument(s) follow it; the counts must match"
        )
    return ReplText(account=acct, sql_text=sql, args=tuple(values))


def _cr_class(value: Arg, classes: tuple[str, ...]) -> str:
    cls = _word_arg(value, "class").lower()
    if cls not in classes:
        raise ValueError(f"the class must be one of {', '.join(classes)}")
    return cls


FUNCTIONS: dict[str, Function] = {
    "REPL_CREATE_SNAPSHOT_LOG": Function(("source_table",), lambda t: CreateSnapshotLog(source=_source(t))),
    "REPL_DROP_SNAPSHOT_LOG": Function(("source_table",), lambda t: DropSnapshotLog(source=_source(t))),
    "REPL_PURGE_SNAPSHOT_LOG": Function(("source_table",), lambda t: PurgeSnapshotLog(source=_source(t))),
    "REPL_CREATE_SNAPSHOT": Function(
        ("query_def", "dest_table"),
        lambda q, d: CreateNonincrementalSnapshot(dest=_name_arg(d, "dest_table"), query=_text_arg(q) or ""),
    ),
    "REPL_CREATE_INC_SNAPSHOT": Function(
        ("source_column_list", "source_table", "condition", "dest_table"),
        lambda cols, src, cond, dest: CreateIncrementalSnapshot(
            dest=_name_arg(dest, "dest_table"), source=_name_arg(src, "source_table"),
            columns=_text_arg(cols), condition=_text_arg(cond),
        ),
    ),
    "REPL_REFRESH_INC_SNAPSHOT": Function(
        ("snapshot_table_name",), lambda n: UpdateSnapshot(name=_name_arg(n, "snapshot_table_name"))
    ),
    "REPL_REFRESH_NONINC_SNAPSHOT": Function(
        ("snapshot_table_name",),
        lambda n: UpdateSnapshot(name=_name_arg(n, "snapshot_table_name"), nonincremental=True),
    ),
    "REPL_DROP_SNAPSHOT": Function(
        ("snapshot_table_name", "delete"),
        lambda n, d=0: DropSnapshot(name=_name_arg(n, "snapshot_table_name"), with_delete=bool(d)),
        optional=1,
    ),
    "REPL_PURGE_RPLOGS": Function((), lambda: PurgeReplayLogs()),
    "REPL_PURGE_URPLOGS": Function((), lambda: PurgeUpdateableReplayLogs()),
    "REPL_CREATE_SNAPSHOT_PUB": Function(
        ("item", "type"), lambda i, t: CreateSnapshotPub(item=_name_arg(i, "item"), item_type=_item_type(t))
    ),
    "REPL_DROP_SNAPSHOT_PUB": Function(
        ("item", "type"), lambda i, t: DropSnapshotPub(item=_name_arg(i, "item"), item_type=_item_type(t))
    ),
    "REPL_SNP_SERVER": Function(
        ("dsn", "uid", "pwd"),
        lambda dsn, u=None, p=None: SnpServer(dsn=_word_arg(dsn, "dsn"), user=_text_arg(u), password=_text_arg(p)),
        optional=2,
    ),
    "REPL_SERVER_NAME": Function(("dsn",), lambda dsn: ServerNameStatement(dsn=_word_arg(dsn, "dsn"))),
    "REPL_CREATE_SNAPSHOT_SUB": Function(
        ("server", "item", "type"),
        lambda s, i, t: CreateSnapshotSub(server=_server_arg(s), item=_name_arg(i, "item"), item_type=_item_type(t)),
    ),
    "REPL_DROP_SNAPSHOT_SUB": Function(
        ("server", "item", "type"),
        lambda s, i, t: DropSnapshotSub(server=_server_arg(s), item=_name_arg(i, "item"), item_type=_item_type(t)),
    ),
    "REPL_INIT_SNAPSHOT": Function(
        ("server", "item", "type", "rows_per_commit"),
        lambda s, i, t, n=100: InitSnapshot(
            server=_server_arg(s), item=_name_arg(i, "item"), item_type=_item_type(t),
            rows_per_commit=_int_arg(n, "rows_per_commit", 1, 10_000_000),
        ),
        optional=1,
    ),
    "REPL_UPDATE_SNAPSHOT": Function(
        ("item", "type"), lambda i, t: UpdateSnapshotPub(item=_name_arg(i, "item"), item_type=_item_type(t))
    ),
    # (table, name_suffix, type, order, class, column, expression); (table, type, name_suffix, ...) too
    "REPL_ADD_SNAPSHOT_CR": Function(
        ("table", "suffix", "type", "order", "class", "column", "expression"),
        lambda tb, suf, ty, order, cls, col=None, expr=None: AddSnapshotCr(
            table=_name_arg(tb, "table"), **_suffix_and_type(suf, ty), order=_int_arg(order, "order", 0, 1_000_000),
            cls=_word_arg(cls, "class").lower(), column=_text_arg(col), expression=_text_arg(expr),
        ),
        optional=2,
    ),
    # transactional replication: publisher
    "REPL_PUBLISH": Function(
        ("account", "log_file", "is_updateable", "sync_user"),
        lambda a, f=None, u=None, su=None: Publish(
            account=_account(a), log_file=_opt_text(f, "log_file"), updateable=_flag(u, "is_updateable"),
            sync_user=_opt_text(su, "sync_user"),
        ),
        optional=3,
    ),
    "REPL_UNPUBLISH": Function(("account",), lambda a: Unpublish(account=_account(a))),
    "REPL_PUB_ADD": Function(("account", "item", "type", "mode", "options"), _pub_add, optional=2),
    "REPL_PUB_REMOVE": Function(
        ("account", "item", "type", "mode"),
        lambda a, i, t, m=0: PubRemove(
            account=_account(a), item=_item(i), item_type=_trx_item_type(t), drop=_flag(m, "mode"),
        ),
        optional=1,
    ),
    "REPL_GRANT": Function(
        ("account", "grantee"),
        lambda a, g: Grant(account=_account(a), grantee=_word_arg(g, "grantee", USER_MAX_LENGTH)),
    ),
    "REPL_REVOKE": Function(
        ("account", "grantee"),
        lambda a, g: Revoke(account=_account(a), grantee=_word_arg(g, "grantee", USER_MAX_LENGTH)),
    ),
    "REPL_TEXT": Function(("account", "sql_text"), _repl_text, variadic=True),
    "REPL_NEW_LOG": Function(
        ("account", "file"), lambda a, f: NewLog(account=_account(a), log_file=_word_arg(f, "file"))
    ),
    "REPL_PURGE": Function(("server", "account"), lambda s, a: Purge(server=_server(s), account=_account(a))),
    "REPL_PUB_INIT_IMAGE": Function(
        ("account", "file", "bytes_per_file"),
        lambda a, f, b=None: PubInitImage(
            account=_account(a), file=_word_arg(f, "file"),
            bytes_per_file=None if b is None else _int_arg(b, "bytes_per_file", 1024, 2**40),
        ),
        optional=1,
    ),
    "REPL_PUB_ACK": Function(
        ("account", "policy", "timeout"),
        lambda a, p, t=None: PubAck(account=_account(a), policy=_ack_policy(p), timeout=_seconds(t, "the timeout")),
        optional=1,
    ),
    "REPL_PUB_SCHEMA_CHANGES": Function(
        ("account", "policy"), lambda a, x: PubSchemaChanges(account=_account(a), policy=_schema_policy(x))
    ),
    "REPL_PUB_ON_CONFLICT": Function(
        ("account", "answer"), lambda a, x: PubOnConflict(account=_account(a), answer=_conflict_answer(x))
    ),
    "REPL_TRACER": Function(("account",), lambda a: PostTracer(account=_account(a))),
    "REPL_TRACER_SCHEDULE": Function(
        ("account", "minutes"),
        lambda a, m: ScheduleTracer(account=_account(a), minutes=_int_arg(m, "minutes", 0, 10080)),
    ),
    "REPL_WAIT": Function(
        ("account", "level", "timeout"),
        lambda a, lv=None, t=None: Wait(account=_account(a), level=_opt_level(lv), timeout=_seconds(t, "the timeout")),
        optional=2,
    ),
    # (table, name_suffix, type, order, class, column, expression); (table, type, name_suffix, ...) too
    "REPL_ADD_CR": Function(
        ("table", "suffix", "type", "order", "class", "column", "expression"),
        lambda tb, suf, ty, order, cls, col=None, expr=None: AddCr(
            table=_name_arg(tb, "table"), **_suffix_and_type(suf, ty), order=_int_arg(order, "order", 0, 1_000_000),
            cls=_cr_class(cls, class_names(transactional=True)), column=_text_arg(col), expression=_text_arg(expr),
        ),
        optional=2,
    ),
    # transactional replication: subscriber
    "REPL_SERVER": Function(
        ("server", "dsn", "address"),
        lambda s, d, ad=None: ReplServer(
            server=_server(s), dsn=_word_arg(d, "dsn"), repl_address=_opt_text(ad, "address"),
        ),
        optional=1,
    ),
    "REPL_SUBSCRIBE": Function(
        ("server", "account", "dav_user", "dav_group", "replication_user", "replication_password", "replaying_user"),
        lambda s, a, du=None, dg=None, u=None, p=None, ru=None: Subscribe(
            server=_server(s), account=_account(a), dav_user=_opt_text(du, "dav_user"),
            dav_group=_opt_text(dg, "dav_group"), user=_opt_text(u, "replication_user"),
            password=_secret(p, "replication_password"), replay_user=_opt_text(ru, "replaying_user"),
        ),
        optional=5,
    ),
    "REPL_UNSUBSCRIBE": Function(
        ("server", "account", "item"),
        lambda s, a, i=None: Unsubscribe(server=_server(s), account=_account(a), item=_opt_text(i, "item")),
        optional=1,
    ),
    "REPL_INIT_COPY": Function(
        ("server", "account", "image"),
        lambda s, a, i=None: InitCopy(server=_server(s), account=_account(a), image=_opt_text(i, "image")),
        optional=1,
    ),
    "REPL_RELOAD_TABLE": Function(
        ("server", "account", "table"),
        lambda s, a, t: ReloadTable(server=_server(s), account=_account(a), table=_table_text(t)),
    ),
    "REPL_COLUMN_CONFLICTS": Function(
        ("account", "table", "on"),
        lambda a, t, o=1: ColumnConflicts(account=_account(a), table=_table_text(t), on=_flag(o, "on")),
        optional=1,
    ),
    "REPL_PUB_ROW_FILTER": Function(
        ("account", "table", "condition", "columns"),
        lambda a, t, c, cols=None: SetPubRowFilter(
            account=_account(a), table=_table_text(t), condition=_opt_text(c, "condition") or "",
            columns=_opt_text(cols, "columns") or "",
        ),
        optional=1,
    ),
    "REPL_ROW_FILTER": Function(
        ("server", "account", "table", "condition", "columns"),
        lambda s, a, t, c, cols=None: SetRowFilter(
            server=_server(s), account=_account(a), table=_table_text(t), condition=_opt_text(c, "condition") or "",
            columns=_opt_text(cols, "columns") or "",
        ),
        optional=1,
    ),
    "REPL_VALIDATE": Function(
        ("server", "account", "table"),
        lambda s, a, t=None: Validate(server=_server(s), account=_account(a), table=_opt_text(t, "table")),
        optional=1,
    ),
    "REPL_SYNC": Function(
        ("server", "account", "user", "password"),
        lambda s, a, u=None, p=None: Sync(
            server=_server(s), account=_account(a), user=_opt_text(u, "user"), password=_secret(p),
        ),
        optional=2,
    ),
    "REPL_SKIP_TRANSACTION": Function(
        ("server", "account", "subscriber"),
        lambda s, a, sub=None: SkipTransaction(
            server=_server(s), account=_account(a), subscriber=None if sub is None else _server(sub)
        ),
        optional=1,
    ),
    "REPL_REPAIR_KEYS": Function(
        ("server", "account", "subscriber"),
        lambda s, a, sub=None: RepairKeys(
            server=_server(s), account=_account(a), subscriber=None if sub is None else _server(sub)
        ),
        optional=1,
    ),
    "REPL_SYNC_ALL": Function((), lambda: SyncAll()),
    "REPL_SCHED_INIT": Function((), lambda: SchedInit()),
    "SYNC_REPL": Function((), lambda: SyncRepl()),
    "REPL_DISCONNECT": Function(("server",), lambda s: Disconnect(server=_server(s))),
    "REPL_THIS_SERVER": Function((), lambda: ThisServer()),
    "REPL_STATUS": Function(
        ("server", "account"), lambda s, a: Status(server=_server(s), account=_account(a)), outputs=("level", "stat")
    ),
    "REPL_STAT": Function((), lambda: Stat()),
    "SUB_SCHEDULE": Function(
        ("server", "account", "interval"),
        lambda s, a, i: SubSchedule(
            server=_server(s), account=_account(a), interval=_int_arg(i, "interval (minutes)", 0, 525_600),
        ),
    ),
}  # fmt: skip

VALUE_FUNCTIONS = {"REPL_SERVER_NAME"}  # functions that may stand where an argument is expected


# --- parser -----------------------------------------------------------------------------------------------


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    # token helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def error(self, message: str, token: Token | None = None) -> StatementError:
        return StatementError(message, self.text, (token or self.tok).start)

    def describe(self, token: Token) -> str:
        if token.kind == "end":
            return "the end of the input"
        if token.kind == "string":
            return f"string '{token.value}'"
        return repr(token.value)

    def at_word(self, *words: str) -> bool:
        return self.tok.kind == "word" and self.tok.value.upper() in words

    def take_word(self, *words: str) -> Token:
        if not self.at_word(*words):
            expected = " or ".join(words)
            raise self.error(f"expected {expected}, found {self.describe(self.tok)}")
        token = self.tok
        self.pos += 1
        return token

    def take_punct(self, ch: str) -> Token:
        if not (self.tok.kind == "punct" and self.tok.value == ch):
            raise self.error(f"expected {ch!r}, found {self.describe(self.tok)}")
        token = self.tok
        self.pos += 1
        return token

    def at_punct(self, ch: str) -> bool:
        return self.tok.kind == "punct" and self.tok.value == ch

    def peek(self, offset: int) -> Token:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)]

    def qualifier_length(self) -> int:
        """How many tokens a function name's qualifier takes (`DB..name`, `DB.DBA.name`); 0 if none."""

        def dot(offset: int) -> bool:
            token = self.peek(offset)
            return token.kind == "punct" and token.value == "."

        if self.tok.kind != "word" or not dot(1):
            return 0
        if dot(2) and self.peek(3).kind == "word":
            return 3
        if self.peek(2).kind == "word" and dot(3) and self.peek(4).kind == "word":
            return 4
        return 0

    def take_string(self, what: str) -> str:
        if self.tok.kind != "string":
            raise self.error(f"expected {what} as a quoted string ('...'), found {self.describe(self.tok)}")
        value = self.tok.value
        self.pos += 1
        return value

    def take_ident(self, what: str) -> str:
        token = self.tok
        if token.kind == "qident":
            self.pos += 1
            return token.value
        if token.kind == "word" and token.value.upper() not in KEYWORDS:
            self.pos += 1
            return token.value
        hint = " (quote it as an identifier)" if token.kind == "word" else ""
        raise self.error(f"expected {what}, found {self.describe(token)}{hint}")

    def take_name(self, what: str) -> Name:
        first = self.take_ident(what)
        if self.at_punct("."):
            self.pos += 1
            second = self.take_ident(f"a table name after {first}.")
            if self.at_punct("."):
                raise self.error(
                    "a table name has at most two parts, server.table "
                    "(a PostgreSQL schema belongs to the server's registration)"
                )
            return Name(table=second, server=first)
        return Name(table=first)

    # statements
    def script(self) -> list[Statement]:
        statements: list[Statement] = []
        while True:
            while self.at_punct(";"):
                self.pos += 1
            if self.tok.kind == "end":
                break
            start = self.tok.start
            selected = self.at_word("SELECT")
            statement = self.statement()
            end = self.tokens[self.pos - 1].end
            statements.append(_with_text(statement, self.text[start:end]))
            if selected and self.tok.kind == "word":  # `select repl_stat() union select ...`, `... from t`
                raise PlainSqlError(self.text, start)
            if self.tok.kind != "end" and not self.at_punct(";"):
                raise self.error(f"expected ';' or the end of the input, found {self.describe(self.tok)}")
        if not statements:
            raise StatementError("no statement given", self.text, 0)
        return statements

    def statement(self) -> Statement:
        if self.at_word(*PLAIN_SQL_WORDS) or self.plain_select() or self.plain_write():
            raise PlainSqlError(self.text, self.tok.start)
        if self.at_word("CREATE"):
            return self.create()
        if self.at_word("DROP"):
            return self.drop()
        if self.at_word("PURGE"):
            self.pos += 1
            self.take_word("SNAPSHOT")
            self.take_word("LOG")
            self.take_word("FOR")
            return PurgeSnapshotLog(source=self.take_name("a source table name"))
        if self.at_word("UPDATE"):
            self.pos += 1
            self.take_word("SNAPSHOT")
            name = self.take_name("a snapshot name")
            nonincremental = False
            if self.at_word("AS"):
                self.pos += 1
                self.take_word("NONINCREMENTAL")
                nonincremental = True
            return UpdateSnapshot(name=name, nonincremental=nonincremental)
        if self.at_word("CALL", "SELECT"):
            self.pos += 1
            return self.call()
        after_name = self.peek(self.qualifier_length() + 1)
        if self.tok.kind == "word" and after_name.kind == "punct" and after_name.value == "(":
            return self.call()
        raise self.error(
            f"expected a replication statement (CREATE, DROP, PURGE, UPDATE SNAPSHOT or a REPL_* call), "
            f"found {self.describe(self.tok)}"
        )

    def plain_select(self) -> bool:
        """SELECT of anything but a replication function (`select * from t`, `select count(*) ...`)."""
        if not self.at_word("SELECT"):
            return False
        name = self.peek(1 + self.qualifier_length_at(1))
        after = self.peek(2 + self.qualifier_length_at(1))
        called = name.kind == "word" and after.kind == "punct" and after.value == "("
        return not (called and _replication_function(name.value))

    def plain_write(self) -> bool:
        """UPDATE of a table (`update t set ...`), CREATE or DROP of a table, view, index... A misspelt replication
        statement (`update snapshoot x`) is not plain SQL: the parser says what it expected instead."""
        follows = self.peek(1)
        if self.at_word("UPDATE"):
            for offset in range(2, 8):  # `update t set`, `update "a b" set`, `update s.t set`
                token = self.peek(offset)
                if token.kind == "end" or (token.kind == "punct" and token.value == ";"):
                    return False
                if token.kind == "word" and token.value.upper() == "SET":
                    return True
            return False
        if self.at_word("CREATE", "DROP"):
            return follows.kind == "word" and follows.value.upper() in PLAIN_SQL_OBJECTS
        return False

    def qualifier_length_at(self, offset: int) -> int:
        self.pos += offset
        try:
            return self.qualifier_length()
        finally:
            self.pos -= offset

    def create(self) -> Statement:
        self.take_word("CREATE")
        if self.at_word("NONINCREMENTAL"):
            self.pos += 1
            self.take_word("SNAPSHOT")
            dest = self.take_name("a destination table name")
            self.take_word("AS")
            return CreateNonincrementalSnapshot(dest=dest, query=self.take_string("the query"))
        if self.at_word("INCREMENTAL"):
            self.pos += 1
        self.take_word("SNAPSHOT")
        if self.at_word("LOG"):
            self.pos += 1
            self.take_word("FOR")
            return CreateSnapshotLog(source=self.take_name("a source table name"))
        dest = self.take_name("a destination table name")
        self.take_word("FROM")
        source = self.take_name("a source table name")
        columns = self.take_string("the column list") if self.tok.kind == "string" else None
        condition = None
        if self.at_word("WHERE"):
            self.pos += 1
            condition = self.take_string("the condition")
        return CreateIncrementalSnapshot(dest=dest, source=source, columns=columns, condition=condition)

    def drop(self) -> Statement:
        self.take_word("DROP")
        self.take_word("SNAPSHOT")
        if self.at_word("LOG"):
            self.pos += 1
            self.take_word("FOR")
            return DropSnapshotLog(source=self.take_name("a source table name"))
        name = self.take_name("a snapshot name")
        with_delete = False
        if self.at_word("WITH"):
            self.pos += 1
            self.take_word("DELETE")
            with_delete = True
        return DropSnapshot(name=name, with_delete=with_delete)

    def call(self) -> Statement:
        self.pos += self.qualifier_length()  # DB..REPL_INIT_COPY is REPL_INIT_COPY
        token = self.tok
        if token.kind != "word":
            raise self.error(f"expected a function name, found {self.describe(token)}")
        self.pos += 1
        function = FUNCTIONS.get(token.value.upper())
        if function is None:
            known = ", ".join(sorted(FUNCTIONS)).lower()
            raise self.error(f"unknown replication function {token.value!r} (known: {known})", token)
        self.take_punct("(")
        args: list[Arg] = []
        outputs = 0  # output variables given (ignored)
        if not self.at_punct(")"):
            while True:
                if function.outputs and len(args) >= len(function.params):
                    self.output_argument(function.outputs[min(outputs, len(function.outputs) - 1)])
                    outputs += 1
                else:
                    args.append(self.argument())
                if self.at_punct(","):
                    self.pos += 1
                    continue
                break
        close = self.take_punct(")")
        name, params = token.value.lower(), ", ".join(function.params)
        required = len(function.params) - function.optional
        if function.variadic:
            if len(args) < len(function.params):
                raise self.error(
                    f"{name} takes at least {len(function.params)} argument(s) ({params}, ...), got {len(args)}", close
                )
            if len(args) - len(function.params) > VARIADIC_LIMIT:
                raise self.error(
                    f"{name} takes at most {VARIADIC_LIMIT} argument(s) after {params}, "
                    f"got {len(args) - len(function.params)}",
                    close,
                )
        elif function.outputs:
            if not (len(args) == len(function.params) and outputs in (0, len(function.outputs))):
                raise self.error(
                    f"{name} takes {len(function.params)} or {len(function.params) + len(function.outputs)} "
                    f"argument(s) ({params}[, {', '.join(function.outputs)}]), got {len(args) + outputs}",
                    close,
                )
        elif not required <= len(args) <= len(function.params):
            count = str(len(function.params)) if not function.optional else f"{required} to {len(function.params)}"
            raise self.error(
                f"{token.value.lower()} takes {count} argument(s) ({', '.join(function.params)}), got {len(args)}",
                close,
            )
        try:
            if function.variadic:
                return function.build(*args[: len(function.params)], tuple(args[len(function.params) :]))
            return function.build(*args)
        except (ValueError, StatementError) as exc:
            message = exc.reason if isinstance(exc, StatementError) else str(exc)
            raise self.error(f"{token.value.lower()}: {message}", token) from None

    def output_argument(self, what: str) -> None:
        """An output variable (REPL_STATUS's level and stat): a bare name or NULL, which is ignored."""
        token = self.tok
        if token.kind != "word":
            raise self.error(
                f"expected a variable name or NULL for the output argument {what}, found {self.describe(token)}"
            )
        self.pos += 1

    def argument(self) -> Arg:
        token = self.tok
        if token.kind == "string":
            self.pos += 1
            return token.value
        if token.kind == "number" or (token.kind == "punct" and token.value == "-"):
            negative = token.value == "-"
            if negative:
                self.pos += 1
                if self.tok.kind != "number":
                    raise self.error("expected a number after '-'")
            text = self.tok.value
            self.pos += 1
            number: int | float = float(text) if "." in text else int(text)
            return -number if negative else number
        if self.at_word("NULL"):
            self.pos += 1
            return None
        if token.kind == "word" and token.value.upper() in VALUE_FUNCTIONS:
            self.pos += 1
            self.take_punct("(")
            dsn = self.argument()
            self.take_punct(")")
            if not isinstance(dsn, str) or not dsn.strip():
                raise self.error("repl_server_name takes one non-empty string (the server's DSN or name)", token)
            return ServerNameOf(dsn)
        raise self.error(f"expected a string, a number or NULL as an argument, found {self.describe(token)}")


def _replication_function(name: str) -> bool:
    """A name that calls, or was meant to call, a replication function (a misspelt REPL_ call is told so)."""
    upper = name.upper()
    return upper in FUNCTIONS or upper.startswith(("REPL_", "SYNC_", "SUB_"))


def _with_text(statement: Statement, text: str) -> Statement:
    return replace(statement, text=text)


def parse(text: str) -> list[Statement]:
    """Parse a script of one or more statements separated by ';'."""
    if len(text) > 1_000_000:
        raise StatementError("the script is longer than 1,000,000 characters")
    return Parser(text).script()


def parse_one(text: str) -> Statement:
    statements = parse(text)
    if len(statements) != 1:
        raise StatementError(f"expected one statement, got {len(statements)}", text, 0)
    return statements[0]


def parse_name(text: str) -> Name:
    """A table name given as a string argument, e.g. repl_create_snapshot_log('demo."Order Details"')."""
    parser = Parser(text)
    name = parser.take_name("a table name")
    if parser.tok.kind != "end":
        raise parser.error(f"unexpected {parser.describe(parser.tok)} after the table name")
    return name


PASSWORD_MASK = "********"  # noqa: S105 (what stands in for a password, not one)


def string_literal(value: str) -> str:
    """`value` as a quoted string of the statement language (the form scheduled events store)."""
    return "'" + value.replace("'", "''") + "'"


def _literal(value: str | None) -> str:
    return "NULL" if value is None else string_literal(value)


def masked_text(statement: Statement) -> str:
    """The statement's text as shown and recorded: a password argument (REPL_SNP_SERVER, REPL_SUBSCRIBE,
    REPL_SYNC) is replaced by '********'; any other statement's text is returned as it was written."""
    mask = f"'{PASSWORD_MASK}'"
    if isinstance(statement, SnpServer) and statement.password is not None:
        return f"REPL_SNP_SERVER ({_literal(statement.dsn)}, {_literal(statement.user)}, {mask})"
    if isinstance(statement, Subscribe) and statement.password is not None:
        before = (statement.server, statement.account, statement.dav_user, statement.dav_group, statement.user)
        args = [*map(_literal, before), mask]
        if statement.replay_user is not None:
            args.append(_literal(statement.replay_user))
        return f"REPL_SUBSCRIBE ({', '.join(args)})"
    if isinstance(statement, Sync) and statement.password is not None:
        args = [_literal(statement.server), _literal(statement.account), _literal(statement.user), mask]
        return f"REPL_SYNC ({', '.join(args)})"
    return statement.text
