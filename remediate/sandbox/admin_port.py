"""The KafkaAdmin port (remediate/ports.py) for the sandbox's emulated brokers, which
speak the sandbox's own wire rather than Kafka's protocol (real brokers take
KafkaPythonAdmin). Kafka's error codes come back as Kafka's error names; a request that
fails as a whole raises KafkaAdminError, as KafkaPythonAdmin's do."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from remediate.errors import SandboxError, ZooKeeperError
from remediate.kafka_admin import asking
from remediate.ports import BrokerLogDirs, DescribedSetting
from remediate.sandbox import admin
from remediate.sandbox.emulated import wire
from remediate.state import ReplicaRef, TopicPartition
from remediate.zookeeper import ZkSettings, connect

# What a request to the emulated brokers raises when it fails: its wire's, ZooKeeper's.
ERRORS = (SandboxError, OSError, ZooKeeperError, KazooException)


def _name(code: int) -> str | None:
    return None if code == wire.NONE else wire.ERROR_NAMES.get(code, str(code))


class SandboxAdmin:
    def __init__(self, zk: KazooClient, *, owned: bool = False) -> None:
        self.zk = zk
        self._owned = owned

    @classmethod
    def connect(cls, settings: ZkSettings, *, timeout: float | None = None) -> SandboxAdmin:
        """With a ZooKeeper session of its own, opened as every other one is: through the
        cluster's TLS and login where cluster.yaml has them (the emulated brokers answer
        through ZooKeeper, so its port is the one the operator's config names)."""
        with asking("the admin client's start", ERRORS):
            return cls(connect(settings, timeout=timeout).client, owned=True)

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaRef, str]
    ) -> dict[ReplicaRef, str | None]:
        with asking("AlterReplicaLogDirs", ERRORS):
            answers = admin.alter_replica_log_dirs(
                self.zk,
                {(r.partition.topic, r.partition.partition, r.broker): d for r, d in moves.items()},
            )
        return {
            r: _name(
                answers.get(
                    (r.partition.topic, r.partition.partition, r.broker), wire.UNKNOWN_SERVER_ERROR
                )
            )
            for r in moves
        }

    def log_dirs(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> dict[int, BrokerLogDirs]:
        wanted = set(partitions)
        found: dict[int, BrokerLogDirs] = {}
        for broker in sorted(set(brokers)):
            replicas: dict[TopicPartition, tuple[str, int]] = {}
            futures: dict[TopicPartition, str] = {}
            online: list[str] = []
            offline: list[str] = []
            with asking("DescribeLogDirs", ERRORS, broker=broker):
                described = admin.describe_log_dirs(self.zk, broker)
            for log_dir in described:
                if log_dir.get("error", wire.NONE) != wire.NONE:
                    offline.append(log_dir["path"])
                    continue
                online.append(log_dir["path"])
                for entry in log_dir["partitions"]:
                    tp = TopicPartition(entry["topic"], int(entry["partition"]))
                    if tp not in wanted:
                        continue
                    if entry["future"]:
                        futures[tp] = log_dir["path"]
                    else:
                        replicas[tp] = (log_dir["path"], int(entry["size"]))
            found[broker] = BrokerLogDirs(
                tuple(sorted(online)), tuple(sorted(offline)), replicas, futures
            )
        return found

    def reassign(
        self, reassignments: Mapping[TopicPartition, Sequence[int]]
    ) -> dict[TopicPartition, str | None]:
        with asking("AlterPartitionReassignments", ERRORS):
            answers = admin.alter_partition_reassignments(
                self.zk, {(tp.topic, tp.partition): list(r) for tp, r in reassignments.items()}
            )
        return {key: _name(answers.get(key, wire.UNKNOWN_SERVER_ERROR)) for key in reassignments}

    def ongoing_reassignments(self) -> set[TopicPartition]:
        # The sandbox takes only reassignments to the current replicas, done at once.
        return set()

    def kafka_version(self, broker: int) -> tuple[int, int] | None:
        with asking("ApiVersions", ERRORS, broker=broker):
            host, port = admin.broker_endpoint(self.zk, broker)
            answer = wire.call_once(host, port, {"api": "ApiVersions"})
        major, _, minor = str(answer.get("kafka_version", "")).partition(".")
        return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None

    def broker_setting(self, broker: int, name: str) -> str | None:
        with asking("DescribeConfigs", ERRORS, broker=broker):
            return admin.broker_settings(self.zk, broker).get(name)

    def effective_setting(self, broker: int, name: str) -> DescribedSetting:
        # The sandbox's cluster.yaml names each broker's server.properties: its settings are
        # read there, as on a production broker without Kafka's admin API configured.
        return DescribedSetting(
            None, error=f"the emulated broker {broker} takes no DescribeConfigs"
        )

    def set_broker_setting(self, broker: int, name: str, value: str | None) -> str | None:
        # The emulated brokers take no settings request: the admin writes ZooKeeper as a
        # broker would on receiving one (their copies between log dirs are not throttled).
        with asking("IncrementalAlterConfigs", ERRORS, broker=broker):
            admin.set_broker_setting(self.zk, broker, name, value)
        return None

    def cluster_operations(self) -> frozenset[str] | None:
        # The emulated brokers run no authorizer: every operation, as Kafka answers then.
        return frozenset({"DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"})

    def close(self) -> None:
        """Ends the ZooKeeper session it opened itself (a caller's stays the caller's)."""
        if self._owned:
            self.zk.stop()
            self.zk.close()
