"""The fault table in docs/faults.md, generated from the tests that prove it.

A test that proves how the operator behaves under a fault carries
`@pytest.mark.fault(area, fault, outcome)`. `pytest -m fault --fault-table=docs/faults.md`
runs them and, only if every one passed, writes the table between the document's marker
lines; `pytest --collect-only --fault-table-check=docs/faults.md` fails when the document's
table is not the one the markers give (so the table cannot drift from the suite without a test
failing). The Makefile's `fault-table` and `test` targets name the document.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pytest

START = "<!-- fault-table:start -->"
END = "<!-- fault-table:end -->"
AREAS = ("Faults during apply", "Bad input", "Security")


@dataclass(frozen=True)
class FaultRow:
    area: str
    fault: str
    outcome: str
    test: str


def rows_of(items: Iterable[pytest.Item]) -> list[FaultRow]:
    """One row per marked test (parametrized copies that share a fault become one row)."""
    rows: dict[tuple[str, str], FaultRow] = {}
    # In the order the tests are written (file, line), whatever order they run in.
    for item in sorted(items, key=lambda i: (i.location[0], i.location[1] or 0)):
        marker = item.get_closest_marker("fault")
        if marker is None:
            continue
        area, fault, outcome = marker.args
        if area not in AREAS:
            raise pytest.UsageError(f"{item.nodeid}: fault area {area!r} is not one of {AREAS}")
        test = item.nodeid.split("[", 1)[0]
        rows.setdefault((area, fault), FaultRow(area, fault, outcome, test))
    return sorted(rows.values(), key=lambda r: AREAS.index(r.area))


def render(rows: list[FaultRow]) -> str:
    lines = ["| Area | Fault | What the operator does | Proved by |", "|---|---|---|---|"]
    for row in rows:
        cells = [row.area, row.fault, row.outcome, f"`{row.test}`"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def replace_table(document: str, table: str) -> str:
    if document.count(START) != 1 or document.count(END) != 1:
        raise ValueError(f"the document must hold exactly one {START} and one {END} line")
    head, rest = document.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}\n{END}{tail}"


def current_table(document: str) -> str:
    if START not in document or END not in document:
        return ""
    return document.split(START, 1)[1].split(END, 1)[0].strip("\n")
