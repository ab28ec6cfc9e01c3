"""The kazoo adapter's boundary, without a server: kazoo's errors come out as the project's,
and nothing that acts on a cluster imports kazoo."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import remediate
from remediate.errors import ZooKeeperError
from remediate.sandbox.plumbing.zkserver import free_port
from remediate.zookeeper import KazooZooKeeper, ZkSettings, connect


@pytest.fixture
def unstarted() -> KazooZooKeeper:
    # Never started: kazoo refuses every request, as with a connection that is gone.
    return KazooZooKeeper(KazooClient("127.0.0.1:1"))


def test_a_refused_request_is_a_zookeeper_error(unstarted: KazooZooKeeper) -> None:
    assert unstarted.connected is False
    assert unstarted.session_id is None
    with pytest.raises(ZooKeeperError):
        unstarted.get("/controller")
    with pytest.raises(ZooKeeperError):
        unstarted.set("/controller", b"", version=0)
    with pytest.raises(ZooKeeperError):
        unstarted.exists("/")
    with pytest.raises(ZooKeeperError):
        unstarted.lock("/remediate/locks/x").contenders()


def test_a_session_that_does_not_come_says_where_and_how_long_it_was_waited_for() -> None:
    closed = f"127.0.0.1:{free_port('127.0.0.1')}"
    with pytest.raises(ZooKeeperError) as caught:
        connect(ZkSettings(connect=closed), timeout=0.5)
    assert str(caught.value).startswith(
        f"cannot connect to ZooKeeper at {closed} within 0.5s: KazooTimeoutError"
    )


def test_nothing_under_execute_imports_kazoo() -> None:
    execute = Path(remediate.__file__).parent / "execute"
    modules = sorted(execute.rglob("*.py"))
    assert {"executor.py", "lock.py", "probes.py", "restore.py"} <= {p.name for p in modules}
    for path in modules:
        tree = ast.parse(path.read_text())
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.split(".")[0] == "kazoo"], path.name
