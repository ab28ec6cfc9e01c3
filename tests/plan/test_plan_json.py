"""The typed plan and its JSON, over generated plans: whatever the planner can hold goes out
through `to_json` and comes back through `plan_from_json` equal, and goes out again as the same
bytes. The names are Kafka's: a topic name may hold '-' and digits, so a partition's number is
the one after its name's last '-'."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.plan import (
    Candidate,
    FileKey,
    Fingerprint,
    Plan,
    Prediction,
    RestartStep,
    RestoreStep,
    canonical,
    plan_from_json,
    with_digest,
)
from remediate.playbook import Action
from remediate.state import ReplicaRef, TopicPartition

# Kafka's legal topic names: [a-zA-Z0-9._-], at most 249 characters.
TOPICS = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True)
NUMBERS = st.integers(0, 100_000)
PARTITIONS = st.builds(TopicPartition, TOPICS, NUMBERS)
BROKERS = st.integers(0, 2**31 - 1)
REPLICAS = st.builds(ReplicaRef, BROKERS, PARTITIONS)
TEXT = st.text(max_size=20)
IDS = st.from_regex(r"[A-Za-z0-9_-]{22}", fullmatch=True)
PHASES = st.lists(st.sampled_from(["now", "step 1", "after step 1", "step 2"]), max_size=3)


def few(
    elements: st.SearchStrategy[object], size: int = 4
) -> st.SearchStrategy[tuple[object, ...]]:
    return st.lists(elements, max_size=size).map(tuple)


predictions = st.builds(
    Prediction, few(PARTITIONS), few(PARTITIONS), few(PARTITIONS), few(PARTITIONS)
)
windows = st.dictionaries(PARTITIONS, PHASES.map(tuple), max_size=4)
restarts = st.builds(
    RestartStep,
    broker=BROKERS,
    reason=TEXT,
    partitions=few(PARTITIONS),
    files=few(TEXT),
    actions=few(st.sampled_from(Action)),
    impact=few(TEXT),
    is_controller=st.booleans(),
    order_reason=TEXT,
    predicted=predictions,
)
restores = st.builds(
    RestoreStep,
    topic=TOPICS,
    topic_id=IDS,
    zk_topic_id=st.none() | IDS,
    znode_version=st.integers(0, 2**31 - 1),
    reelect=st.booleans(),
    reason=TEXT,
    partitions=few(PARTITIONS),
    actions=few(st.sampled_from(Action)),
    impact=few(TEXT),
    playbook=TEXT,
    rolled_later=few(REPLICAS),
    predicted=predictions,
    mint=st.booleans(),
)
candidates = st.builds(
    Candidate,
    name=TEXT,
    chosen=st.booleans(),
    summary=TEXT,
    targets=st.dictionaries(TOPICS, IDS, max_size=3),
    restarts=st.integers(0, 100),
    newly_unavailable=few(PARTITIONS),
    unavailable_phases=st.integers(0, 100),
    windows=windows,
    converges=st.booleans(),
    blocked=st.none() | TEXT,
)
file_keys = st.builds(FileKey, BROKERS, st.from_regex(r"/[a-z0-9/._:-]{1,30}", fullmatch=True))
fingerprints = st.builds(
    Fingerprint,
    cluster_id=st.none() | TEXT,
    brokers=few(BROKERS),
    controller_epoch=st.none() | st.integers(0, 10**6),
    topics=st.dictionaries(TOPICS, st.integers(0, 10**6), max_size=3),
    files=st.dictionaries(file_keys, st.none() | IDS, max_size=3),
)
gates = st.dictionaries(
    TEXT,
    st.dictionaries(TEXT, st.integers(0, 10**6) | st.floats(0, 1e6), max_size=3),
    max_size=2,
)
plans = st.builds(
    Plan,
    cluster=TEXT,
    cluster_id=st.none() | TEXT,
    playbook=TEXT,
    playbook_version=st.integers(1, 100),
    controller=st.none() | BROKERS,
    fingerprint=fingerprints,
    steps=few(st.one_of(restarts, restores), 3),
    skipped=few(st.tuples(BROKERS, TEXT)),
    refusals=few(TEXT),
    allow_unsafe=st.booleans(),
    estimate_s=st.floats(0, 1e9),
    created_at=st.none() | TEXT,
    notes=few(TEXT),
    gates=gates,
    candidates=few(candidates, 2),
    newly_unavailable=windows,
    unavailable_now=few(PARTITIONS),
).map(with_digest)


@settings(max_examples=300, deadline=None)
@given(plans)
def test_a_plan_comes_back_from_its_json_equal(plan: Plan) -> None:
    document = plan.to_json()
    again = plan_from_json(json.loads(json.dumps(document)))
    assert again == plan
    assert again.digest == plan.digest


@settings(max_examples=300, deadline=None)
@given(plans)
def test_a_plan_read_back_writes_the_same_bytes(plan: Plan) -> None:
    document = plan.to_json()
    again = plan_from_json(json.loads(json.dumps(document))).to_json()
    assert json.dumps(again) == json.dumps(document)
    assert canonical(again) == canonical(document)
    assert plan.to_json() == document, "to_json is not stable"


@given(PARTITIONS)
def test_a_partition_name_reads_back_as_its_partition(tp: TopicPartition) -> None:
    assert TopicPartition.parse(str(tp)) == tp
    assert str(tp) == f"{tp.topic}-{tp.partition}"


@given(REPLICAS)
def test_a_replica_reads_back_as_itself(replica: ReplicaRef) -> None:
    assert ReplicaRef.parse(str(replica)) == replica
    assert (
        str(replica)
        == f"{replica.partition.topic}-{replica.partition.partition} on broker {replica.broker}"
    )


@given(st.text())
def test_a_name_without_a_partition_number_is_refused(text: str) -> None:
    if re.fullmatch(r".+-[0-9]+", text, flags=re.DOTALL | re.ASCII):
        assert TopicPartition.parse(text) == TopicPartition(
            text.rpartition("-")[0], int(text.rpartition("-")[2])
        )
    else:
        with pytest.raises(ValueError, match="is not a partition name"):
            TopicPartition.parse(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-3", TopicPartition("orders", 3)),
        ("orders-2024-07-11", TopicPartition("orders-2024-07", 11)),
        ("a--3-10", TopicPartition("a--3", 10)),
        ("-1-0", TopicPartition("-1", 0)),
        ("9-9", TopicPartition("9", 9)),
    ],
)
def test_the_partition_is_the_number_after_the_last_dash(
    name: str, expected: TopicPartition
) -> None:
    assert TopicPartition.parse(name) == expected


@pytest.mark.parametrize("name", ["orders", "orders-", "-3", "orders-x", "orders-٣", "orders- 3"])
def test_what_is_not_a_partition_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a partition name"):
        TopicPartition.parse(name)


@pytest.mark.parametrize(
    "text", ["orders-3", "orders-3 on broker", "orders-3 on broker x", "orders on broker 3"]
)
def test_what_is_not_a_replica_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a"):
        ReplicaRef.parse(text)


def test_a_plan_naming_an_action_outside_the_vocabulary_is_not_read() -> None:
    step = RestartStep(3, "r", (), (), (Action.STOP,), (), is_controller=False)
    plan = with_digest(
        Plan("c", None, "p", 1, None, Fingerprint(None, (), None), (step,), (), (), False, 0.0)
    )
    document = plan.to_json()
    document["steps"][0]["actions"] = ["stop", "reboot"]
    with pytest.raises(ValueError, match="'reboot' is not a valid Action"):
        plan_from_json(document)
