"""Long lists of a plan summarised for people: the helpers on plain data, and a plan of many
partitions whose markdown and table stay short while its JSON keeps every name."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from remediate.plan.render import plan_markdown, plan_table
from remediate.plan.summary import (
    LIMIT,
    by_topic,
    file_lines,
    impact_lines,
    partitions_text,
    phase_groups,
    ranges,
)
from remediate.state import TopicPartition
from tests.plan.model import cluster, findings_for
from tests.plan.test_planner import plan_for


@pytest.mark.parametrize(
    ("numbers", "text"),
    [
        ([], ""),
        ([3], "3"),
        ([0, 1, 2, 3], "0-3"),
        ([9, 7, 8, 5, 0, 1, 2, 3, 3], "0-3, 5, 7-9"),
        ([10, 2], "2, 10"),
    ],
)
def test_ranges(numbers: list[int], text: str) -> None:
    assert ranges(numbers) == text


@given(st.sets(st.integers(min_value=0, max_value=500)))
def test_ranges_name_every_number_and_no_other(numbers: set[int]) -> None:
    named: set[int] = set()
    for part in filter(None, ranges(numbers).split(", ")):
        low, _, high = part.partition("-")
        named |= set(range(int(low), int(high or low) + 1))
    assert named == numbers


def tps(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def test_a_short_list_is_shown_whole_and_a_long_one_by_topic_with_counts() -> None:
    short = tps("orders", LIMIT)
    assert partitions_text(short) == ", ".join(str(tp) for tp in short)
    many = tps("orders", 50) + tps("audit", 3) + [TopicPartition("a-b-1", 7)]
    assert partitions_text(many) == "54 partitions: a-b-1 7; audit 0-2; orders 0-49"
    topics = [TopicPartition(f"t{n:02}", 0) for n in range(12)]
    assert by_topic(topics).endswith("t07 0; and 4 more topic(s), 4 partition(s)")


def test_files_by_log_dir_and_impact_by_what_happens() -> None:
    paths = [f"/d{n % 2}/orders-{n}/partition.metadata" for n in range(30)]
    assert file_lines(paths) == [
        "/d0: 15 partition.metadata file(s) of orders 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,"
        " 22, 24, 26, 28",
        "/d1: 15 partition.metadata file(s) of orders 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,"
        " 23, 25, 27, 29",
    ]
    impact = [f"orders-{n}: isr 3 -> 2 (min 2)" for n in range(25)] + ["x-0: isr 1 -> 0 (min 1)"]
    assert impact_lines(impact) == [
        "isr 3 -> 2 (min 2): 25 partitions: orders 0-24",
        "isr 1 -> 0 (min 1): x-0",
    ]
    phases = {tp: ("step 1",) for tp in tps("orders", 30)}
    assert phase_groups(phases) == [("30 partitions: orders 0-29", ("step 1",))]


def test_a_plan_of_many_partitions_reads_short_and_keeps_every_name_in_json() -> None:
    count = 600
    topics = {"orders": {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(count)}}
    state = cluster(brokers=[1, 2, 3], topics=topics, controller=3)
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for p in range(count) for b in (1, 2, 3)}
    plan = plan_for(state, findings_for(state, kinds))
    markdown = plan_markdown(plan)
    assert len(markdown.splitlines()) < 150, len(markdown.splitlines())
    assert "/data/1/kafka: 600 partition.metadata file(s) of orders 0-599" in markdown
    console = Console(file=io.StringIO(), width=160, color_system=None, record=True)
    console.print(plan_table(plan))
    assert len(console.export_text().splitlines()) < 80
    document = json.loads(json.dumps(plan.to_json()))
    for step in document["steps"]:
        assert len(step["files"]) == count and len(step["partitions"]) == count
