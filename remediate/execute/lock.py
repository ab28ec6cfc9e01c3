"""One run per cluster: a lock in ZooKeeper, checked before every destructive action.

The lock is an ephemeral sequential znode under `/remediate/locks/<cluster>`, so it lives
exactly as long as the ZooKeeper session that created it. A session can end behind the
process's back (a long GC pause, a network partition, ZooKeeper restarting), and then another
run may take the lock; so holding it once is not enough. `ensure_held` is called right before
each destructive step and refuses unless the session never expired since `acquire`, the
connection is up (or comes back within a bounded wait) and our lock node is still there and
still ours.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from types import TracebackType

import structlog

from remediate.errors import ConfigError, LockHeldError, LockLostError, ZooKeeperError
from remediate.ports import SessionState, ZooKeeper, ZooKeeperLock

LOCK_ROOT = "/remediate/locks"
# How long release waits for ZooKeeper to confirm the delete; the node goes with the
# session anyway once the client is closed, so waiting longer buys nothing.
RELEASE_TIMEOUT = 5.0

_NAME = re.compile(r"[A-Za-z0-9._-]+")

log = structlog.get_logger(__name__)


def lock_path(cluster: str) -> str:
    """The lock's znode for `cluster`, after checking the name is one path segment."""
    if not _NAME.fullmatch(cluster) or cluster in (".", ".."):
        raise ConfigError(f"invalid cluster name {cluster!r}: expected [A-Za-z0-9._-]+")
    return f"{LOCK_ROOT}/{cluster}"


def default_identifier(run_id: str) -> str:
    """Who holds the lock, in words an operator can act on: host, pid and run."""
    return f"{socket.gethostname()} pid {os.getpid()} run {run_id}"


class RunLock:
    """The cluster's run lock, held by one run through one ZooKeeper session."""

    def __init__(
        self, zk: ZooKeeper, cluster: str, *, run_id: str, identifier: str | None = None
    ) -> None:
        self.zk = zk
        self.cluster = cluster
        self.path = lock_path(cluster)
        self.run_id = run_id
        self.identifier = identifier if identifier is not None else default_identifier(run_id)
        self._lock: ZooKeeperLock | None = None
        self._node_path: str | None = None
        self._session_id: int | None = None
        # Written by the client's connection thread through the listener, read by the run.
        self._lost = threading.Event()
        self._connected = threading.Event()
        self._suspensions = 0
        self._log = log.bind(cluster=cluster, run_id=run_id)

    @property
    def node_path(self) -> str | None:
        """Our lock znode while we hold the lock."""
        return self._node_path

    @property
    def suspensions(self) -> int:
        """How often the connection was suspended since acquire (each one a risk)."""
        return self._suspensions

    def acquire(self, *, timeout: float = 1.0) -> None:
        """Take the lock, waiting at most `timeout` seconds for a holder to let go.

        A run never queues behind another: if the lock stays held, LockHeldError names
        the holder so the operator can find it.
        """
        if self._node_path is not None:
            return
        lock = self.zk.lock(self.path, self.identifier)
        self._lost.clear()
        self._connected.clear()
        self._suspensions = 0
        # Listening before the lock is taken, so a session lost during acquire is seen too;
        # and before reading `connected`, so no transition falls between the two.
        self.zk.add_listener(self._on_state)
        if self.zk.connected:
            self._connected.set()
        try:
            gotten = lock.acquire(timeout=timeout)
        except ZooKeeperError as error:
            self.zk.remove_listener(self._on_state)
            raise ZooKeeperError(f"cannot take the lock {self.path}: {error}") from error
        if not gotten:
            self.zk.remove_listener(self._on_state)
            holder = self._read_holder()
            raise LockHeldError(
                f"cluster {self.cluster} is locked by {holder or 'another run'} ({self.path}),"
                f" still after waiting {timeout:g}s; if that process is gone, its lock ends"
                " with its ZooKeeper session",
                holder=holder,
            )
        self._lock = lock
        self._node_path = f"{self.path}/{lock.node}"
        self._session_id = self.zk.session_id
        self._log.info("lock acquired", node=self._node_path, identifier=self.identifier)

    def ensure_held(self, *, reconnect_timeout: float = 10.0) -> None:
        """Raise LockLostError unless we still hold the lock; called before every destructive
        action, so any doubt counts as lost: the run halts and can be resumed."""
        if self._node_path is None:
            raise LockLostError(f"lock {self.path} is not held by run {self.run_id}")
        self._raise_if_lost()
        if not self._connected.wait(reconnect_timeout):
            raise LockLostError(
                f"lock {self.path}: ZooKeeper connection suspended and not back within"
                f" {reconnect_timeout:g}s; the session may have expired"
            )
        # A reconnect can be the one that reports the session expired.
        self._raise_if_lost()
        try:
            stat = self.zk.exists(self._node_path)
        except ZooKeeperError as error:
            raise LockLostError(
                f"lock {self.path}: cannot confirm our node {self._node_path}: {error!r}"
            ) from error
        if stat is None:
            raise LockLostError(f"lock {self.path}: our node {self._node_path} was deleted")
        if stat.ephemeral_owner != self._session_id:
            raise LockLostError(
                f"lock {self.path}: node {self._node_path} belongs to session"
                f" {stat.ephemeral_owner:#x}, not ours"
            )

    def release(self) -> None:
        """Let go of the lock. Idempotent; never raises, even on a dead session."""
        self.zk.remove_listener(self._on_state)
        node_path, self._node_path, self._lock = self._node_path, None, None
        if node_path is None:
            return
        try:
            # Not Lock.release: it retries until ZooKeeper answers, which may be never.
            self.zk.delete(node_path, timeout=RELEASE_TIMEOUT)
        except ZooKeeperError as error:
            # Gone with the session, or goes with it when the client is closed.
            self._log.warning("lock release not confirmed", node=node_path, error=repr(error))
        else:
            self._log.info("lock released", node=node_path)

    @property
    def holder(self) -> str | None:
        """The identifier of whoever holds the lock now (ours included), None if free."""
        return self._read_holder()

    def _read_holder(self) -> str | None:
        try:
            contenders = self.zk.lock(self.path).contenders()
        except ZooKeeperError as error:
            raise ZooKeeperError(f"cannot read the lock {self.path}: {error}") from error
        return str(contenders[0]) if contenders else None

    def _raise_if_lost(self) -> None:
        if self._lost.is_set():
            raise LockLostError(
                f"lock {self.path}: the ZooKeeper session that held it expired;"
                " another run may have taken it"
            )

    def _on_state(self, state: str) -> None:
        # Runs on the client's connection thread: it must not block.
        if state == SessionState.LOST:
            self._lost.set()
            self._connected.clear()
            self._log.error("zookeeper session lost while holding the lock")
        elif state == SessionState.SUSPENDED:
            self._suspensions += 1
            self._connected.clear()
            self._log.warning("zookeeper connection suspended while holding the lock")
        else:
            self._connected.set()
            self._log.info("zookeeper connection back while holding the lock")

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
