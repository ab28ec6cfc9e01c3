"""The key order of Kafka's JSON maps (remediate/formats/scala_order.py), held to znodes real
Kafka wrote (tests/formats/data/scala_key_order.json, recorded from real Kafka 2.8.2 and Kafka
1.0.2's TopicCommand; tests/sandbox/test_incident.py compares with live ones on real Kafka)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.scala_order import (
    java_string_hash,
    legacy_partition_order,
    mutable_hash_map_order,
)
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import TopicAssignment, encode_topic, encode_topic_legacy

RECORDED = json.loads((Path(__file__).parent / "data" / "scala_key_order.json").read_text())
# The partition counts recorded, as the JSON keys them (decimal strings), smallest first.
COUNTS_2_8_2: list[str] = sorted(RECORDED["kafka_2_8_2_partition_keys"], key=int)
COUNTS_1_0_2: list[str] = sorted(RECORDED["kafka_1_0_2_partition_keys"], key=int)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("0", 48), ("10", 1567), ("version", 351608024), ("topic_id", 3337675307)],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@pytest.mark.parametrize("count", COUNTS_2_8_2)
def test_partition_keys_in_kafka_2_8_2s_order(count: str) -> None:
    expected = RECORDED["kafka_2_8_2_partition_keys"][count]
    assert mutable_hash_map_order(str(p) for p in range(int(count))) == expected


def test_topic_znode_keys_in_kafka_2_8_2s_order() -> None:
    keys = ["version", "partitions", "adding_replicas", "removing_replicas", "topic_id"]
    assert mutable_hash_map_order(keys, initial_table=8) == RECORDED["kafka_2_8_2_topic_znode_keys"]
    data = encode_topic(TopicAssignment({0: (1,)}, TopicId.random()))
    assert list(json.loads(data)) == RECORDED["kafka_2_8_2_topic_znode_keys"]


@pytest.mark.parametrize("count", COUNTS_1_0_2)
def test_legacy_partition_keys_in_kafka_1_0_2s_order(count: str) -> None:
    expected = RECORDED["kafka_1_0_2_partition_keys"][count]
    assert [str(p) for p in legacy_partition_order(int(count))] == expected


def test_the_legacy_stand_in_writes_kafka_1_0_2s_bytes() -> None:
    assert encode_topic_legacy({p: (1, 2, 3) for p in range(6)}) == (
        RECORDED["kafka_1_0_2_example"].encode()
    )


@given(st.lists(st.text(max_size=8), max_size=40))
def test_an_order_is_a_permutation_of_the_keys(keys: list[str]) -> None:
    assert sorted(mutable_hash_map_order(keys)) == sorted(set(keys))


@given(st.integers(min_value=0, max_value=300))
def test_a_legacy_order_is_a_permutation_of_the_partitions(count: int) -> None:
    assert sorted(legacy_partition_order(count)) == list(range(count))
