"""JDBC edges of the data plane: reads through safe-aliased subqueries, never raw table names.

How wide a read or a write goes is decided here, from the cluster and the data (`Parallelism`,
`partition_count`): enough partitions to keep every core of the cluster busy on a large table, never
partitions so small that opening their connections costs more than they move, and never more at once
against one server than its connection cap allows (reads and writes alike)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from pyspark.sql import DataFrame, DataFrameReader, SparkSession

from replication_admin.engine.dialects import JdbcEndpoint

FETCH_SIZE = 20_000
# A partition is one JDBC connection and one query: below this many rows the connection and the task
# cost more than the rows they move in parallel.
MIN_ROWS_PER_PARTITION = 50_000
# Two tasks per core keep every core busy while another task waits on its server (measured on 2 cores:
# 1M rows PostgreSQL -> MariaDB in 4 partitions beat 2; see docs/design-notes.md, Parallelism).
TASKS_PER_CORE = 2
# Very large tables are split further (each task then holds its server less long and retries less).
MAX_ROWS_PER_PARTITION = 2_000_000
DEFAULT_CONNECTIONS_PER_SERVER = 4


@dataclass(frozen=True)
class Parallelism:
    """The cluster's cores, and how many connections a job may hold at once on each server."""

    cores: int = 2
    connections: int = DEFAULT_CONNECTIONS_PER_SERVER

    def partitions(self, rows: int) -> int:
        return partition_count(rows, self.cores, self.connections)


DEFAULT_PARALLELISM = Parallelism()


def partition_count(rows: int, cores: int, connections: int) -> int:
    """How many partitions to read `rows` rows (or a key range that wide) in."""
    if rows < 2 * MIN_ROWS_PER_PARTITION:
        return 1
    wanted = max(max(cores, 1) * TASKS_PER_CORE, -(-rows // MAX_ROWS_PER_PARTITION))
    return max(1, min(wanted, rows // MIN_ROWS_PER_PARTITION, max(connections, 1)))


def jdbc_options(endpoint: JdbcEndpoint) -> dict[str, str]:
    """The url and properties of an endpoint as Spark options.

    Spark Connect sends option names lower-cased, and the JDBC drivers read their properties case-sensitively
    (readOnly, reWriteBatchedInserts, currentSchema, sessionVariables, useBulkStmts): such properties go into
    the URL, where the drivers read them whichever way the session was made. PostgreSQL's driver decodes URL
    parameters; MariaDB's takes them as written."""
    url, options = endpoint.url, {}
    in_url: list[str] = []
    for key, value in endpoint.properties.items():
        if key == key.lower() or not url.startswith(("jdbc:postgresql:", "jdbc:mysql:", "jdbc:mariadb:")):
            options[key] = value
        elif url.startswith("jdbc:postgresql:"):
            in_url.append(f"{key}={quote(value, safe='')}")
        elif "&" in value:
            raise ValueError(f"JDBC property {key} of {url} cannot contain '&'")
        else:
            in_url.append(f"{key}={value}")
    if in_url:
        url += ("&" if "?" in url else "?") + "&".join(in_url)
    return {"url": url, **options}


def _reader(spark: SparkSession, endpoint: JdbcEndpoint) -> DataFrameReader:
    reader = spark.read.format("jdbc")
    for key, value in jdbc_options(endpoint).items():
        reader = reader.option(key, value)
    return reader.option("fetchsize", str(FETCH_SIZE))


def read_query(
    spark: SparkSession, endpoint: JdbcEndpoint, select_sql: str, custom_schema: str | None = None
) -> DataFrame:
    """Read the rows of a SELECT (built by the engine from quoted identifiers)."""
    reader = _reader(spark, endpoint).option("dbtable", f"({select_sql}) src")
    if custom_schema:
        reader = reader.option("customSchema", custom_schema)
    return reader.load()


def key_bounds(
    spark: SparkSession, endpoint: JdbcEndpoint, select_sql: str, alias: str
) -> tuple[int | None, int | None]:
    """(min, max) of an integer key of a subquery, to split a large read into partitions.

    MIN and MAX of a key are index lookups; a COUNT(*) would scan the table, so the key range stands in
    for the row count when choosing how many partitions to read."""
    bounds_sql = f"SELECT MIN({alias}) AS lo, MAX({alias}) AS hi FROM ({select_sql}) b"
    row = read_query(spark, endpoint, bounds_sql, "lo BIGINT, hi BIGINT").collect()[0]
    return row["lo"], row["hi"]


@dataclass(frozen=True)
class Read:
    """A DataFrame read over JDBC and the number of partitions it was read in (at most)."""

    df: DataFrame
    partitions: int


def read_by_key_range(
    spark: SparkSession,
    endpoint: JdbcEndpoint,
    select_sql: str,
    custom_schema: str,
    partition_alias: str | None,
    parallelism: Parallelism,
) -> Read:
    """Read a SELECT, split on ranges of an integer key when the table is large enough to profit."""
    if partition_alias is None:
        return Read(read_query(spark, endpoint, select_sql, custom_schema), 1)
    lo, hi = key_bounds(spark, endpoint, select_sql, partition_alias)
    span = (hi - lo + 1) if lo is not None and hi is not None else 0
    partitions = parallelism.partitions(span)
    if lo is None or hi is None or partitions <= 1 or hi <= lo:
        return Read(read_query(spark, endpoint, select_sql, custom_schema), 1)
    df = (
        _reader(spark, endpoint)
        .option("dbtable", f"({select_sql}) src")
        .option("customSchema", custom_schema)
        .option("partitionColumn", partition_alias)
        .option("lowerBound", str(lo))
        .option("upperBound", str(hi + 1))
        .option("numPartitions", str(partitions))
        .load()
    )
    return Read(df, partitions)


def read_partitioned(
    spark: SparkSession,
    endpoint: JdbcEndpoint,
    select_sql: str,
    custom_schema: str,
    partition_alias: str | None,
    parallelism: Parallelism | None = None,
) -> DataFrame:
    """Read a SELECT, split on an integer key when the table is large enough to profit."""
    return read_by_key_range(
        spark, endpoint, select_sql, custom_schema, partition_alias, parallelism or DEFAULT_PARALLELISM
    ).df


def modulo_predicates(alias: str, partitions: int) -> list[str]:
    """WHERE conditions that split rows by an integer column into `partitions` disjoint sets covering all
    of them (ABS keeps negative keys in range; `%` is the same operator in every live dialect)."""
    return [f"ABS({alias} % {partitions}) = {i}" for i in range(partitions)]


def read_split(
    spark: SparkSession,
    endpoint: JdbcEndpoint,
    select_sql: str,
    custom_schema: str,
    split_alias: str | None,
    rows: int,
    parallelism: Parallelism,
) -> Read:
    """Read a SELECT of about `rows` rows (a count the caller already has: a log window, a batch of
    changes), split by an integer column modulo the partition count when there are enough rows.

    Unlike a key range, a modulo split needs no bounds query and stays even on sparse or clustered keys
    (a log window holds scattered keys)."""
    partitions = parallelism.partitions(rows) if split_alias is not None else 1
    if split_alias is None or partitions <= 1:
        return Read(read_query(spark, endpoint, select_sql, custom_schema), 1)
    reader = _reader(spark, endpoint).option("customSchema", custom_schema)
    df = reader.jdbc(endpoint.url, f"({select_sql}) src", predicates=modulo_predicates(split_alias, partitions))
    return Read(df, partitions)
