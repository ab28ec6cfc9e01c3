"""The fault-table plugin on plain data: the document it reads and rewrites is docs/faults.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import fault_table

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    fault_table.FaultRow("Faults during apply", "a broker dies", "halts (exit 5)", "tests/a.py::t"),
    fault_table.FaultRow("Security", "a | in a cell", "escaped", "tests/b.py::u"),
]


def document(table: str) -> str:
    return f"# Faults\n\nintro\n\n{fault_table.START}\n{table}\n{fault_table.END}\n\nafter\n"


def test_replace_then_read_back_gives_the_rendered_table() -> None:
    table = fault_table.render(ROWS)
    written = fault_table.replace_table(document("| old |"), table)
    assert fault_table.current_table(written) == table
    assert written.startswith("# Faults\n\nintro\n\n")
    assert written.endswith(f"{fault_table.END}\n\nafter\n")
    assert "a \\| in a cell" in table


def test_a_tampered_table_is_not_the_rendered_one() -> None:
    table = fault_table.render(ROWS)
    tampered = document(table.replace("halts (exit 5)", "carries on"))
    assert fault_table.current_table(tampered) != table


def test_a_document_without_markers_has_no_table_and_cannot_be_rewritten() -> None:
    assert fault_table.current_table("# Faults\n") == ""
    with pytest.raises(ValueError, match="exactly one"):
        fault_table.replace_table("# Faults\n", fault_table.render(ROWS))


def test_the_table_lives_in_docs_faults_md_and_the_makefile_names_it() -> None:
    faults = (ROOT / "docs" / "faults.md").read_text(encoding="utf-8")
    assert faults.count(fault_table.START) == 1
    assert faults.count(fault_table.END) == 1
    assert fault_table.START not in (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "FAULT_TABLE := docs/faults.md" in makefile
    assert "--fault-table-check=$(FAULT_TABLE)" in makefile
    assert "--fault-table=$(FAULT_TABLE)" in makefile
