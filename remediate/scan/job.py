"""The classification on Spark: the snapshot tables read with fixed schemas, then the rules of
remediate/scan/rules.py in two jobs: the facts of every replica in one pass, then the summary
of the findings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from remediate.collect.snapshot import TABLES
from remediate.scan.rules import (
    BROKERS_SQL,
    CLASSIFY_SQL,
    FACTS_SQL,
    OPTIONAL_TABLES,
    TABLE_COLUMNS,
    summary_sql,
)


def ddl(table: str) -> str:
    """A table's schema as Spark DDL (`cluster STRING, broker INT, ...`)."""
    return ", ".join(f"`{name}` {kind}" for name, kind in TABLE_COLUMNS[table])


def load_tables(spark: SparkSession, snapshot_dirs: Sequence[str]) -> dict[str, DataFrame]:
    """Read every table of every snapshot directory, with fixed schemas (no inference)."""
    tables: dict[str, DataFrame] = {}
    for name in TABLES:
        paths = [f"{d.rstrip('/')}/{name}.jsonl" for d in snapshot_dirs]
        if name in OPTIONAL_TABLES:
            paths = [p for p in paths if Path(p).exists()]
        if not paths:
            frame = spark.createDataFrame([], ddl(name))
        else:
            frame = spark.read.schema(ddl(name)).option("mode", "FAILFAST").json(paths)
        tables[name] = frame
        frame.createOrReplaceTempView(name)
    return tables


def classify(
    spark: SparkSession, snapshot_dirs: Sequence[str], *, include_ok: bool = False
) -> tuple[DataFrame, DataFrame]:
    """(summary, brokers) for the snapshots: the summary's rows are the counts per (cluster,
    broker, kind), each with its findings listed (OK ones only with `include_ok`).

    The one pass over the big tables (rules.FACTS_SQL) runs here, kept in memory as a local
    checkpoint; collecting the summary is the second and last job.
    """
    load_tables(spark, snapshot_dirs)
    spark.sql(FACTS_SQL).localCheckpoint(eager=True).createOrReplaceTempView("facts")
    spark.sql(CLASSIFY_SQL).createOrReplaceTempView("findings")
    return spark.sql(summary_sql(include_ok=include_ok)), spark.sql(BROKERS_SQL)
