"""The cluster run lock against a real ZooKeeper: exclusion, the holder named in the refusal,
and every way of losing the lock (session expiry, node deleted, ZooKeeper gone too long)
detected before the next destructive action."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from remediate.errors import ConfigError, LockHeldError, LockLostError
from remediate.execute.lock import RunLock, lock_path
from remediate.sandbox.plumbing import process, zkserver
from remediate.zookeeper import KazooZooKeeper
from tests.wait import wait_until


def start_zookeeper(directory: Path) -> tuple[str, int, int]:
    port = zkserver.free_port()
    zkserver.write_config(directory, "127.0.0.1", port)
    pid = zkserver.start(directory, "127.0.0.1", port)
    return f"127.0.0.1:{port}", port, pid


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    hosts, _, pid = start_zookeeper(tmp_path_factory.mktemp("zk"))
    yield hosts
    process.terminate(pid, "QuorumPeerMain", timeout=10)


@contextmanager
def client(hosts: str, **options: Any) -> Iterator[KazooClient]:
    # Reconnect attempts at most 0.5 s apart, so a restarted ZooKeeper is found quickly.
    zk = KazooClient(hosts, connection_retry={"max_tries": -1, "max_delay": 0.5}, **options)
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def test_acquire_and_release(zookeeper: str) -> None:
    with client(zookeeper) as zk:
        lock = RunLock(KazooZooKeeper(zk), "acquire-release", run_id="20261122T031500Z-aaaaaa")
        assert lock.identifier == (
            f"{socket.gethostname()} pid {os.getpid()} run 20261122T031500Z-aaaaaa"
        )
        assert lock.holder is None
        lock.acquire()
        assert lock.holder == lock.identifier
        assert lock.node_path is not None
        assert lock.node_path.startswith("/remediate/locks/acquire-release/")
        data, stat = zk.get(lock.node_path)
        assert data.decode() == lock.identifier
        assert stat.ephemeralOwner == zk.client_id[0]
        lock.ensure_held()
        lock.release()
        assert lock.holder is None
        assert zk.get_children("/remediate/locks/acquire-release") == []
        lock.release()  # idempotent
        with pytest.raises(LockLostError, match="not held"):
            lock.ensure_held()


def test_context_manager_holds_for_the_block(zookeeper: str) -> None:
    with client(zookeeper) as zk:
        with RunLock(KazooZooKeeper(zk), "context", run_id="r1", identifier="operator one") as lock:
            assert lock.holder == "operator one"
            lock.ensure_held()
        assert lock.holder is None


def test_a_second_run_is_refused_naming_the_holder(zookeeper: str) -> None:
    with client(zookeeper) as first_zk, client(zookeeper) as second_zk:
        first = RunLock(KazooZooKeeper(first_zk), "exclusive", run_id="20261122T031500Z-111111")
        second = RunLock(KazooZooKeeper(second_zk), "exclusive", run_id="20261122T031501Z-222222")
        first.acquire()
        with pytest.raises(LockHeldError) as refused:
            second.acquire(timeout=0.5)
        # Refused, not queued behind the holder: the call returned while the holder still
        # holds the lock (a queued contender would only return once the holder let go).
        first.ensure_held()
        assert "20261122T031500Z-111111" in str(refused.value)
        assert ", still after waiting 0.5s;" in str(refused.value)
        assert refused.value.holder == first.identifier
        # The refused contender left nothing behind.
        assert zk_children(first_zk, "exclusive") == [first.node_path]
        with pytest.raises(LockHeldError, match="20261122T031500Z-111111"):
            second.acquire(timeout=0)
        first.ensure_held()
        first.release()
        second.acquire()
        assert second.holder == second.identifier
        assert first.holder == second.identifier
        second.release()


def zk_children(zk: KazooClient, cluster: str) -> list[str]:
    path = lock_path(cluster)
    return [f"{path}/{child}" for child in zk.get_children(path)]


@pytest.mark.parametrize("cluster", ["", ".", "..", "a/b", "prod east", "../locks"])
def test_invalid_cluster_names_are_refused(zookeeper: str, cluster: str) -> None:
    with client(zookeeper) as zk, pytest.raises(ConfigError, match="invalid cluster name"):
        RunLock(KazooZooKeeper(zk), cluster, run_id="r")


def test_session_expiry_loses_the_lock(zookeeper: str) -> None:
    with client(zookeeper) as zk, client(zookeeper) as other_zk:
        lock = RunLock(KazooZooKeeper(zk), "expiry", run_id="r-expiring")
        lock.acquire()
        states: list[str] = []
        zk.add_listener(states.append)
        # Connecting a second client with the same session id and password moves the
        # session to it (ZooKeeper drops the first connection); closing that client ends the
        # session, which the first client learns as SessionExpired on reconnect.
        assert zk.client_id is not None
        session_id, password = zk.client_id
        thief = KazooClient(zookeeper, client_id=(session_id, password))
        thief.start()
        thief.stop()
        thief.close()
        wait_until(lambda: KazooState.LOST in states)
        with pytest.raises(LockLostError, match="session that held it expired"):
            lock.ensure_held()
        # Sticky: the client has a new session by now, still no lock.
        wait_until(lambda: zk.connected)
        with pytest.raises(LockLostError, match="expired"):
            lock.ensure_held()
        # The ephemeral node went with the session, so another run can take over.
        successor = RunLock(KazooZooKeeper(other_zk), "expiry", run_id="r-successor")
        successor.acquire()
        assert successor.holder == successor.identifier
        lock.release()  # a dead session: must not raise
        successor.ensure_held()
        successor.release()


def test_lock_node_deleted_by_someone_else(zookeeper: str) -> None:
    with client(zookeeper) as zk, client(zookeeper) as other_zk:
        lock = RunLock(KazooZooKeeper(zk), "deleted", run_id="r1")
        lock.acquire()
        assert lock.node_path is not None
        other_zk.delete(lock.node_path)
        with pytest.raises(LockLostError, match="was deleted"):
            lock.ensure_held()
        lock.release()


def test_release_on_a_closed_client_does_not_raise(zookeeper: str) -> None:
    zk = KazooClient(zookeeper)
    zk.start()
    lock = RunLock(KazooZooKeeper(zk), "closed-client", run_id="r1")
    lock.acquire()
    zk.stop()
    zk.close()
    lock.release()
    with client(zookeeper) as observer:
        # Closing the client ended the session, and the lock with it.
        assert observer.get_children(lock_path("closed-client")) == []


def test_zookeeper_down_briefly_then_back(tmp_path: Path) -> None:
    """A ZooKeeper restart shorter than the session timeout keeps the session and the lock;
    ensure_held waits for the reconnect, and refuses if it does not come in time."""
    hosts, port, pid = start_zookeeper(tmp_path)
    try:
        # The longest session the sandbox's ZooKeeper grants: its restart (a JVM start, slow
        # on a loaded machine) must end well within it. The server listed four times: kazoo
        # waits the session timeout divided by the number of hosts for the answer to a
        # connect, and ZooKeeper never answers one that comes in while it loads its database
        # (the connection's close fails there), so the client tries again after 15 s, not 60.
        with client(",".join([hosts] * 4), timeout=60) as zk:
            lock = RunLock(KazooZooKeeper(zk), "restart", run_id="r1")
            lock.acquire()
            node_path = lock.node_path
            assert zk.client_id is not None
            session = zk.client_id[0]

            process.kill(pid, "QuorumPeerMain")  # a crash: no session is closed
            wait_until(lambda: zk.state == KazooState.SUSPENDED)
            with pytest.raises(LockLostError, match=r"suspended and not back within 0\.5s"):
                lock.ensure_held(reconnect_timeout=0.5)

            # ZooKeeper comes back while ensure_held is waiting for it.
            restarted: list[int] = []
            restart = threading.Thread(
                target=lambda: restarted.append(zkserver.start(tmp_path, "127.0.0.1", port))
            )
            restart.start()
            try:
                lock.ensure_held(reconnect_timeout=60)
            finally:
                restart.join()
                pid = restarted[0] if restarted else pid
            assert zk.client_id is not None
            assert zk.client_id[0] == session
            assert lock.node_path == node_path
            assert lock.holder == lock.identifier
            assert lock.suspensions == 1
            lock.release()
            assert zk.get_children(lock_path("restart")) == []
    finally:
        process.terminate(pid, "QuorumPeerMain", timeout=10)
