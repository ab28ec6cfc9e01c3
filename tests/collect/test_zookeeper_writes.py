"""The ZooKeeper adapter's writes against a real ZooKeeper, through a proxy that loses answers
or stops answering: a transaction is all or nothing, a write is sent once and a lost answer
says so (OutcomeUnknownError, for the caller to read again), and no request waits longer than
the session's timeout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from remediate.errors import OutcomeUnknownError, VersionConflictError, ZooKeeperError
from remediate.ports import CheckVersion, DeleteNode, SetData
from remediate.sandbox.plumbing import process
from remediate.zookeeper import KazooZooKeeper, ZkSettings, connect
from tests.collect.zkproxy import DELETE, MULTI, SET_DATA, ZkProxy, multi_operations
from tests.execute.test_lock import start_zookeeper

DELETE_REQUEST = 2  # a plain delete's operation code (OpCode.delete)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    _hosts, port, pid = start_zookeeper(tmp_path_factory.mktemp("zk"))
    yield "127.0.0.1", port
    process.terminate(pid, "QuorumPeerMain", timeout=10)


def session_through(proxy: ZkProxy, timeout_s: float = 10.0) -> KazooZooKeeper:
    return connect(ZkSettings(connect=proxy.connect_string, session_timeout_s=timeout_s))


def test_a_transaction_is_all_or_nothing(upstream: tuple[str, int]) -> None:
    proxy = ZkProxy(upstream)
    zk = session_through(proxy)
    try:
        zk.client.create("/all-or-nothing/fence", b"1", makepath=True)
        zk.client.create("/all-or-nothing/data", b"old")
        # The fence moved on: the write beside its check is refused, and nothing is written.
        zk.client.set("/all-or-nothing/fence", b"2")
        with pytest.raises(VersionConflictError, match=r"^/all-or-nothing/fence is no longer at"):
            zk.commit(
                [
                    CheckVersion("/all-or-nothing/fence", 0),
                    SetData("/all-or-nothing/data", b"new", 0),
                ]
            )
        assert zk.get("/all-or-nothing/data")[0] == b"old"
        zk.commit(
            [CheckVersion("/all-or-nothing/fence", 1), SetData("/all-or-nothing/data", b"new", 0)]
        )
        assert zk.get("/all-or-nothing/data")[0] == b"new"
    finally:
        zk.close()
        proxy.close()


def test_a_transaction_whose_answer_is_lost_is_reported_once_and_took_effect(
    upstream: tuple[str, int],
) -> None:
    def the_write(operation: int, body: bytes) -> bool:
        return operation == MULTI and SET_DATA in multi_operations(body)

    proxy = ZkProxy(upstream, lose_answer_to=the_write)
    zk = session_through(proxy)
    try:
        zk.client.create("/lost-answer/data", b"old", makepath=True)
        with pytest.raises(OutcomeUnknownError, match="it may have taken effect"):
            zk.commit([SetData("/lost-answer/data", b"new", 0)])
        assert proxy.answers_lost == 1
        assert proxy.operations[MULTI] == 1, "the transaction was sent again"
        # The session lives on: a read (retried through the reconnection) shows the write.
        assert zk.get("/lost-answer/data")[0] == b"new"
    finally:
        zk.close()
        proxy.close()


def test_a_delete_whose_answer_is_lost_is_not_sent_again(upstream: tuple[str, int]) -> None:
    def the_delete(operation: int, body: bytes) -> bool:
        return operation in (DELETE_REQUEST, MULTI) and (
            operation == DELETE_REQUEST or DELETE in multi_operations(body)
        )

    proxy = ZkProxy(upstream, lose_answer_to=the_delete)
    zk = session_through(proxy)
    try:
        zk.client.create("/lost-delete/a", b"", makepath=True)
        zk.client.create("/lost-delete/b", b"")
        with pytest.raises(OutcomeUnknownError):
            zk.delete("/lost-delete/a")
        with pytest.raises(OutcomeUnknownError):
            zk.commit([DeleteNode("/lost-delete/b", 0)])
        assert proxy.operations[DELETE_REQUEST] == 1 and proxy.operations[MULTI] == 1
        assert zk.exists("/lost-delete/a") is None and zk.exists("/lost-delete/b") is None
    finally:
        zk.close()
        proxy.close()


def test_no_request_waits_past_the_session_timeout(upstream: tuple[str, int]) -> None:
    """A server that stops answering behind an open connection: kazoo drops the connection
    when its pings go unanswered and queues every request while it reconnects, for as long as
    that lasts; the adapter gives up instead (a dropped connection retried a few times, then
    no answer within the session's timeout), for a read and for a write alike."""
    proxy = ZkProxy(upstream)
    zk = session_through(proxy, timeout_s=2.0)
    try:
        zk.client.create("/stalled/data", b"old", makepath=True)
        proxy.stalled = True
        with pytest.raises(ZooKeeperError, match=r"\(read of /stalled/data\)"):
            zk.get("/stalled/data")
        with pytest.raises(OutcomeUnknownError):
            zk.commit([SetData("/stalled/data", b"new", 0)])
    finally:
        proxy.stalled = False
        zk.close()
        proxy.close()
