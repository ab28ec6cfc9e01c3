"""Vectors taken from Kafka's own tests and decoders at tags 2.8.2 and 3.4.1, each with the file
and line it comes from (paths in apache/kafka; "a/b" lines are 2.8.2/3.4.1 where they differ).

Where the two versions disagree, the project follows one and says why:
- `leader_recovery_state` in a partition state: 2.8.2 never reads it (ZkData.scala:360-364),
  3.4.1 refuses a value other than 0 or 1 (ZkData.scala:397-399, LeaderRecoveryState.of). The
  project refuses it: a state a 3.4 controller cannot read must not pass a scan unseen, and
  no 2.8 writer ever writes the field.
Where Kafka silently reads invalid JSON as an empty document (Json.parseBytes returns None,
TopicZNode.decode then an empty assignment), the project reports the problem instead.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from remediate.errors import FormatError
from remediate.formats.logdir import parse_leader_epoch_checkpoint, parse_partition_metadata
from remediate.formats.topic_id import TopicId, parse_topic_id
from remediate.formats.znodes import (
    decode_broker,
    decode_controller,
    decode_partition_state,
    decode_topic,
    parse_endpoint,
)

BROKER_TEST = "core/src/test/scala/unit/kafka/cluster/BrokerEndPointTest.scala"
UUID_TEST = "clients/src/test/java/org/apache/kafka/common/UuidTest.java"
STATE_TEST = "core/src/test/scala/kafka/zk/TopicPartitionStateZNodeTest.scala"  # 3.4.1 only
ZK_DATA = "core/src/main/scala/kafka/zk/ZkData.scala"
JSON = "core/src/main/scala/kafka/utils/Json.scala"
END_POINT = "core/src/main/scala/kafka/cluster/EndPoint.scala"
BROKER = "core/src/main/scala/kafka/cluster/Broker.scala"
VERSION_RANGE = "clients/src/main/java/org/apache/kafka/common/feature/BaseVersionRange.java"
METADATA_FILE = "core/src/main/scala/kafka/server/PartitionMetadataFile.scala"
EPOCH_FILE = "core/src/main/scala/kafka/server/checkpoints/LeaderEpochCheckpointFile.scala"
CHECKPOINT_FILE = (
    "core/src/main/scala/kafka/server/checkpoints/CheckpointFile.scala (2.8.2),"
    " server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java (3.4.1)"
)

REFUSED = FormatError
Outcome = Callable[[Any], bool] | type[FormatError]


def check(decode: Callable[[], Any], expected: Outcome) -> None:
    if expected is REFUSED:
        with pytest.raises(FormatError):
            decode()
    else:
        assert callable(expected)
        assert not isinstance(expected, type)  # not REFUSED, so the predicate
        value = decode()
        assert expected(value), value


def endpoint_of(listener: str, host: str, port: int) -> Callable[[Any], bool]:
    def matches(registration: Any) -> bool:
        found = registration.endpoint(listener)
        return found is not None and (found.host, found.port) == (host, port)

    return matches


# -- broker registrations, versions 1 to 5 and a future one -------------------------------------

BROKERS: list[tuple[str, str, bytes, Outcome]] = [
    (
        "future-version-100",
        f"{BROKER_TEST}:53/52 testFromJsonFutureVersion",
        b'{"foo":"bar","version":100,"host":"localhost","port":9092,"jmx_port":9999,'
        b'"timestamp":"1416974968782","endpoints":["SSL://localhost:9093"]}',
        endpoint_of("SSL", "localhost", 9093),
    ),
    (
        "v2",
        f"{BROKER_TEST}:72/71 testFromJsonV2",
        b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,'
        b'"timestamp":"1416974968782","endpoints":["PLAINTEXT://localhost:9092"]}',
        endpoint_of("PLAINTEXT", "localhost", 9092),
    ),
    (
        "v1",
        f"{BROKER_TEST}:89/88 testFromJsonV1",
        b'{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,'
        b'"port":9091}',
        endpoint_of("PLAINTEXT", "172.16.8.243", 9091),
    ),
    (
        "v3-rack",
        f"{BROKER_TEST}:99/98 testFromJsonV3",
        b'{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],"rack":"dc1"}',
        lambda r: endpoint_of("SSL", "host1", 9093)(r) and r.rack == "dc1",
    ),
    (
        "v4-null-rack",
        f"{BROKER_TEST}:118/117 testFromJsonV4WithNullRack",
        b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
        b'"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},'
        b'"rack":null}',
        lambda r: endpoint_of("CLIENT", "host1", 9092)(r) and r.rack is None,
    ),
    (
        "v4-no-rack",
        f"{BROKER_TEST}:138/137 testFromJsonV4WithNoRack",
        b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
        b'"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"}}',
        lambda r: endpoint_of("CLIENT", "host1", 9092)(r) and r.rack is None,
    ),
    (
        "v5-features",
        f"{BROKER_TEST}:178/177 testFromJsonV5",
        b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
        b'"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},'
        b'"rack":"dc1","features": {"feature1": {"min_version": 1, "max_version": 2},'
        b' "feature2": {"min_version": 2, "max_version": 4}}}',
        lambda r: endpoint_of("CLIENT", "host1", 9092)(r) and r.rack == "dc1",
    ),
    (
        "host-port-not-read-at-v2",
        f"{ZK_DATA}:250/270 BrokerIdZNode.decode reads host and port only at version 1",
        b'{"version":2,"host":7,"port":"x","jmx_port":-1,"endpoints":["PLAINTEXT://h:1"]}',
        endpoint_of("PLAINTEXT", "h", 1),
    ),
    (
        "timestamp-never-read",
        f"{ZK_DATA}:239-275/259-295 BrokerIdZNode.decode has no timestamp read",
        b'{"version":4,"jmx_port":-1,"timestamp":12,"endpoints":["PLAINTEXT://h:1"]}',
        endpoint_of("PLAINTEXT", "h", 1),
    ),
    (
        "duplicate-listener",
        f"{BROKER}:59-60/77-78 more than one end point with the same listener name",
        b'{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://a:1","plaintext://b:2"]}',
        REFUSED,
    ),
    (
        "features-min-above-max",
        f"{VERSION_RANGE}:63 minValue < 1 || maxValue < 1 || maxValue < minValue",
        b'{"version":5,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],'
        b'"features":{"f":{"min_version":3,"max_version":2}}}',
        REFUSED,
    ),
    (
        "features-min-0",
        f"{VERSION_RANGE}:63 minValue < 1",
        b'{"version":5,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],'
        b'"features":{"f":{"min_version":0,"max_version":2}}}',
        REFUSED,
    ),
    (
        "trailing-bytes",
        f"{JSON}:50-51 Json.parseBytes: readTree reads the first value",
        b'{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"]} trailing',
        endpoint_of("PLAINTEXT", "h", 1),
    ),
]


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [v[1:] for v in BROKERS],
    ids=[v[0] for v in BROKERS],
)
def test_broker_registration(source: str, data: bytes, expected: Outcome) -> None:
    check(lambda: decode_broker(1, data, source=source), expected)


# -- endpoints -----------------------------------------------------------------------------------

ENDPOINTS: list[tuple[str, str, str, Outcome]] = [
    (
        "localhost",
        f"{BROKER_TEST}:232/203 testEndpointFromUri",
        "PLAINTEXT://localhost:9092",
        lambda e: (e.host, e.port) == ("localhost", 9092),
    ),
    (
        "underscore",
        f"{BROKER_TEST}:232/203 testEndpointFromUri (KAFKA-3719)",
        "PLAINTEXT://local_host:9092",
        lambda e: (e.host, e.port) == ("local_host", 9092),
    ),
    (
        "default-bind",
        f"{BROKER_TEST}:232/203 testEndpointFromUri",
        "PLAINTEXT://:9092",
        lambda e: (e.host, e.port) == ("", 9092),
    ),
    (
        "ipv6",
        f"{BROKER_TEST}:232/203 testEndpointFromUri",
        "PLAINTEXT://[::1]:9092",
        lambda e: (e.host, e.port, str(e)) == ("::1", 9092, "PLAINTEXT://[::1]:9092"),
    ),
    (
        "ipv6-zone",
        f"{BROKER_TEST}:232/203 testEndpointFromUri",
        "PLAINTEXT://[fe80::b1da:69ca:57f7:63d8%3]:9092",
        lambda e: (e.host, e.port) == ("fe80::b1da:69ca:57f7:63d8%3", 9092),
    ),
    (
        "upper-case-host",
        f"{BROKER_TEST}:232/203 testEndpointFromUri",
        "PLAINTEXT://MyHostname:9092",
        lambda e: (e.host, e.port) == ("MyHostname", 9092),
    ),
    (
        "negative-port",
        f"{END_POINT}:29,41/30,42 the port group is -?[0-9]+; negative ports are accepted",
        "PLAINTEXT://h:-1",
        lambda e: e.port == -1,
    ),
    (
        "port-above-65535",
        f"{END_POINT}:29/30 the port is any int",
        "PLAINTEXT://h:70000",
        lambda e: e.port == 70000,
    ),
    ("no-port", f"{END_POINT}:29/30 the regex needs :port", "PLAINTEXT://h", REFUSED),
]


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [v[1:] for v in ENDPOINTS],
    ids=[v[0] for v in ENDPOINTS],
)
def test_endpoint(source: str, text: str, expected: Outcome) -> None:
    check(lambda: parse_endpoint(text, source=source), expected)


# -- /controller ----------------------------------------------------------------------------------

CONTROLLERS: list[tuple[str, str, bytes, Outcome]] = [
    (
        "only-brokerid-read",
        f"{ZK_DATA}:60/68 ControllerZNode.decode: brokerid only",
        b'{"version":"x","brokerid":2,"timestamp":5,"kraftControllerEpoch":null}',
        lambda c: c.broker_id == 2,
    ),
    (
        "brokerid-string",
        f"{ZK_DATA}:60/68 brokerid .to[Int]",
        b'{"version":1,"brokerid":"2","timestamp":"1"}',
        REFUSED,
    ),
]


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [v[1:] for v in CONTROLLERS],
    ids=[v[0] for v in CONTROLLERS],
)
def test_controller(source: str, data: bytes, expected: Outcome) -> None:
    check(lambda: decode_controller(data, source=source), expected)


# -- topic znodes ----------------------------------------------------------------------------------

TOPICS: list[tuple[str, str, bytes, Outcome]] = [
    (
        "no-partitions",
        f"{ZK_DATA}:326/346 partitions is optional: an empty assignment",
        b'{"version":1}',
        lambda t: dict(t.partitions) == {},
    ),
    (
        "adding-looked-up-by-the-partitions-key",
        f"{ZK_DATA}:311-319/331-339 getReplicas(adding, partition) with the same string",
        b'{"partitions":{"0":[1,2]},"adding_replicas":{"00":[2]}}',
        lambda t: dict(t.adding_replicas) == {},
    ),
    (
        "junk-under-other-keys",
        f"{ZK_DATA}:311-319/331-339 only the listed partitions are looked up",
        b'{"partitions":{"0":[1]},"removing_replicas":{"x":"junk"}}',
        lambda t: dict(t.removing_replicas) == {},
    ),
    (
        "utf8-bom",
        f"{JSON}:50-51 Jackson detects the encoding",
        b'\xef\xbb\xbf{"partitions":{"0":[1]}}',
        lambda t: dict(t.partitions) == {0: (1,)},
    ),
    (
        "utf16",
        f"{JSON}:50-51 Jackson detects the encoding",
        '{"partitions":{"0":[1]}}'.encode("utf-16-le"),
        lambda t: dict(t.partitions) == {0: (1,)},
    ),
    (
        "second-value-ignored",
        f"{JSON}:50-51 readTree reads the first value",
        b'{"partitions":{"0":[1]}}{"partitions":{"1":[2]}}',
        lambda t: dict(t.partitions) == {0: (1,)},
    ),
    (
        "invalid-json-reported",
        f"{ZK_DATA}:338/358 Kafka reads it as empty; the project reports it",
        b'{"partitions":',
        REFUSED,
    ),
]


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [v[1:] for v in TOPICS],
    ids=[v[0] for v in TOPICS],
)
def test_topic(source: str, data: bytes, expected: Outcome) -> None:
    check(lambda: decode_topic(data, source=source), expected)


# -- partition states ------------------------------------------------------------------------------

STATES: list[tuple[str, str, bytes, Outcome]] = [
    (
        "old-value-recovered",
        f"{STATE_TEST}:57 testDecodeOldValue (3.4.1)",
        b'{"version":1,"leader":1,"leader_epoch":6,"controller_epoch":10,"isr":[1]}',
        lambda s: (s.leader, s.leader_epoch, s.isr, s.leader_recovery_state) == (1, 6, (1,), 0),
    ),
    (
        "recovering",
        f"{STATE_TEST}:35 testEncodeDecodeRecovering (3.4.1)",
        b'{"version":1,"leader":1,"leader_epoch":6,"controller_epoch":10,"isr":[1],'
        b'"leader_recovery_state":1}',
        lambda s: s.leader_recovery_state == 1,
    ),
    (
        "recovery-state-7",
        f"{ZK_DATA}:360-364 (2.8.2 ignores it) / 397-399 (3.4.1 refuses): 3.4.1 followed",
        b'{"version":1,"leader":1,"leader_epoch":6,"controller_epoch":10,"isr":[1],'
        b'"leader_recovery_state":7}',
        REFUSED,
    ),
    (
        "isr-of-strings",
        f"{ZK_DATA}:363/396 isr .to[List[Int]]",
        b'{"version":1,"leader":1,"leader_epoch":6,"controller_epoch":10,"isr":["1"]}',
        REFUSED,
    ),
]


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [v[1:] for v in STATES],
    ids=[v[0] for v in STATES],
)
def test_partition_state(source: str, data: bytes, expected: Outcome) -> None:
    check(lambda: decode_partition_state(data, source=source), expected)


# -- Uuid -----------------------------------------------------------------------------------------


def uuid_text(most: int, least: int) -> str:
    raw = most.to_bytes(8, "big", signed=True) + least.to_bytes(8, "big", signed=True)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


UUIDS: list[tuple[str, str, str, Outcome]] = [
    (
        "significant-bits",
        f"{UUID_TEST}:30/32 testSignificantBits: new Uuid(34L, 98L)",
        uuid_text(34, 98),
        lambda t: t == TopicId((34).to_bytes(8, "big") + (98).to_bytes(8, "big")),
    ),
    (
        "hash-code-vector",
        f"{UUID_TEST}:53/55 testHashCode: new Uuid(104312423523523L, 200732425676585L)",
        uuid_text(104312423523523, 200732425676585),
        lambda t: str(t) == uuid_text(104312423523523, 200732425676585),
    ),
    (
        "zero",
        f"{UUID_TEST}:64/66 testStringConversion: fromString(ZERO_UUID.toString)",
        uuid_text(0, 0),
        lambda t: t.is_zero,
    ),
    (
        "oversize",
        f"{UUID_TEST}:102/103 testFromStringWithInvalidInput: 32 bytes",
        base64.urlsafe_b64encode(bytes(32)).decode().rstrip("="),
        REFUSED,
    ),
    (
        "undersize",
        f"{UUID_TEST}:102/103 testFromStringWithInvalidInput: 4 bytes",
        base64.urlsafe_b64encode(bytes(4)).decode().rstrip("="),
        REFUSED,
    ),
]


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [v[1:] for v in UUIDS],
    ids=[v[0] for v in UUIDS],
)
def test_uuid(source: str, text: str, expected: Outcome) -> None:
    check(lambda: parse_topic_id(text, source=source, field="topic_id"), expected)


# -- partition.metadata and leader-epoch-checkpoint ------------------------------------------------

GOOD_METADATA = b"version: 0\ntopic_id: " + uuid_text(34, 98).encode() + b"\n"

FILES: list[tuple[str, str, Callable[[], Any], Outcome]] = [
    (
        "metadata-two-lines-then-junk",
        f"{METADATA_FILE}:49-60/48-59 two readLine calls, nothing after",
        lambda: parse_partition_metadata(GOOD_METADATA + b"x" * 10_000, source="m"),
        lambda m: str(m.topic_id) == uuid_text(34, 98),
    ),
    (
        "metadata-bad-utf8-past-8k",
        f"{METADATA_FILE}:142/141 Files.newBufferedReader decodes 8 KiB at a time",
        lambda: parse_partition_metadata(GOOD_METADATA + b"x" * 9000 + b"\xff", source="m"),
        lambda m: str(m.topic_id) == uuid_text(34, 98),
    ),
    (
        "metadata-version-1",
        f"{METADATA_FILE}:49-60/48-59 version must be 0",
        lambda: parse_partition_metadata(GOOD_METADATA.replace(b": 0", b": 1", 1), source="m"),
        REFUSED,
    ),
    (
        "epoch-checkpoint",
        f"{EPOCH_FILE}:44-46 two whitespace-separated fields; {CHECKPOINT_FILE}",
        lambda: parse_leader_epoch_checkpoint(b"0\n2\n0 0\n3  1500\n", source="e"),
        lambda entries: [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (3, 1500)],
    ),
    (
        "epoch-checkpoint-short",
        f"{CHECKPOINT_FILE}: 'Expected N entries' (2.8.2:66-67, 3.4.1:155-156)",
        lambda: parse_leader_epoch_checkpoint(b"0\n2\n0 0\n", source="e"),
        REFUSED,
    ),
    (
        "epoch-checkpoint-three-fields",
        f"{EPOCH_FILE}:44-46 case Array(epoch, offset) only",
        lambda: parse_leader_epoch_checkpoint(b"0\n1\n0 0 0\n", source="e"),
        REFUSED,
    ),
]


@pytest.mark.parametrize(
    ("source", "decode", "expected"),
    [v[1:] for v in FILES],
    ids=[v[0] for v in FILES],
)
def test_log_dir_file(source: str, decode: Callable[[], Any], expected: Outcome) -> None:
    assert source
    check(decode, expected)
