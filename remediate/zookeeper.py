"""ZooKeeper through kazoo: the adapter behind the `ZooKeeper` port (remediate/ports.py),
and how a session is made (digest or SASL auth, TLS).

The adapter is the only place that touches kazoo: it retries what may be retried (a dropped
connection, bounded, with tenacity; nothing else), tells the caller of each retry, and turns
kazoo's exceptions into ZooKeeperError and its subclasses. Reads are issued asynchronously
and collected afterwards, so a cluster with fifty thousand partitions costs a handful of
round trips, not fifty thousand: on ZooKeeper 3.6 and later as multiRead requests of many
znodes each (remediate/zookeeper_multiread.py), on older servers as one pipelined request per
znode. The collector's read of a whole cluster is remediate/collect/cluster_state.py.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    LockTimeout,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat as KazooStat
from kazoo.recipe.lock import Lock
from kazoo.security import ACL, Id, Permissions, make_digest_acl
from tenacity import (
    RetryCallState,
    Retrying,
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from remediate import zookeeper_multiread as multiread
from remediate.errors import (
    OutcomeUnknownError,
    VersionConflictError,
    ZnodeExistsError,
    ZnodeMissingError,
    ZooKeeperError,
)
from remediate.ports import (
    CheckVersion,
    Listener,
    OnRetry,
    SetData,
    ZkOp,
    ZnodeAcl,
    ZnodeStat,
)

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
    # How long `connect` waits for the session by default; None: the session timeout.
    connect_timeout_s: float | None = None
    # Identities (scheme:id, e.g. "sasl:kafka") given all rights to the znodes the tool
    # creates, beside its own.
    acl_also: tuple[str, ...] = ()

    @property
    def connect_within_s(self) -> float:
        return self.connect_timeout_s or self.session_timeout_s


def own_acl(auth: ZkAuth | None, also: Sequence[str] = ()) -> list[ACL] | None:
    """The ACL of every znode the tool creates (its lock, its journal's copy): all rights to
    its own identity and to each of `also`, nobody else any. None where the tool logs in as
    nobody: ZooKeeper's open ACL, the only one such a client could use again."""
    if auth is None:
        return None
    if auth.scheme == "digest":
        own = make_digest_acl(auth.username, auth.password or "", all=True)
    else:
        own = ACL(Permissions.ALL, Id("sasl", auth.username))
    extra = []
    for identity in also:
        scheme, _, name = identity.partition(":")
        extra.append(ACL(Permissions.ALL, Id(scheme, name)))
    return [own, *extra]


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
        kwargs["default_acl"] = own_acl(settings.auth, settings.acl_also)
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
def session(settings: ZkSettings, *, timeout: float | None = None) -> Iterator[KazooZooKeeper]:
    """A connected session for the `with` block, closed after it."""
    zk = connect(settings, timeout=timeout)
    try:
        yield zk
    finally:
        zk.close()


def connect(settings: ZkSettings, *, timeout: float | None = None) -> KazooZooKeeper:
    """A started client whose session has answered a read, within `timeout` (by default the
    settings' connect timeout).

    kazoo reports the session as connected before SASL authentication has finished, and a
    refused login only shows at the first request (AuthFailedError, or a closed connection
    when the server enforces SASL), so one read of `/` proves the session before anything
    relies on it.
    """
    if timeout is None:
        timeout = settings.connect_within_s
    client = make_client(settings)
    try:
        client.start(timeout=timeout)
    except (KazooTimeoutError, KazooException, ssl.SSLError, OSError) as exc:
        client.close()
        within = f" within {timeout:g}s" if isinstance(exc, KazooTimeoutError) else ""
        raise ZooKeeperError(
            f"cannot connect to ZooKeeper at {settings.connect}{within}:"
            f" {type(exc).__name__}: {exc}"
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
    return KazooZooKeeper(
        client, multi_read=multi_read, request_timeout_s=settings.session_timeout_s
    )


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


def _describe(op: ZkOp) -> str:
    if isinstance(op, CheckVersion):
        return f"check of {op.path} at version {op.version}"
    if isinstance(op, SetData):
        return f"write of {op.path} at version {op.version}"
    return f"delete of {op.path} at version {op.version}"


def _rolled_back(error: Exception) -> bool:
    """An op of a failed transaction that failed only because another one did."""
    return isinstance(error, RolledBackError | RuntimeInconsistency)


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

    def __init__(
        self, client: KazooClient, *, multi_read: bool = False, request_timeout_s: float = 10.0
    ) -> None:
        self.client = client
        self.multi_read = multi_read
        # How long a request waits for its answer: kazoo queues requests while the connection
        # is down and would wait as long as it stays down (a run that could neither go on nor
        # be stopped). The session's timeout: past it the session has expired anyway.
        self.request_timeout_s = request_timeout_s

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
        """`call` (a request that may be sent again), retried on a dropped connection; no
        answer within the request timeout is not retried: ZooKeeper is out of reach."""
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
        except self.client.handler.timeout_exception as exc:
            raise ZooKeeperError(
                f"ZooKeeper did not answer within {self.request_timeout_s:g}s ({what}): the"
                " connection is down"
            ) from exc
        except NoNodeError as exc:
            raise ZnodeMissingError(f"{what}: no such znode") from exc
        except NodeExistsError as exc:
            raise ZnodeExistsError(f"{what}: the znode exists already") from exc
        except KazooException as exc:
            raise ZooKeeperError(
                f"ZooKeeper refused a request ({what}): {type(exc).__name__}: {exc}"
            ) from exc

    def get(self, path: str, *, on_retry: OnRetry | None = None) -> tuple[bytes, ZnodeStat]:
        def read() -> tuple[bytes, ZnodeStat]:
            data, stat = self.client.get_async(path).get(timeout=self.request_timeout_s)
            return data, _stat(stat)

        return self._retried(f"read of {path}", read, on_retry)

    def get_many(
        self, paths: Collection[str], *, on_retry: OnRetry | None = None
    ) -> dict[str, tuple[bytes, ZnodeStat] | None]:
        def read_batched() -> dict[str, tuple[bytes, ZnodeStat] | None]:
            return {
                path: None if read is None else (read[0], _stat_of(read[1]))
                for path, read in multiread.read_many(
                    self.client, list(paths), timeout=self.request_timeout_s
                ).items()
            }

        def read() -> dict[str, tuple[bytes, ZnodeStat] | None]:
            # Every read in flight at once; the results are collected afterwards.
            pending = {p: self.client.get_async(p) for p in paths}
            resolved: dict[str, tuple[bytes, ZnodeStat] | None] = {}
            for path, result in pending.items():
                try:
                    data, stat = result.get(timeout=self.request_timeout_s)
                except NoNodeError:
                    resolved[path] = None
                else:
                    resolved[path] = (data, _stat(stat))
            return resolved

        return self._retried(
            f"read of {len(paths)} znode(s)", read_batched if self.multi_read else read, on_retry
        )

    def acls_many(self, paths: Collection[str]) -> dict[str, tuple[ZnodeAcl, ...] | None]:
        """Each znode's ACL (None: no such znode), every request in flight at once. An ACL
        the session may not read (ZooKeeper asks READ or ADMIN for it) is given as no entry:
        it grants this session neither."""

        def read() -> dict[str, tuple[ZnodeAcl, ...] | None]:
            pending = {p: self.client.get_acls_async(p) for p in paths}
            resolved: dict[str, tuple[ZnodeAcl, ...] | None] = {}
            for path, result in pending.items():
                try:
                    acls, _stat = result.get(timeout=self.request_timeout_s)
                except NoNodeError:
                    resolved[path] = None
                except NoAuthError:
                    resolved[path] = ()
                else:
                    resolved[path] = tuple(
                        ZnodeAcl(int(a.perms), str(a.id.scheme), str(a.id.id)) for a in acls
                    )
            return resolved

        return self._retried(f"read of {len(paths)} znode(s)' ACLs", read, None)

    def children(self, path: str, *, on_retry: OnRetry | None = None) -> list[str]:
        def read() -> list[str]:
            try:
                children = self.client.get_children_async(path)
                return sorted(children.get(timeout=self.request_timeout_s))
            except NoNodeError:
                return []

        return self._retried(f"read of {path}'s children", read, on_retry)

    def exists(self, path: str) -> ZnodeStat | None:
        try:
            stat = self.client.exists_async(path).get(timeout=self.request_timeout_s)
        except (KazooException, self.client.handler.timeout_exception) as exc:
            raise ZooKeeperError(f"{type(exc).__name__}: {exc}") from exc
        return None if stat is None else _stat(stat)

    def set(self, path: str, data: bytes, *, version: int) -> ZnodeStat:
        try:
            written = self.client.set_async(path, data, version=version)
            return _stat(written.get(timeout=self.request_timeout_s))
        except (*TRANSIENT, self.client.handler.timeout_exception) as exc:
            raise OutcomeUnknownError(
                f"write of {path}: no answer ({type(exc).__name__}); it may have taken effect"
            ) from exc
        except BadVersionError as exc:
            raise VersionConflictError(f"{path} is no longer at version {version}") from exc
        except NoNodeError as exc:
            raise ZnodeMissingError(f"{path}: no such znode") from exc
        except KazooException as exc:
            raise ZooKeeperError(f"{path}: {type(exc).__name__}: {exc}") from exc

    def delete(self, path: str, *, timeout: float | None = None) -> None:
        try:
            self.client.delete_async(path).get(
                timeout=self.request_timeout_s if timeout is None else timeout
            )
        except NoNodeError as exc:
            raise ZnodeMissingError(f"{path}: no such znode") from exc
        except (*TRANSIENT, self.client.handler.timeout_exception) as exc:
            raise OutcomeUnknownError(
                f"delete of {path}: no answer ({type(exc).__name__}); it may have taken effect"
            ) from exc
        except KazooException as exc:
            raise ZooKeeperError(f"delete of {path}: {type(exc).__name__}: {exc}") from exc

    def commit(self, ops: Sequence[ZkOp]) -> None:
        transaction = self.client.transaction()
        for op in ops:
            if isinstance(op, CheckVersion):
                transaction.check(op.path, op.version)
            elif isinstance(op, SetData):
                transaction.set_data(op.path, op.data, op.version)
            else:
                transaction.delete(op.path, op.version)
        what = "a transaction of " + ", ".join(_describe(op) for op in ops)
        try:
            results = transaction.commit_async().get(timeout=self.request_timeout_s)
        except (*TRANSIENT, self.client.handler.timeout_exception) as exc:
            raise OutcomeUnknownError(
                f"{what}: no answer ({type(exc).__name__}); it may have taken effect"
            ) from exc
        except KazooException as exc:
            raise ZooKeeperError(f"{what}: {type(exc).__name__}: {exc}") from exc
        for op, result in zip(ops, results, strict=False):
            if isinstance(result, BadVersionError):
                raise VersionConflictError(
                    f"{op.path} is no longer at version {op.version}: nothing written"
                )
            if isinstance(result, NoNodeError):
                raise ZnodeMissingError(f"{op.path}: no such znode: nothing written")
        failed = [r for r in results if isinstance(r, Exception) and not _rolled_back(r)]
        if failed:
            raise ZooKeeperError(f"{what}: {type(failed[0]).__name__}: nothing written")

    def create(self, path: str, data: bytes, *, makepath: bool = False) -> None:
        self._retried(
            f"create of {path}",
            lambda: self.client.create_async(path, data, makepath=makepath).get(
                timeout=self.request_timeout_s
            ),
            None,
        )

    def delete_tree(self, path: str) -> None:
        def delete() -> None:
            try:
                self.client.delete(path, recursive=True)
            except NoNodeError:
                return

        self._retried(f"delete of {path} and its children", delete, None)

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
