"""The embedded engine's queries, transpiled once (remediate/scan/duck_sql.py, `make duck-sql`):
the file is what sqlglot makes of the rules now, so a change of a rule, or of sqlglot, that
is not written down fails here; and a query the file lacks is still transpiled when run."""

from __future__ import annotations

from pathlib import Path

from remediate.scan import duck, duck_sql


def test_the_transpiled_queries_are_up_to_date() -> None:
    assert {duck.query_key(q): duck.transpile(q) for q in duck.queries()} == duck_sql.TRANSPILED
    written = Path(duck_sql.__file__).read_text()
    assert written == duck.transpiled_module(), "run `make duck-sql`"


def test_a_query_not_transpiled_yet_is_transpiled_when_run() -> None:
    query = "SELECT to_json(named_struct('a', 1), map('ignoreNullFields', 'false')) AS j"
    assert duck.query_key(query) not in duck_sql.TRANSPILED
    assert duck.duckdb_sql(query) == duck.transpile(query)
    assert "ignoreNullFields" not in duck.duckdb_sql(query)
