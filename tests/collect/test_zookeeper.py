"""The ZooKeeper collector against a real ZooKeeper: exact reads, ACLs with digest auth,
bad znodes reported rather than fatal, and bounded retries across a connection loss."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError
from kazoo.security import ACL, make_digest_acl

from remediate.collect.cluster_state import read_cluster_state
from remediate.collect.collector import transports
from remediate.collect.min_isr import read_dynamic_min_isr, resolve_brokers_min_isr
from remediate.config import ClusterConfig, parse_cluster_config
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
from remediate.minisr import MinIsrRule, MinIsrSource, PlannedMinIsr
from remediate.ports import DescribedSetting, KafkaAdmin
from remediate.sandbox.plumbing import zkserver
from remediate.state import TopicPartition
from remediate.zookeeper import ZkAuth, ZkSettings, _probe, connect, make_client
from tests.wait import freeze

TOPIC_ID = TopicId(bytes(range(16)))
# A session that outlives the silences below with room to spare: kazoo gives up on an answer
# after two thirds of it, ZooKeeper would end the session only after all of it.
SILENT_SESSION_S = 9


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


def populate(zk: KazooClient, acl: Sequence[ACL] | None = None) -> None:
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
    state_mzxid = state.partitions[TopicPartition("modern", 0)].mzxid
    topic_mzxid = state.topics["modern"].mzxid
    assert state_mzxid == stats[state_path].mzxid
    assert state_mzxid is not None and topic_mzxid is not None
    assert state_mzxid > topic_mzxid
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
    assert state.min_insync_replicas(TopicPartition("modern", 0), MinIsrRule(1)) == 2
    assert state.min_insync_replicas(TopicPartition("legacy", 0), MinIsrRule(1)) == 1
    assert state.partitions[TopicPartition("modern", 1)].leader == -1
    assert state.partitions[TopicPartition("modern", 0)].isr == (1,)
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
    zk = connect(ZkSettings(connect_string + "/retry", session_timeout_s=SILENT_SESSION_S))
    try:
        # Silent for longer than kazoo waits for an answer: the read fails with a connection
        # loss, and succeeds on a later attempt once ZooKeeper answers again (it answers as
        # soon as the first retry is reported, well within the session).
        freeze(pid)
        retries: list[tuple[int, BaseException]] = []

        def retried(n: int, error: BaseException) -> None:
            retries.append((n, error))
            os.kill(pid, signal.SIGCONT)

        try:
            state = read_cluster_state(zk, on_retry=retried)
        finally:
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
    zk = make_client(ZkSettings(connect_string, session_timeout_s=SILENT_SESSION_S))
    zk.start(timeout=15)
    # What each of the probe's attempts met: the client's own exists(), counted.
    attempts: list[str] = []
    exists = zk.exists

    def counted(path: str) -> object:
        try:
            found = exists(path)
        except BaseException as error:
            attempts.append(type(error).__name__)
            raise
        attempts.append("answered")
        return found

    zk.exists = counted  # type: ignore[method-assign,assignment]
    try:
        # The same silence as above, right after the connect: the probe that proves the
        # session (connect() makes it) must ride it out rather than report a refused session.
        # ZooKeeper answers again once kazoo has given up on the connection: it fails what was
        # pending or queued with ConnectionLoss before it reports SUSPENDED.
        freeze(pid)
        lost = threading.Event()
        zk.add_listener(lambda state: lost.set() if state == KazooState.SUSPENDED else None)

        def resume_once_lost() -> None:
            lost.wait(60)
            os.kill(pid, signal.SIGCONT)

        resume = threading.Thread(target=resume_once_lost)
        resume.start()
        try:
            _probe(zk)
        finally:
            resume.join()
            os.kill(pid, signal.SIGCONT)
        assert attempts[0] in ("ConnectionLoss", "OperationTimeoutError"), attempts
        assert attempts[-1] == "answered" and len(attempts) >= 2, attempts
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


def _min_isr_config(tmp_path: Path, connect: str, files: dict[int, str | None]) -> ClusterConfig:
    """Local brokers, each with a server.properties holding `files[b]` (None: no file)."""
    brokers = []
    for broker, text in files.items():
        path = tmp_path / f"server-{broker}.properties"
        if text is not None:
            path.write_text(text)
        brokers.append(
            {
                "id": broker,
                "host": "localhost",
                "transport": "local",
                "server_properties": str(path),
            }
        )
    document = {
        "cluster": "min-isr",
        "zookeeper": {"connect": connect},
        "brokers": brokers,
        "service": {"stop": "true", "start": "true"},
        "min_insync_replicas_default": 1,
    }
    return parse_cluster_config(document, source="cluster.yaml", base_dir=tmp_path)


def test_min_isr_from_the_dynamic_settings_and_the_brokers_files(
    zookeeper: tuple[str, int], tmp_path: Path
) -> None:
    """/config/brokers/<default> decides over the brokers' files; a broker's own dynamic
    setting over both; without them, the strictest file; an unreadable file is named and
    counted with cluster.yaml's value."""
    chroot = "/min-isr"
    admin = chrooted(zookeeper[0], chroot)
    files: dict[int, str | None] = {
        1: "log.dirs=/d\nmin.insync.replicas=2\n",
        2: "log.dirs=/d\nmin.insync.replicas=3\n",
        3: "log.dirs=/d\n",
    }
    config = _min_isr_config(tmp_path, zookeeper[0] + chroot, files)
    zk = connect(ZkSettings(zookeeper[0] + chroot))
    try:
        resolved, problems = resolve_brokers_min_isr(
            config, zk, transport_for=transports(config), admin=None
        )
        assert (resolved, problems) == (
            # Each partition gets the strictest of its replicas' own values.
            PlannedMinIsr(3, MinIsrSource.SERVER_PROPERTIES, "broker(s) 2", by_broker={1: 2, 3: 1}),
            (),
        )
        admin.create(
            "/config/brokers/<default>",
            encode_topic_config({"min.insync.replicas": "2"}),
            makepath=True,
        )
        assert read_dynamic_min_isr(zk, [1, 2, 3]) == (2, {})
        resolved, _ = resolve_brokers_min_isr(
            config, zk, transport_for=transports(config), admin=None
        )
        assert resolved == PlannedMinIsr(
            2, MinIsrSource.CLUSTER_DYNAMIC_DEFAULT, "/config/brokers/<default>"
        )
        admin.create("/config/brokers/3", encode_topic_config({"min.insync.replicas": "4"}))
        assert read_dynamic_min_isr(zk, [1, 2, 3]) == (2, {3: 4})
        resolved, _ = resolve_brokers_min_isr(
            config, zk, transport_for=transports(config), admin=None
        )
        assert resolved == PlannedMinIsr(
            4, MinIsrSource.BROKER_DYNAMIC, "broker(s) 3", by_broker={1: 2, 2: 2}
        )
        admin.delete("/config/brokers", recursive=True)
        missing = _min_isr_config(
            tmp_path, zookeeper[0] + chroot, {1: "min.insync.replicas=2\n", 4: None}
        )
        resolved, problems = resolve_brokers_min_isr(
            missing, zk, transport_for=transports(missing), admin=None
        )
        assert resolved == PlannedMinIsr(
            2,
            MinIsrSource.SERVER_PROPERTIES,
            "broker(s) 1; nothing known of broker(s) 4",
            by_broker={4: 1},  # cluster.yaml's value, stated, for the broker it stands in for
        )
        assert len(problems) == 1
        assert "broker 4: cannot read" in problems[0]
    finally:
        zk.close()
        admin.stop()
        admin.close()


class DescribesMinIsr:
    """Kafka's DescribeConfigs for min.insync.replicas, as brokers that answer it would."""

    def __init__(self, values: dict[int, str]) -> None:
        self.values = values
        self.asked: list[int] = []

    def effective_setting(self, broker: int, name: str) -> DescribedSetting:
        self.asked.append(broker)
        value = self.values.get(broker)
        if value is None:
            return DescribedSetting(None, error=f"broker {broker} did not describe {name}")
        return DescribedSetting(value, "STATIC_BROKER_CONFIG")

    def close(self) -> None:
        return None


def test_an_unreadable_file_falls_through_to_describe_configs_and_unknown_is_named(
    zookeeper: tuple[str, int], tmp_path: Path
) -> None:
    """server.properties named but unreadable (the ssh user may not read it): DescribeConfigs
    is asked next; a broker neither source gives is named as unknown (cluster.yaml states no
    value here), never counted as 1."""
    chroot = "/min-isr-fall-through"
    made = chrooted(zookeeper[0], chroot)
    made.stop()
    made.close()
    config = _min_isr_config(
        tmp_path, zookeeper[0] + chroot, {1: "min.insync.replicas=2\n", 2: None, 3: None}
    )
    unstated = config.model_copy(update={"min_insync_replicas_default": None})
    described = DescribesMinIsr({2: "3"})
    zk = connect(ZkSettings(zookeeper[0] + chroot))
    try:
        resolved, problems = resolve_brokers_min_isr(
            unstated,
            zk,
            transport_for=transports(unstated),
            admin=lambda: cast(KafkaAdmin, described),
        )
    finally:
        zk.close()
    assert sorted(described.asked) == [2, 3]  # not broker 1: its file answered
    assert resolved == PlannedMinIsr(
        3,
        MinIsrSource.DESCRIBE_CONFIGS,
        "broker(s) 2; nothing known of broker(s) 3",
        unknown=(3,),
        by_broker={1: 2},
    )
    (problem,) = problems
    assert "broker 3: cannot read" in problem
    assert problem.endswith("; broker 3 did not describe min.insync.replicas")


def test_an_unreadable_config_brokers_is_an_error_that_says_so(
    zookeeper: tuple[str, int],
) -> None:
    """Kafka protects /config/brokers with ACLs (zookeeper.set.acl): never a silent default."""
    chroot = "/min-isr-acl"
    admin = KazooClient(zookeeper[0], auth_data=[("digest", "kafka:kafka-secret")])
    admin.start()
    try:
        admin.ensure_path(chroot)
        admin.create(
            chroot + "/config/brokers/<default>",
            encode_topic_config({"min.insync.replicas": "2"}),
            makepath=True,
            acl=[make_digest_acl("kafka", "kafka-secret", all=True)],
        )
    finally:
        admin.stop()
        admin.close()
    zk = connect(ZkSettings(zookeeper[0] + chroot))
    try:
        with pytest.raises(ZooKeeperError, match=r"cannot read /config/brokers.*NoAuth"):
            read_dynamic_min_isr(zk, [1])
    finally:
        zk.close()
