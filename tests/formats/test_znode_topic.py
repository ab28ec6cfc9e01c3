"""`/brokers/topics/<t>` and its partition state znodes (TopicZNode, TopicPartitionStateZNode)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    NO_LEADER,
    PartitionState,
    TopicAssignment,
    decode_partition_state,
    decode_topic,
    encode_partition_state,
    encode_topic,
    encode_topic_legacy,
    partition_state_path,
    topic_path,
    with_topic_id,
)
from tests.formats.helpers import (
    FAST,
    OTHER_ID_TEXT,
    TOPIC_ID,
    TOPIC_ID_TEXT,
    expect_format_error,
    int32s,
    topic_ids,
)

TOPIC = topic_path("orders")
STATE = partition_state_path("orders", 0)


def as_bytes(doc: object) -> bytes:
    return json.dumps(doc).encode()


# -- topic znode -------------------------------------------------------------------------------

V3 = {
    "version": 3,
    "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
    "adding_replicas": {},
    "removing_replicas": {},
    "topic_id": TOPIC_ID_TEXT,
}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            V3,
            TopicAssignment({0: (1, 2, 3), 1: (2, 3, 1)}, TOPIC_ID, {}, {}, 3),
            id="v3-with-topic-id",
        ),
        pytest.param(
            {k: v for k, v in V3.items() if k != "topic_id"},
            TopicAssignment({0: (1, 2, 3), 1: (2, 3, 1)}, None, {}, {}, 3),
            id="v3-without-topic-id",
        ),
        pytest.param(
            {
                "version": 2,
                "partitions": {"0": [1, 2]},
                "adding_replicas": {"0": [3]},
                "removing_replicas": {"0": [1]},
            },
            TopicAssignment({0: (1, 2)}, None, {0: (3,)}, {0: (1,)}, 2),
            id="v2-adding-removing",
        ),
        pytest.param(
            {"version": 1, "partitions": {"0": [1, 2], "1": [2, 1]}},
            TopicAssignment({0: (1, 2), 1: (2, 1)}, None, {}, {}, 1),
            id="v1-legacy-client",
        ),
        pytest.param({"partitions": {"0": [1]}}, TopicAssignment({0: (1,)}), id="no-version-field"),
        pytest.param(
            {"version": "3", "partitions": {}}, TopicAssignment({}), id="version-ignored-if-odd"
        ),
        pytest.param(
            {"version": True, "partitions": {}}, TopicAssignment({}), id="version-bool-ignored"
        ),
        pytest.param(
            {"partitions": {"0": []}, "future_field": [1, {"x": None}]},
            TopicAssignment({0: ()}),
            id="unknown-fields-and-empty-replicas",
        ),
        pytest.param(
            {"partitions": {"+1": [1], "007": [2], "٣": [3], "-1": [4]}},
            TopicAssignment({1: (1,), 7: (2,), 3: (3,), -1: (4,)}),
            id="partition-keys-are-java-ints",
        ),
        pytest.param(
            {"partitions": {"0": [-1, 2147483647, -2147483648]}},
            TopicAssignment({0: (-1, 2**31 - 1, -(2**31))}),
            id="replica-int-range",
        ),
        pytest.param(
            {"partitions": {"0": [1]}, "topic_id": TOPIC_ID_TEXT + "=="},
            TopicAssignment({0: (1,)}, TOPIC_ID),
            id="padded-topic-id",
        ),
    ],
)
def test_decode_topic(doc: dict[str, Any], expected: TopicAssignment) -> None:
    assert decode_topic(as_bytes(doc), source=TOPIC) == expected


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param({"partitions": None}, "partitions", id="partitions-null"),
        pytest.param({"partitions": [[1, 2]]}, "partitions", id="partitions-list"),
        pytest.param({"partitions": {"x": [1]}}, "partitions", id="partition-key-not-int"),
        pytest.param({"partitions": {"": [1]}}, "partitions", id="partition-key-empty"),
        pytest.param({"partitions": {"1.0": [1]}}, "partitions", id="partition-key-decimal"),
        pytest.param({"partitions": {" 1": [1]}}, "partitions", id="partition-key-space"),
        pytest.param(
            {"partitions": {"2147483648": [1]}}, "partitions", id="partition-key-overflow"
        ),
        pytest.param({"partitions": {"0": 1}}, "partitions.0", id="replicas-not-list"),
        pytest.param({"partitions": {"0": None}}, "partitions.0", id="replicas-null"),
        pytest.param({"partitions": {"0": ["1"]}}, "partitions.0", id="replica-string"),
        pytest.param({"partitions": {"0": [True]}}, "partitions.0", id="replica-bool"),
        pytest.param({"partitions": {"0": [1.0]}}, "partitions.0", id="replica-float"),
        pytest.param({"partitions": {"0": [None]}}, "partitions.0", id="replica-null"),
        pytest.param({"partitions": {"0": [2**31]}}, "partitions.0", id="replica-overflow"),
        pytest.param({"partitions": {"0": [[1]]}}, "partitions.0", id="replica-nested"),
        pytest.param({"partitions": {}, "topic_id": 123}, "topic_id", id="topic-id-number"),
        pytest.param({"partitions": {}, "topic_id": None}, "topic_id", id="topic-id-null"),
        pytest.param({"partitions": {}, "topic_id": "abc"}, "topic_id", id="topic-id-short"),
        pytest.param(
            {"partitions": {}, "topic_id": TOPIC_ID_TEXT + "="}, "topic_id", id="topic-id-23"
        ),
        pytest.param(
            {"partitions": {}, "adding_replicas": []}, "adding_replicas", id="adding-list"
        ),
        pytest.param(
            {"partitions": {}, "adding_replicas": None}, "adding_replicas", id="adding-null"
        ),
        pytest.param(
            {"partitions": {"0": [1]}, "adding_replicas": {"0": [False]}},
            "adding_replicas.0",
            id="adding-bool",
        ),
        pytest.param(
            {"partitions": {}, "removing_replicas": "none"}, "removing_replicas", id="removing-str"
        ),
        pytest.param(
            {"partitions": {"1": [2]}, "removing_replicas": {"1": ["2"]}},
            "removing_replicas.1",
            id="removing-string-id",
        ),
    ],
)
def test_decode_topic_rejects(doc: dict[str, Any], field: str) -> None:
    error = expect_format_error(
        lambda: decode_topic(as_bytes(doc), source=TOPIC), source=TOPIC, field=field
    )
    assert str(error).startswith(TOPIC)


@pytest.mark.parametrize(
    "data",
    [None, b"", b"[]", b"{", b'{"partitions":{"0":[NaN]}}', b"\xff"],
    ids=["none", "empty", "array", "truncated", "nan", "not-utf8"],
)
def test_decode_topic_rejects_bad_data(data: bytes | None) -> None:
    expect_format_error(lambda: decode_topic(data, source=TOPIC), source=TOPIC, field="data")


# What Kafka's TopicZNode.decode accepts that a stricter reader would refuse (Json.parseBytes
# reads the first JSON value with the encoding Jackson detects; `partitions` may be absent;
# adding/removing replicas are looked up only under the keys `partitions` uses).
V3_BYTES = b'{"version":3,"partitions":{"0":[1,2]},"topic_id":"' + TOPIC_ID_TEXT.encode() + b'"}'


@pytest.mark.parametrize(
    ("data", "partitions", "adding"),
    [
        pytest.param(V3_BYTES + b" x", {0: (1, 2)}, {}, id="trailing-junk"),
        pytest.param(V3_BYTES + b'{"partitions":{}}', {0: (1, 2)}, {}, id="second-object"),
        pytest.param(b" \n" + V3_BYTES + b"\n", {0: (1, 2)}, {}, id="surrounding-whitespace"),
        pytest.param(b"\xef\xbb\xbf" + V3_BYTES, {0: (1, 2)}, {}, id="utf8-bom"),
        pytest.param(V3_BYTES.decode().encode("utf-16-le"), {0: (1, 2)}, {}, id="utf16-le"),
        pytest.param(V3_BYTES.decode().encode("utf-16"), {0: (1, 2)}, {}, id="utf16-bom"),
        pytest.param(V3_BYTES.decode().encode("utf-32-be"), {0: (1, 2)}, {}, id="utf32-be"),
        pytest.param(b'{"version":1}', {}, {}, id="no-partitions"),
        pytest.param(
            b'{"partitions":{"0":[1]},"adding_replicas":{"x":[1],"5":"junk"}}',
            {0: (1,)},
            {},
            id="adding-junk-under-other-keys",
        ),
        pytest.param(
            b'{"partitions":{"0":[1,2]},"adding_replicas":{"00":[2]}}',
            {0: (1, 2)},
            {},
            id="adding-key-looked-up-as-written",
        ),
        pytest.param(
            b'{"partitions":{"00":[1,2]},"adding_replicas":{"00":[2]}}',
            {0: (1, 2)},
            {0: (2,)},
            id="adding-key-same-string",
        ),
    ],
)
def test_decode_topic_accepts_what_kafka_accepts(
    data: bytes, partitions: dict[int, tuple[int, ...]], adding: dict[int, tuple[int, ...]]
) -> None:
    assignment = decode_topic(data, source=TOPIC)
    assert dict(assignment.partitions) == partitions
    assert dict(assignment.adding_replicas) == adding
    assert dict(assignment.removing_replicas) == {}


def test_encode_topic_v3_with_id() -> None:
    assignment = TopicAssignment(
        {1: (2, 3), 0: (1, 2)}, TOPIC_ID, adding_replicas={1: (4,)}, removing_replicas={}
    )
    data = encode_topic(assignment)
    assert b" " not in data
    assert json.loads(data) == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"1": [4]},
        "removing_replicas": {},
        "topic_id": TOPIC_ID_TEXT,
    }


def test_encode_topic_without_id_has_no_topic_id_key() -> None:
    doc = json.loads(encode_topic(TopicAssignment({0: (1,)})))
    assert "topic_id" not in doc
    assert doc == {
        "version": 3,
        "partitions": {"0": [1]},
        "adding_replicas": {},
        "removing_replicas": {},
    }


def test_legacy_encoder_drops_the_topic_id() -> None:
    """The incident: a pre-2.8 client rewrites the znode as version 1 without `topic_id`."""
    data = encode_topic_legacy({1: [2, 3], 0: (1, 2)})
    # Kafka 1.0's Scala map writes partition 1 first (tests/formats/test_scala_order.py).
    assert data == b'{"version":1,"partitions":{"1":[2,3],"0":[1,2]}}'
    assert decode_topic(data, source=TOPIC) == TopicAssignment(
        {0: (1, 2), 1: (2, 3)}, None, {}, {}, 1
    )


replica_maps = st.dictionaries(int32s, st.lists(int32s, max_size=4).map(tuple), max_size=6)


@FAST
@given(
    partitions=replica_maps,
    topic_id=st.none() | topic_ids,
    adding=replica_maps,
    removing=replica_maps,
)
def test_topic_round_trip(
    partitions: dict[int, tuple[int, ...]],
    topic_id: TopicId | None,
    adding: dict[int, tuple[int, ...]],
    removing: dict[int, tuple[int, ...]],
) -> None:
    # Kafka reads adding/removing replicas only for the partitions in `partitions`: what it
    # would write round-trips, and entries under other keys are never read.
    listed = {
        "adding": {p: r for p, r in adding.items() if p in partitions},
        "removing": {p: r for p, r in removing.items() if p in partitions},
    }
    written = TopicAssignment(partitions, topic_id, listed["adding"], listed["removing"])
    assert decode_topic(encode_topic(written), source=TOPIC) == dataclasses.replace(
        written, version=3
    )
    assignment = TopicAssignment(partitions, topic_id, adding, removing)
    decoded = decode_topic(encode_topic(assignment), source=TOPIC)
    assert decoded == dataclasses.replace(written, version=3)
    legacy = decode_topic(encode_topic_legacy(partitions), source=TOPIC)
    assert legacy == TopicAssignment(partitions, None, {}, {}, 1)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            {"version": 1, "partitions": {"0": [1, 2]}},
            {
                "version": 3,
                "partitions": {"0": [1, 2]},
                "adding_replicas": {},
                "removing_replicas": {},
                "topic_id": TOPIC_ID_TEXT,
            },
            id="legacy-v1-upgraded",
        ),
        pytest.param(
            {
                "version": 2,
                "partitions": {"0": [1, 2, 4], "1": [2, 3]},
                "adding_replicas": {"0": [4]},
                "removing_replicas": {"0": [3]},
            },
            {
                "version": 3,
                "partitions": {"0": [1, 2, 4], "1": [2, 3]},
                "adding_replicas": {"0": [4]},
                "removing_replicas": {"0": [3]},
                "topic_id": TOPIC_ID_TEXT,
            },
            id="reassignment-in-flight-kept",
        ),
        pytest.param(
            {"partitions": {"0": [1]}, "topic_id": OTHER_ID_TEXT, "x_future_field": [1, {"a": 2}]},
            {
                "version": 3,
                "partitions": {"0": [1]},
                "adding_replicas": {},
                "removing_replicas": {},
                "topic_id": TOPIC_ID_TEXT,
                "x_future_field": [1, {"a": 2}],
            },
            id="other-id-replaced-unknown-field-kept",
        ),
    ],
)
def test_with_topic_id_keeps_every_other_field(
    doc: dict[str, Any], expected: dict[str, Any]
) -> None:
    written = with_topic_id(as_bytes(doc), TOPIC_ID, source=TOPIC)
    assert json.loads(written) == expected
    assert decode_topic(written, source=TOPIC).topic_id == TOPIC_ID


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(b"", "data", id="empty"),
        pytest.param(as_bytes({"partitions": {"x": [1]}}), "partitions", id="bad-partition-key"),
        pytest.param(
            as_bytes({"partitions": {}, "adding_replicas": []}), "adding_replicas", id="bad-adding"
        ),
    ],
)
def test_with_topic_id_never_writes_back_what_kafka_cannot_read(data: bytes, field: str) -> None:
    """(A topic znode without `partitions` is one Kafka reads, as an empty assignment.)"""
    expect_format_error(
        lambda: with_topic_id(data, TOPIC_ID, source=TOPIC), source=TOPIC, field=field
    )


@FAST
@given(
    partitions=replica_maps,
    old_id=st.none() | topic_ids,
    adding=replica_maps,
    removing=replica_maps,
    topic_id=topic_ids,
)
def test_with_topic_id_changes_nothing_but_the_id(
    partitions: dict[int, tuple[int, ...]],
    old_id: TopicId | None,
    adding: dict[int, tuple[int, ...]],
    removing: dict[int, tuple[int, ...]],
    topic_id: TopicId,
) -> None:
    adding = {p: r for p, r in adding.items() if p in partitions}
    removing = {p: r for p, r in removing.items() if p in partitions}
    before = TopicAssignment(partitions, old_id, adding, removing)
    written = decode_topic(
        with_topic_id(encode_topic(before), topic_id, source=TOPIC), source=TOPIC
    )
    assert written == dataclasses.replace(before, topic_id=topic_id, version=3)


# -- partition state ---------------------------------------------------------------------------

STATE_DOC = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(STATE_DOC, PartitionState(1, 0, (1, 2, 3), 1, 5), id="kafka-example"),
        pytest.param(
            {**STATE_DOC, "leader": -1, "isr": [2]},
            PartitionState(NO_LEADER, 0, (2,), 1, 5),
            id="no-leader",
        ),
        pytest.param({**STATE_DOC, "isr": []}, PartitionState(1, 0, (), 1, 5), id="empty-isr"),
        pytest.param(
            {k: v for k, v in STATE_DOC.items() if k != "version"},
            PartitionState(1, 0, (1, 2, 3), 1, 5),
            id="version-not-read",
        ),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": 0},
            PartitionState(1, 0, (1, 2, 3), 1, 5, 0),
            id="recovered",
        ),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": 1},
            PartitionState(1, 0, (1, 2, 3), 1, 5, 1),
            id="recovering",
        ),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": 257},
            PartitionState(1, 0, (1, 2, 3), 1, 5, 1),
            id="recovery-state-is-int-toByte",
        ),
        pytest.param(
            {**STATE_DOC, "unknown": {"a": [1]}},
            PartitionState(1, 0, (1, 2, 3), 1, 5),
            id="unknown-field",
        ),
    ],
)
def test_decode_partition_state(doc: dict[str, Any], expected: PartitionState) -> None:
    state = decode_partition_state(as_bytes(doc), source=STATE, zk_version=5)
    assert state == expected
    assert state.has_leader == (expected.leader != NO_LEADER)


def test_partition_state_zk_version_defaults_to_zero() -> None:
    assert decode_partition_state(as_bytes(STATE_DOC), source=STATE).zk_version == 0


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param(
            {k: v for k, v in STATE_DOC.items() if k != "leader"}, "leader", id="no-leader"
        ),
        pytest.param({**STATE_DOC, "leader": "1"}, "leader", id="leader-string"),
        pytest.param({**STATE_DOC, "leader": True}, "leader", id="leader-bool"),
        pytest.param({**STATE_DOC, "leader": 1.0}, "leader", id="leader-float"),
        pytest.param({**STATE_DOC, "leader": None}, "leader", id="leader-null"),
        pytest.param({**STATE_DOC, "leader": 2**31}, "leader", id="leader-overflow"),
        pytest.param(
            {k: v for k, v in STATE_DOC.items() if k != "leader_epoch"},
            "leader_epoch",
            id="no-leader-epoch",
        ),
        pytest.param({**STATE_DOC, "leader_epoch": False}, "leader_epoch", id="epoch-bool"),
        pytest.param({k: v for k, v in STATE_DOC.items() if k != "isr"}, "isr", id="no-isr"),
        pytest.param({**STATE_DOC, "isr": 1}, "isr", id="isr-not-list"),
        pytest.param({**STATE_DOC, "isr": [1, True]}, "isr", id="isr-bool"),
        pytest.param({**STATE_DOC, "isr": [1, None]}, "isr", id="isr-null-member"),
        pytest.param({**STATE_DOC, "isr": ["1"]}, "isr", id="isr-string-member"),
        pytest.param(
            {k: v for k, v in STATE_DOC.items() if k != "controller_epoch"},
            "controller_epoch",
            id="no-controller-epoch",
        ),
        pytest.param({**STATE_DOC, "controller_epoch": "1"}, "controller_epoch", id="ce-string"),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": 2}, "leader_recovery_state", id="recovery-2"
        ),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": -1},
            "leader_recovery_state",
            id="recovery-minus-1",
        ),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": None},
            "leader_recovery_state",
            id="recovery-null",
        ),
        pytest.param(
            {**STATE_DOC, "leader_recovery_state": True},
            "leader_recovery_state",
            id="recovery-bool",
        ),
    ],
)
def test_decode_partition_state_rejects(doc: dict[str, Any], field: str) -> None:
    expect_format_error(
        lambda: decode_partition_state(as_bytes(doc), source=STATE), source=STATE, field=field
    )


def test_encode_partition_state() -> None:
    data = encode_partition_state(PartitionState(2, 7, (2, 3), 4, zk_version=9))
    assert json.loads(data) == {
        "controller_epoch": 4,
        "leader": 2,
        "version": 1,
        "leader_epoch": 7,
        "isr": [2, 3],
    }
    recovering = json.loads(encode_partition_state(PartitionState(-1, 1, (), 1, 0, 1)))
    assert recovering["leader_recovery_state"] == 1
    assert recovering["leader"] == -1


@FAST
@given(
    st.builds(
        PartitionState,
        leader=st.sampled_from([NO_LEADER]) | int32s,
        leader_epoch=int32s,
        isr=st.lists(int32s, max_size=5).map(tuple),
        controller_epoch=int32s,
        zk_version=st.integers(min_value=0, max_value=2**31 - 1),
        leader_recovery_state=st.sampled_from([0, 1]),
    )
)
def test_partition_state_round_trip(state: PartitionState) -> None:
    data = encode_partition_state(state)
    assert decode_partition_state(data, source=STATE, zk_version=state.zk_version) == state


def test_paths() -> None:
    assert TOPIC == "/brokers/topics/orders"
    assert STATE == "/brokers/topics/orders/partitions/0/state"
