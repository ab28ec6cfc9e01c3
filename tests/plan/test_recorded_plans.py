"""Plans as the planner wrote them before its model became typed, read back and written again
byte for byte.

`tests/plan/data/plans.jsonl` holds one plan document per line, recorded from the planner's
and the executor's tests, from the plan files of the sandbox's runs, and from plans made on
purpose with topic names that hold '-' and digits and with topics of more than ten partitions
(where names and numbers sort apart): one of each shape the suite makes. With each, its
digest and the sha256 of its markdown and table renderings as they were then (made again
only when a rendering changed on purpose, after reading the diff: the timeouts lines the
renderings gained are the only lines that differ; one plan was recorded again with the
min.insync.replicas it resolved, its lines the only new ones; one plan's renderings again when
lists past twenty partitions became summaries (remediate/plan/summary.py): its partitions to
approve and its impact lines, grouped by what they say). Every document
must come back from `plan_from_json` typed, and go out again through `to_json` as the same
bytes, in every form the plan is written (the plan file, the canonical form its digest
covers, plain `json.dumps`), with the same digest and the same renderings.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from remediate.plan import Plan, RestartStep, RestoreStep, canonical, compute_digest
from remediate.plan.model import plan_from_json
from remediate.plan.render import plan_markdown, plan_table
from remediate.playbook import Action
from remediate.state import ReplicaRef, TopicPartition

CORPUS = Path(__file__).parent / "data" / "plans.jsonl"
ENTRIES: list[dict[str, Any]] = [
    json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()
]


def entry_id(entry: dict[str, Any]) -> str:
    digest: str = entry["digest"]
    return digest[:12]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def table_text(plan: Plan) -> str:
    """The table as the recording rendered it: plain text, 160 columns."""
    console = Console(file=io.StringIO(), width=160, color_system=None, record=True)
    console.print(plan_table(plan))
    return console.export_text()


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_a_recorded_plan_reads_back_typed_and_writes_the_same_bytes(entry: dict[str, Any]) -> None:
    document = entry["document"]
    plan = plan_from_json(document)
    assert plan.digest == entry["digest"] == document["digest"]
    again = plan.to_json()
    # Every form the plan is written in: the plan file (write_plan, the journal's plan.json),
    # the canonical JSON its digest covers, and plain json.dumps (key order included).
    assert json.dumps(again, indent=2, sort_keys=True) == json.dumps(
        document, indent=2, sort_keys=True
    )
    assert canonical(again) == canonical(document)
    assert json.dumps(again) == json.dumps(document)
    assert compute_digest(plan.body()) == entry["digest"]
    assert plan_from_json(again) == plan


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_a_recorded_plan_renders_as_it_did(entry: dict[str, Any]) -> None:
    plan = plan_from_json(entry["document"])
    assert sha256(plan_markdown(plan)) == entry["markdown_sha256"]
    assert sha256(table_text(plan)) == entry["table_sha256"]


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_inside_a_plan_every_partition_replica_and_action_is_typed(
    entry: dict[str, Any],
) -> None:
    plan = plan_from_json(entry["document"])
    predicted = [s.predicted for s in plan.steps]
    partitions = [
        *(tp for s in plan.steps for tp in s.partitions),
        *(tp for p in predicted for tp in (*p.during, *p.after, *p.out_of_isr_after)),
        *(tp for p in predicted for tp in p.last_in_isr),
        *plan.unavailable_now,
        *plan.newly_unavailable,
        *(tp for c in plan.candidates for tp in (*c.newly_unavailable, *c.windows)),
        *(r.partition for s in plan.restores for r in s.rolled_later),
    ]
    assert all(type(tp) is TopicPartition for tp in partitions)
    assert all(isinstance(r, ReplicaRef) for s in plan.restores for r in s.rolled_later)
    assert all(type(a) is Action for s in plan.steps for a in s.actions)


def test_the_corpus_holds_every_kind_of_plan() -> None:
    plans = [plan_from_json(e["document"]) for e in ENTRIES]
    steps = [s for p in plans for s in p.steps]
    names = {str(tp) for s in steps for tp in s.partitions}
    assert any(isinstance(s, RestartStep) for s in steps)
    assert any(isinstance(s, RestoreStep) and s.reelect for s in steps)
    assert any(isinstance(s, RestoreStep) and not s.reelect for s in steps)
    assert any(isinstance(s, RestoreStep) and s.mint for s in steps)
    assert any(isinstance(s, RestoreStep) and s.rolled_later for s in steps)
    assert any(p.candidates for p in plans) and any(p.newly_unavailable for p in plans)
    assert any(p.unavailable_now for p in plans) and any(p.refused for p in plans)
    # The min.insync.replicas a plan resolved, from the brokers and from a topic override.
    assert any(p.min_isr is not None and p.min_isr_topics for p in plans)
    assert any(s.predicted.last_in_isr for s in steps)
    # Topic names holding '-' and digits, and partitions whose names sort apart from their
    # numbers ("t-10" before "t-2").
    assert {"a-1-2-0", "orders-2024-07-11", "-1-0", "a--3-10"} <= names
    assert any(
        [str(tp) for tp in s.partitions] == sorted(str(tp) for tp in s.partitions)
        and list(s.partitions) != sorted(s.partitions)
        for s in steps
        if isinstance(s, RestartStep)
    )
