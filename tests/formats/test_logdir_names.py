"""Log-dir entries: partition directory names (parseTopicPartitionName), topic names
(Topic.validate) and meta.properties (BrokerMetadataCheckpoint)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.logdir import (
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    INTERNAL_TOPICS,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    MAX_TOPIC_LENGTH,
    META_PROPERTIES,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    MetaProperties,
    PartitionDir,
    encode_meta_properties,
    parse_meta_properties,
    parse_partition_dir,
    partition_dir_name,
    topic_name_problem,
    validate_topic_name,
)
from tests.formats.helpers import (
    FAST,
    LEGAL_TOPIC_CHARS,
    expect_format_error,
    legal_topics,
    returns_or_format_error,
)

LOG_DIR = "/var/lib/kafka/data"
HEX = "0123456789abcdef0123456789abcdef"

# -- partition directories ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "topic", "partition", "kind"),
    [
        pytest.param("orders-0", "orders", 0, "live", id="simple"),
        pytest.param(
            "my.topic-with-dash-12", "my.topic-with-dash", 12, "live", id="split-at-last-dash"
        ),
        pytest.param(
            "__consumer_offsets-49", "__consumer_offsets", 49, "live", id="internal-topic"
        ),
        pytest.param(f"t-0.{HEX}-delete", "t", 0, "delete", id="delete"),
        pytest.param(f"my-topic-3.{HEX}-future", "my-topic", 3, "future", id="future"),
        pytest.param(f"t-1.{HEX}-stray", "t", 1, "stray", id="stray-3.6"),
        pytest.param(
            "t-0.not-hex-at-all-delete", "t", 0, "delete", id="delete-id-is-any-non-space"
        ),
        pytest.param("a.b-7.xy-delete", "a.b", 7, "delete", id="dotted-topic-delete"),
        pytest.param("t--1", "t-", 1, "live", id="double-dash-is-topic-dash"),
        pytest.param("t-+1", "t", 1, "live", id="plus-sign"),
        pytest.param("t-007", "t", 7, "live", id="leading-zeros"),
        pytest.param("t-٣", "t", 3, "live", id="unicode-digit"),
        pytest.param("bad topic!-0", "bad topic!", 0, "live", id="topic-not-validated-here"),
        pytest.param("t-2147483647", "t", 2**31 - 1, "live", id="int-max"),
    ],
)
def test_partition_dir_valid(name: str, topic: str, partition: int, kind: str) -> None:
    assert parse_partition_dir(name, source=LOG_DIR) == PartitionDir(name, topic, partition, kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "field"),
    [
        pytest.param("", "directory name", id="empty"),
        pytest.param("orders", "directory name", id="no-dash"),
        pytest.param("t-", "directory name", id="no-partition"),
        pytest.param("-1", "directory name", id="no-topic"),
        pytest.param("-", "directory name", id="dash-only"),
        pytest.param("t-x", "partition", id="partition-not-a-number"),
        pytest.param("t-1.5", "partition", id="partition-decimal"),
        pytest.param("t- 1", "partition", id="partition-leading-space"),
        pytest.param("t-0\n", "partition", id="partition-trailing-newline"),
        pytest.param("t-2147483648", "partition", id="partition-overflow"),
        pytest.param("t-0-delete", "directory name", id="delete-without-unique-id"),
        pytest.param("t-0.-delete", "directory name", id="delete-empty-unique-id"),
        pytest.param(
            f"t-0.{HEX[:4]} {HEX[4:]}-delete", "directory name", id="delete-id-with-space"
        ),
        pytest.param(f"t 1-0.{HEX}-delete", "directory name", id="delete-topic-with-space"),
        pytest.param(f"-0.{HEX}-delete", "directory name", id="delete-no-topic"),
        pytest.param("t-future", "directory name", id="future-without-unique-id"),
        pytest.param("t-0.-stray", "directory name", id="stray-empty-unique-id"),
        pytest.param(f"t-x.{HEX}-delete", "partition", id="delete-partition-not-a-number"),
        pytest.param("a.b-c.d-delete", "partition", id="delete-partition-is-c"),
        pytest.param("a.b-7.x.y-delete", "partition", id="delete-cut-at-last-dot-leaves-7.x"),
        pytest.param(f"t-0.{HEX}-delete\n", "partition", id="newline-after-suffix"),
        pytest.param(META_PROPERTIES, "directory name", id="meta.properties"),
        pytest.param(LOCK_FILE, "directory name", id="lock-file"),
        pytest.param(CLEAN_SHUTDOWN, "directory name", id="clean-shutdown-marker"),
        pytest.param(REPLICATION_OFFSET_CHECKPOINT, "partition", id="replication-checkpoint"),
        pytest.param(RECOVERY_POINT_OFFSET_CHECKPOINT, "partition", id="recovery-checkpoint"),
        pytest.param(LOG_START_OFFSET_CHECKPOINT, "partition", id="log-start-checkpoint"),
        pytest.param(CLEANER_OFFSET_CHECKPOINT, "partition", id="cleaner-checkpoint"),
    ],
)
def test_partition_dir_invalid(name: str, field: str) -> None:
    error = expect_format_error(
        lambda: parse_partition_dir(name, source=LOG_DIR), source=LOG_DIR, field=field
    )
    assert str(error).startswith(LOG_DIR)


def test_partition_dir_name() -> None:
    assert partition_dir_name("orders", 3) == "orders-3"
    assert partition_dir_name("my-topic", 0) == "my-topic-0"


@FAST
@given(legal_topics, st.integers(min_value=0, max_value=2**31 - 1))
def test_partition_dir_name_round_trip(topic: str, partition: int) -> None:
    name = partition_dir_name(topic, partition)
    assert parse_partition_dir(name, source=LOG_DIR) == PartitionDir(name, topic, partition)


@FAST
@given(
    legal_topics,
    st.integers(min_value=0, max_value=2**31 - 1),
    st.uuids(),
    st.sampled_from(["delete", "future", "stray"]),
)
def test_marked_dir_round_trip(topic: str, partition: int, unique: uuid.UUID, kind: str) -> None:
    name = f"{partition_dir_name(topic, partition)}.{unique.hex}-{kind}"
    assert parse_partition_dir(name, source=LOG_DIR) == PartitionDir(name, topic, partition, kind)  # type: ignore[arg-type]


@FAST
@given(
    st.text(alphabet=st.sampled_from("t-.0159x \n") | st.characters(), max_size=30)
    | st.sampled_from(["-delete", "-future", "-stray"]).flatmap(
        lambda suffix: st.text(max_size=20).map(lambda text: text + suffix)
    )
)
def test_hostile_dir_names(name: str) -> None:
    result = returns_or_format_error(
        lambda: parse_partition_dir(name, source=LOG_DIR), source=LOG_DIR
    )
    if isinstance(result, PartitionDir):
        assert result.name == name
        assert result.topic
        assert -(2**31) <= result.partition < 2**31
        assert "-" in name
    else:
        assert result.field in ("directory name", "partition")


# -- topic names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a", id="one-char"),
        pytest.param("orders", id="plain"),
        pytest.param("A.b_c-1", id="all-legal-kinds"),
        pytest.param("...", id="three-dots"),
        pytest.param(".a", id="leading-dot"),
        pytest.param("__consumer_offsets", id="internal"),
        pytest.param("x" * 249, id="249-chars"),
    ],
)
def test_legal_topic_names(name: str) -> None:
    assert topic_name_problem(name) is None
    assert validate_topic_name(name, source="/brokers/topics") == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        pytest.param("", "is empty", id="empty"),
        pytest.param(".", "cannot be '.' or '..'", id="dot"),
        pytest.param("..", "cannot be '.' or '..'", id="dot-dot"),
        pytest.param("x" * 250, "is longer than 249 characters", id="250-chars"),
        pytest.param("a b", "contains characters", id="space"),
        pytest.param("a/b", "contains characters", id="slash"),
        pytest.param("a:b", "contains characters", id="colon"),
        pytest.param("a*", "contains characters", id="star"),
        pytest.param("café", "contains characters", id="non-ascii-letter"),
        pytest.param("ａ", "contains characters", id="fullwidth-letter"),
        pytest.param("a\n", "contains characters", id="trailing-newline"),
        pytest.param("٣", "contains characters", id="non-ascii-digit"),
    ],
)
def test_illegal_topic_names(name: str, problem: str) -> None:
    found = topic_name_problem(name)
    assert found is not None and found.startswith(problem)
    error = expect_format_error(
        lambda: validate_topic_name(name, source="/brokers/topics"),
        source="/brokers/topics",
        field="topic",
    )
    assert problem in str(error)


def test_topic_name_limits() -> None:
    assert MAX_TOPIC_LENGTH == 249
    assert {"__consumer_offsets", "__transaction_state"} == INTERNAL_TOPICS
    assert all(topic_name_problem(topic) is None for topic in INTERNAL_TOPICS)


@FAST
@given(legal_topics)
def test_legal_alphabet_names_pass(name: str) -> None:
    assert topic_name_problem(name) is None


@FAST
@given(
    st.text(alphabet=LEGAL_TOPIC_CHARS, max_size=20),
    st.characters().filter(lambda char: char not in LEGAL_TOPIC_CHARS),
    st.text(alphabet=LEGAL_TOPIC_CHARS, max_size=20),
)
def test_any_other_character_fails(head: str, bad: str, tail: str) -> None:
    assert topic_name_problem(head + bad + tail) is not None


@FAST
@given(st.text(max_size=260) | st.text(alphabet=LEGAL_TOPIC_CHARS, min_size=245, max_size=255))
def test_hostile_topic_names(name: str) -> None:
    problem = topic_name_problem(name)
    result = returns_or_format_error(
        lambda: validate_topic_name(name, source="/brokers/topics"), source="/brokers/topics"
    )
    assert (problem is None) == (result == name)
    legal = 0 < len(name) <= 249 and name not in (".", "..") and set(name) <= set(LEGAL_TOPIC_CHARS)
    assert (problem is None) == legal


# -- meta.properties ---------------------------------------------------------------------------

META = f"{LOG_DIR}/{META_PROPERTIES}"
ZK_META = (
    b"#\n#Tue Jan 02 03:04:05 UTC 2024\ncluster.id=Mk3OEYBSD34fcwNTJENDM2\nversion=0\nbroker.id=1\n"
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(ZK_META, MetaProperties(1, "Mk3OEYBSD34fcwNTJENDM2", 0), id="zk-broker"),
        pytest.param(b"version=0\nbroker.id=7\n", MetaProperties(7, None, 0), id="no-cluster-id"),
        pytest.param(b"broker.id=7\n", MetaProperties(7, None, 0), id="version-defaults-to-0"),
        pytest.param(
            b"version=+0\nbroker.id=\\u0663\n", MetaProperties(3, None, 0), id="java-ints"
        ),
        pytest.param(
            b"version=1\nnode.id=4\ncluster.id=abc\n", MetaProperties(4, "abc", 1), id="kraft-v1"
        ),
    ],
)
def test_meta_properties_valid(data: bytes, expected: MetaProperties) -> None:
    assert parse_meta_properties(data, source=META) == expected


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(b"version=2\nbroker.id=1\n", "version", id="version-2"),
        pytest.param(b"version=x\nbroker.id=1\n", "version", id="version-not-a-number"),
        pytest.param(b"version=\nbroker.id=1\n", "version", id="version-empty"),
        pytest.param(b"version=0\nbroker.id=one\n", "broker.id", id="broker-id-not-a-number"),
        pytest.param(b"version=0\nbroker.id=1 \n", "broker.id", id="broker-id-trailing-space"),
        pytest.param(b"version=0\n", "broker.id", id="broker-id-missing"),
        pytest.param(b"version=1\nnode.id=1\n", "cluster.id", id="v1-without-cluster-id"),
        pytest.param(b"version=1\ncluster.id=c\n", "node.id", id="v1-without-node-id"),
        pytest.param(b"version=0\nbroker.id=\\u12\n", "escape", id="bad-escape"),
    ],
)
def test_meta_properties_invalid(data: bytes, field: str) -> None:
    expect_format_error(lambda: parse_meta_properties(data, source=META), source=META, field=field)


def test_meta_properties_encoder() -> None:
    now = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    meta = MetaProperties(broker_id=1, cluster_id="Mk3OEYBSD34fcwNTJENDM2")
    data = encode_meta_properties(meta, now=now)
    assert data == ZK_META
    assert parse_meta_properties(data, source=META) == meta
    assert b"cluster.id" not in encode_meta_properties(MetaProperties(2, None), now=now)


@FAST
@given(
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.none() | st.text(max_size=30),
)
def test_meta_properties_round_trip(broker_id: int, cluster_id: str | None) -> None:
    meta = MetaProperties(broker_id=broker_id, cluster_id=cluster_id)
    assert parse_meta_properties(encode_meta_properties(meta), source=META) == meta


@FAST
@given(
    st.binary(max_size=60)
    | st.lists(
        st.sampled_from(
            [
                b"version",
                b"broker.id",
                b"node.id",
                b"cluster.id",
                b"=",
                b"0",
                b"1",
                b"\n",
                b"\\u",
                b" ",
            ]
        ),
        max_size=14,
    ).map(b"".join)
)
def test_hostile_meta_properties(data: bytes) -> None:
    result = returns_or_format_error(lambda: parse_meta_properties(data, source=META), source=META)
    assert isinstance(result, MetaProperties) or result.field in (
        "version",
        "broker.id",
        "node.id",
        "cluster.id",
        "escape",
    )
