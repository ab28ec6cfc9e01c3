"""The KafkaAdmin port (remediate/kafka_admin.py) for the sandbox's emulated brokers, which
speak the sandbox's own wire rather than Kafka's protocol (real brokers take
KafkaPythonAdmin). Kafka's error codes come back as Kafka's error names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kazoo.client import KazooClient

from remediate.kafka_admin import Partition, Replica, ReplicaPlace
from remediate.sandbox import admin, wire


def _name(code: int) -> str | None:
    return None if code == wire.NONE else wire.ERROR_NAMES.get(code, str(code))


class SandboxAdmin:
    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def alter_replica_log_dirs(self, moves: Mapping[Replica, str]) -> dict[Replica, str | None]:
        answers = admin.alter_replica_log_dirs(self.zk, moves)
        return {key: _name(answers.get(key, wire.UNKNOWN_SERVER_ERROR)) for key in moves}

    def replica_places(
        self, brokers: Iterable[int], partitions: Iterable[Partition]
    ) -> dict[Replica, ReplicaPlace]:
        wanted = set(partitions)
        current: dict[Replica, tuple[str, int]] = {}
        future: dict[Replica, str] = {}
        for broker in sorted(set(brokers)):
            for log_dir in admin.describe_log_dirs(self.zk, broker):
                for entry in log_dir["partitions"]:
                    if (entry["topic"], entry["partition"]) not in wanted:
                        continue
                    key = (entry["topic"], entry["partition"], broker)
                    if entry["future"]:
                        future[key] = log_dir["path"]
                    else:
                        current[key] = (log_dir["path"], int(entry["size"]))
        return {
            key: ReplicaPlace(
                log_dir=current[key][0] if key in current else None,
                future_dir=future.get(key),
                size=current[key][1] if key in current else 0,
            )
            for key in set(current) | set(future)
        }

    def reassign(
        self, reassignments: Mapping[Partition, Sequence[int]]
    ) -> dict[Partition, str | None]:
        answers = admin.alter_partition_reassignments(self.zk, reassignments)
        return {key: _name(answers.get(key, wire.UNKNOWN_SERVER_ERROR)) for key in reassignments}

    def ongoing_reassignments(self) -> set[Partition]:
        # The sandbox takes only reassignments to the current replicas, done at once.
        return set()

    def kafka_version(self, broker: int) -> tuple[int, int] | None:
        host, port = admin.broker_endpoint(self.zk, broker)
        answer = wire.call_once(host, port, {"api": "ApiVersions"})
        major, _, minor = str(answer.get("kafka_version", "")).partition(".")
        return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None

    def close(self) -> None:
        """The ZooKeeper session is the caller's."""
