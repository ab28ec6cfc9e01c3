"""Topic configs, change notifications and admin requests (ConfigEntityZNode,
IsrChangeNotificationSequenceZNode, PreferredReplicaElectionZNode, ReassignPartitionsZNode)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONFIG_TOPICS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    broker_path,
    decode_topic_config,
    encode_topic_config,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)
from tests.formats.admin_znodes import (
    ADMIN_DELETE_TOPICS,
    ADMIN_PREFERRED_REPLICA_ELECTION,
    ADMIN_REASSIGN_PARTITIONS,
    CONFIG_CHANGES,
    ISR_CHANGE_NOTIFICATION,
    TopicPartitionRef,
    decode_isr_change_notification,
    decode_preferred_replica_election,
    decode_reassign_partitions,
    encode_config_change,
    encode_isr_change_notification,
    encode_preferred_replica_election,
    encode_reassign_partitions,
)
from tests.formats.helpers import FAST, expect_format_error, int32s, legal_topics

CONFIG = topic_config_path("orders")
ISR_CHANGE = f"{ISR_CHANGE_NOTIFICATION}/isr_change_0000000007"


def as_bytes(doc: object) -> bytes:
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(topic_path("t"), "/brokers/topics/t", id="topic"),
        pytest.param(partitions_path("t"), "/brokers/topics/t/partitions", id="partitions"),
        pytest.param(partition_path("t", 3), "/brokers/topics/t/partitions/3", id="partition"),
        pytest.param(
            partition_state_path("t", 3), "/brokers/topics/t/partitions/3/state", id="state"
        ),
        pytest.param(broker_path(2), "/brokers/ids/2", id="broker"),
        pytest.param(topic_config_path("t"), "/config/topics/t", id="topic-config"),
        pytest.param(BROKER_IDS, "/brokers/ids", id="broker-ids"),
        pytest.param(BROKER_TOPICS, "/brokers/topics", id="broker-topics"),
        pytest.param(CONTROLLER, "/controller", id="controller"),
        pytest.param(CONTROLLER_EPOCH, "/controller_epoch", id="controller-epoch"),
        pytest.param(CLUSTER_ID, "/cluster/id", id="cluster-id"),
        pytest.param(CONFIG_TOPICS, "/config/topics", id="config-topics"),
        pytest.param(CONFIG_CHANGES, "/config/changes", id="config-changes"),
        pytest.param(ISR_CHANGE_NOTIFICATION, "/isr_change_notification", id="isr-change"),
        pytest.param(ADMIN_DELETE_TOPICS, "/admin/delete_topics", id="delete-topics"),
        pytest.param(
            ADMIN_PREFERRED_REPLICA_ELECTION, "/admin/preferred_replica_election", id="preferred"
        ),
        pytest.param(ADMIN_REASSIGN_PARTITIONS, "/admin/reassign_partitions", id="reassign"),
    ],
)
def test_paths(path: str, expected: str) -> None:
    assert path == expected


# -- /config/topics/<t> ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            {"version": 1, "config": {"min.insync.replicas": "2"}},
            {"min.insync.replicas": "2"},
            id="kafka-example",
        ),
        pytest.param({}, {}, id="created-as-empty-object"),
        pytest.param({"version": 1, "config": {}}, {}, id="empty-config"),
        pytest.param(
            {"config": {"cleanup.policy": "compact,delete", "retention.ms": "-1", "x": ""}},
            {"cleanup.policy": "compact,delete", "retention.ms": "-1", "x": ""},
            id="several",
        ),
    ],
)
def test_decode_topic_config(doc: dict[str, Any], expected: dict[str, str]) -> None:
    assert decode_topic_config(as_bytes(doc), source=CONFIG) == expected


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param(
            {"config": {"min.insync.replicas": 2}}, "config.min.insync.replicas", id="int"
        ),
        pytest.param({"config": {"a": None}}, "config.a", id="null-value"),
        pytest.param({"config": {"a": True}}, "config.a", id="bool-value"),
        pytest.param({"config": {"a": ["x"]}}, "config.a", id="list-value"),
        pytest.param({"config": {"a": {"b": "c"}}}, "config.a", id="object-value"),
        pytest.param({"config": ["a=b"]}, "config", id="config-list"),
        pytest.param({"config": "a=b"}, "config", id="config-string"),
    ],
)
def test_topic_config_values_must_be_strings(doc: dict[str, Any], field: str) -> None:
    expect_format_error(
        lambda: decode_topic_config(as_bytes(doc), source=CONFIG), source=CONFIG, field=field
    )


def test_encode_topic_config_and_change() -> None:
    assert encode_topic_config({"min.insync.replicas": "2"}) == (
        b'{"version":1,"config":{"min.insync.replicas":"2"}}'
    )
    assert encode_config_change("topics/orders") == b'{"version":2,"entity_path":"topics/orders"}'


@FAST
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=6))
def test_topic_config_round_trip(config: dict[str, str]) -> None:
    assert decode_topic_config(encode_topic_config(config), source=CONFIG) == config


# -- partition lists ---------------------------------------------------------------------------

PARTITION_LIST = {
    "version": 1,
    "partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 3}],
}
EXPECTED_REFS = [TopicPartitionRef("t", 0), TopicPartitionRef("u", 3)]

BAD_PARTITION_LISTS = [
    pytest.param({"version": 1}, "partitions", id="no-partitions"),
    pytest.param({"partitions": {"t": 0}}, "partitions", id="partitions-object"),
    pytest.param({"partitions": None}, "partitions", id="partitions-null"),
    pytest.param({"partitions": ["t-0"]}, "partitions", id="item-string"),
    pytest.param({"partitions": [None]}, "partitions", id="item-null"),
    pytest.param({"partitions": [{"partition": 0}]}, "topic", id="no-topic"),
    pytest.param({"partitions": [{"topic": 1, "partition": 0}]}, "topic", id="topic-number"),
    pytest.param({"partitions": [{"topic": "t"}]}, "partition", id="no-partition"),
    pytest.param(
        {"partitions": [{"topic": "t", "partition": "0"}]}, "partition", id="partition-string"
    ),
    pytest.param(
        {"partitions": [{"topic": "t", "partition": True}]}, "partition", id="partition-bool"
    ),
    pytest.param(
        {"partitions": [{"topic": "t", "partition": 0.0}]}, "partition", id="partition-float"
    ),
]


def test_decode_isr_change_notification() -> None:
    assert (
        decode_isr_change_notification(as_bytes(PARTITION_LIST), source=ISR_CHANGE) == EXPECTED_REFS
    )
    assert decode_isr_change_notification(b'{"version":1,"partitions":[]}', source=ISR_CHANGE) == []


@pytest.mark.parametrize(("doc", "field"), BAD_PARTITION_LISTS)
def test_decode_isr_change_notification_rejects(doc: dict[str, Any], field: str) -> None:
    expect_format_error(
        lambda: decode_isr_change_notification(as_bytes(doc), source=ISR_CHANGE),
        source=ISR_CHANGE,
        field=field,
    )


def test_decode_preferred_replica_election() -> None:
    assert decode_preferred_replica_election(as_bytes(PARTITION_LIST)) == EXPECTED_REFS


@pytest.mark.parametrize(("doc", "field"), BAD_PARTITION_LISTS)
def test_decode_preferred_replica_election_rejects(doc: dict[str, Any], field: str) -> None:
    expect_format_error(
        lambda: decode_preferred_replica_election(as_bytes(doc)),
        source=ADMIN_PREFERRED_REPLICA_ELECTION,
        field=field,
    )


def test_encode_partition_lists() -> None:
    expected = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    )
    assert encode_isr_change_notification(EXPECTED_REFS) == expected
    assert encode_preferred_replica_election(EXPECTED_REFS) == expected


REASSIGN = {
    "version": 1,
    "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 3]},
        {"topic": "t", "partition": 1, "replicas": []},
    ],
}


def test_decode_reassign_partitions() -> None:
    assert decode_reassign_partitions(as_bytes(REASSIGN)) == {
        TopicPartitionRef("t", 0): (1, 2, 3),
        TopicPartitionRef("t", 1): (),
    }


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        *BAD_PARTITION_LISTS,
        pytest.param(
            {"partitions": [{"topic": "t", "partition": 0}]}, "replicas", id="no-replicas"
        ),
        pytest.param(
            {"partitions": [{"topic": "t", "partition": 0, "replicas": [True]}]},
            "replicas",
            id="replica-bool",
        ),
        pytest.param(
            {"partitions": [{"topic": "t", "partition": 0, "replicas": "1,2"}]},
            "replicas",
            id="replicas-string",
        ),
    ],
)
def test_decode_reassign_partitions_rejects(doc: dict[str, Any], field: str) -> None:
    expect_format_error(
        lambda: decode_reassign_partitions(as_bytes(doc)),
        source=ADMIN_REASSIGN_PARTITIONS,
        field=field,
    )


def test_encode_reassign_partitions() -> None:
    assignment = {TopicPartitionRef("t", 0): [1, 2, 3]}
    assert encode_reassign_partitions(assignment) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}'
    )


refs = st.builds(TopicPartitionRef, legal_topics, int32s)


@FAST
@given(st.lists(refs, max_size=8))
def test_partition_list_round_trips(partitions: list[TopicPartitionRef]) -> None:
    assert (
        decode_isr_change_notification(
            encode_isr_change_notification(partitions), source=ISR_CHANGE
        )
        == partitions
    )
    assert (
        decode_preferred_replica_election(encode_preferred_replica_election(partitions))
        == partitions
    )


@FAST
@given(st.dictionaries(refs, st.lists(int32s, max_size=4).map(tuple), max_size=8))
def test_reassign_round_trip(assignment: dict[TopicPartitionRef, tuple[int, ...]]) -> None:
    assert decode_reassign_partitions(encode_reassign_partitions(assignment)) == assignment
