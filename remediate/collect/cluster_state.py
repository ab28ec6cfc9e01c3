"""The collector's one read-only, pipelined pass over a ZK-mode cluster's znodes, through the
`ZooKeeper` port (remediate/zookeeper.py is the kazoo adapter): brokers, topics, their configs
and every partition state, in a few round trips, into one ClusterState. It never writes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from remediate.errors import FormatError
from remediate.formats.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONTROLLER,
    CONTROLLER_EPOCH,
    MIGRATION,
    BrokerRegistration,
    MigrationState,
    PartitionState,
    decode_broker,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_migration,
    decode_partition_state,
    decode_topic,
    decode_topic_config,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from remediate.ports import CheckVersion, OnRetry, ZooKeeper
from remediate.state import ClusterState, TopicPartition, TopicState

T = TypeVar("T")


def _decode_brokers(reads: dict[Any, Any], problems: list[str]) -> dict[int, BrokerRegistration]:
    brokers: dict[int, BrokerRegistration] = {}
    for name, value in reads.items():
        if value is None:
            continue
        path = f"{BROKER_IDS}/{name}"
        try:
            brokers[int(name)] = decode_broker(
                int(name), value[0], source=path, epoch=value[1].czxid
            )
        except (FormatError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    return brokers


def _decode_topics(
    topic_reads: dict[Any, Any], config_reads: dict[Any, Any], problems: list[str]
) -> dict[str, TopicState]:
    topics: dict[str, TopicState] = {}
    for name, value in topic_reads.items():
        if value is None:
            continue
        try:
            assignment = decode_topic(value[0], source=topic_path(name))
        except FormatError as exc:
            problems.append(str(exc))
            continue
        config: dict[str, str] = {}
        config_value = config_reads.get(name)
        if config_value is not None:
            try:
                config = decode_topic_config(config_value[0], source=topic_config_path(name))
            except FormatError as exc:
                problems.append(str(exc))
        topics[name] = TopicState(name, assignment, value[1].version, config, value[1].mzxid)
    return topics


def _decode_states(
    reads: dict[Any, Any], problems: list[str]
) -> dict[TopicPartition, PartitionState]:
    partitions: dict[TopicPartition, PartitionState] = {}
    # Many partitions hold the same bytes (the same leader, epoch and ISR): each distinct
    # document is decoded once, its stat's fields filled in per partition.
    decoded: dict[bytes, PartitionState] = {}
    for (name, number), value in reads.items():
        if value is None:
            continue
        data, stat = value
        known = decoded.get(data)
        if known is None:
            try:
                known = decode_partition_state(data, source=partition_state_path(name, number))
            except FormatError as exc:
                problems.append(str(exc))
                continue
            decoded[data] = known
        partitions[TopicPartition(name, number)] = replace(
            known, zk_version=stat.version, mzxid=stat.mzxid
        )
    return partitions


def _decode_singles(
    singles: dict[Any, Any], problems: list[str]
) -> tuple[int | None, int | None, str | None, int | None]:
    """The controller's id, the controller epoch, the cluster id and the KRaft controller's
    epoch, each decoded on its own: one that does not parse is a problem and None, and never
    takes the others with it."""

    def decoded(path: str, decode: Callable[[bytes], T]) -> T | None:
        read = singles.get(path)
        if not read:
            return None
        try:
            return decode(read[0])
        except FormatError as exc:
            problems.append(str(exc))
            return None

    controller = decoded(CONTROLLER, decode_controller)
    kraft_epoch = controller.kraft_controller_epoch if controller is not None else None
    return (
        controller.broker_id if controller is not None else None,
        decoded(CONTROLLER_EPOCH, decode_controller_epoch),
        decoded(CLUSTER_ID, decode_cluster_id),
        kraft_epoch if kraft_epoch is not None and kraft_epoch >= 0 else None,
    )


def decode_migration_read(read: tuple[bytes, Any] | None) -> MigrationState | None:
    """`/migration` as read (None when the znode does not exist)."""
    return None if read is None else decode_migration(read[0])


def read_migration(zk: ZooKeeper, on_retry: OnRetry | None = None) -> ClusterState:
    """Only what says whether a ZooKeeper-to-KRaft migration has begun: `/migration` and
    `/controller`, in one round trip (the refusal before a run: remediate/execute/locked.py).
    The rest of the state is empty."""
    return read_fence(zk, on_retry).state


@dataclass(frozen=True)
class ControllerFence:
    """What a write of the tool's in ZooKeeper is conditioned on, read in one round trip:
    whether a ZooKeeper-to-KRaft migration has begun (`state`, only `/migration` and
    `/controller` in it), and the version of `/controller_epoch`.

    Every controller that takes over bumps `/controller_epoch` in the transaction that claims
    `/controller` (Kafka's ZooKeeper-mode controllers since 2.2, and a KRaft controller that
    begins a migration: KafkaZkClient's registerControllerAndIncrementControllerEpoch and
    tryRegisterKRaftControllerAsActiveController), and Kafka's own controller writes are
    conditioned on it. A write of the tool's made in one transaction with `check` is
    therefore refused if any controller, a migrating KRaft controller included, took over
    since this read: the migration check and the write are atomic."""

    state: ClusterState
    epoch_version: int | None  # None: /controller_epoch does not exist (no controller yet)
    controller_version: int | None  # None: no /controller now (an election under way)

    @property
    def check(self) -> CheckVersion:
        """The condition: `/controller_epoch` still at the version read."""
        if self.epoch_version is None:
            raise ValueError("no /controller_epoch to check")
        return CheckVersion(CONTROLLER_EPOCH, self.epoch_version)


def read_fence(zk: ZooKeeper, on_retry: OnRetry | None = None) -> ControllerFence:
    """`/controller`, `/controller_epoch` and `/migration` in one round trip (also what
    `read_migration` gives, as its state)."""
    problems: list[str] = []
    reads = zk.get_many((CONTROLLER, CONTROLLER_EPOCH, MIGRATION), on_retry=on_retry)
    controller_id, epoch, _cluster, kraft_epoch = _decode_singles(reads, problems)
    epoch_read, controller_read = reads.get(CONTROLLER_EPOCH), reads.get(CONTROLLER)
    state = ClusterState(
        cluster_id=None,
        controller_id=controller_id,
        controller_epoch=epoch,
        brokers={},
        topics={},
        partitions={},
        problems=tuple(problems),
        migration=decode_migration_read(reads.get(MIGRATION)),
        kraft_controller_epoch=kraft_epoch,
    )
    return ControllerFence(
        state,
        None if epoch_read is None else epoch_read[1].version,
        None if controller_read is None else controller_read[1].version,
    )


def _read(zk: ZooKeeper, topics_filter: Iterable[str] | None, on_retry: OnRetry) -> ClusterState:
    problems: list[str] = []
    singles = zk.get_many((CONTROLLER, CONTROLLER_EPOCH, CLUSTER_ID, MIGRATION), on_retry=on_retry)
    broker_ids = zk.children(BROKER_IDS, on_retry=on_retry)
    topic_names = zk.children(BROKER_TOPICS, on_retry=on_retry)
    if topics_filter is not None:
        wanted = set(topics_filter)
        topic_names = [t for t in topic_names if t in wanted]
    # Every read of one level is in flight at once; results are collected afterwards.
    broker_paths = {b: f"{BROKER_IDS}/{b}" for b in broker_ids}
    topic_paths = {t: topic_path(t) for t in topic_names}
    config_paths = {t: topic_config_path(t) for t in topic_names}
    level = zk.get_many(
        [*broker_paths.values(), *topic_paths.values(), *config_paths.values()],
        on_retry=on_retry,
    )
    topics = _decode_topics(
        {t: level[p] for t, p in topic_paths.items()},
        {t: level[p] for t, p in config_paths.items()},
        problems,
    )
    state_paths = {
        (t, p): partition_state_path(t, p)
        for t, topic in topics.items()
        for p in topic.assignment.partitions
    }
    state_reads = zk.get_many(list(state_paths.values()), on_retry=on_retry)
    controller_id, controller_epoch, cluster_id, kraft_epoch = _decode_singles(singles, problems)
    return ClusterState(
        cluster_id=cluster_id,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        brokers=_decode_brokers({b: level[p] for b, p in broker_paths.items()}, problems),
        topics=topics,
        partitions=_decode_states({k: state_reads[p] for k, p in state_paths.items()}, problems),
        problems=tuple(problems),
        migration=decode_migration_read(singles.get(MIGRATION)),
        kraft_controller_epoch=kraft_epoch,
    )


def read_cluster_state(
    zk: ZooKeeper, *, topics: Iterable[str] | None = None, on_retry: OnRetry | None = None
) -> ClusterState:
    """Read the whole cluster (or only `topics`) in a few pipelined round trips. A dropped
    connection is retried (by the adapter, bounded); `on_retry(attempt, error)` is told of
    each retry, attempts counted over the whole read, so that a caller can record it."""
    attempts = itertools.count(1)

    def tell(_attempt: int, error: BaseException) -> None:
        if on_retry is not None:
            on_retry(next(attempts), error)

    return _read(zk, topics, tell)
