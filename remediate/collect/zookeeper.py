"""The ZooKeeper collector: one read-only, pipelined pass over a ZK-mode cluster's znodes.

Reads are issued asynchronously and collected afterwards, so a cluster with fifty thousand
partitions costs a handful of round trips, not fifty thousand. Connection loss is retried
(bounded) with tenacity; nothing else is. Nothing here ever writes.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, OperationTimeoutError
from kazoo.handlers.threading import KazooTimeoutError
from tenacity import (
    RetryCallState,
    Retrying,
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from remediate.errors import FormatError, ZooKeeperError
from remediate.formats.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONTROLLER,
    CONTROLLER_EPOCH,
    BrokerRegistration,
    PartitionState,
    decode_broker,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic,
    decode_topic_config,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from remediate.state import ClusterState, TopicPartition, TopicState

TRANSIENT = (ConnectionLoss, OperationTimeoutError, KazooTimeoutError)


@dataclass(frozen=True)
class ZkAuth:
    scheme: str  # "digest" or "sasl"
    username: str
    password: str | None
    sasl_mechanism: str = "DIGEST-MD5"

    def __repr__(self) -> str:
        return f"ZkAuth(scheme={self.scheme!r}, username={self.username!r}, password=***)"


@dataclass(frozen=True)
class ZkTls:
    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None
    verify_hostname: bool = True


@dataclass(frozen=True)
class ZkSettings:
    connect: str
    session_timeout_s: float = 10.0
    auth: ZkAuth | None = None
    tls: ZkTls | None = None


def make_client(settings: ZkSettings) -> KazooClient:
    """A kazoo client for `settings` (not started). The chroot in `connect` is honoured."""
    kwargs: dict[str, Any] = {"hosts": settings.connect, "timeout": settings.session_timeout_s}
    if settings.auth is not None:
        if settings.auth.scheme == "digest":
            kwargs["auth_data"] = [
                ("digest", f"{settings.auth.username}:{settings.auth.password or ''}")
            ]
        else:
            sasl: dict[str, str] = {
                "mechanism": settings.auth.sasl_mechanism,
                "username": settings.auth.username,
            }
            if settings.auth.password is not None:
                sasl["password"] = settings.auth.password
            kwargs["sasl_options"] = sasl
    if settings.tls is not None:
        kwargs.update(
            use_ssl=True,
            ca=str(settings.tls.ca_file),
            certfile=str(settings.tls.cert_file) if settings.tls.cert_file else None,
            keyfile=str(settings.tls.key_file) if settings.tls.key_file else None,
            verify_certs=True,
            check_hostname=settings.tls.verify_hostname,
        )
    return KazooClient(**kwargs)


@contextmanager
def session(settings: ZkSettings, *, timeout: float = 15.0) -> Iterator[KazooClient]:
    """A connected client for the `with` block, stopped and closed after it."""
    client = connect(settings, timeout=timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def connect(settings: ZkSettings, *, timeout: float = 15.0) -> KazooClient:
    """A started client whose session has answered a read.

    kazoo reports the session as connected before SASL authentication has finished, and a
    refused login only shows at the first request (AuthFailedError, or a closed connection
    when the server enforces SASL), so one read of `/` proves the session before anything
    relies on it.
    """
    client = make_client(settings)
    try:
        client.start(timeout=timeout)
    except (KazooTimeoutError, KazooException, ssl.SSLError, OSError) as exc:
        client.close()
        raise ZooKeeperError(
            f"cannot connect to ZooKeeper at {settings.connect}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        _probe(client)
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        raise ZooKeeperError(
            f"ZooKeeper at {settings.connect} refused the session: {type(exc).__name__}"
            f"{_auth_hint(settings.auth)}"
        ) from exc
    return client


# A connection that drops for a moment is retried like every read; a refused SASL login fails
# every attempt (AuthFailedError is not transient, and an enforcing server's closed
# connection never comes back).
@retry(
    retry=retry_if_exception_type(TRANSIENT),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.2, max=1),
    reraise=True,
)
def _probe(client: KazooClient) -> None:
    client.exists("/")


def _auth_hint(auth: ZkAuth | None) -> str:
    """What to check when a session is refused right after connecting (never the password)."""
    if auth is None:
        return " (the server may require authentication: set zookeeper.auth in cluster.yaml)"
    mechanism = f"SASL {auth.sasl_mechanism}" if auth.scheme == "sasl" else "digest"
    return f" (check the {mechanism} credentials of user {auth.username!r})"


def _gather(results: dict[Any, Any]) -> dict[Any, tuple[bytes, Any] | None]:
    """Resolve async reads: value, or None for a znode that does not exist."""
    resolved: dict[Any, tuple[bytes, Any] | None] = {}
    for key, result in results.items():
        try:
            resolved[key] = result.get()
        except NoNodeError:
            resolved[key] = None
    return resolved


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return sorted(zk.get_children(path))
    except NoNodeError:
        return []


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
        topics[name] = TopicState(name, assignment, value[1].version, config)
    return topics


def _decode_states(
    reads: dict[Any, Any], problems: list[str]
) -> dict[TopicPartition, PartitionState]:
    partitions: dict[TopicPartition, PartitionState] = {}
    for (name, number), value in reads.items():
        if value is None:
            continue
        path = partition_state_path(name, number)
        try:
            partitions[(name, number)] = decode_partition_state(
                value[0], source=path, zk_version=value[1].version
            )
        except FormatError as exc:
            problems.append(str(exc))
    return partitions


def _decode_singles(
    singles: dict[Any, Any], problems: list[str]
) -> tuple[int | None, int | None, str | None]:
    controller = singles.get(CONTROLLER)
    epoch = singles.get(CONTROLLER_EPOCH)
    cluster = singles.get(CLUSTER_ID)
    try:
        return (
            decode_controller(controller[0]).broker_id if controller else None,
            decode_controller_epoch(epoch[0]) if epoch else None,
            decode_cluster_id(cluster[0]) if cluster else None,
        )
    except FormatError as exc:
        problems.append(str(exc))
        return None, None, None


def _read(zk: KazooClient, topics_filter: Iterable[str] | None) -> ClusterState:
    problems: list[str] = []
    singles = _gather({p: zk.get_async(p) for p in (CONTROLLER, CONTROLLER_EPOCH, CLUSTER_ID)})
    broker_ids = _children(zk, BROKER_IDS)
    topic_names = _children(zk, BROKER_TOPICS)
    if topics_filter is not None:
        wanted = set(topics_filter)
        topic_names = [t for t in topic_names if t in wanted]
    # Every read of one level is in flight at once; results are collected afterwards.
    broker_reads = _gather({b: zk.get_async(f"{BROKER_IDS}/{b}") for b in broker_ids})
    topic_reads = _gather({t: zk.get_async(topic_path(t)) for t in topic_names})
    config_reads = _gather({t: zk.get_async(topic_config_path(t)) for t in topic_names})
    topics = _decode_topics(topic_reads, config_reads, problems)
    state_reads = _gather(
        {
            (t, p): zk.get_async(partition_state_path(t, p))
            for t, topic in topics.items()
            for p in topic.assignment.partitions
        }
    )
    controller_id, controller_epoch, cluster_id = _decode_singles(singles, problems)
    return ClusterState(
        cluster_id=cluster_id,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        brokers=_decode_brokers(broker_reads, problems),
        topics=topics,
        partitions=_decode_states(state_reads, problems),
        problems=tuple(problems),
    )


OnRetry = Callable[[int, BaseException], None]


def read_cluster_state(
    zk: KazooClient, *, topics: Iterable[str] | None = None, on_retry: OnRetry | None = None
) -> ClusterState:
    """Read the whole cluster (or only `topics`) in a few pipelined round trips. A dropped
    connection is retried (5 attempts in about 5 s); `on_retry(attempt, error)` is told of
    each retry, so that a caller can record it."""

    def tell(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            error = state.outcome.exception()
            if error is not None:
                on_retry(state.attempt_number, error)

    try:
        for attempt in Retrying(
            retry=retry_if_exception_type(TRANSIENT),
            stop=stop_after_attempt(5),
            wait=wait_exponential(multiplier=0.2, max=3),
            before_sleep=tell,
            reraise=True,
        ):
            with attempt:
                return _read(zk, topics)
        raise AssertionError("unreachable")  # pragma: no cover
    except TRANSIENT as exc:
        raise ZooKeeperError(
            f"ZooKeeper connection lost while reading the cluster state: {exc}"
        ) from exc
    except KazooException as exc:
        raise ZooKeeperError(f"ZooKeeper refused a read: {type(exc).__name__}: {exc}") from exc
