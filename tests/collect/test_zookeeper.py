"""The ZooKeeper collector against a real ZooKeeper: exact reads, ACLs with digest auth,
bad znodes reported rather than fatal, and bounded retries across a connection loss."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError
from kazoo.security import make_digest_acl

from remediate.collect.cluster_state import read_cluster_state
from remediate.errors import ZooKeeperError
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    BrokerRegistration,
    ControllerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
    encode_broker,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
    encode_topic_config,
    encode_topic_legacy,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from remediate.sandbox import zkserver
from remediate.zookeeper import ZkAuth, ZkSettings, _probe, connect, make_client

TOPIC_ID = TopicId(bytes(range(16)))


def chrooted(connect: str, chroot: str) -> KazooClient:
    """A started client under `chroot`, which is created first (kazoo warns otherwise)."""
    root = KazooClient(connect)
    root.start()
    root.ensure_path(chroot)
    root.stop()
    root.close()
    client = KazooClient(connect + chroot)
    client.start()
    return client


def populate(zk: KazooClient, acl: list[object] | None = None) -> None:
    zk.create("/cluster/id", encode_cluster_id("Cl-us_ter-id-abcdefghij"), makepath=True, acl=acl)
    zk.create("/controller_epoch", encode_controller_epoch(7), acl=acl)
    zk.create(
        "/controller", encode_controller(ControllerRegistration(2, 1)), ephemeral=True, acl=acl
    )
    for broker in (1, 2):
        registration = BrokerRegistration(
            broker_id=broker,
            endpoints=(Endpoint("PLAINTEXT", f"10.0.0.{broker}", 9092),),
            host=f"10.0.0.{broker}",
            port=9092,
            timestamp_ms=1,
            security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        )
        zk.create(f"/brokers/ids/{broker}", encode_broker(registration), makepath=True, acl=acl)
    zk.create(
        topic_path("modern"),
        encode_topic(TopicAssignment({0: (1, 2), 1: (2, 1)}, topic_id=TOPIC_ID)),
        makepath=True,
        acl=acl,
    )
    zk.create(topic_path("legacy"), encode_topic_legacy({0: (2, 1)}), acl=acl)
    zk.create(topic_path("broken"), b"{not json", acl=acl)
    zk.create(
        topic_config_path("modern"),
        encode_topic_config({"min.insync.replicas": "2"}),
        makepath=True,
        acl=acl,
    )
    for topic, partition, state in (
        ("modern", 0, PartitionState(1, 3, (1, 2), 7)),
        ("modern", 1, PartitionState(-1, 5, (2,), 7)),
        ("legacy", 0, PartitionState(2, 0, (2, 1), 7)),
    ):
        zk.create(
            partition_state_path(topic, partition),
            encode_partition_state(state),
            makepath=True,
            acl=acl,
        )


def test_reads_the_whole_cluster_in_one_pass(zookeeper: tuple[str, int]) -> None:
    chroot = "/exact"
    admin = chrooted(zookeeper[0], chroot)
    try:
        populate(admin)
        # A later write of one state znode: its mzxid moves past the topic's.
        state_path = partition_state_path("modern", 0)
        admin.set(state_path, encode_partition_state(PartitionState(1, 4, (1,), 7)))
        stats = {
            path: admin.get(path)[1]
            for path in (topic_path("modern"), state_path, "/brokers/ids/1")
        }
        zk = connect(ZkSettings(zookeeper[0] + chroot))
        try:
            state = read_cluster_state(zk)
        finally:
            zk.close()
    finally:
        admin.stop()
        admin.close()
    # ZooKeeper's transaction ids, exactly as its stats give them.
    assert state.topics["modern"].mzxid == stats[topic_path("modern")].mzxid
    assert state.partitions[("modern", 0)].mzxid == stats[state_path].mzxid
    assert state.partitions[("modern", 0)].mzxid > state.topics["modern"].mzxid  # type: ignore[operator]
    assert state.brokers[1].epoch == stats["/brokers/ids/1"].czxid
    assert (state.cluster_id, state.controller_id, state.controller_epoch) == (
        "Cl-us_ter-id-abcdefghij",
        2,
        7,
    )
    assert sorted(state.brokers) == [1, 2]
    assert state.brokers[2].endpoint() == Endpoint("PLAINTEXT", "10.0.0.2", 9092)
    assert state.brokers[1].epoch > 0
    assert sorted(state.topics) == ["legacy", "modern"]
    assert state.topics["modern"].topic_id == str(TOPIC_ID)
    assert state.topics["legacy"].topic_id is None
    assert state.topics["legacy"].assignment.version == 1
    assert state.min_insync_replicas("modern", default=1) == 2
    assert state.min_insync_replicas("legacy", default=1) == 1
    assert state.partitions[("modern", 1)].leader == -1
    assert state.partitions[("modern", 0)].isr == (1,)
    assert state.partitions_on(1) == [("legacy", 0), ("modern", 0), ("modern", 1)]
    assert len(state.problems) == 1 and "/brokers/topics/broken" in state.problems[0]


def test_a_controller_znode_that_does_not_parse_leaves_the_epoch_and_cluster_id(
    zookeeper: tuple[str, int],
) -> None:
    """Each of /controller, /controller_epoch and /cluster/id is decoded on its own: one that
    does not parse is a problem, and the other two are still read."""
    chroot = "/bad-controller"
    admin = chrooted(zookeeper[0], chroot)
    try:
        populate(admin)
        admin.set("/controller", b'{"version":1,"brokerid":"two"}')
        zk = connect(ZkSettings(zookeeper[0] + chroot))
        try:
            state = read_cluster_state(zk)
        finally:
            zk.close()
    finally:
        admin.stop()
        admin.close()
    assert (state.cluster_id, state.controller_id, state.controller_epoch) == (
        "Cl-us_ter-id-abcdefghij",
        None,
        7,
    )
    assert any(p.startswith("/controller:") and "brokerid" in p for p in state.problems)


def test_digest_auth_reads_znodes_protected_by_acls(zookeeper: tuple[str, int]) -> None:
    chroot = "/secured"
    acl = [make_digest_acl("remediate", "zk-secret-sentinel", all=True)]
    admin = KazooClient(zookeeper[0], auth_data=[("digest", "remediate:zk-secret-sentinel")])
    admin.start()
    try:
        admin.create(chroot, b"", acl=acl)
        admin.chroot = chroot
        populate(admin, acl=acl)
    finally:
        admin.stop()
        admin.close()
    settings = ZkSettings(
        zookeeper[0] + chroot, auth=ZkAuth("digest", "remediate", "zk-secret-sentinel")
    )
    assert "zk-secret-sentinel" not in repr(settings)
    zk = connect(settings)
    try:
        state = read_cluster_state(zk)
    finally:
        zk.close()
    assert sorted(state.topics) == ["legacy", "modern"]
    anonymous = connect(ZkSettings(zookeeper[0] + chroot))
    try:
        with pytest.raises(ZooKeeperError, match="refused"):
            read_cluster_state(anonymous)
    finally:
        anonymous.close()


def test_an_unreachable_zookeeper_is_a_zookeeper_error() -> None:
    port = zkserver.free_port()
    with pytest.raises(ZooKeeperError, match=f"127.0.0.1:{port}"):
        connect(ZkSettings(f"127.0.0.1:{port}", session_timeout_s=2), timeout=2)


def test_a_connection_loss_during_the_read_is_retried(zookeeper: tuple[str, int]) -> None:
    connect_string, pid = zookeeper
    admin = chrooted(connect_string, "/retry")
    populate(admin)
    admin.stop()
    admin.close()
    zk = connect(ZkSettings(connect_string + "/retry", session_timeout_s=4))
    try:
        # Silent for longer than kazoo waits for an answer: the read fails with a connection
        # loss, and succeeds on a later attempt once ZooKeeper answers again.
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(3.5, os.kill, (pid, signal.SIGCONT))
        timer.start()
        retries: list[tuple[int, BaseException]] = []
        try:
            state = read_cluster_state(zk, on_retry=lambda n, e: retries.append((n, e)))
        finally:
            timer.join()
            os.kill(pid, signal.SIGCONT)
        assert sorted(state.topics) == ["legacy", "modern"]
        # The caller was told of every retry, in order, with the error it retried.
        assert retries, "the read was not retried"
        assert [n for n, _ in retries] == list(range(1, len(retries) + 1))
        assert all(isinstance(e, (ConnectionLoss, OperationTimeoutError)) for _, e in retries)
    finally:
        zk.close()


def test_a_connection_loss_while_proving_a_new_session_is_retried(
    zookeeper: tuple[str, int],
) -> None:
    connect_string, pid = zookeeper
    zk = make_client(ZkSettings(connect_string, session_timeout_s=4))
    zk.start(timeout=15)
    try:
        # The same silence as above, right after the connect: the probe that proves the
        # session (connect() makes it) must ride it out rather than report a refused session.
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(3.5, os.kill, (pid, signal.SIGCONT))
        timer.start()
        try:
            _probe(zk)
        finally:
            timer.join()
            os.kill(pid, signal.SIGCONT)
        assert _probe.statistics["attempt_number"] >= 2
    finally:
        zk.stop()
        zk.close()


def test_topics_filter_reads_only_those_topics(zookeeper: tuple[str, int]) -> None:
    admin = chrooted(zookeeper[0], "/filter")
    populate(admin)
    admin.stop()
    admin.close()
    zk = connect(ZkSettings(zookeeper[0] + "/filter"))
    try:
        state = read_cluster_state(zk, topics=["modern", "absent"])
    finally:
        zk.close()
    assert sorted(state.topics) == ["modern"]
    assert sorted(state.partitions) == [("modern", 0), ("modern", 1)]
