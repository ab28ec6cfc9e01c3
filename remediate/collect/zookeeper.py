"""ZooKeeper: the kazoo adapter behind the `ZooKeeper` port, and the collector's one
read-only, pipelined pass over a ZK-mode cluster's znodes.

The adapter is the only place that touches kazoo: it retries what may be retried (a dropped
connection, bounded, with tenacity; nothing else), tells the caller of each retry, and turns
kazoo's exceptions into ZooKeeperError and its subclasses. Reads are issued asynchronously
and collected afterwards, so a cluster with fifty thousand partitions costs a handful of
round trips, not fifty thousand: on ZooKeeper 3.6 and later as multiRead requests of many
znodes each (remediate/collect/multiread.py), on older servers as one pipelined request per
znode. The collector never writes.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    LockTimeout,
    NoNodeError,
    OperationTimeoutError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat as KazooStat
from kazoo.recipe.lock import Lock
from tenacity import (
    RetryCallState,
    Retrying,
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from remediate.collect import multiread
from remediate.errors import FormatError, VersionConflictError, ZnodeMissingError, ZooKeeperError
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
from remediate.ports import Listener, OnRetry, ZnodeStat, ZooKeeper
from remediate.state import ClusterState, TopicPartition, TopicState

TRANSIENT = (ConnectionLoss, OperationTimeoutError, KazooTimeoutError)
# A read of a dropped connection: 5 attempts in about 3 s.
READ_ATTEMPTS = 5
T = TypeVar("T")


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
def session(settings: ZkSettings, *, timeout: float = 15.0) -> Iterator[KazooZooKeeper]:
    """A connected session for the `with` block, closed after it."""
    zk = connect(settings, timeout=timeout)
    try:
        yield zk
    finally:
        zk.close()


def connect(settings: ZkSettings, *, timeout: float = 15.0) -> KazooZooKeeper:
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
        multi_read = _multi_read_probe(client, timeout)
        if not multi_read:
            _probe(client)  # the server closed the connection: wait for kazoo's reconnection
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        raise ZooKeeperError(
            f"ZooKeeper at {settings.connect} refused the session: {type(exc).__name__}"
            f"{_auth_hint(settings.auth)}"
        ) from exc
    return KazooZooKeeper(client, multi_read=multi_read)


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


@retry(
    retry=retry_if_exception_type(TRANSIENT),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.2, max=1),
    reraise=True,
)
def _multi_read_probe(client: KazooClient, timeout: float) -> bool:
    return multiread.supports_multi_read(client, timeout=timeout)


def _auth_hint(auth: ZkAuth | None) -> str:
    """What to check when a session is refused right after connecting (never the password)."""
    if auth is None:
        return " (the server may require authentication: set zookeeper.auth in cluster.yaml)"
    mechanism = f"SASL {auth.sasl_mechanism}" if auth.scheme == "sasl" else "digest"
    return f" (check the {mechanism} credentials of user {auth.username!r})"


def _stat(stat: KazooStat) -> ZnodeStat:
    return ZnodeStat(stat.version, stat.czxid, stat.ephemeralOwner, stat.mzxid)


def _stat_of(fields: tuple[int, ...]) -> ZnodeStat:
    """A stat as ZooKeeper orders its fields (czxid, mzxid, ctime, mtime, version, cversion,
    aversion, ephemeralOwner, ...)."""
    return ZnodeStat(fields[4], fields[0], fields[7], fields[1])


def _telling(on_retry: OnRetry | None) -> Callable[[RetryCallState], None]:
    def tell(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            error = state.outcome.exception()
            if error is not None:
                on_retry(state.attempt_number, error)

    return tell


class KazooZooKeeper:
    """The `ZooKeeper` port over a started kazoo client. With `multi_read` (the server is
    3.6 or later), `get_many` sends multiRead batches instead of one request per znode."""

    def __init__(self, client: KazooClient, *, multi_read: bool = False) -> None:
        self.client = client
        self.multi_read = multi_read

    def close(self) -> None:
        """Stop and close the client: its session ends, and its ephemeral znodes with it."""
        self.client.stop()
        self.client.close()

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    @property
    def session_id(self) -> int | None:
        client_id = self.client.client_id
        return int(client_id[0]) if client_id else None

    def _retried(self, what: str, call: Callable[[], T], on_retry: OnRetry | None) -> T:
        try:
            for attempt in Retrying(
                retry=retry_if_exception_type(TRANSIENT),
                stop=stop_after_attempt(READ_ATTEMPTS),
                wait=wait_exponential(multiplier=0.2, max=3),
                before_sleep=_telling(on_retry),
                reraise=True,
            ):
                with attempt:
                    return call()
            raise AssertionError("unreachable")  # pragma: no cover
        except TRANSIENT as exc:
            raise ZooKeeperError(f"ZooKeeper connection lost ({what}): {exc}") from exc
        except NoNodeError as exc:
            raise ZnodeMissingError(f"{what}: no such znode") from exc
        except KazooException as exc:
            raise ZooKeeperError(
                f"ZooKeeper refused a request ({what}): {type(exc).__name__}: {exc}"
            ) from exc

    def get(self, path: str, *, on_retry: OnRetry | None = None) -> tuple[bytes, ZnodeStat]:
        def read() -> tuple[bytes, ZnodeStat]:
            data, stat = self.client.get(path)
            return data, _stat(stat)

        return self._retried(f"read of {path}", read, on_retry)

    def get_many(
        self, paths: Collection[str], *, on_retry: OnRetry | None = None
    ) -> dict[str, tuple[bytes, ZnodeStat] | None]:
        def read_batched() -> dict[str, tuple[bytes, ZnodeStat] | None]:
            return {
                path: None if read is None else (read[0], _stat_of(read[1]))
                for path, read in multiread.read_many(self.client, list(paths)).items()
            }

        def read() -> dict[str, tuple[bytes, ZnodeStat] | None]:
            # Every read in flight at once; the results are collected afterwards.
            pending = {p: self.client.get_async(p) for p in paths}
            resolved: dict[str, tuple[bytes, ZnodeStat] | None] = {}
            for path, result in pending.items():
                try:
                    data, stat = result.get()
                except NoNodeError:
                    resolved[path] = None
                else:
                    resolved[path] = (data, _stat(stat))
            return resolved

        return self._retried(
            f"read of {len(paths)} znode(s)", read_batched if self.multi_read else read, on_retry
        )

    def children(self, path: str, *, on_retry: OnRetry | None = None) -> list[str]:
        def read() -> list[str]:
            try:
                return sorted(self.client.get_children(path))
            except NoNodeError:
                return []

        return self._retried(f"read of {path}'s children", read, on_retry)

    def exists(self, path: str) -> ZnodeStat | None:
        try:
            stat = self.client.exists(path)
        except KazooException as exc:
            raise ZooKeeperError(f"{type(exc).__name__}: {exc}") from exc
        return None if stat is None else _stat(stat)

    def set(self, path: str, data: bytes, *, version: int) -> ZnodeStat:
        try:
            return _stat(self.client.set(path, data, version=version))
        except BadVersionError as exc:
            raise VersionConflictError(f"{path} is no longer at version {version}") from exc
        except NoNodeError as exc:
            raise ZnodeMissingError(f"{path}: no such znode") from exc
        except KazooException as exc:
            raise ZooKeeperError(f"{path}: {type(exc).__name__}: {exc}") from exc

    def delete(
        self, path: str, *, timeout: float | None = None, on_retry: OnRetry | None = None
    ) -> None:
        if timeout is None:
            self._retried(f"delete of {path}", lambda: self.client.delete(path), on_retry)
            return
        try:
            self.client.delete_async(path).get(timeout=timeout)
        except NoNodeError as exc:
            raise ZnodeMissingError(f"{path}: no such znode") from exc
        except (KazooException, self.client.handler.timeout_exception) as exc:
            raise ZooKeeperError(f"delete of {path}: {type(exc).__name__}: {exc}") from exc

    def add_listener(self, listener: Listener) -> None:
        self.client.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.client.remove_listener(listener)

    def lock(self, path: str, identifier: str = "") -> KazooLock:
        return KazooLock(Lock(self.client, path, identifier))


class KazooLock:
    """kazoo's Lock recipe behind the `ZooKeeperLock` port."""

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    @property
    def node(self) -> str | None:
        node = self._lock.node
        return None if node is None else str(node)

    def acquire(self, *, timeout: float) -> bool:
        try:
            if timeout > 0:
                return bool(self._lock.acquire(blocking=True, timeout=timeout))
            return bool(self._lock.acquire(blocking=False))
        except LockTimeout:
            return False
        except KazooException as exc:
            raise ZooKeeperError(f"{type(exc).__name__}: {exc}") from exc

    def contenders(self) -> list[str]:
        try:
            return [str(c) for c in self._lock.contenders()]
        except KazooException as exc:
            raise ZooKeeperError(f"{type(exc).__name__}: {exc}") from exc


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
) -> tuple[int | None, int | None, str | None]:
    """The controller's id, the controller epoch and the cluster id, each decoded on its own:
    one that does not parse is a problem and None, and never takes the others with it."""

    def decoded(path: str, decode: Callable[[bytes], T]) -> T | None:
        read = singles.get(path)
        if not read:
            return None
        try:
            return decode(read[0])
        except FormatError as exc:
            problems.append(str(exc))
            return None

    return (
        decoded(CONTROLLER, lambda data: decode_controller(data).broker_id),
        decoded(CONTROLLER_EPOCH, decode_controller_epoch),
        decoded(CLUSTER_ID, decode_cluster_id),
    )


def _read(zk: ZooKeeper, topics_filter: Iterable[str] | None, on_retry: OnRetry) -> ClusterState:
    problems: list[str] = []
    singles = zk.get_many((CONTROLLER, CONTROLLER_EPOCH, CLUSTER_ID), on_retry=on_retry)
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
    controller_id, controller_epoch, cluster_id = _decode_singles(singles, problems)
    return ClusterState(
        cluster_id=cluster_id,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        brokers=_decode_brokers({b: level[p] for b, p in broker_paths.items()}, problems),
        topics=topics,
        partitions=_decode_states({k: state_reads[p] for k, p in state_paths.items()}, problems),
        problems=tuple(problems),
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
