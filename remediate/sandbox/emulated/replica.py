"""The broker side of replication: partitions, LeaderAndIsr, produce, fetch and the ISR.

Follows kafka.server.ReplicaManager and kafka.cluster.Partition at 2.8.2 where it matters to
the incident: the topic-id check comes before the leader-epoch check and refuses the whole
partition on a mismatch; a refused partition keeps whatever role it had. Also modelled:
leader epochs, high watermark = min log end over the (maximal) ISR, ISR shrink after
replica.lag.time.max.ms and expansion on catch-up through AlterIsr to the controller, acks=all
with min.insync.replicas, and follower truncation by leader epoch or to the high watermark.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remediate.errors import FormatError
from remediate.formats.logdir import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    encode_offset_checkpoint,
    parse_offset_checkpoint,
    parse_partition_dir,
    partition_dir_name,
)
from remediate.formats.topic_id import TopicId, parse_topic_id
from remediate.sandbox.emulated import wire
from remediate.sandbox.emulated.kafkalog import STATE_CHANGE_LOGGER
from remediate.sandbox.emulated.log_dir_move import LogDirMover
from remediate.sandbox.emulated.storage import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    PartitionLog,
    Record,
    write_atomically,
)

TopicPartition = tuple[str, int]
log = logging.getLogger("kafka.server.ReplicaManager")
state_change_log = logging.getLogger(STATE_CHANGE_LOGGER)


def now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass
class FollowerState:
    """What the leader knows of one follower (kafka.cluster.Replica)."""

    log_end_offset: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = 0

    def update(self, fetch_offset: int, leader_leo: int, fetch_ms: float) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = fetch_ms


@dataclass
class Partition:
    topic: str
    partition: int
    log: PartitionLog | None = None
    leader: int = -1
    leader_epoch: int = -1
    is_leader: bool = False
    isr: tuple[int, ...] = ()
    pending_isr: tuple[int, ...] | None = None
    # False once the controller refused the pending change: Kafka then stays in the pending
    # state, proposing nothing more, until the next LeaderAndIsr.
    alter_isr_in_flight: bool = False
    replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0
    high_watermark: int = 0
    leader_epoch_start_offset: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """ISR used for the high watermark: the committed one plus any pending additions."""
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))


@dataclass
class LogDir:
    path: Path
    offline: bool = False
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)


class ReplicaManager:
    """All replicas hosted by one broker and the requests that act on them."""

    def __init__(
        self,
        *,
        broker_id: int,
        kafka_version: str,
        log_dirs: list[LogDir],
        logs: dict[TopicPartition, PartitionLog],
        replica_lag_time_max_ms: int,
        fetch_wait_max_ms: int,
        fetch_backoff_ms: int,
        min_isr_for: Callable[[str], int],
        send_alter_isr: Callable[[list[dict[str, Any]]], dict[str, Any] | None],
        future_logs: dict[TopicPartition, PartitionLog] | None = None,
        file_delete_delay_ms: int = 60_000,
    ) -> None:
        self.broker_id = broker_id
        self.kafka_version = kafka_version
        self.log_dirs = log_dirs
        self.logs = logs
        self.lag_max_ms = replica_lag_time_max_ms
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.fetch_backoff_ms = fetch_backoff_ms
        self.min_isr_for = min_isr_for
        self.send_alter_isr = send_alter_isr
        self.broker_epoch = -1
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.fetchers = FetcherManager(self)
        self.stopping = threading.Event()
        self._alter_isr_wakeup = threading.Event()
        self.mover = LogDirMover(
            self, delete_delay_s=file_delete_delay_ms / 1000.0, stopping=self.stopping
        )
        for tp, future in (future_logs or {}).items():
            self.mover.adopt(tp, future)

    # -- helpers ------------------------------------------------------------------------------

    def _log_dir_for_new(self) -> LogDir:
        online = [d for d in self.log_dirs if not d.offline]
        if not online:
            raise OSError("every log directory is offline")
        counts = {d.path: 0 for d in online}
        for tp_log in self.logs.values():
            parent = tp_log.dir.parent
            if parent in counts:
                counts[parent] += 1
        return min(online, key=lambda d: (counts[d.path], str(d.path)))

    def _high_watermark_from_checkpoint(self, tp: TopicPartition, tp_log: PartitionLog) -> int:
        for log_dir in self.log_dirs:
            if tp_log.dir.parent == log_dir.path:
                return min(log_dir.high_watermarks.get(tp, 0), tp_log.log_end_offset)
        return 0

    def _get_or_create_log(self, partition: Partition, topic_id: TopicId | None) -> PartitionLog:
        if partition.log is None:
            tp_log = self.logs.get(partition.tp)
            if tp_log is None:
                log_dir = self._log_dir_for_new()
                tp_log = PartitionLog.create(
                    log_dir.path / partition_dir_name(partition.topic, partition.partition),
                    partition.topic,
                    partition.partition,
                )
                self.logs[partition.tp] = tp_log
                log.info("Created log for partition %s in %s", partition.name, log_dir.path)
            partition.log = tp_log
            partition.high_watermark = self._high_watermark_from_checkpoint(partition.tp, tp_log)
        # Kafka 3.x passes the request's topic id to log creation; 2.8 does not.
        if self.kafka_version != "2.8" and topic_id is not None and partition.log.topic_id is None:
            partition.log.assign_topic_id(topic_id)
        return partition.log

    # -- moving a replica between log dirs (log_dir_move.py) -----------------------------------

    def online_log_dirs(self) -> list[Path]:
        return [d.path for d in self.log_dirs if not d.offline]

    def all_log_dirs_online(self) -> bool:
        return not any(d.offline for d in self.log_dirs)

    def hosts(self, tp: TopicPartition) -> bool:
        """A LeaderAndIsr named this broker a replica of the partition since it started."""
        return tp in self.partitions

    def current_log(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of a partition this broker hosts online (a LeaderAndIsr attached it)."""
        partition = self.partitions.get(tp)
        return partition.log if partition is not None else None

    def swap_in(self, tp: TopicPartition, future: PartitionLog) -> PartitionLog | None:
        """Partition.maybeReplaceCurrentWithFutureReplica: the caught-up future log takes the
        partition's own name in its dir and becomes its log; only the high watermark carries
        over. Returns the log it replaced."""
        partition = self.partitions.get(tp)
        if partition is None or partition.log is None:
            return None
        current = partition.log
        future.rename_dir(future.dir.with_name(partition_dir_name(*tp)))
        partition.log = future
        self.logs[tp] = future
        log.info(
            "The current replica is successfully replaced with the future replica for %s"
            " (now in %s, topic id %s)",
            partition.name,
            future.dir.parent,
            future.topic_id,
        )
        self.changed.notify_all()
        return current

    def handle_alter_replica_log_dirs(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self.mover.alter(request)

    def handle_describe_log_dirs(self, request: dict[str, Any]) -> dict[str, Any]:
        del request
        with self.lock:
            return {
                "error": wire.NONE,
                "log_dirs": self.mover.describe(
                    [(d.path, d.offline) for d in self.log_dirs], self.logs
                ),
            }

    # -- LeaderAndIsr -------------------------------------------------------------------------

    def _check_topic_id(self, partition: Partition, request_id: TopicId | None) -> bool:
        """Partition.checkOrSetTopicId (2.8) / ReplicaManager's check (3.x)."""
        if request_id is None or request_id.is_zero:
            return True
        tp_log = partition.log if partition.log is not None else self.logs.get(partition.tp)
        if self.kafka_version == "2.8":
            # 2.8 looks only at a log already attached to the Partition.
            tp_log = partition.log
        if tp_log is None:
            return True
        if tp_log.topic_id is None:
            if self.kafka_version == "2.8":
                tp_log.assign_topic_id(request_id)
            return True
        if tp_log.topic_id == request_id:
            return True
        if self.kafka_version == "2.8":
            state_change_log.error(
                "[Broker id=%d] Topic Id in memory: %s does not match the topic Id for partition"
                " %s provided in the request: %s.",
                self.broker_id,
                tp_log.topic_id,
                partition.name,
                request_id,
            )
        else:
            state_change_log.error(
                "[Broker id=%d] Topic ID in memory: %s does not match the topic ID for partition"
                " %s received: %s.",
                self.broker_id,
                tp_log.topic_id,
                partition.name,
                request_id,
            )
        return False

    def handle_leader_and_isr(self, request: dict[str, Any]) -> dict[str, Any]:
        controller_id = request["controller_id"]
        controller_epoch = request["controller_epoch"]
        topic_ids = {
            topic: parse_topic_id(text, source="LeaderAndIsr", field=f"topic_ids.{topic}")
            for topic, text in request.get("topic_ids", {}).items()
        }
        leaders = {int(k): (v[0], v[1]) for k, v in request.get("live_leaders", {}).items()}
        errors: list[list[Any]] = []
        with self.lock:
            if controller_epoch < self.controller_epoch:
                state_change_log.warning(
                    "[Broker id=%d] Ignoring LeaderAndIsr request from controller %d with"
                    " controller epoch %d since its controller epoch is old. Latest known"
                    " controller epoch is %d",
                    self.broker_id,
                    controller_id,
                    controller_epoch,
                    self.controller_epoch,
                )
                return {"error": wire.STALE_CONTROLLER_EPOCH, "errors": []}
            # Only an older epoch is stale: the controller may see the new registration and
            # send with its epoch before this broker has learnt it (KafkaApis.isBrokerEpochStale).
            request_epoch = request.get("broker_epoch", -1)
            if request_epoch != -1 and request_epoch < self.broker_epoch:
                return {"error": wire.STALE_BROKER_EPOCH, "errors": []}
            self.controller_epoch = controller_epoch
            to_leader: list[tuple[Partition, dict[str, Any]]] = []
            to_follower: list[tuple[Partition, dict[str, Any]]] = []
            for state in request["partitions"]:
                tp = (state["topic"], state["partition"])
                partition = self.partitions.setdefault(tp, Partition(tp[0], tp[1]))
                if (
                    tp not in self.logs
                    and not state.get("is_new", False)
                    and any(d.offline for d in self.log_dirs)
                ):
                    # LogManager.getOrCreateLog: with a log dir offline, only a brand-new
                    # partition may get a log; this one may well live in the offline dir.
                    state_change_log.warning(
                        "[Broker id=%d] Ignoring LeaderAndIsr request for partition %s as the"
                        " local replica for the partition is in an offline log directory",
                        self.broker_id,
                        partition.name,
                    )
                    errors.append([tp[0], tp[1], wire.KAFKA_STORAGE_ERROR])
                    continue
                request_id = topic_ids.get(tp[0])
                if not self._check_topic_id(partition, request_id):
                    errors.append([tp[0], tp[1], wire.INCONSISTENT_TOPIC_ID])
                elif state["leader_epoch"] > partition.leader_epoch:
                    if self.broker_id not in state["replicas"]:
                        errors.append([tp[0], tp[1], wire.UNKNOWN_TOPIC_OR_PARTITION])
                    elif state["leader"] == self.broker_id:
                        to_leader.append((partition, state))
                    else:
                        to_follower.append((partition, state))
                else:
                    state_change_log.info(
                        "[Broker id=%d] Ignoring LeaderAndIsr request from controller %d for"
                        " partition %s since its associated leader epoch %d is not higher than"
                        " the current leader epoch %d",
                        self.broker_id,
                        controller_id,
                        partition.name,
                        state["leader_epoch"],
                        partition.leader_epoch,
                    )
                    errors.append([tp[0], tp[1], wire.STALE_CONTROLLER_EPOCH])
            for partition, state in to_leader:
                self._make_leader(partition, state, topic_ids.get(partition.topic))
                errors.append([partition.topic, partition.partition, wire.NONE])
            for partition, state in to_follower:
                self._make_follower(partition, state, topic_ids.get(partition.topic), leaders)
                errors.append([partition.topic, partition.partition, wire.NONE])
            self.changed.notify_all()
        return {"error": wire.NONE, "errors": errors}

    def _become(
        self, partition: Partition, state: dict[str, Any], topic_id: TopicId | None
    ) -> PartitionLog:
        tp_log = self._get_or_create_log(partition, topic_id)
        partition.controller_epoch = state["controller_epoch"]
        partition.replicas = tuple(state["replicas"])
        partition.zk_version = state["zk_version"]
        partition.pending_isr = None
        partition.alter_isr_in_flight = False
        return tp_log

    def _make_leader(
        self, partition: Partition, state: dict[str, Any], topic_id: TopicId | None
    ) -> None:
        tp_log = self._become(partition, state, topic_id)
        self.fetchers.remove(partition.tp)
        was_leader = partition.is_leader
        start = tp_log.log_end_offset
        state_change_log.info(
            "[Broker id=%d] Leader %s starts at leader epoch %d from offset %d with high"
            " watermark %d. Previous leader epoch was %d.",
            self.broker_id,
            partition.name,
            state["leader_epoch"],
            start,
            partition.high_watermark,
            partition.leader_epoch,
        )
        partition.leader = self.broker_id
        partition.leader_epoch = state["leader_epoch"]
        partition.leader_epoch_start_offset = start
        partition.isr = tuple(state["isr"])
        partition.is_leader = True
        tp_log.epochs.assign(partition.leader_epoch, start)
        current = now_ms()
        followers: dict[int, FollowerState] = {}
        for replica in partition.replicas:
            if replica == self.broker_id:
                continue
            old = partition.followers.get(replica)
            follower = FollowerState(
                log_end_offset=old.log_end_offset if (old and was_leader) else -1,
                last_caught_up_ms=current if replica in partition.isr else 0.0,
                last_fetch_ms=current,
                last_fetch_leader_leo=start,
            )
            followers[replica] = follower
        partition.followers = followers
        self._maybe_increment_high_watermark(partition)

    def _make_follower(
        self,
        partition: Partition,
        state: dict[str, Any],
        topic_id: TopicId | None,
        leaders: dict[int, tuple[str, int]],
    ) -> None:
        self._become(partition, state, topic_id)
        partition.is_leader = False
        partition.isr = ()
        partition.followers = {}
        partition.leader = state["leader"]
        partition.leader_epoch = state["leader_epoch"]
        state_change_log.info(
            "[Broker id=%d] Follower %s starts at leader epoch %d with leader %d",
            self.broker_id,
            partition.name,
            partition.leader_epoch,
            partition.leader,
        )
        self.fetchers.remove(partition.tp)
        endpoint = leaders.get(partition.leader)
        if partition.leader >= 0 and endpoint is not None:
            self.fetchers.add(partition.leader, endpoint, partition.tp)

    def handle_stop_replica(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if request["controller_epoch"] < self.controller_epoch:
                return {"error": wire.STALE_CONTROLLER_EPOCH}
            for topic, number in request["partitions"]:
                self.fetchers.remove((topic, number))
                partition = self.partitions.get((topic, number))
                if partition is not None and not partition.is_leader:
                    partition.leader = -1
            self.changed.notify_all()
        return {"error": wire.NONE}

    # -- high watermark and ISR ---------------------------------------------------------------

    def _maybe_increment_high_watermark(self, partition: Partition) -> None:
        if not partition.is_leader or partition.log is None:
            return
        ends = [partition.log.log_end_offset]
        for replica in partition.maximal_isr:
            if replica == self.broker_id:
                continue
            follower = partition.followers.get(replica)
            ends.append(follower.log_end_offset if follower else -1)
        new_hw = min(ends)
        if new_hw > partition.high_watermark:
            partition.high_watermark = new_hw
            self.changed.notify_all()

    def _maybe_expand_isr(self, partition: Partition, replica: int) -> None:
        if partition.pending_isr is not None or replica in partition.isr:
            return
        follower = partition.followers.get(replica)
        if follower is None or replica not in partition.replicas:
            return
        if (
            follower.log_end_offset >= partition.high_watermark
            and follower.log_end_offset >= partition.leader_epoch_start_offset
        ):
            new_isr = tuple(sorted(set(partition.isr) | {replica}))
            log.info(
                "[Partition %s broker=%d] Expanding ISR from %s to %s",
                partition.name,
                self.broker_id,
                ",".join(map(str, partition.isr)),
                ",".join(map(str, new_isr)),
            )
            partition.pending_isr = new_isr
            partition.alter_isr_in_flight = True
            self._alter_isr_wakeup.set()

    def shrink_isr_if_needed(self) -> None:
        """Leader check every replica.lag.time.max.ms / 2 (Partition.maybeShrinkIsr)."""
        current = now_ms()
        with self.lock:
            for partition in self.partitions.values():
                if not partition.is_leader or partition.pending_isr is not None:
                    continue
                out_of_sync = [
                    r
                    for r in partition.isr
                    if r != self.broker_id
                    and current - partition.followers.get(r, FollowerState()).last_caught_up_ms
                    > self.lag_max_ms
                ]
                if out_of_sync:
                    new_isr = tuple(r for r in partition.isr if r not in out_of_sync)
                    log.info(
                        "[Partition %s broker=%d] Shrinking ISR from %s to %s. Out of sync"
                        " replicas: %s.",
                        partition.name,
                        self.broker_id,
                        ",".join(map(str, partition.isr)),
                        ",".join(map(str, new_isr)),
                        ",".join(map(str, out_of_sync)),
                    )
                    partition.pending_isr = new_isr
                    partition.alter_isr_in_flight = True
                    self._alter_isr_wakeup.set()

    def run_alter_isr(self) -> None:
        """Send pending ISR changes to the controller until each is committed or fenced."""
        while not self.stopping.is_set():
            self._alter_isr_wakeup.wait(0.5)
            self._alter_isr_wakeup.clear()
            with self.lock:
                pending = [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "leader_epoch": p.leader_epoch,
                        "new_isr": list(p.pending_isr),
                        "zk_version": p.zk_version,
                    }
                    for p in self.partitions.values()
                    if p.is_leader and p.pending_isr is not None and p.alter_isr_in_flight
                ]
            if not pending:
                continue
            try:
                response = self.send_alter_isr(pending)
            except Exception:  # the sender must outlive any failure, or the ISR never expands
                log.exception("[Broker id=%d] Error sending AlterIsr; retrying", self.broker_id)
                response = None
            if response is None:
                self._alter_isr_wakeup.set()
                time.sleep(0.2)
                continue
            self._apply_alter_isr(response)

    def _apply_alter_isr(self, response: dict[str, Any]) -> None:
        with self.lock:
            for result in response.get("partitions", []):
                partition = self.partitions.get((result["topic"], result["partition"]))
                if (
                    partition is None
                    or not partition.is_leader
                    or not partition.alter_isr_in_flight
                ):
                    continue
                if result["error"] == wire.NONE:
                    if (
                        result["leader_epoch"] != partition.leader_epoch
                        or result["zk_version"] < partition.zk_version
                    ):
                        partition.alter_isr_in_flight = False
                        continue
                    log.info(
                        "[Partition %s broker=%d] ISR updated to %s and zkVersion updated to %d",
                        partition.name,
                        self.broker_id,
                        ",".join(map(str, result["isr"])),
                        result["zk_version"],
                    )
                    partition.isr = tuple(result["isr"])
                    partition.zk_version = result["zk_version"]
                    partition.pending_isr = None
                    partition.alter_isr_in_flight = False
                    self._maybe_increment_high_watermark(partition)
                elif result["error"] in (
                    wire.FENCED_LEADER_EPOCH,
                    wire.INVALID_UPDATE_VERSION,
                    wire.UNKNOWN_TOPIC_OR_PARTITION,
                ):
                    # Kafka gives up and stays pending until new metadata arrives.
                    log.info(
                        "[Partition %s broker=%d] Failed to update ISR to %s: %s. Giving up.",
                        partition.name,
                        self.broker_id,
                        ",".join(map(str, partition.pending_isr or ())),
                        wire.ERROR_NAMES.get(result["error"], result["error"]),
                    )
                    partition.alter_isr_in_flight = False
                else:
                    self._alter_isr_wakeup.set()
            self.changed.notify_all()

    # -- produce ------------------------------------------------------------------------------

    def handle_produce(self, request: dict[str, Any]) -> dict[str, Any]:
        tp = (request["topic"], request["partition"])
        acks = request.get("acks", -1)
        timeout_s = request.get("timeout_ms", 5000) / 1000.0
        records = [(r[0], r[1]) for r in request["records"]]
        with self.lock:
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader or partition.log is None:
                return {"error": wire.NOT_LEADER_OR_FOLLOWER}
            min_isr = self.min_isr_for(tp[0])
            if acks == -1 and len(partition.isr) < min_isr:
                return {"error": wire.NOT_ENOUGH_REPLICAS}
            epoch = partition.leader_epoch
            base = partition.log.append(records, epoch)
            last = base + len(records) - 1
            self._maybe_increment_high_watermark(partition)
            self.changed.notify_all()
            if acks != -1:
                return {"error": wire.NONE, "base_offset": base}
            deadline = time.monotonic() + timeout_s
            while True:
                if not partition.is_leader or partition.leader_epoch != epoch:
                    return {"error": wire.NOT_LEADER_OR_FOLLOWER}
                if partition.high_watermark > last:
                    if len(partition.isr) < min_isr:
                        return {"error": wire.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
                    return {"error": wire.NONE, "base_offset": base}
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.stopping.is_set():
                    return {"error": wire.REQUEST_TIMED_OUT}
                self.changed.wait(remaining)

    # -- fetch --------------------------------------------------------------------------------

    def handle_fetch(self, request: dict[str, Any]) -> dict[str, Any]:
        replica_id = request.get("replica_id", -1)
        max_wait_s = request.get("max_wait_ms", 0) / 1000.0
        max_records = request.get("max_records", 500)
        deadline = time.monotonic() + max_wait_s
        with self.lock:
            while True:
                results = [
                    self._read_partition(replica_id, p, max_records) for p in request["partitions"]
                ]
                has_data = any(r["records"] or r["error"] != wire.NONE for r in results)
                remaining = deadline - time.monotonic()
                if has_data or remaining <= 0 or self.stopping.is_set():
                    return {"error": wire.NONE, "partitions": results}
                self.changed.wait(remaining)

    def _read_partition(
        self, replica_id: int, fetch: dict[str, Any], max_records: int
    ) -> dict[str, Any]:
        tp = (fetch["topic"], fetch["partition"])
        offset = fetch["offset"]
        base: dict[str, Any] = {"topic": tp[0], "partition": tp[1], "records": []}
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader or partition.log is None:
            return {**base, "error": wire.NOT_LEADER_OR_FOLLOWER}
        if self._inconsistent_fetch_topic_id(replica_id, fetch, partition.log):
            return {**base, "error": wire.INCONSISTENT_TOPIC_ID}
        current_epoch = fetch.get("current_leader_epoch", -1)
        if current_epoch >= 0 and current_epoch < partition.leader_epoch:
            return {**base, "error": wire.FENCED_LEADER_EPOCH}
        if current_epoch > partition.leader_epoch:
            return {**base, "error": wire.UNKNOWN_LEADER_EPOCH}
        leo = partition.log.log_end_offset
        if offset > leo or offset < 0:
            return {**base, "error": wire.OFFSET_OUT_OF_RANGE, "log_end_offset": leo}
        if replica_id >= 0:
            follower = partition.followers.get(replica_id)
            if follower is None:
                return {**base, "error": wire.UNKNOWN_TOPIC_OR_PARTITION}
            follower.update(offset, leo, now_ms())
            self._maybe_expand_isr(partition, replica_id)
            self._maybe_increment_high_watermark(partition)
            records = partition.log.read(offset, max_records)
        else:
            records = [
                r
                for r in partition.log.read(offset, max_records)
                if r.offset < partition.high_watermark
            ]
        return {
            **base,
            "error": wire.NONE,
            "high_watermark": partition.high_watermark,
            "log_end_offset": leo,
            "records": [[r.offset, r.leader_epoch, r.key, r.value] for r in records],
        }

    def _inconsistent_fetch_topic_id(
        self, replica_id: int, fetch: dict[str, Any], log: PartitionLog
    ) -> bool:
        """A consumer's fetch by topic id (Fetch v13+, which 3.x brokers take and 2.8 brokers
        do not have) names another id than the leader's log holds: Kafka 3.4.1's
        ReplicaManager.readFromLocalLog refuses it with INCONSISTENT_TOPIC_ID ("Topic ID in
        the fetch session did not match the topic ID in the log"). Followers fetch with
        their own partition's id, which the emulated fetcher leaves out."""
        if self.kafka_version == "2.8" or replica_id >= 0:
            return False
        text = fetch.get("topic_id")
        if not isinstance(text, str) or not text or log.topic_id is None:
            return False
        return str(log.topic_id) != text

    def handle_offsets_for_leader_epoch(self, request: dict[str, Any]) -> dict[str, Any]:
        results = []
        with self.lock:
            for item in request["partitions"]:
                tp = (item["topic"], item["partition"])
                partition = self.partitions.get(tp)
                if partition is None or not partition.is_leader or partition.log is None:
                    results.append(
                        {"topic": tp[0], "partition": tp[1], "error": wire.NOT_LEADER_OR_FOLLOWER}
                    )
                    continue
                epoch, end = partition.log.epochs.end_offset_for(
                    item["leader_epoch"], partition.log.log_end_offset
                )
                results.append(
                    {
                        "topic": tp[0],
                        "partition": tp[1],
                        "error": wire.NONE,
                        "leader_epoch": epoch,
                        "end_offset": end,
                    }
                )
        return {"error": wire.NONE, "partitions": results}

    # -- follower side, called by the fetcher threads ----------------------------------------

    def follower_fetch_state(
        self, tp: TopicPartition, leader: int
    ) -> tuple[int, int, int | None, int] | None:
        """(log end, leader epoch, latest log epoch, high watermark) while still following."""
        partition = self.partitions.get(tp)
        if (
            partition is None
            or partition.is_leader
            or partition.leader != leader
            or partition.log is None
        ):
            return None
        return (
            partition.log.log_end_offset,
            partition.leader_epoch,
            partition.log.epochs.latest_epoch,
            partition.high_watermark,
        )

    def truncate_follower(self, tp: TopicPartition, leader_epoch: int, offset: int) -> None:
        with self.lock:
            partition = self.partitions.get(tp)
            if partition is None or partition.log is None or partition.leader_epoch != leader_epoch:
                return
            if offset < partition.log.log_end_offset:
                log.info(
                    "[Log partition=%s] Truncating to offset %d (log end offset was %d)",
                    partition.name,
                    offset,
                    partition.log.log_end_offset,
                )
                partition.log.truncate_to(offset)
            partition.high_watermark = min(partition.high_watermark, partition.log.log_end_offset)

    def append_as_follower(
        self, tp: TopicPartition, leader_epoch: int, result: dict[str, Any]
    ) -> None:
        with self.lock:
            partition = self.partitions.get(tp)
            if partition is None or partition.log is None or partition.leader_epoch != leader_epoch:
                return
            records = [Record(o, e, k, v) for o, e, k, v in result["records"]]
            records = [r for r in records if r.offset >= partition.log.log_end_offset]
            if records and records[0].offset == partition.log.log_end_offset:
                partition.log.append_replicated(records)
            partition.high_watermark = min(result["high_watermark"], partition.log.log_end_offset)
            self.changed.notify_all()

    # -- checkpoints --------------------------------------------------------------------------

    def checkpoint(self, *, clean: bool = False) -> None:
        """Write the root checkpoint files of every online log dir (tmp, fsync, rename)."""
        with self.lock:
            for log_dir in self.log_dirs:
                if log_dir.offline:
                    continue
                high_watermarks: dict[TopicPartition, int] = dict(log_dir.high_watermarks)
                recovery_points: dict[TopicPartition, int] = {}
                for tp, tp_log in self.logs.items():
                    if tp_log.dir.parent != log_dir.path or not tp_log.dir.exists():
                        continue
                    partition = self.partitions.get(tp)
                    if partition is not None and partition.log is not None:
                        high_watermarks[tp] = partition.high_watermark
                    recovery_points[tp] = tp_log.log_end_offset
                high_watermarks = {tp: hw for tp, hw in high_watermarks.items() if tp in self.logs}
                log_dir.high_watermarks = high_watermarks
                write_atomically(
                    log_dir.path / REPLICATION_OFFSET_CHECKPOINT,
                    encode_offset_checkpoint(high_watermarks),
                )
                write_atomically(
                    log_dir.path / RECOVERY_POINT_OFFSET_CHECKPOINT,
                    encode_offset_checkpoint(recovery_points),
                )
                write_atomically(
                    log_dir.path / LOG_START_OFFSET_CHECKPOINT, encode_offset_checkpoint({})
                )
                cleaner = log_dir.path / CLEANER_OFFSET_CHECKPOINT
                if not cleaner.exists():
                    cleaner.touch()
            del clean

    def shutdown(self) -> None:
        self.stopping.set()
        self._alter_isr_wakeup.set()
        self.fetchers.shutdown()
        with self.lock:
            self.changed.notify_all()


# -- loading log directories -------------------------------------------------------------------


class FatalStartupError(Exception):
    """Kafka 2.8-3.2: 'Fatal error during KafkaServer startup'."""


def load_log_dirs(
    paths: tuple[Path, ...], kafka_version: str
) -> tuple[list[LogDir], dict[TopicPartition, PartitionLog]]:
    """Load every partition directory, as LogManager.loadLogs does at startup.

    A malformed partition.metadata stops a 2.8 broker from starting and takes a 3.3+ broker's
    whole log dir offline (Kafka's PartitionMetadataFile and LogManager).
    """
    log_dirs: list[LogDir] = []
    logs: dict[TopicPartition, PartitionLog] = {}
    for path in paths:
        log_dir = LogDir(path)
        log_dirs.append(log_dir)
        hw_file = path / REPLICATION_OFFSET_CHECKPOINT
        try:
            if hw_file.exists():
                log_dir.high_watermarks = parse_offset_checkpoint(
                    hw_file.read_bytes(), source=str(hw_file)
                )
        except FormatError as exc:
            log.error("Error while reading checkpoint file %s: %s", hw_file, exc)
        loaded: dict[TopicPartition, PartitionLog] = {}
        for entry in sorted(path.iterdir()):
            if not entry.is_dir():
                continue
            try:
                parsed = parse_partition_dir(entry.name, source=str(entry))
            except FormatError as exc:
                raise FatalStartupError(
                    f"Found directory {entry}, '{entry.name}' is not in the form of topic-partition"
                    " or topic-partition.uniqueId-delete (if marked for deletion).\nKafka's log"
                    " directories (and children) should only contain Kafka topic data."
                ) from exc
            if parsed.kind != "live":
                continue
            try:
                loaded[(parsed.topic, parsed.partition)] = PartitionLog.load(
                    entry, parsed.topic, parsed.partition
                )
            except FormatError as exc:
                if kafka_version == "2.8":
                    raise FatalStartupError(
                        f"Error while reading partition metadata file: {exc}"
                    ) from exc
                log.error("Error while loading log dir %s: %s", path, exc)
                log_dir.offline = True
                break
        if not log_dir.offline:
            logs.update(loaded)
    return log_dirs, logs


def load_future_logs(log_dirs: list[LogDir]) -> dict[TopicPartition, PartitionLog]:
    """The future logs of moves under way (`-future` dirs), which the move resumes; and the
    `-delete` dirs of finished moves, deleted (Kafka deletes them `file.delete.delay.ms` after
    it starts; here at once)."""
    futures: dict[TopicPartition, PartitionLog] = {}
    for log_dir in log_dirs:
        if log_dir.offline:
            continue
        for entry in sorted(log_dir.path.iterdir()):
            if not entry.is_dir():
                continue
            try:
                parsed = parse_partition_dir(entry.name, source=str(entry))
            except FormatError:
                continue
            if parsed.kind == "future":
                futures[(parsed.topic, parsed.partition)] = PartitionLog.load(
                    entry, parsed.topic, parsed.partition
                )
            elif parsed.kind == "delete":
                shutil.rmtree(entry, ignore_errors=True)
    return futures


# -- the replica fetchers ----------------------------------------------------------------------


class FetcherManager:
    """One fetcher thread per leader broker (ReplicaFetcherManager).

    Not Kafka's: `pause` (the sandbox's PauseFetchers request, for fault injection) stops
    every fetcher and returns once none has a request in flight, so that a test knows no
    fetch response can still carry what its leader takes next; `resume` lets them go on."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self.threads: dict[int, FetcherThread] = {}
        self.paused = threading.Event()

    def pause(self, timeout: float) -> bool:
        """Stop fetching; True once no fetcher has a request in flight (within `timeout`)."""
        self.paused.set()
        deadline = time.monotonic() + timeout
        return all(
            thread.idle.wait(max(0.0, deadline - time.monotonic()))
            for thread in list(self.threads.values())
            if thread.is_alive()
        )

    def resume(self) -> None:
        self.paused.clear()

    def add(self, leader: int, endpoint: tuple[str, int], tp: TopicPartition) -> None:
        thread = self.threads.get(leader)
        if thread is not None and thread.endpoint != endpoint:
            thread.stop()
            thread = None
        if thread is None or not thread.is_alive():
            thread = FetcherThread(self.replicas, leader, endpoint, self.paused)
            self.threads[leader] = thread
            thread.start()
        thread.add(tp)

    # A LeaderAndIsr handled on a request thread may add a fetcher while these run: each walks
    # a copy (a shutdown that raised here left no clean-shutdown marker).

    def remove(self, tp: TopicPartition) -> None:
        for thread in list(self.threads.values()):
            thread.remove(tp)

    def shutdown(self) -> None:
        for thread in list(self.threads.values()):
            thread.stop()


class FetcherThread(threading.Thread):
    """Fetches every partition this broker follows from one leader, truncating first.

    A partition whose fetch or truncation fails is delayed on its own for
    replica.fetch.backoff.ms while the others go on being fetched (AbstractFetcherThread's
    delayPartitions); only a failed request backs the whole thread off.
    """

    def __init__(
        self,
        replicas: ReplicaManager,
        leader: int,
        endpoint: tuple[str, int],
        paused: threading.Event,
    ) -> None:
        super().__init__(name=f"ReplicaFetcherThread-{replicas.broker_id}-{leader}", daemon=True)
        self.replicas = replicas
        # The manager's pause (fault injection), and this thread's answer: set while it
        # holds still with nothing in flight.
        self.paused = paused
        self.idle = threading.Event()
        self.leader = leader
        self.endpoint = endpoint
        self.partitions: dict[TopicPartition, bool] = {}  # tp -> needs truncation
        self.delayed: dict[TopicPartition, float] = {}  # tp -> monotonic time it may fetch again
        self._stopped = threading.Event()
        self._connection = wire.Connection(endpoint[0], endpoint[1], timeout=5.0)

    def add(self, tp: TopicPartition) -> None:
        self.partitions[tp] = True
        self.delayed.pop(tp, None)

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.delayed.pop(tp, None)

    def stop(self) -> None:
        self._stopped.set()
        self._connection.close()

    def run(self) -> None:
        while not self._stopped.is_set() and not self.replicas.stopping.is_set():
            # Cleared before the pause is looked at: a pause that finds `idle` set knows this
            # thread sends nothing until it is resumed.
            self.idle.clear()
            if self.paused.is_set():
                self.idle.set()
                self._stopped.wait(0.01)
                continue
            try:
                self._fetch_once()
            except wire.WireError:
                self._stopped.wait(self.replicas.fetch_backoff_ms / 1000)
            except Exception:  # a fetcher that died would leave its partitions out of the ISR
                log.exception("[%s] Error in fetch; retrying", self.name)
                self._stopped.wait(self.replicas.fetch_backoff_ms / 1000)

    def _delay(self, tp: TopicPartition) -> None:
        self.delayed[tp] = time.monotonic() + self.replicas.fetch_backoff_ms / 1000

    def _ready(self) -> list[TopicPartition]:
        """The partitions not delayed now (a delay that has run out is dropped)."""
        now = time.monotonic()
        for tp, until in list(self.delayed.items()):
            if until <= now:
                self.delayed.pop(tp, None)
        return [tp for tp in list(self.partitions) if tp not in self.delayed]

    def _idle(self) -> None:
        """Nothing to fetch: wait for the first delay to run out (or a moment for new work)."""
        pending = [until for tp, until in list(self.delayed.items()) if tp in self.partitions]
        wait = min(pending) - time.monotonic() if pending else 0.1
        self._stopped.wait(min(max(0.01, wait), 0.1))

    def _fetch_once(self) -> None:
        with self.replicas.lock:
            states = {
                tp: state
                for tp in self._ready()
                if (state := self.replicas.follower_fetch_state(tp, self.leader)) is not None
            }
        for tp, (_leo, epoch, _latest, high_watermark) in states.items():
            if self.partitions.get(tp) and not self._truncate(tp, epoch, high_watermark):
                self._delay(tp)
        with self.replicas.lock:
            states = {
                tp: state
                for tp in self._ready()
                if not self.partitions.get(tp)
                and (state := self.replicas.follower_fetch_state(tp, self.leader)) is not None
            }
        if not states:
            self._idle()
            return
        request = {
            "api": "Fetch",
            "replica_id": self.replicas.broker_id,
            "max_wait_ms": self.replicas.fetch_wait_max_ms,
            "partitions": [
                {"topic": tp[0], "partition": tp[1], "offset": s[0], "current_leader_epoch": s[1]}
                for tp, s in states.items()
            ],
        }
        response = self._connection.call(
            request, timeout=5.0 + self.replicas.fetch_wait_max_ms / 1000
        )
        for result in response.get("partitions", []):
            tp = (result["topic"], result["partition"])
            epoch = states[tp][1] if tp in states else -1
            if result["error"] == wire.NONE:
                self.replicas.append_as_follower(tp, epoch, result)
            elif result["error"] == wire.OFFSET_OUT_OF_RANGE and tp in states:
                self.replicas.truncate_follower(tp, epoch, result.get("log_end_offset", 0))
            else:
                self._delay(tp)

    def _truncate(self, tp: TopicPartition, epoch: int, high_watermark: int) -> bool:
        """Truncate a new follower's log before fetching (AbstractFetcherThread.maybeTruncate).

        Without leader epochs the follower truncates to its high watermark. Otherwise it asks
        the leader where its latest epoch ended; when the leader answers with an epoch the
        follower does not have, it truncates to where its own nearest epoch ended and asks
        again, as Kafka does, until both agree. False when the leader answered with an error
        (the partition is then delayed and truncated again).
        """
        for _ in range(16):
            with self.replicas.lock:
                partition = self.replicas.partitions.get(tp)
                if partition is None or partition.log is None or partition.leader_epoch != epoch:
                    return True
                leo = partition.log.log_end_offset
                latest = partition.log.epochs.latest_epoch
            if latest is None:
                self._finish_truncation(tp, epoch, high_watermark)
                return True
            response = self._connection.call(
                {
                    "api": "OffsetsForLeaderEpoch",
                    "partitions": [{"topic": tp[0], "partition": tp[1], "leader_epoch": latest}],
                }
            )
            result = response["partitions"][0]
            if result["error"] != wire.NONE:
                return False
            leader_epoch, leader_end = result["leader_epoch"], result["end_offset"]
            if leader_end == UNDEFINED_OFFSET:
                self._finish_truncation(tp, epoch, high_watermark)
                return True
            with self.replicas.lock:
                own_epoch, own_end = partition.log.epochs.end_offset_for(leader_epoch, leo)
            if own_epoch == UNDEFINED_EPOCH:
                self._finish_truncation(tp, epoch, min(leader_end, leo))
                return True
            if own_epoch != leader_epoch:
                self.replicas.truncate_follower(tp, epoch, min(own_end, leo))
                continue
            self._finish_truncation(tp, epoch, min(own_end, leader_end, leo))
            return True
        return False

    def _finish_truncation(self, tp: TopicPartition, epoch: int, offset: int) -> None:
        self.replicas.truncate_follower(tp, epoch, offset)
        with self.replicas.lock:
            if tp in self.partitions:
                self.partitions[tp] = False
