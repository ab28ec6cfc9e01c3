"""`remediate sandbox reproduce`: the incident, step by step, on a running sandbox.

1. create a topic through ZooKeeper without an id (the controller assigns id X);
2. produce; 3. consume;
4. add partitions the pre-2.8 way: the znode is rewritten as version 1 and X is dropped;
5. produce and consume on every partition;
6. controller failover: the new controller finds no id and mints Y;
7. produce still works (running brokers keep their roles), and so does consuming on 2.8 and
   3.0; from 3.1 consumers fetch by topic id and every leader refuses them;
8. restart one broker: the mismatch is logged and the broker stays out of the ISR of every
   old partition.

Kafka 2.8 brokers write partition.metadata only when a LeaderAndIsr reaches a log that already
exists (Partition.checkOrSetTopicId runs before the log is created), so a freshly created
topic's replicas have no file until the next LeaderAndIsr. Long-lived topics always have had
one; step 1 gives the new topic one with an ordinary controller move while the znode still
holds X. Kafka 3.x brokers write the file when the log is created and need no such move.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from remediate.errors import FormatError, SandboxError
from remediate.formats.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    parse_leader_epoch_checkpoint,
    parse_partition_metadata,
    partition_dir_name,
)
from remediate.formats.znodes import (
    BROKER_TOPICS,
    PartitionState,
    decode_partition_state,
    partition_state_path,
)
from remediate.sandbox import admin, clients, legacy_admin
from remediate.sandbox.cluster import (
    SandboxState,
    broker_dir,
    load_state,
    start_broker,
    stop_broker,
    upgrade_broker,
    zk_client,
)
from remediate.sandbox.records import Acked

INCONSISTENT_TOPIC_ID = "INCONSISTENT_TOPIC_ID"
MISMATCH_MARKERS = (
    "does not match the topic Id for partition",
    "does not match the topic ID for partition",
)


@dataclass
class IncidentStep:
    number: str
    title: str
    facts: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.number, "title": self.title, **self.facts}


@dataclass
class Reproduction:
    topic: str
    old_partitions: list[int]
    new_partitions: list[int]
    old_id: str = ""
    new_id: str = ""
    restarted_broker: int = -1
    steps: list[IncidentStep] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "old_partitions": self.old_partitions,
            "new_partitions": self.new_partitions,
            "old_topic_id": self.old_id,
            "new_topic_id": self.new_id,
            "restarted_broker": self.restarted_broker,
            "steps": [s.to_json() for s in self.steps],
        }


def replica_file_ids(state: SandboxState, topic: str) -> dict[tuple[int, int], str | None]:
    """(broker, partition) -> the id in that replica's partition.metadata (None if absent)."""
    ids: dict[tuple[int, int], str | None] = {}
    for broker in state.brokers:
        for log_dir in broker.log_dirs:
            for entry in Path(log_dir).glob(f"{topic}-*"):
                try:
                    number = int(entry.name[len(topic) + 1 :])
                except ValueError:
                    continue
                if entry.name != partition_dir_name(topic, number):
                    continue
                metadata = entry / PARTITION_METADATA
                if not metadata.exists():
                    ids[(broker.broker_id, number)] = None
                    continue
                try:
                    ids[(broker.broker_id, number)] = str(
                        parse_partition_metadata(
                            metadata.read_bytes(), source=str(metadata)
                        ).topic_id
                    )
                except FormatError:
                    ids[(broker.broker_id, number)] = "<corrupt>"
    return ids


def partition_states(
    zk: KazooClient, topic: str, partitions: list[int]
) -> dict[int, PartitionState]:
    states = {}
    for p in partitions:
        data, stat = zk.get(partition_state_path(topic, p))
        states[p] = decode_partition_state(
            data, source=partition_state_path(topic, p), zk_version=stat.version
        )
    return states


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise SandboxError(f"timed out after {timeout:.0f}s waiting for {what}")


def mismatch_lines(directory: Path, broker_id: int) -> list[str]:
    path = broker_dir(directory, broker_id) / "logs" / "state-change.log"
    if not path.exists():
        return []
    return [
        line for line in path.read_text().splitlines() if any(m in line for m in MISMATCH_MARKERS)
    ]


def latest_leader_epoch(state: SandboxState, broker_id: int, topic: str, partition: int) -> int:
    """The last epoch in the replica's leader-epoch-checkpoint (-1 when it has none): the
    newest leader epoch that replica accepted and wrote down."""
    for log_dir in state.broker(broker_id).log_dirs:
        path = Path(log_dir) / partition_dir_name(topic, partition) / LEADER_EPOCH_CHECKPOINT
        try:
            entries = parse_leader_epoch_checkpoint(path.read_bytes(), source=str(path))
        except (OSError, FormatError):
            continue
        return entries[-1].epoch if entries else -1
    return -1


def leader_fenced(
    state: SandboxState, topic: str, partition: int, zk_state: PartitionState
) -> bool:
    """ZooKeeper's leader of the partition never took ZooKeeper's leader epoch: it refused
    the LeaderAndIsr that carried it, so no ISR change of its own can commit (Kafka fences an
    AlterIsr from an older epoch) and no replica out of the ISR can come back."""
    if zk_state.leader < 0:
        return False
    return latest_leader_epoch(state, zk_state.leader, topic, partition) < zk_state.leader_epoch


def _produce_and_consume(
    kafka: clients.SandboxClient, topic: str, count: int, prefix: str, acked: list[Acked]
) -> dict[str, Any]:
    report = kafka.produce(topic, count=count, key_prefix=prefix, retries=10)
    acked += report.acked
    records, errors = kafka.consume(topic)
    consumed = {r.key for r in records}
    lost = [a.key for a in report.acked if a.key not in consumed]
    if errors or lost or len(report.acked) != count:
        raise SandboxError(
            f"produce/consume on {topic} failed: acked {len(report.acked)}/{count},"
            f" errors {report.to_json()['errors']}, consume errors {errors}, lost {len(lost)}"
        )
    return {"produced": count, "acked": len(report.acked), "consumed": len(records)}


class Incident:
    """The eight steps, runnable one at a time (the tests assert after each)."""

    def __init__(
        self,
        directory: Path,
        *,
        topic: str = "orders",
        partitions: int = 3,
        added: int = 3,
        records: int = 100,
        upgrade_to: str | None = None,
        on_step: Callable[[IncidentStep], None] | None = None,
    ) -> None:
        self.directory = directory.resolve()
        # Step 8's restart as a rolling upgrade's step to this real release (`real-<version>`):
        # the restart that surfaces the incident is very often one.
        self.upgrade_to = upgrade_to
        self.state = load_state(self.directory)
        self.records = records
        self.replication = min(3, len(self.state.brokers))
        self.on_step = on_step
        self.result = Reproduction(
            topic, list(range(partitions)), list(range(partitions, partitions + added))
        )
        self.zk = zk_client(self.state)
        self.kafka = clients.for_sandbox(self.state, self.zk)
        self.acked: list[Acked] = []

    @property
    def topic(self) -> str:
        return self.result.topic

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _done(self, step: IncidentStep) -> IncidentStep:
        self.result.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        return step

    def run(self) -> Reproduction:
        for step in (
            self.create_topic,
            self.produce,
            self.consume,
            self.add_partitions_legacy,
            self.produce_and_consume_all,
            self.failover,
            self.still_works,
            self.restart_one_broker,
        ):
            step()
        return self.result

    def create_topic(self) -> IncidentStep:
        """(1) A topic created through ZooKeeper without id; the controller assigns X."""
        zk, topic = self.zk, self.topic
        legacy_admin.create_topic(
            self.state,
            zk,
            topic,
            len(self.result.old_partitions),
            self.replication,
        )
        wait_for(
            lambda: admin.read_topic(zk, topic)[0].topic_id is not None,
            "the controller to assign a topic id",
        )
        assignment = admin.read_topic(zk, topic)[0]
        self.result.old_id = str(assignment.topic_id)
        step = IncidentStep(
            "1", "create topic through ZooKeeper without id", {"zk_topic_id": self.result.old_id}
        )
        expected = {(b, p) for p, replicas in assignment.partitions.items() for b in replicas}

        def all_files_written() -> bool:
            ids = replica_file_ids(self.state, topic)
            return all(ids.get(r) == self.result.old_id for r in expected)

        wait_for(
            lambda: set(replica_file_ids(self.state, topic)) >= expected,
            f"every replica of {topic} to create its log",
        )
        if self.state.kafka_version == "2.8" and not all_files_written():
            before, after = admin.failover_controller(zk)
            step.facts["controller_move"] = {
                "from": before.broker_id,
                "to": after.broker_id,
                "epoch": after.epoch,
            }
        wait_for(all_files_written, f"every replica of {topic} to write partition.metadata")
        step.facts["replica_files"] = "all hold the topic id"
        return self._done(step)

    def produce(self) -> IncidentStep:
        """(2) acks=all produce works."""
        report = self.kafka.produce(self.topic, count=self.records, key_prefix="step2", retries=10)
        self.acked += report.acked
        if len(report.acked) != self.records:
            raise SandboxError(f"step 2: {len(report.acked)} of {self.records} records acked")
        return self._done(IncidentStep("2", "produce", {"acked": len(report.acked)}))

    def consume(self) -> IncidentStep:
        """(3) Everything produced is consumed."""
        consumed, errors = self.kafka.consume(self.topic)
        if errors or len(consumed) < self.records:
            raise SandboxError(f"step 3: consumed {len(consumed)} records, errors {errors}")
        return self._done(IncidentStep("3", "consume", {"consumed": len(consumed)}))

    def add_partitions_legacy(self) -> IncidentStep:
        """(4) Kafka 1.0's add-partitions: a version-1 znode without topic_id."""
        total = len(self.result.old_partitions) + len(self.result.new_partitions)
        legacy_admin.add_partitions(self.state, self.zk, self.topic, total)
        assignment, _ = admin.read_topic(self.zk, self.topic)
        wait_for(
            lambda: all(
                self.zk.exists(partition_state_path(self.topic, p))
                for p in self.result.new_partitions
            ),
            "the controller to create the new partitions",
        )
        added = {
            (b, p)
            for p, replicas in assignment.partitions.items()
            if p in self.result.new_partitions
            for b in replicas
        }
        wait_for(
            lambda: set(replica_file_ids(self.state, self.topic)) >= added,
            "every replica of the new partitions to create its log",
        )
        # Step 5 produces by the partitions a broker's metadata shows: each must show them all.
        wait_for(
            lambda: self.kafka.serves_partitions(self.topic, total),
            f"every broker's metadata to show {total} partitions of {self.topic}",
        )
        return self._done(
            IncidentStep(
                "4",
                "add partitions the pre-2.8 way (znode version 1, topic_id dropped)",
                {"znode_version": assignment.version, "zk_topic_id": None, "partitions": total},
            )
        )

    def produce_and_consume_all(self) -> IncidentStep:
        """(5) Produce and consume on every partition, old and new."""
        facts = _produce_and_consume(self.kafka, self.topic, self.records, "step5", self.acked)
        return self._done(IncidentStep("5", "produce and consume on every partition", facts))

    def failover(self) -> IncidentStep:
        """(6) Controller failover: the new controller finds no id and mints Y."""
        before, after = admin.failover_controller(self.zk)
        wait_for(
            lambda: admin.read_topic(self.zk, self.topic)[0].topic_id is not None,
            "the new controller to assign an id",
        )
        self.result.new_id = str(admin.read_topic(self.zk, self.topic)[0].topic_id)
        facts = {
            "controller_from": before.broker_id,
            "controller_to": after.broker_id,
            "controller_epoch": after.epoch,
            "zk_topic_id": self.result.new_id,
        }
        return self._done(IncidentStep("6", "controller failover", facts))

    def still_works(self) -> IncidentStep:
        """(7) Running brokers keep their roles: acks=all produce still works everywhere.

        On 2.8 and 3.0 consuming does too (their Fetch stops at v12, with no topic id). From
        3.1 a consumer fetches by topic id (Fetch v13: Kafka's clients since 3.1, librdkafka
        2): the id it gets from the metadata is Y, the leaders still hold X, and every fetch
        is refused with INCONSISTENT_TOPIC_ID: consumers stop at the failover itself."""
        if not self.state.fetches_by_id:
            facts = _produce_and_consume(self.kafka, self.topic, self.records, "step7", self.acked)
            return self._done(IncidentStep("7", "produce and consume still work", facts))
        report = self.kafka.produce(self.topic, count=self.records, key_prefix="step7", retries=10)
        self.acked += report.acked
        if len(report.acked) != self.records:
            raise SandboxError(
                f"step 7: {len(report.acked)} of {self.records} records acked,"
                f" errors {report.to_json()['errors']}"
            )
        partitions = self.result.old_partitions + self.result.new_partitions
        _, errors = self.kafka.consume(self.topic, timeout=15, refused_by={INCONSISTENT_TOPIC_ID})
        refused = sorted(p for p, e in errors.items() if e == INCONSISTENT_TOPIC_ID)
        if refused != partitions:
            raise SandboxError(
                f"step 7: consuming by topic id should be refused on every partition, got {errors}"
            )
        facts = {
            "acked": len(report.acked),
            "consume_refused": {f"{self.topic}-{p}": errors[p] for p in refused},
        }
        return self._done(IncidentStep("7", "produce still works; consumers are refused", facts))

    def restart_one_broker(self) -> IncidentStep:
        """(8) Restart a broker that leads an old partition and is not the controller.

        Its controlled shutdown moves leadership and shrinks ISRs with new leader epochs,
        which every replica holding X refuses. Once it is out of every old ISR and the leader
        ZooKeeper names for each old partition is fenced (it never took ZooKeeper's epoch),
        nothing can bring it back: that leader's ISR changes are all refused. The step ends
        when it is back in the ISR of every other partition it hosts (a healthy follower's
        way back, and a cluster that has settled)."""
        zk, topic, old = self.zk, self.topic, self.result.old_partitions
        controller = admin.current_controller(zk)
        states = partition_states(zk, topic, old)
        leaders = sorted(
            {
                s.leader
                for s in states.values()
                if s.leader >= 0 and (controller is None or s.leader != controller.broker_id)
            }
        )
        broker_id = leaders[0] if leaders else self.state.brokers[0].broker_id
        self.result.restarted_broker = broker_id
        if self.upgrade_to is not None:
            upgrade_broker(self.directory, broker_id, self.upgrade_to)
        else:
            stop_broker(self.directory, broker_id)
            start_broker(self.directory, broker_id, wait=True)
        hosted = [p for p, s in states.items() if broker_id in self._replicas(p)]

        def out_of_isr_everywhere() -> bool:
            return all(broker_id not in s.isr for s in partition_states(zk, topic, old).values())

        def leaders_fenced() -> bool:
            now = partition_states(zk, topic, hosted)
            return all(leader_fenced(self.state, topic, p, s) for p, s in now.items())

        def rejoinable() -> list[tuple[str, int]]:
            """Every partition it hosts where nothing stops it from coming back: other
            topics', and on 2.8 the new partitions, which hold Y as ZooKeeper does."""
            found = []
            for name in zk.get_children(BROKER_TOPICS):
                assignment, _ = admin.read_topic(zk, name)
                for number, replicas in assignment.partitions.items():
                    stale = name == topic and (number in old or self.state.kafka_version != "2.8")
                    if broker_id in replicas and not stale:
                        found.append((name, number))
            return found

        def back_where_it_can() -> bool:
            return all(
                broker_id in partition_states(zk, name, [number])[number].isr
                for name, number in rejoinable()
            )

        wait_for(out_of_isr_everywhere, f"broker {broker_id} to be out of every old ISR")
        wait_for(leaders_fenced, f"the leaders of the old partitions broker {broker_id} hosts")
        wait_for(
            back_where_it_can,
            f"broker {broker_id} to rejoin the ISR of every other partition it hosts",
            timeout=120,
        )
        if not out_of_isr_everywhere():
            raise SandboxError(f"broker {broker_id} rejoined the ISR of an old partition")
        # Registered is not yet refused: the controller's LeaderAndIsr, which the broker
        # refuses, comes after the registration (and, where it hosts no other partition,
        # nothing above waited for it).
        wait_for(
            lambda: bool(mismatch_lines(self.directory, broker_id)),
            f"broker {broker_id} to log a topic id mismatch (state-change.log)",
        )
        lines = mismatch_lines(self.directory, broker_id)
        facts: dict[str, Any] = {
            "broker": broker_id,
            **({"upgraded_to": self.upgrade_to} if self.upgrade_to is not None else {}),
            "mismatch_log_lines": len(lines),
            "example": lines[0],
            "out_of_isr": [f"{topic}-{p}" for p in old],
            "fenced_leaders": sorted({s.leader for s in partition_states(zk, topic, old).values()}),
        }
        return self._done(IncidentStep("8", "restart one broker", facts))

    def _replicas(self, partition: int) -> tuple[int, ...]:
        assignment, _ = admin.read_topic(self.zk, self.topic)
        return tuple(assignment.partitions.get(partition, ()))


def reproduce(
    directory: Path,
    *,
    topic: str = "orders",
    upgrade_to: str | None = None,
    on_step: Callable[[IncidentStep], None] | None = None,
) -> Reproduction:
    incident = Incident(directory, topic=topic, upgrade_to=upgrade_to, on_step=on_step)
    try:
        return incident.run()
    finally:
        incident.close()
