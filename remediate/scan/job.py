"""The classification on Spark: the snapshot tables read with fixed schemas, then the rules of
remediate/scan/rules.py, in one Spark SQL query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from remediate.collect.snapshot import TABLES
from remediate.scan.rules import (
    BROKERS_SQL,
    CLASSIFY_SQL,
    COUNTS_SQL,
    OPTIONAL_TABLES,
    TABLE_COLUMNS,
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
    spark: SparkSession, snapshot_dirs: Sequence[str]
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(findings, counts per cluster/broker/kind, brokers) for the snapshots, lazily.

    The findings are cached: the counts and the rows a caller collects come from one pass.
    """
    load_tables(spark, snapshot_dirs)
    findings = spark.sql(CLASSIFY_SQL).cache()
    findings.createOrReplaceTempView("findings")
    return findings, spark.sql(COUNTS_SQL), spark.sql(BROKERS_SQL)
