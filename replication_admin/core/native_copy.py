"""Full copies as native streams: the source's own export piped into the destination's own bulk load, from
the worker process, without Spark's fixed cost or a conversion of every value in the JVM.

- PostgreSQL source: `COPY (SELECT …) TO STDOUT (FORMAT csv)` through psycopg, the bytes passed on as they come;
- MariaDB / MySQL source: an unbuffered SELECT whose every row the server formats as one CSV line;
- PostgreSQL destination: `COPY … FROM STDIN (FORMAT csv)`; MariaDB / MySQL: `LOAD DATA LOCAL INFILE` reading a
  pipe the export is written into. LOCAL turns conversion errors into warnings, so a load with a warning fails
  (rolled back): nothing is truncated or coerced silently.

Each dialect says how its values are written (`stream_value_sql`) so they arrive as Spark's read delivers them
(docs/types.md): doubles as doubles, booleans 1 / 0, instants as UTC wall time, bytes as hex. A copy that needs
what only Spark does (another dialect, a column changing family, a type moved as its text) goes to Spark:
`copy_path` is the one rule, REPLADMIN_FULL_COPY_PATH forces either way, and `copy_table` the one place that
follows it: every full copy (a snapshot's full refresh and the replay-log rows of its first one, the
transactional and the bi-directional initial copies) describes its rows once and gets back the rows copied and
the path taken.

Streams only ever fill a staging table the caller created and empties or drops; the caller's swap, replace or
chunked apply makes the copy visible. A large table is split into key ranges, one stream (one source and one
destination connection, one destination transaction) each, at most the per-server connection cap at once.
A stream that fails stops the others and fails the copy; a killed worker's connections end with it and its
staging table is dropped by the next attempt."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import psycopg
import pymysql
from django.conf import settings

from jobs import snapshot_refresh as spark_refresh
from jobs.jdbc import Parallelism
from jobs.snapshot_refresh import row_number_bits
from replication_admin.core import connections, spark_sizing
from replication_admin.core.errors import ReplicationError
from replication_admin.core.jobs import Reporter
from replication_admin.core.shapes import SourceShape
from replication_admin.core.spark import endpoint, spark_session
from replication_admin.engine import dialects
from replication_admin.engine.compare import family_of, read_type
from replication_admin.engine.dialects import Dialect, StreamWire
from replication_admin.engine.refresh_sql import Moved, noninc_select
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server

STREAM, SPARK, AUTO = "stream", "spark", "auto"  # REPLADMIN_FULL_COPY_PATH
FETCH_ROWS = 5_000  # rows per fetch of a SELECT export (one chunk of the stream)

Progress = Callable[[int, int], None]


class StreamCopyError(ReplicationError):
    """A streamed copy failed (the staging table it filled is not to be used)."""


@dataclass(frozen=True)
class StreamColumn:
    alias: str  # the column of the plan's SELECT
    target: str  # the staging table's column it goes into
    source: LogicalType  # the type the source delivers
    dest: LogicalType  # the destination column's type


@dataclass(frozen=True)
class StreamPlan:
    source: Server
    select_sql: str  # the rows, under the columns' aliases (read as subquery q)
    columns: tuple[StreamColumn, ...]
    dest: Server
    staging_sql: str  # the staging table, qualified and quoted
    split_alias: str | None = None  # an integer key alias to split a large copy into key ranges on
    row_number: str | None = None  # a staging column taking increasing row numbers (below 2**31)


def why_not_stream(source: Server, dest: Server, columns: Sequence[StreamColumn]) -> str | None:
    """Why a copy of these columns between these servers must go through Spark; None when it can stream."""
    src_d, dest_d = dialects.get(source.dialect), dialects.get(dest.dialect)
    if src_d.bulk_export is None:
        return f"{src_d.label} has no native export"
    if dest_d.stream_wire is None:
        return f"{dest_d.label} takes no native stream"
    if source.odbc_dsn or dest.odbc_dsn:
        return "a server is reached through an ODBC data source name"
    for c in columns:
        if "other" in (c.source.kind, c.dest.kind):
            return f"{c.target} is moved as its text"
        if family_of(c.source) != family_of(c.dest):
            return f"{c.target} changes from {c.source.kind} to {c.dest.kind}"
    return None


def copy_path(source: Server, dest: Server, columns: Sequence[StreamColumn]) -> str:
    """STREAM or SPARK for a full copy: a stream whenever it can deliver the same rows, unless the setting says."""
    forced = settings.FULL_COPY_PATH
    if forced == SPARK:
        return SPARK
    why = why_not_stream(source, dest, columns)
    if why is None:
        return STREAM
    if forced == STREAM:
        raise StreamCopyError(f"this copy cannot stream ({why}) and REPLADMIN_FULL_COPY_PATH is '{STREAM}'")
    return SPARK


def stream_parallelism() -> Parallelism:
    """Streams run on this host's cores; each holds one connection on either server (capped like Spark's)."""
    cap = max(int(getattr(settings, "MAX_CONNECTIONS_PER_SERVER", 4)), 1)
    return Parallelism(cores=os.cpu_count() or 1, connections=cap)


# --- connections ---------------------------------------------------------------------------------------


def _address(server: Server) -> dict[str, Any]:
    address = connections.address_for(server)
    d = dialects.get(server.dialect)
    port = int(address.port or d.default_port or 0)
    return {"host": address.host, "port": port, "database": address.database, "user": address.user,
            "password": address.password}  # fmt: skip


def _postgresql(server: Server) -> psycopg.Connection[Any]:
    a = _address(server)
    conn = psycopg.connect(host=a["host"], port=a["port"], dbname=a["database"], user=a["user"],
                           password=a["password"], autocommit=True)  # fmt: skip
    for statement in dialects.get(server.dialect).stream_session_sql():
        conn.execute(statement)
    conn.autocommit = False
    return conn


def _mysql(server: Server, **extra: Any) -> pymysql.connections.Connection[Any]:
    a = _address(server)
    conn = pymysql.connect(host=a["host"], port=a["port"], user=a["user"], password=a["password"],
                           database=a["database"], charset="utf8mb4", autocommit=False, **extra)  # fmt: skip
    with conn.cursor(pymysql.cursors.Cursor) as cursor:
        for statement in dialects.get(server.dialect).stream_session_sql():
            cursor.execute(statement)
    return conn


# --- one stream: an export (chunks of CSV) and a load -----------------------------------------------------


class _Stopped(Exception):
    """Another stream of the same copy failed."""


class _Export:
    """The CSV chunks of one key range of the source; `rows` is what the source sent, once exhausted."""

    def __init__(self, server: Server, statement: str, numbered_from: int | None, stop: threading.Event):
        self.server, self.statement, self.numbered_from, self.stop = server, statement, numbered_from, stop
        self.rows: int | None = None

    def chunks(self) -> Iterator[bytes]:
        export = dialects.get(self.server.dialect).bulk_export
        try:
            yield from (self._copy() if export == "copy" else self._select())
        except Exception as exc:
            raise _lost(self.server, exc) from exc

    def _copy(self) -> Iterator[bytes]:
        with _postgresql(self.server) as conn:
            conn.read_only = True
            with conn.cursor() as cursor:
                with cursor.copy(self.statement) as copy:
                    for chunk in copy:
                        if self.stop.is_set():
                            raise _Stopped()
                        yield bytes(chunk)
                self.rows = cursor.rowcount

    def _select(self) -> Iterator[bytes]:
        conn = _mysql(self.server, cursorclass=pymysql.cursors.SSCursor, use_unicode=False)
        rows, number = 0, self.numbered_from
        cursor = conn.cursor()  # not closed: that would read the rest of an unbuffered result first
        try:
            cursor.execute(self.statement)
            while batch := cursor.fetchmany(FETCH_ROWS):
                if self.stop.is_set():
                    raise _Stopped()
                lines = [line for (line,) in batch]
                if any(line is None for line in lines):
                    raise StreamCopyError(
                        f"a row of {self.server.name} is longer than its max_allowed_packet as one line"
                    )
                if number is not None:
                    lines = [b'"%d",%s' % (number + i, line) for i, line in enumerate(lines, start=1)]
                    number += len(lines)
                rows += len(lines)
                yield b"\n".join(lines) + b"\n"
        finally:
            result = getattr(cursor, "_result", None)
            if result is not None:  # left early: the connection closes under the result, nothing to drain
                result.unbuffered_active = False
            conn.close()
        self.rows = rows


def _lost(server: Server, exc: Exception) -> Exception:
    """A broken connection to `server` as the retry policy knows it (the job runs again from its start, as a
    Spark copy cut by a blip does); any other error as it is."""
    if isinstance(exc, connections.ConnectionLost | _Stopped | ReplicationError):
        return exc
    return connections.ConnectionLost(server, exc) if connections.is_connection_fault(exc) else exc


def _load(dest: Server, statement_for: Callable[[str], str], export: _Export) -> int:
    """Load one export into the staging table in one transaction; the rows loaded, checked against the rows
    the source sent before the load commits."""
    try:
        if dialects.get(dest.dialect).bulk_loader == "copy":
            return _load_copy(dest, statement_for(""), export)
        return _load_file(dest, statement_for, export)
    except Exception as exc:
        raise _lost(dest, exc) from exc


def _load_copy(dest: Server, statement: str, export: _Export) -> int:
    # The connection commits on leaving, and rolls back on an exception.
    with _postgresql(dest) as conn, conn.cursor() as cursor:
        with cursor.copy(statement) as copy:
            for chunk in export.chunks():
                copy.write(chunk)
        loaded = cursor.rowcount
        if export.rows is None or loaded != export.rows:
            raise StreamCopyError(f"{dest.name} loaded {loaded} row(s) of {export.rows} sent")
    return loaded


def _load_file(dest: Server, statement_for: Callable[[str], str], export: _Export) -> int:
    """LOAD DATA LOCAL INFILE from a named pipe a thread writes the export into."""
    folder = tempfile.mkdtemp(prefix="repladmin-stream-")
    pipe = os.path.join(folder, "rows.csv")
    os.mkfifo(pipe, 0o600)
    failed: list[BaseException] = []

    def feed() -> None:
        try:
            with open(pipe, "wb") as out:
                for chunk in export.chunks():
                    out.write(chunk)
        except BaseException as exc:  # handed to the loading thread
            failed.append(exc)

    feeder = threading.Thread(target=feed, name="stream-feed", daemon=True)
    feeder.start()
    conn = None
    try:
        conn = _mysql(dest, local_infile=True)
        with conn.cursor() as cursor:
            loaded = int(cursor.execute(statement_for(pipe)))
            cursor.execute("SHOW WARNINGS LIMIT 1")
            warnings = cursor.fetchall()
        feeder.join()
        if failed:
            raise failed[0]
        if warnings:
            raise StreamCopyError(f"LOAD DATA into {dest.name} warned: {warnings[0][2]}")
        if export.rows is None or loaded != export.rows:
            raise StreamCopyError(f"{dest.name} loaded {loaded} row(s) of {export.rows} sent")
        conn.commit()
        return loaded
    finally:
        if feeder.is_alive():
            # The load ended before reading the pipe to its end: open and close its other end so that the
            # feeder's open or write returns (with a broken pipe) and the export is closed.
            with contextlib.suppress(OSError):
                os.close(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))
            feeder.join(timeout=30)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.rollback()
            conn.close()
        shutil.rmtree(folder, ignore_errors=True)


# --- the copy ---------------------------------------------------------------------------------------------


def _key_ranges(plan: StreamPlan, src_d: Dialect) -> list[str]:
    """WHERE conditions splitting the plan's rows on its integer key into ranges (like Spark's JDBC partitions:
    the first takes NULL keys too); [""] for one stream."""
    if plan.split_alias is None:
        return [""]
    key = f"q.{plan.split_alias}"
    bounds = f"SELECT MIN({key}), MAX({key}) FROM ({plan.select_sql}) q"
    if src_d.bulk_export == "copy":
        with _postgresql(plan.source) as conn:
            row = conn.execute(bounds).fetchone()
    else:
        conn = _mysql(plan.source)
        try:
            with conn.cursor() as cursor:
                cursor.execute(bounds)
                row = cursor.fetchone()
        finally:
            conn.close()
    lo, hi = (int(row[0]), int(row[1])) if row and row[0] is not None and row[1] is not None else (0, 0)
    streams = stream_parallelism().partitions(hi - lo + 1) if hi > lo else 1
    if streams <= 1:
        return [""]
    stride = (hi - lo + 1) // streams
    cuts = [lo + i * stride for i in range(1, streams)]
    ranges = [f"{key} < {cuts[0]} OR {key} IS NULL"]
    ranges += [f"{key} >= {a} AND {key} < {b}" for a, b in itertools.pairwise(cuts)]
    ranges.append(f"{key} >= {cuts[-1]}")
    return ranges


def stream_copy(plan: StreamPlan, progress: Progress | None = None) -> int:
    """Copy the plan's rows into its staging table as native streams; the number of rows copied.

    `progress(streams done, streams)` is called on the calling thread."""
    src_d, dest_d = dialects.get(plan.source.dialect), dialects.get(plan.dest.dialect)
    wire: StreamWire | None = dest_d.stream_wire
    assert wire is not None
    values = [src_d.stream_value_sql(f"q.{c.alias}", c.source, family_of(c.source), wire) for c in plan.columns]
    targets = [c.target for c in plan.columns]
    binary = [family_of(c.dest) == "binary" for c in plan.columns]
    if plan.row_number is not None:
        targets, binary = [plan.row_number, *targets], [False, *binary]

    def statement_for(path: str) -> str:
        return dest_d.stream_load_sql(plan.staging_sql, targets, binary, path)

    ranges = _key_ranges(plan, src_d)
    _, place_bits = row_number_bits(len(ranges))
    stop = threading.Event()

    def one(index: int, where: str) -> int:
        first = index << place_bits  # row numbers: the stream in the top bits, the row's place below
        numbered = plan.row_number is not None
        in_sql = numbered and src_d.row_number_sql() is not None
        items = [f"{first} + {src_d.row_number_sql()}", *values] if in_sql else values
        statement = src_d.stream_export_sql(plan.select_sql, items, where, wire)
        export = _Export(plan.source, statement, first if numbered and not in_sql else None, stop)
        try:
            return _load(plan.dest, statement_for, export)
        except BaseException:
            stop.set()
            raise

    done = 0
    with ThreadPoolExecutor(max_workers=len(ranges), thread_name_prefix="stream") as pool:
        futures = [pool.submit(one, i, where) for i, where in enumerate(ranges)]
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
            done += len(finished)
            if any(f.exception() is not None for f in finished):
                stop.set()
                wait(pending)
                break
            if progress is not None:
                progress(done, len(futures))
    errors = [e for e in (f.exception() for f in futures) if e is not None]
    if errors:
        first_error = next((e for e in errors if not isinstance(e, _Stopped)), errors[0])
        if isinstance(first_error, ReplicationError | connections.ConnectionLost):
            raise first_error  # a lost connection: retryable, the copy runs again from its start
        said = (str(first_error).strip().splitlines() or [type(first_error).__name__])[0]
        raise StreamCopyError(f"streaming {plan.source.name} into {plan.dest.name} failed: {said}") from first_error
    return sum(f.result() for f in futures)


# --- a full copy on the path the rule picks -----------------------------------------------------------------


@dataclass(frozen=True)
class FullCopyPlan:
    """A full copy into a staging table the caller created, whichever path moves it."""

    source: Server
    select_sql: str  # the rows, under the moved columns' aliases (read as subquery q)
    moved: tuple[Moved, ...]  # each column's alias (k0.. keys, v0.. the others) and destination type
    source_types: Mapping[str, LogicalType]  # alias -> the type the source delivers
    dest: Server
    staging_sql: str  # the staging table, qualified and quoted
    staging_columns: tuple[str, ...]  # the staging table's columns, in `moved` order
    row_number: str | None = None  # a staging column taking increasing row numbers (below 2**31)

    @classmethod
    def of_shape(
        cls,
        shape: SourceShape,
        moved: tuple[Moved, ...],
        dest: Server,
        staging_sql: str,
        staging_columns: tuple[str, ...],
    ) -> FullCopyPlan:
        """The rows of a snapshot's (or a published table's) shape, moved into a staging table."""
        types = dict(shape.output)
        return cls(
            source=shape.server,
            select_sql=noninc_select(dialects.get(shape.server.dialect), shape.sql, moved),
            moved=moved,
            source_types={m.alias: types[m.source] for m in moved},
            dest=dest,
            staging_sql=staging_sql,
            staging_columns=staging_columns,
        )


@dataclass(frozen=True)
class Copied:
    rows: int
    path: str  # STREAM or SPARK: results carry it


def copy_table(plan: FullCopyPlan, reporter: Reporter, progress: Progress | None = None) -> Copied:
    """Fill the plan's staging table as a native stream or on Spark, as copy_path says.

    Either way a lost connection is retryable (the job runs again from its start) and the staging table is
    the caller's to apply or drop; a table with one integer key is read in key ranges."""
    src_d = dialects.get(plan.source.dialect)
    read_types = {m.alias: read_type(src_d, plan.source_types[m.alias]) for m in plan.moved}
    keys = [m for m in plan.moved if m.is_key]
    split = keys[0].alias if len(keys) == 1 and read_types[keys[0].alias] == "BIGINT" else None
    columns = tuple(
        StreamColumn(m.alias, target, plan.source_types[m.alias], m.logical)
        for m, target in zip(plan.moved, plan.staging_columns, strict=True)
    )
    if copy_path(plan.source, plan.dest, columns) == STREAM:
        stream = StreamPlan(
            source=plan.source,
            select_sql=plan.select_sql,
            columns=columns,
            dest=plan.dest,
            staging_sql=plan.staging_sql,
            split_alias=split,
            row_number=plan.row_number,
        )
        with reporter.phase("stream_copy"):
            return Copied(stream_copy(stream, progress=progress), STREAM)
    spark_plan = spark_refresh.FullCopy(
        source=endpoint(plan.source, readonly=True),
        select_sql=plan.select_sql,
        custom_schema=", ".join(f"{m.alias} {read_types[m.alias]}" for m in plan.moved),
        partition_alias=split,
        moved=plan.moved,
        read_types=read_types,
        dest=endpoint(plan.dest),
        staging_sql=plan.staging_sql,
        staging_columns=plan.staging_columns,
        parallelism=spark_sizing.parallelism(),
        row_number=plan.row_number,
    )
    with reporter.phase("spark_session"):
        spark = spark_session()  # the job's (or this process's) session: made once, then handed out again
    with reporter.phase("spark_copy"):
        return Copied(spark_refresh.full_copy(spark, spark_plan, progress=progress), SPARK)
