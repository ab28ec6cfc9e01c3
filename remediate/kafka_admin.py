"""Kafka's admin requests over Kafka's own protocol: the KafkaAdmin port (remediate/ports.py) for
real brokers. The requests: moving a replica between its broker's log dirs
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

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from remediate.errors import KafkaAdminError
from remediate.ports import NO_ANSWER, BrokerLogDirs, DescribedSetting
from remediate.state import ReplicaRef, TopicPartition

# DescribeConfigs' source of a setting set for one broker alone.
DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"


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
    # The broker's certificate must name the address it is reached at (Kafka's default).
    check_hostname: bool = True

    def client_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"security_protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL"):
            config.update(
                ssl_cafile=self.ca_file,
                ssl_certfile=self.cert_file,
                ssl_keyfile=self.key_file,
                ssl_check_hostname=self.check_hostname,
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


class _Said(logging.Handler):
    """Keeps what kafka-python warns of while it bootstraps: the reason of each failed attempt
    (a refused login, a refused connection), which its own timeout error leaves out."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# What every failed attempt may end in, which says nothing of why.
_UNTELLING = ("socket disconnected", "Request timed out", "Unable to bootstrap")
# Said when every attempt on a secured listener ended that way: kafka-python can read a
# broker's close before its last answer (why it refused the login).
DROPPED_WHILE_SECURING = (
    "the brokers closed every connection as it was set up: most often credentials they"
    " refuse (kafka.sasl), or a security_protocol or certificate the listener does not take"
)


def _telling(lines: Sequence[str]) -> str | None:
    """The most telling reason among kafka-python's warnings of failed attempts: the last one
    that says more than that the connection dropped or the time ran out, else the last
    failure."""
    failures = [line for line in lines if " failed: " in line]
    telling = [line for line in failures if not any(u in line for u in _UNTELLING)]
    found = telling or failures
    return found[-1] if found else None


@contextmanager
def starting(
    request: str,
    errors: tuple[type[BaseException], ...],
    *,
    broker: int | None = None,
    secured: bool = False,
) -> Iterator[None]:
    """A client's start (its bootstrap) as `asking` does it, and when it fails, the most
    telling reason kafka-python gave for a failed attempt: a bootstrap that times out because
    every broker refused the login says so, not only "unable to bootstrap". `secured`: the
    listener takes TLS or SASL."""
    said = _Said()
    logger = logging.getLogger("kafka")
    logger.addHandler(said)
    try:
        with asking(request, errors, broker=broker):
            yield
    except KafkaAdminError as exc:
        reason = _telling(said.lines)
        if reason is None:
            raise
        if secured and any(u in reason for u in _UNTELLING):
            reason += f"; {DROPPED_WHILE_SECURING}"
        raise KafkaAdminError(exc.request, f"{exc.said} ({reason})", broker=exc.broker) from exc
    finally:
        logger.removeHandler(said)


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
        self._secured = (security or Security()).protocol != "PLAINTEXT"
        with starting(
            f"the admin client's start (bootstrap {', '.join(bootstrap)})",
            self._errors,
            secured=self._secured,
        ):
            self._client = KafkaAdminClient(bootstrap_servers=list(bootstrap), **self._settings)

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaRef, str]
    ) -> dict[ReplicaRef, str | None]:
        from kafka import TopicPartitionReplica  # noqa: PLC0415

        with asking("AlterReplicaLogDirs", self._errors):
            answers = self._client.alter_replica_log_dirs(
                {
                    TopicPartitionReplica(r.partition.topic, r.partition.partition, r.broker): d
                    for r, d in moves.items()
                }
            )
        said = {
            ReplicaRef(r.broker_id, TopicPartition(r.topic, r.partition)): _error_name(e)
            for r, e in answers.items()
        }
        return {key: said.get(key, NO_ANSWER) for key in moves}

    def log_dirs(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> dict[int, BrokerLogDirs]:
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            wanted.setdefault(topic, []).append(partition)
        found: dict[int, BrokerLogDirs] = {}
        answers: list[dict[str, Any]] = []
        # One call per broker: kafka-python sends one request object to every broker it is
        # given, and the first send fixes its version. In a cluster of two releases a 3.x
        # broker's version reached a 2.8 broker, which closed the connection.
        with asking("DescribeLogDirs", self._errors):
            for broker in dict.fromkeys(brokers):
                answers += self._client.describe_log_dirs(wanted, brokers=[broker])
        for answer in answers:
            online: list[str] = []
            offline: list[str] = []
            replicas: dict[TopicPartition, tuple[str, int]] = {}
            futures: dict[TopicPartition, str] = {}
            for log_dir in answer["log_dirs"]:
                if log_dir.get("error_code", 0):
                    offline.append(log_dir["log_dir"])
                    continue
                online.append(log_dir["log_dir"])
                for topic in log_dir["topics"]:
                    for entry in topic["partitions"]:
                        tp = TopicPartition(topic["name"], int(entry["partition_index"]))
                        if entry["is_future_key"]:
                            futures[tp] = log_dir["log_dir"]
                        else:
                            replicas[tp] = (log_dir["log_dir"], int(entry["partition_size"]))
            found[int(answer["broker"])] = BrokerLogDirs(
                tuple(sorted(online)), tuple(sorted(offline)), replicas, futures
            )
        return found

    def reassign(
        self, reassignments: Mapping[TopicPartition, Sequence[int]]
    ) -> dict[TopicPartition, str | None]:
        from kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

        with asking("AlterPartitionReassignments", self._errors):
            answers = self._client.alter_partition_reassignments(
                {KafkaTopicPartition(t, p): list(r) for (t, p), r in reassignments.items()}
            )
        said = {
            TopicPartition(tp.topic, tp.partition): _error_name(error)
            for tp, error in answers.items()
        }
        # A partition the controller said nothing about was not reassigned.
        return {key: said.get(key, NO_ANSWER) for key in reassignments}

    def ongoing_reassignments(self) -> set[TopicPartition]:
        with asking("ListPartitionReassignments", self._errors):
            ongoing = self._client.list_partition_reassignments()
        return {TopicPartition(tp.topic, tp.partition) for tp in ongoing}

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
        with starting("ApiVersions", self._errors, broker=broker, secured=self._secured):
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

    def cluster_operations(self) -> frozenset[str] | None:
        # DescribeCluster with the cluster's authorized operations (all of them where no
        # authorizer runs, as Kafka answers). Sent through the client's own connections:
        # kafka-python 3.0's describe_cluster() reads a field DescribeCluster has only from
        # version 1 (Kafka 3.7) and fails on every earlier broker with KeyError.
        from kafka.admin import ACLOperation  # noqa: PLC0415
        from kafka.protocol.admin.cluster import DescribeClusterRequest  # noqa: PLC0415

        manager = self._client._manager

        async def describe() -> Any:
            request = DescribeClusterRequest(include_cluster_authorized_operations=True)
            return await manager.send(request)

        with asking("DescribeCluster", self._errors):
            response = manager.run(describe)
        if response.error_code:
            return None
        told = response.authorized_operations
        if isinstance(told, int):  # a bitfield, or Kafka's "not told" (INT32 minimum)
            if told < 0:
                return None
            told = [op for op in range(32) if told & (1 << op)]
        names: set[str] = set()
        for op in told:
            try:
                names.add(ACLOperation(op).name)
            except ValueError:  # an operation newer than this client
                continue
        return frozenset(names - {"UNKNOWN", "ANY", "ALL"}) or None

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
