"""Moving a replica to another log dir of its broker, on real Apache Kafka and on the
emulator, the same assertions on both (the emulator's fidelity row for remediate's repair
without restarts, docs/sandbox.md).

On Kafka 2.8, after the incident (3 brokers, 2 log dirs each), every old partition is fenced:
its leader holds the old id X and refused ZooKeeper's epoch. Moving each replica of one such
partition to its broker's other log dir (AlterReplicaLogDirs) builds a future log with no topic
id at all, and after the swap the replica holds none, on disk or in memory (Kafka 2.8.2's
LogManager.getOrCreateLog takes no id, LogManager.scala:781). A reassignment to the same
replica list then sends LeaderAndIsr with ZooKeeper's id Y, which every replica takes, as a
restarted broker would: the partition heals with no restart, no leader forced anywhere, its data
copied only on each broker's own disk. On Kafka 3.x the future log inherits the current one's
id (KAFKA-12426): the same move and trigger change nothing, which is why the repair is never
offered there.

Slow: each kind starts a sandbox and runs the incident on it (real Kafka: about 20 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.formats.logdir import PARTITION_METADATA, parse_partition_metadata
from remediate.kafka_admin import KafkaPythonAdmin
from remediate.ports import KafkaAdmin, places
from remediate.sandbox import admin, cluster
from remediate.sandbox.admin_port import SandboxAdmin
from remediate.sandbox.reproduce import Incident, leader_fenced, partition_states
from remediate.state import ReplicaRef, TopicPartition
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"


@pytest.fixture(
    scope="module",
    params=[("emulated", "2.8"), ("real-2.8.2", "2.8"), ("emulated", "3.4"), ("real-3.4.1", "3.4")],
    ids=["emulated-2.8", "real-kafka-2.8.2", "emulated-3.4", "real-kafka-3.4.1"],
)
def incident(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Incident]:
    kafka, version = request.param
    directory = tmp_path_factory.mktemp(f"log-dir-move-{kafka}-{version}") / "sandbox"
    cluster.up(directory, kafka=kafka, kafka_version=version)
    reproduced = Incident(directory, topic=TOPIC)
    try:
        reproduced.run()
        yield reproduced
    finally:
        reproduced.close()
        cluster.down(directory)


def kafka_admin(incident: Incident) -> KafkaAdmin:
    if incident.state.real_kafka is None:
        return SandboxAdmin(incident.zk)
    addresses = {b.broker_id: f"{b.host}:{b.port}" for b in incident.state.brokers}
    return KafkaPythonAdmin(list(addresses.values()), addresses=addresses)


def on_disk(incident: Incident, broker: int, partition: int) -> list[Path]:
    """Every directory named after the replica in the broker's log dirs (two for a moment
    during a swap, see `moved_on_disk`)."""
    return [
        Path(d) / f"{TOPIC}-{partition}"
        for d in incident.state.broker(broker).log_dirs
        if (Path(d) / f"{TOPIC}-{partition}").is_dir()
    ]


def replica_dir(incident: Incident, broker: int, partition: int) -> Path:
    found = on_disk(incident, broker, partition)
    assert len(found) == 1, f"broker {broker} has {len(found)} {TOPIC}-{partition} dirs: {found}"
    return found[0]


def file_id(directory: Path) -> str | None:
    path = directory / PARTITION_METADATA
    if not path.exists():
        return None
    return str(parse_partition_metadata(path.read_bytes(), source=str(path)).topic_id)


def test_the_move_and_the_trigger(incident: Incident) -> None:
    zk, state = incident.zk, incident.state
    old, new = incident.result.old_id, incident.result.new_id
    partition, control = incident.result.old_partitions[:2]
    replicas = list(admin.read_topic(zk, TOPIC)[0].partitions[partition])
    before = partition_states(zk, TOPIC, [partition, control])
    assert leader_fenced(state, TOPIC, partition, before[partition])
    assert leader_fenced(state, TOPIC, control, before[control])
    assert {file_id(replica_dir(incident, b, partition)) for b in replicas} == {old}
    destinations = {
        b: next(
            d
            for d in state.broker(b).log_dirs
            if d != str(replica_dir(incident, b, partition).parent)
        )
        for b in replicas
    }
    tp = TopicPartition(TOPIC, partition)
    moves = {ReplicaRef(b, tp): d for b, d in destinations.items()}

    client = kafka_admin(incident)
    try:
        assert {v for b in replicas if (v := client.kafka_version(b))} == {
            tuple(int(x) for x in state.kafka_version.split("."))
        }
        answers = client.alter_replica_log_dirs(moves)
        if state.kafka_version != "2.8":
            # The restarted broker refused every LeaderAndIsr since it started: its replica has
            # no log to move (Partition.maybeCreateFutureReplica needs one).
            refused = ReplicaRef(incident.result.restarted_broker, tp)
            assert answers.pop(refused) == "REPLICA_NOT_AVAILABLE"
            del moves[refused]
        assert set(answers.values()) == {None}

        def moved() -> bool:
            found = places(client.log_dirs(replicas, [tp]))
            return {k: (found[k].log_dir, found[k].future_dir) for k in moves if k in found} == {
                k: (d, None) for k, d in moves.items()
            }

        wait_until(moved, f"the replicas of {TOPIC}-{partition} to move", timeout=60)

        def moved_on_disk() -> bool:
            # DescribeLogDirs reports the move done once the broker's maps are swapped; on the
            # disk, real 2.8.2 renames the future dir to the replica's name first and only
            # then the old one away (LogManager.replaceCurrentWithFutureLog): until then the
            # broker has two.
            return all(
                on_disk(incident, r.broker, partition) == [Path(d) / f"{TOPIC}-{partition}"]
                for r, d in moves.items()
            )

        wait_until(
            moved_on_disk,
            f"one {TOPIC}-{partition} dir per broker, in its new log dir: {moves}",
            timeout=30,
        )
        # The move is the broker's own business: nothing changed in ZooKeeper.
        assert partition_states(zk, TOPIC, [partition])[partition] == before[partition]
        swapped = {file_id(replica_dir(incident, r.broker, partition)) for r in moves}
        if state.kafka_version == "2.8":
            assert swapped == {None}  # no partition.metadata in the new directories
        else:
            assert swapped == {old}  # the future log inherited it (KAFKA-12426)

        # The trigger: a reassignment to the very same replica list.
        assert client.reassign({tp: replicas}) == {tp: None}
        if state.kafka_version == "2.8":

            def healed() -> bool:
                now = partition_states(zk, TOPIC, [partition])[partition]
                files = {file_id(replica_dir(incident, b, partition)) for b in replicas}
                return sorted(now.isr) == sorted(replicas) and files == {new}

            wait_until(healed, f"{TOPIC}-{partition} to heal", timeout=120)
        assert client.ongoing_reassignments() == set()
    finally:
        client.close()
    after = partition_states(zk, TOPIC, [partition])[partition]
    assert after.leader_epoch == before[partition].leader_epoch + 1

    if state.kafka_version != "2.8":
        # Every replica still holds X: it refused the trigger, and the partition stays fenced.
        assert {file_id(replica_dir(incident, b, partition)) for b in replicas} == {old}
        assert leader_fenced(state, TOPIC, partition, after)
        return
    assert not leader_fenced(state, TOPIC, partition, after)
    # acks=all works on the healed partition and every record it ever acknowledged is there:
    # no follower lost or skipped anything across the swap (the leader-epoch-cache gap of
    # KAFKA-15608: the moved logs hold no entry for an epoch nothing was written in).
    producer = incident.kafka.producer(timeout_ms=10_000)
    try:
        offset, error = producer.send(TOPIC, partition, [("after-the-move", "v")])
    finally:
        producer.close()
    assert error is None and offset is not None
    # The partition left alone is still fenced: the move healed the other, not time.
    producer = incident.kafka.producer(timeout_ms=3000)
    try:
        _, control_error = producer.send(TOPIC, control, [("control", "v")])
    finally:
        producer.close()
    assert control_error is not None
    records, errors = incident.kafka.consume(TOPIC, timeout=20)
    assert partition not in errors
    read = {(r.offset, r.key) for r in records if r.partition == partition}
    assert {(a.offset, a.key) for a in incident.acked if a.partition == partition} <= read


def test_what_a_broker_refuses_to_move(incident: Incident) -> None:
    """ReplicaManager.alterReplicaLogDirs at 2.8.2 (ReplicaManager.scala:734-805): a log dir
    the broker does not have, and a partition it does not host, are refused per replica."""
    state = incident.state
    partition = incident.result.new_partitions[0]
    replicas = set(admin.read_topic(incident.zk, TOPIC)[0].partitions[partition])
    broker = min(replicas)
    client = kafka_admin(incident)
    try:
        answers = client.alter_replica_log_dirs(
            {
                ReplicaRef(broker, TopicPartition(TOPIC, partition)): "/nowhere/kafka-logs",
                ReplicaRef(broker, TopicPartition("no-such-topic", 0)): (
                    state.broker(broker).log_dirs[0]
                ),
            }
        )
    finally:
        client.close()
    assert answers[ReplicaRef(broker, TopicPartition(TOPIC, partition))] == "LOG_DIR_NOT_FOUND"
    assert (
        answers[ReplicaRef(broker, TopicPartition("no-such-topic", 0))]
        == "UNKNOWN_TOPIC_OR_PARTITION"
    )
