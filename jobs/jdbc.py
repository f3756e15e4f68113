"""JDBC edges of the data plane: reads through safe-aliased subqueries, never raw table names."""

from __future__ import annotations

from urllib.parse import quote

from pyspark.sql import DataFrame, DataFrameReader, SparkSession

from replication_admin.engine.dialects import JdbcEndpoint

FETCH_SIZE = 20_000
ROWS_PER_PARTITION = 250_000  # 1M rows -> 4 partitions: measured best for PostgreSQL -> MariaDB on 2 cores
MAX_PARTITIONS = 8


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


def read_partitioned(
    spark: SparkSession,
    endpoint: JdbcEndpoint,
    select_sql: str,
    custom_schema: str,
    partition_alias: str | None,
) -> DataFrame:
    """Read a SELECT, split on an integer key when the table is large enough to profit."""
    if partition_alias is None:
        return read_query(spark, endpoint, select_sql, custom_schema)
    lo, hi = key_bounds(spark, endpoint, select_sql, partition_alias)
    span = (hi - lo + 1) if lo is not None and hi is not None else 0
    partitions = min(MAX_PARTITIONS, max(1, span // ROWS_PER_PARTITION))
    if lo is None or hi is None or partitions <= 1 or hi <= lo:
        return read_query(spark, endpoint, select_sql, custom_schema)
    return (
        _reader(spark, endpoint)
        .option("dbtable", f"({select_sql}) src")
        .option("customSchema", custom_schema)
        .option("partitionColumn", partition_alias)
        .option("lowerBound", str(lo))
        .option("upperBound", str(hi + 1))
        .option("numPartitions", str(partitions))
        .load()
    )
