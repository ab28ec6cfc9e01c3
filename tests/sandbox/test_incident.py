"""The incident, one test per step, on the 2.8 emulator and on real Apache Kafka 2.8.2.

Each test runs the steps up to its own (once, in order, on one module-wide sandbox of each
kind) and then asserts the ZooKeeper and on-disk state that Kafka 2.8's source predicts
(docs/sandbox.md). The same assertions hold on both kinds: where they did not, the emulator
was wrong and was fixed. On real Kafka the legacy writes are Kafka 1.0.2's own TopicCommand
and the client is confluent-kafka.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from remediate.formats.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    encode_partition_metadata,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
)
from remediate.formats.topic_id import parse_topic_id
from remediate.formats.znodes import (
    CLUSTER_ID,
    decode_cluster_id,
    decode_topic_config,
    encode_topic_legacy,
    topic_config_path,
    topic_path,
)
from remediate.sandbox import admin, cluster
from remediate.sandbox.reproduce import Incident, mismatch_lines, replica_file_ids
from tests.sandbox.helpers import replica_dirs, states
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"
LINE_2_8 = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ERROR \[Broker id=(\d+)\] Topic Id in memory: "
    r"([A-Za-z0-9_-]{22}) does not match the topic Id for partition orders-(\d+) provided in the "
    r"request: ([A-Za-z0-9_-]{22})\. \(state\.change\.logger\)$"
)


class Steps:
    def __init__(self, incident: Incident) -> None:
        self.incident = incident
        self.done = 0
        self.methods = [
            incident.create_topic,
            incident.produce,
            incident.consume,
            incident.add_partitions_legacy,
            incident.produce_and_consume_all,
            incident.failover,
            incident.still_works,
            incident.restart_one_broker,
        ]

    def upto(self, number: int) -> Incident:
        while self.done < number:
            self.methods[self.done]()
            self.done += 1
        return self.incident


@pytest.fixture(scope="module", params=["emulated", "real-2.8.2"])
def steps(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Steps]:
    directory = tmp_path_factory.mktemp(f"incident-{request.param}") / "sandbox"
    cluster.up(directory, kafka=request.param)
    incident = Incident(directory, topic=TOPIC)
    try:
        yield Steps(incident)
    finally:
        incident.close()
        cluster.down(directory)


def raw_topic_znode(incident: Incident) -> dict[str, object]:
    data, _ = incident.zk.get(topic_path(TOPIC))
    return json.loads(data)  # type: ignore[no-any-return]


def file_bytes(incident: Incident, broker: int, partition: int, name: str) -> bytes | None:
    for log_dir in incident.state.broker(broker).log_dirs:
        path = Path(log_dir) / f"{TOPIC}-{partition}" / name
        if path.exists():
            return path.read_bytes()
    return None


def segment(incident: Incident, broker: int, partition: int) -> bytes:
    data = file_bytes(incident, broker, partition, "00000000000000000000.log")
    assert data is not None, f"broker {broker} has no log segment of {TOPIC}-{partition}"
    return data


# A key the incident acknowledged ("step2-17"), not followed by another digit: in both
# kinds of log the bytes after a key are a length, never an ASCII digit.
INCIDENT_KEY = re.compile(rb"step\d-\d+(?!\d)")


def replicated(incident: Incident, partitions: list[int]) -> bool:
    """Every replica of every partition holds every key acknowledged on that partition
    (records are uncompressed on both kinds of broker)."""
    for partition in partitions:
        replicas = sorted(replica_dirs(incident.state, TOPIC, partition))
        keys = {a.key.encode() for a in incident.acked if a.partition == partition}
        if len(replicas) != 3 or not keys:
            return False
        for broker in replicas:
            if not keys <= set(INCIDENT_KEY.findall(segment(incident, broker, partition))):
                return False
    return True


def test_step1_topic_gets_an_id_in_zookeeper_and_in_every_replica(steps: Steps) -> None:
    incident = steps.upto(1)
    znode = raw_topic_znode(incident)
    assert znode["version"] == 3
    topic_id = parse_topic_id(str(znode["topic_id"]), source="test")
    assert str(topic_id) == incident.result.old_id
    assignment = znode["partitions"]
    assert isinstance(assignment, dict) and sorted(assignment) == ["0", "1", "2"]
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    if incident.state.real_kafka is None:
        # The stand-in assigns from the first broker; Kafka 1.0's TopicCommand from a random one.
        assert assignment == {"0": [1, 2, 3], "1": [2, 3, 1], "2": [3, 1, 2]}
    # No override: the topic gets the brokers' min.insync.replicas=2 (server.properties),
    # which the tool must resolve as Kafka does.
    config = decode_topic_config(incident.zk.get(topic_config_path(TOPIC))[0], source="config")
    assert config == {}
    for partition, state in states(incident.zk, TOPIC, [0, 1, 2]).items():
        assert state.leader == znode["partitions"][str(partition)][0]  # type: ignore[index]
        assert sorted(state.isr) == [1, 2, 3]
    expected = encode_partition_metadata(topic_id)
    cluster_id = decode_cluster_id(incident.zk.get(CLUSTER_ID)[0])
    for broker in (1, 2, 3):
        for partition in (0, 1, 2):
            assert file_bytes(incident, broker, partition, PARTITION_METADATA) == expected
        for log_dir in incident.state.broker(broker).log_dirs:
            meta = parse_meta_properties(
                (Path(log_dir) / META_PROPERTIES).read_bytes(), source=log_dir
            )
            assert (meta.broker_id, meta.cluster_id) == (broker, cluster_id)


def test_step2_acks_all_produce_is_replicated_to_every_replica(steps: Steps) -> None:
    incident = steps.upto(2)
    assert len(incident.acked) == incident.records
    for partition in (0, 1, 2):
        leader = states(incident.zk, TOPIC, [partition])[partition].leader
        epochs = parse_leader_epoch_checkpoint(
            file_bytes(incident, leader, partition, LEADER_EPOCH_CHECKPOINT) or b"", source="leader"
        )
        assert epochs and epochs[0].start_offset == 0
    # Every replica's log holds every acknowledged record, as the leader wrote it.
    assert wait_until(lambda: replicated(incident, [0, 1, 2]))


def test_step3_consumer_reads_every_acknowledged_record(steps: Steps) -> None:
    incident = steps.upto(3)
    records, errors = incident.kafka.consume(TOPIC)
    assert errors == {}
    assert {a.key for a in incident.acked} <= {r.key for r in records}


def test_step4_legacy_add_partitions_drops_the_topic_id(steps: Steps) -> None:
    incident = steps.upto(4)
    data, _ = incident.zk.get(topic_path(TOPIC))
    before = {int(p): r for p, r in json.loads(data)["partitions"].items() if int(p) < 3}
    # Kafka 1.0's AdminUtils.addPartitions: the new partitions start at the broker that leads
    # partition 0, and the znode's bytes are the stand-in's (on real Kafka: 1.0.2's own).
    added = admin.assign_replicas(
        [1, 2, 3], 3, 3, start_index=[1, 2, 3].index(before[0][0]), start_partition=3
    )
    assert data == encode_topic_legacy({**before, **added})
    assert json.loads(data)["version"] == 1 and "topic_id" not in json.loads(data)
    new_states = states(incident.zk, TOPIC, [3, 4, 5])
    assert all(sorted(s.isr) == [1, 2, 3] for s in new_states.values())
    ids = replica_file_ids(incident.state, TOPIC)
    # The old replicas keep X; Kafka 2.8 creates the new logs without a file.
    assert {ids[(b, p)] for b in (1, 2, 3) for p in (0, 1, 2)} == {incident.result.old_id}
    assert {ids[(b, p)] for b in (1, 2, 3) for p in (3, 4, 5)} == {None}


def test_step5_every_partition_serves_produce_and_consume(steps: Steps) -> None:
    incident = steps.upto(5)
    assert incident.result.steps[-1].facts["acked"] == incident.records
    produced_to = {a.partition for a in incident.acked}
    assert produced_to == {0, 1, 2, 3, 4, 5}
    # Still no id in ZooKeeper, every ISR full; every replica holds what was acknowledged.
    assert "topic_id" not in raw_topic_znode(incident)
    assert all(len(s.isr) == 3 for s in states(incident.zk, TOPIC, [0, 1, 2, 3, 4, 5]).values())
    assert wait_until(lambda: replicated(incident, list(range(6))))


def test_step6_failover_mints_a_new_id_that_old_replicas_refuse(steps: Steps) -> None:
    incident = steps.upto(6)
    znode = raw_topic_znode(incident)
    assert znode["version"] == 3
    assert znode["topic_id"] == incident.result.new_id != incident.result.old_id
    ids = replica_file_ids(incident.state, TOPIC)
    assert {ids[(b, p)] for b in (1, 2, 3) for p in (0, 1, 2)} == {incident.result.old_id}
    assert wait_until(
        lambda: (
            {replica_file_ids(incident.state, TOPIC)[(b, p)] for b in (1, 2, 3) for p in (3, 4, 5)}
            == {incident.result.new_id}
        )
    )

    # Every running broker refused the old partitions, and logged it with Kafka 2.8's line
    # (waited for: the files above do not order the log lines of every broker).
    def refused_everywhere() -> bool:
        numbers = [
            {m.group(3) for m in map(LINE_2_8.match, mismatch_lines(incident.directory, b)) if m}
            for b in (1, 2, 3)
        ]
        return all(n >= {"0", "1", "2"} for n in numbers)

    wait_until(refused_everywhere, "every broker to log its refusal of partitions 0, 1 and 2")
    for broker in (1, 2, 3):
        lines = mismatch_lines(incident.directory, broker)
        matches = [LINE_2_8.match(line) for line in lines]
        assert lines and all(matches), lines
        assert {m.group(3) for m in matches if m} == {"0", "1", "2"}
        assert {(m.group(2), m.group(4)) for m in matches if m} == {
            (incident.result.old_id, incident.result.new_id)
        }


def test_step7_running_brokers_keep_their_roles(steps: Steps) -> None:
    incident = steps.upto(7)
    assert incident.result.steps[-1].facts["acked"] == incident.records
    # ZooKeeper holds Y while the old replicas still hold X: nothing has noticed.
    assert raw_topic_znode(incident)["topic_id"] == incident.result.new_id
    ids = replica_file_ids(incident.state, TOPIC)
    assert {ids[(b, p)] for b in (1, 2, 3) for p in (0, 1, 2)} == {incident.result.old_id}
    assert all(len(s.isr) == 3 for s in states(incident.zk, TOPIC, [0, 1, 2, 3, 4, 5]).values())


def test_step8_restarted_broker_stays_out_of_the_old_partitions_isr(steps: Steps) -> None:
    incident = steps.upto(8)
    broker = incident.result.restarted_broker
    controller = admin.current_controller(incident.zk)
    assert controller is not None and controller.broker_id != broker
    current = states(incident.zk, TOPIC, [0, 1, 2, 3, 4, 5])
    assert all(broker not in current[p].isr for p in (0, 1, 2))
    # New partitions hold Y, which the restarted broker accepts: it is back in their ISR.
    assert wait_until(
        lambda: all(broker in s.isr for s in states(incident.zk, TOPIC, [3, 4, 5]).values())
    )
    ids = replica_file_ids(incident.state, TOPIC)
    assert {ids[(broker, p)] for p in (0, 1, 2)} == {incident.result.old_id}
    assert any(LINE_2_8.match(line) for line in mismatch_lines(incident.directory, broker))
    # The leaders refused the ISR shrink, so acks=all to an old partition cannot complete
    # (the emulated client is told so; librdkafka's own timer expires first).
    producer = incident.kafka.producer(timeout_ms=1500)
    try:
        _, error = producer.send(TOPIC, 0, [("after-step-8", "v")])
    finally:
        producer.close()
    assert error in ("NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "_MSG_TIMED_OUT")


def test_step8_seen_from_outside_the_old_partitions_high_watermark_is_frozen(
    steps: Steps,
) -> None:
    """The replica-manager rules of tests/sandbox/test_kafka_rules.py, as a client and the
    disk see them on both kinds after step 8: an old partition led by a running broker takes
    an acks=1 write (the leader appends it, Partition.scala:1045-1083 at 2.8.2) that no
    consumer can read (the high watermark is frozen: the fenced AlterIsr keeps the restarted
    broker in the leader's maximal ISR, Partition.scala:878-905); the running follower
    copies it, the restarted broker, at a newer leader epoch than its leader, copies nothing
    (UNKNOWN_LEADER_EPOCH, Partition.scala:359-390)."""
    incident = steps.upto(8)
    restarted = incident.result.restarted_broker
    producer = incident.kafka.producer(acks=1, timeout_ms=5000)
    written: dict[int, str] = {}
    try:
        for partition in (0, 1, 2):
            key = f"fidelity-{partition}"
            offset, _error = producer.send(TOPIC, partition, [(key, "v")])
            if offset is not None:
                written[partition] = key
    finally:
        producer.close()
    # The restarted broker led one old partition at most (preferred leaders are spread):
    # the others' leaders kept running and take acks=1 writes.
    assert len(written) >= 2, written
    records, _errors = incident.kafka.consume(TOPIC, timeout=10)
    assert not {r.key for r in records} & set(written.values())

    def copied(partition: int, key: str, brokers: set[int]) -> bool:
        return all(key.encode() in segment(incident, b, partition) for b in brokers)

    for partition, key in written.items():
        running = set(replica_dirs(incident.state, TOPIC, partition)) - {restarted}
        assert wait_until(
            partial(copied, partition, key, running),
            f"the running replicas of {TOPIC}-{partition} to copy {key}",
        )
    # It stays so: the restarted replica never gets them while the ids disagree.
    assert all(
        key.encode() not in segment(incident, restarted, partition)
        for partition, key in written.items()
    )
