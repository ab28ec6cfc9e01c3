"""Reading a sandbox's ZooKeeper and log dirs the way the tests assert on them."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kazoo.client import KazooClient

from remediate.formats.logdir import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA
from remediate.formats.znodes import PartitionState
from remediate.sandbox import clients, cluster
from remediate.sandbox.records import Acked
from remediate.sandbox.reproduce import partition_states


def states(zk: KazooClient, topic: str, partitions: list[int]) -> dict[int, PartitionState]:
    return partition_states(zk, topic, partitions)


def replica_dirs(state: cluster.SandboxState, topic: str, partition: int) -> dict[int, Path]:
    """broker id -> the replica's directory, for every broker that has one."""
    found: dict[int, Path] = {}
    for broker in state.brokers:
        for log_dir in broker.log_dirs:
            candidate = Path(log_dir) / f"{topic}-{partition}"
            if candidate.is_dir():
                found[broker.broker_id] = candidate
    return found


def delete_metadata_files(
    state: cluster.SandboxState, broker_id: int, topic: str, partitions: list[int]
) -> list[Path]:
    """The manual repair: partition.metadata and leader-epoch-checkpoint of the given partitions."""
    deleted = []
    for partition in partitions:
        directory = replica_dirs(state, topic, partition).get(broker_id)
        if directory is None:
            continue
        for name in (PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT):
            path = directory / name
            if path.exists():
                path.unlink()
                deleted.append(path)
    return deleted


B = TypeVar("B", bound="Background")


class Background(ABC):
    """Runs `_run` on a daemon thread from `with` to its end; `_run` watches `_stop`."""

    _stop: threading.Event
    _thread: threading.Thread | None

    def __enter__(self: B) -> B:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    @abstractmethod
    def _run(self) -> None: ...


@dataclass
class BackgroundProducer(Background):
    """acks=all producer on its own thread, round-robin over the partitions, until stopped."""

    state: cluster.SandboxState
    topic: str
    partitions: int
    prefix: str = "bg"
    acked: list[Acked] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        zk = cluster.zk_client(self.state)
        producer = clients.for_sandbox(self.state, zk).producer(timeout_ms=2000)
        number = 0
        try:
            while not self._stop.is_set():
                key = f"{self.prefix}-{number}"
                partition = number % self.partitions
                number += 1
                offset, error = producer.send(self.topic, partition, [(key, "value")])
                if error is None and offset is not None:
                    self.acked.append(Acked(partition, offset, key))
                else:
                    self.errors += 1
                    self._stop.wait(0.05)  # a producer's retry backoff
        finally:
            producer.close()
            zk.stop()
            zk.close()


def lost_records(
    state: cluster.SandboxState, zk: KazooClient, topic: str, acked: list[Acked]
) -> list[Acked]:
    """Acknowledged records that a full read of the topic does not return."""
    records, errors = clients.for_sandbox(state, zk).consume(topic, timeout=30)
    assert not errors, f"consume errors: {errors}"
    consumed = {(r.partition, r.offset, r.key) for r in records}
    return [a for a in acked if (a.partition, a.offset, a.key) not in consumed]
