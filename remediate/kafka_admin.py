"""Kafka's admin requests, behind one port: moving a replica between its broker's log dirs
(AlterReplicaLogDirs), where each replica is (DescribeLogDirs), reassigning a partition to
the replicas it has (AlterPartitionReassignments, the repair's trigger), the reassignments
under way (ListPartitionReassignments), each broker's Kafka version, and a broker's own
dynamic settings (DescribeConfigs, IncrementalAlterConfigs: the copy's throttle).

`KafkaPythonAdmin` speaks Kafka's protocol through kafka-python, the well-kept client that
has all four requests (confluent-kafka's AdminClient has none of them); the sandbox's
emulated brokers have their own adapter (remediate/sandbox/admin_port.py). A partition's or
a replica's error comes back as Kafka's error name, or None; a request that fails as a whole
(no broker answers, a timeout, credentials refused) raises KafkaAdminError, naming the
request and the broker: nothing of the client's own errors crosses this boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from remediate.errors import KafkaAdminError

# (topic, partition) and (topic, partition, broker), as Kafka's TopicPartition and
# TopicPartitionReplica.
Partition = tuple[str, int]
Replica = tuple[str, int, int]
NO_ANSWER = "NO_ANSWER"
# DescribeConfigs' source of a setting set for one broker alone.
DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
# Kafka's dynamic broker setting that limits how fast a replica is copied between log dirs.
MOVE_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


@dataclass(frozen=True)
class DescribedSetting:
    """One broker setting as DescribeConfigs gives it: its value and Kafka's source name
    (STATIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG...), or the error."""

    value: str | None
    source: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ReplicaPlace:
    """Where a replica's log is on its broker, and the move under way, if any."""

    log_dir: str | None
    future_dir: str | None
    size: int


@dataclass(frozen=True)
class BrokerLogDirs:
    """One broker's log dirs as DescribeLogDirs gives them: the online ones, those that
    answered with an error (offline), and each replica asked about: its dir and size."""

    online: tuple[str, ...]
    offline: tuple[str, ...]
    replicas: Mapping[Partition, tuple[str, int]]
    futures: Mapping[Partition, str]


def places(described: Mapping[int, BrokerLogDirs]) -> dict[Replica, ReplicaPlace]:
    """Where each replica is, from DescribeLogDirs' answers."""
    found: dict[Replica, ReplicaPlace] = {}
    for broker, dirs in described.items():
        for tp in set(dirs.replicas) | set(dirs.futures):
            current = dirs.replicas.get(tp)
            found[(tp[0], tp[1], broker)] = ReplicaPlace(
                log_dir=current[0] if current else None,
                future_dir=dirs.futures.get(tp),
                size=current[1] if current else 0,
            )
    return found


class KafkaAdmin(Protocol):
    def alter_replica_log_dirs(self, moves: Mapping[Replica, str]) -> dict[Replica, str | None]:
        """Ask each broker to move its replicas to the given log dirs; the error per replica."""

    def log_dirs(
        self, brokers: Iterable[int], partitions: Iterable[Partition]
    ) -> dict[int, BrokerLogDirs]:
        """Each broker's log dirs, and where it keeps its replica of each partition."""

    def reassign(
        self, reassignments: Mapping[Partition, Sequence[int]]
    ) -> dict[Partition, str | None]:
        """Reassign partitions to the replica lists given; the error per partition."""

    def ongoing_reassignments(self) -> set[Partition]: ...

    def kafka_version(self, broker: int) -> tuple[int, int] | None:
        """The broker's Kafka release (major, minor), as its API versions tell it."""

    def broker_setting(self, broker: int, name: str) -> str | None:
        """The dynamic setting `name` set for `broker` alone (DescribeConfigs), or None."""

    def effective_setting(self, broker: int, name: str) -> DescribedSetting:
        """The value `broker` runs with for its setting `name`, whatever set it
        (DescribeConfigs), with Kafka's name for where it came from; or why it is not known."""

    def set_broker_setting(self, broker: int, name: str, value: str | None) -> str | None:
        """Set `broker`'s own dynamic setting `name`, or with None remove it
        (IncrementalAlterConfigs); the error, or None."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class Security:
    """How to reach the brokers' listener: Kafka's security protocol and its settings."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    username: str | None = None
    password: str | None = None

    def client_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"security_protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL"):
            config.update(
                ssl_cafile=self.ca_file, ssl_certfile=self.cert_file, ssl_keyfile=self.key_file
            )
        if self.protocol.startswith("SASL"):
            config.update(
                sasl_mechanism=self.sasl_mechanism or "PLAIN",
                sasl_plain_username=self.username,
                sasl_plain_password=self.password,
            )
        return config


def _error_name(error: Any) -> str | None:
    """kafka-python's error class (or instance) as Kafka's error name; None for no error."""
    if error is None or getattr(error, "errno", None) == 0:
        return None
    return str(getattr(error, "message", error))


@contextmanager
def asking(
    request: str, errors: tuple[type[BaseException], ...], *, broker: int | None = None
) -> Iterator[None]:
    """`request` (to `broker`), its client's `errors` turned into KafkaAdminError."""
    try:
        yield
    except KafkaAdminError:
        raise
    except errors as exc:
        said = str(exc) or type(exc).__name__
        if type(exc).__name__ not in said:
            said = f"{type(exc).__name__}: {said}"
        raise KafkaAdminError(request, said, broker=broker) from exc


def _client_errors() -> tuple[type[BaseException], ...]:
    """What kafka-python raises for a request that fails: its own errors (a timeout, no
    broker, a refused login, a version it does not know), the network's."""
    from kafka.errors import KafkaError  # noqa: PLC0415

    return (KafkaError, OSError)


class KafkaPythonAdmin:
    """KafkaAdmin over Kafka's own protocol (kafka-python's KafkaAdminClient)."""

    def __init__(
        self,
        bootstrap: Sequence[str],
        *,
        security: Security | None = None,
        timeout_ms: int = 30_000,
        addresses: Mapping[int, str] | None = None,
    ) -> None:
        """`addresses`: each broker's own address on the listener (its registration's), which
        its release is read at."""
        from kafka.admin import KafkaAdminClient  # noqa: PLC0415 (only where it is used)

        self._errors = _client_errors()
        self._addresses = dict(addresses or {})
        self._settings: dict[str, Any] = {
            "client_id": "remediate",
            "request_timeout_ms": timeout_ms,
            "bootstrap_timeout_ms": timeout_ms,
            **(security or Security()).client_config(),
        }
        with asking(f"the admin client's start (bootstrap {', '.join(bootstrap)})", self._errors):
            self._client = KafkaAdminClient(bootstrap_servers=list(bootstrap), **self._settings)

    def alter_replica_log_dirs(self, moves: Mapping[Replica, str]) -> dict[Replica, str | None]:
        from kafka import TopicPartitionReplica  # noqa: PLC0415

        with asking("AlterReplicaLogDirs", self._errors):
            answers = self._client.alter_replica_log_dirs(
                {TopicPartitionReplica(t, p, b): d for (t, p, b), d in moves.items()}
            )
        said = {(r.topic, r.partition, r.broker_id): _error_name(e) for r, e in answers.items()}
        return {key: said.get(key, NO_ANSWER) for key in moves}

    def log_dirs(
        self, brokers: Iterable[int], partitions: Iterable[Partition]
    ) -> dict[int, BrokerLogDirs]:
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            wanted.setdefault(topic, []).append(partition)
        found: dict[int, BrokerLogDirs] = {}
        with asking("DescribeLogDirs", self._errors):
            answers = self._client.describe_log_dirs(wanted, brokers=sorted(set(brokers)))
        for answer in answers:
            online: list[str] = []
            offline: list[str] = []
            replicas: dict[Partition, tuple[str, int]] = {}
            futures: dict[Partition, str] = {}
            for log_dir in answer["log_dirs"]:
                if log_dir.get("error_code", 0):
                    offline.append(log_dir["log_dir"])
                    continue
                online.append(log_dir["log_dir"])
                for topic in log_dir["topics"]:
                    for entry in topic["partitions"]:
                        tp = (topic["name"], int(entry["partition_index"]))
                        if entry["is_future_key"]:
                            futures[tp] = log_dir["log_dir"]
                        else:
                            replicas[tp] = (log_dir["log_dir"], int(entry["partition_size"]))
            found[int(answer["broker"])] = BrokerLogDirs(
                tuple(sorted(online)), tuple(sorted(offline)), replicas, futures
            )
        return found

    def reassign(
        self, reassignments: Mapping[Partition, Sequence[int]]
    ) -> dict[Partition, str | None]:
        from kafka import TopicPartition  # noqa: PLC0415

        with asking("AlterPartitionReassignments", self._errors):
            answers = self._client.alter_partition_reassignments(
                {TopicPartition(t, p): list(r) for (t, p), r in reassignments.items()}
            )
        said = {(tp.topic, tp.partition): _error_name(error) for tp, error in answers.items()}
        # A partition the controller said nothing about was not reassigned.
        return {key: said.get(key, NO_ANSWER) for key in reassignments}

    def ongoing_reassignments(self) -> set[Partition]:
        with asking("ListPartitionReassignments", self._errors):
            ongoing = self._client.list_partition_reassignments()
        return {(tp.topic, tp.partition) for tp in ongoing}

    def kafka_version(self, broker: int) -> tuple[int, int] | None:
        """The broker's release, from its own ApiVersions: read through a client whose only
        bootstrap is that broker. kafka-python starts every connection from its bootstrap
        broker's version data and keeps the lower release where a broker answers higher
        (kafka/net/connection.py), and picks its bootstrap broker at random: through the
        shared client, a 3.x broker of a cluster half upgraded from 2.8 could be read as 2.8,
        and a plan's digest could change from one read to the next."""
        from kafka.admin import KafkaAdminClient  # noqa: PLC0415

        address = self._addresses.get(broker)
        if address is None:
            raise KafkaAdminError(
                "ApiVersions", "no address of its own is known (not registered?)", broker=broker
            )
        with asking("ApiVersions", self._errors, broker=broker):
            own = KafkaAdminClient(bootstrap_servers=[address], **self._settings)
            try:
                data = own.get_broker_version_data(broker)
            finally:
                own.close()
        version = getattr(data, "broker_version", None)
        if not version or len(version) < 2:
            return None
        return int(version[0]), int(version[1])

    def broker_setting(self, broker: int, name: str) -> str | None:
        from kafka.admin import ConfigResource, ConfigResourceType  # noqa: PLC0415

        # "modified": the broker's non-default settings, with where each comes from.
        with asking("DescribeConfigs", self._errors, broker=broker):
            answer = self._client.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(broker))], config_filter="modified"
            )
        entry = answer.get("broker", {}).get(str(broker), {}).get(name)
        if not entry or entry.get("config_source") != DYNAMIC_BROKER_CONFIG:
            return None
        value = entry.get("value")
        return None if value is None else str(value)

    def effective_setting(self, broker: int, name: str) -> DescribedSetting:
        from kafka.admin import ConfigResource, ConfigResourceType  # noqa: PLC0415

        with asking("DescribeConfigs", self._errors, broker=broker):
            answer = self._client.describe_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(broker), {name: None})],
                config_filter="all",
            )
        # kafka-python drops a resource's error (no DESCRIBE_CONFIGS permission, say) and
        # answers with no settings: a setting every broker has that is missing is that error.
        entry = answer.get("broker", {}).get(str(broker), {}).get(name)
        if not entry or entry.get("value") is None:
            return DescribedSetting(
                None,
                error=f"broker {broker} did not describe {name} (DescribeConfigs answered"
                " without it: most often no DESCRIBE_CONFIGS permission on the cluster)",
            )
        return DescribedSetting(str(entry["value"]), str(entry.get("config_source") or ""))

    def set_broker_setting(self, broker: int, name: str, value: str | None) -> str | None:
        from kafka.admin import ConfigResource, ConfigResourceType  # noqa: PLC0415

        operation = ("DELETE", None) if value is None else ("SET", value)
        # Quota settings such as the log dirs' copy throttle are not among the ones
        # kafka-python knows; the broker itself checks the name.
        with asking("IncrementalAlterConfigs", self._errors, broker=broker):
            answer = self._client.alter_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(broker), {name: operation})],
                incremental=True,
                raise_on_unknown=False,
            )
        said = answer.get("broker", {}).get(str(broker), NO_ANSWER)
        return None if said == "OK" else str(said)

    def close(self) -> None:
        with asking("the admin client's close", self._errors):
            self._client.close()


def bootstrap_servers(
    registered: Mapping[int, Any], listener: str, configured: Sequence[str] = ()
) -> list[str]:
    """The addresses to reach the brokers' `listener`: the configured ones, else the
    endpoints the brokers registered in ZooKeeper under that listener (`registered` maps a
    broker id to its BrokerRegistration)."""
    if configured:
        return list(configured)
    return list(broker_addresses(registered, listener).values())


def broker_addresses(registered: Mapping[int, Any], listener: str) -> dict[int, str]:
    """Each registered broker's own address on `listener`, by broker id."""
    found: dict[int, str] = {}
    for broker, registration in sorted(registered.items()):
        endpoint = registration.endpoint(listener)
        if endpoint is not None and endpoint.listener == listener:
            host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
            found[int(broker)] = f"{host}:{endpoint.port}"
    return found
