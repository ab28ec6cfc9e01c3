"""What the tool creates in ZooKeeper (its lock, its journal's copy) carries an ACL giving its
own identity all rights, and the identities cluster.yaml adds (`zookeeper.acl_also`), nobody
else any; on a real ZooKeeper, through kazoo."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions, make_digest_acl, make_digest_acl_credential

from remediate.execute.journal_mirror import JournalMirror, cluster_path
from remediate.zookeeper import ZkAuth, ZkSettings, connect, own_acl

TOOL, TOOL_PASSWORD = "remediate", "tool-secret"
OTHER, OTHER_PASSWORD = "someone", "other-secret"


@pytest.mark.parametrize(
    ("auth", "also", "expected"),
    [
        pytest.param(None, (), None, id="no-identity-no-acl"),
        pytest.param(
            ZkAuth("digest", TOOL, TOOL_PASSWORD),
            (),
            [make_digest_acl(TOOL, TOOL_PASSWORD, all=True)],
            id="digest",
        ),
        pytest.param(
            ZkAuth("sasl", TOOL, TOOL_PASSWORD),
            ("sasl:kafka",),
            [ACL(Permissions.ALL, Id("sasl", TOOL)), ACL(Permissions.ALL, Id("sasl", "kafka"))],
            id="sasl-and-kafka",
        ),
    ],
)
def test_the_acl_of_what_the_tool_creates(
    auth: ZkAuth | None, also: tuple[str, ...], expected: list[ACL] | None
) -> None:
    assert own_acl(auth, also) == expected


def client(connect_string: str, *identity: str) -> KazooClient:
    zk = KazooClient(
        hosts=connect_string,
        auth_data=[("digest", f"{identity[0]}:{identity[1]}")] if identity else None,
    )
    zk.start(timeout=15)
    return zk


def test_the_lock_and_the_journal_copy_are_the_tools_alone(
    zookeeper: tuple[str, int],
) -> None:
    connect_string = zookeeper[0]
    settings = ZkSettings(
        connect_string,
        auth=ZkAuth("digest", TOOL, TOOL_PASSWORD),
        # Kafka's identity, as cluster.yaml gives it (this ZooKeeper knows no SASL: digest).
        acl_also=(f"digest:{make_digest_acl_credential('kafka', 'kafka-secret')}",),
    )
    zk = connect(settings)
    try:
        lock = zk.lock("/remediate/locks/acl-cluster", "operator@host")
        assert lock.acquire(timeout=10)
        mirror = JournalMirror(zk, "acl-cluster", "20261129T000000Z-aaaaaa")
        mirror.put_plan(b'{"plan": true}')
        mirror.put_record(1, b'{"event": "run-started"}\n')
        assert mirror.behind == 0
        runs = cluster_path("acl-cluster")
        paths = ["/remediate/locks/acl-cluster", runs, *(f"{runs}/{c}" for c in zk.children(runs))]
        expected = own_acl(settings.auth, settings.acl_also)
        nobody, someone = client(connect_string), client(connect_string, OTHER, OTHER_PASSWORD)
        tool = client(connect_string, TOOL, TOOL_PASSWORD)
        try:
            for path in paths:
                acls, _ = tool.get_acls(path)  # reading an ACL needs READ or ADMIN
                assert acls == expected, path
                for stranger in (nobody, someone):
                    with pytest.raises(NoAuthError):
                        stranger.get(path)
                    with pytest.raises(NoAuthError):
                        stranger.set(path, b"forged")
            # The lock's own node (ephemeral, sequential) too: nobody else can delete it.
            held = f"/remediate/locks/acl-cluster/{lock.node}"
            assert tool.get_acls(held)[0] == expected
            with pytest.raises(NoAuthError):
                someone.delete(held)
        finally:
            for other in (nobody, someone, tool):
                other.stop()
                other.close()
    finally:
        zk.close()
