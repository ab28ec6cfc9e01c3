"""The classification on DuckDB, in the tool's own process: the rules of remediate/scan/rules.py,
the same Spark SQL transpiled to DuckDB's dialect with sqlglot, on the same snapshot tables read
with the same columns. For `check` and small clusters, where starting a JVM costs more than the
whole classification; tests/scan/test_engines.py proves both engines give identical findings.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from remediate.collect.snapshot import TABLES
from remediate.errors import ScanError
from remediate.scan.findings import unpack_summary
from remediate.scan.rules import (
    BROKERS_SQL,
    CLASSIFY_SQL,
    FACTS_SQL,
    OPTIONAL_TABLES,
    TABLE_COLUMNS,
    summary_sql,
)

DUCKDB_TYPES = {
    "STRING": "VARCHAR",
    "INT": "INTEGER",
    "BIGINT": "BIGINT",
    "BOOLEAN": "BOOLEAN",
    "ARRAY<INT>": "INTEGER[]",
}

Rows = list[dict[str, Any]]


def _without_json_options(node: exp.Expression) -> exp.Expression:
    """Spark's to_json needs `ignoreNullFields: false` to keep a null field; DuckDB's to_json
    keeps them always and takes no options."""
    if isinstance(node, exp.JSONFormat) and node.args.get("options") is not None:
        node.set("options", None)
    return node


@functools.cache
def duckdb_sql(spark_sql: str) -> str:
    """`spark_sql` in DuckDB's dialect."""
    tree = sqlglot.parse_one(spark_sql, read="spark").transform(_without_json_options)
    return tree.sql(dialect="duckdb")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns(table: str) -> str:
    """The table's columns as read_json's `columns` struct literal."""
    pairs = (f"{_quote(name)}: {_quote(DUCKDB_TYPES[kind])}" for name, kind in TABLE_COLUMNS[table])
    return "{" + ", ".join(pairs) + "}"


def _create_table(con: duckdb.DuckDBPyConnection, table: str, paths: Sequence[str]) -> None:
    if not paths:
        columns = ", ".join(f'"{n}" {DUCKDB_TYPES[k]}' for n, k in TABLE_COLUMNS[table])
        con.execute(f'CREATE TABLE "{table}" ({columns})')
        return
    files = "[" + ", ".join(_quote(p) for p in paths) + "]"
    con.execute(
        f'CREATE TABLE "{table}" AS SELECT * FROM read_json({files},'  # noqa: S608 - quoted
        f" format = 'newline_delimited', columns = {_columns(table)})"
    )


def load_tables(con: duckdb.DuckDBPyConnection, snapshot_dirs: Sequence[Path]) -> None:
    """Every table of every snapshot directory, as a table of `con` with the fixed columns."""
    for table in TABLES:
        paths = [str(d / f"{table}.jsonl") for d in snapshot_dirs]
        if table in OPTIONAL_TABLES:
            paths = [p for p in paths if Path(p).exists()]
        _create_table(con, table, paths)


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> Rows:
    cursor = con.execute(sql)
    names = [column[0] for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def classify(snapshot_dirs: Sequence[Path], *, include_ok: bool) -> tuple[Rows, Rows, Rows]:
    """(finding rows, counts per cluster/broker/kind, broker rows) for the snapshots; OK
    replicas' rows only with `include_ok` (they are counted either way)."""
    con = duckdb.connect(":memory:")
    try:
        load_tables(con, snapshot_dirs)
        con.execute(f"CREATE TABLE facts AS {duckdb_sql(FACTS_SQL)}")
        con.execute(f"CREATE TABLE findings AS {duckdb_sql(CLASSIFY_SQL)}")
        summary = _rows(con, duckdb_sql(summary_sql(include_ok=include_ok)))
        findings, counts = unpack_summary(summary)
        return findings, counts, _rows(con, duckdb_sql(BROKERS_SQL))
    except duckdb.Error as exc:
        raise ScanError(f"classifying {', '.join(map(str, snapshot_dirs))}: {exc}") from exc
    finally:
        con.close()
