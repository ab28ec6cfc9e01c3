"""Kafka 2.8's rules after the failover and in the restart repair, one test per rule.

Each test names its rule and cites the Kafka source line it follows (tag 2.8.2 unless
noted). Rules about one broker's replica manager run on the emulator's ReplicaManager
directly; rules that need the controller start a sandbox. The same behaviour on real Kafka
is held by the tests that run on both kinds of sandbox (docs/sandbox.md).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from remediate.formats.logdir import PARTITION_METADATA
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import PartitionState, topic_path
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import wire
from remediate.sandbox.emulated.replica import Partition, ReplicaManager, load_log_dirs
from remediate.sandbox.emulated.storage import PartitionLog
from remediate.sandbox.plumbing import zkserver
from remediate.sandbox.reproduce import replica_file_ids
from tests.sandbox.helpers import replica_dirs, states
from tests.wait import wait_until

TOPIC = "rules"
TP = (TOPIC, 0)
BACKOFF_MS = 200  # replica.fetch.backoff.ms of the replica managers below


def replica_manager(
    log_dir: Path, kafka_version: str = "2.8", *, broker_id: int = 1, fetch_wait_max_ms: int = 0
) -> ReplicaManager:
    """A broker's replica manager over `log_dir`, as loaded at startup; only fetchers run."""
    log_dirs, logs = load_log_dirs((log_dir,), kafka_version)
    return ReplicaManager(
        broker_id=broker_id,
        kafka_version=kafka_version,
        log_dirs=log_dirs,
        logs=logs,
        replica_lag_time_max_ms=300,
        fetch_wait_max_ms=fetch_wait_max_ms,
        fetch_backoff_ms=BACKOFF_MS,
        min_isr_for=lambda _topic: 2,
        send_alter_isr=lambda _partitions: None,
    )


def leader_and_isr(
    topic_id: TopicId, *, leader: int = 1, leader_epoch: int, isr: list[int] | None = None
) -> dict[str, Any]:
    return {
        "controller_id": 3,
        "controller_epoch": 1,
        "broker_epoch": -1,
        "topic_ids": {TOPIC: str(topic_id)},
        "live_leaders": {},
        "partitions": [
            {
                "topic": TOPIC,
                "partition": 0,
                "leader": leader,
                "leader_epoch": leader_epoch,
                "isr": isr or [1, 2, 3],
                "replicas": [1, 2, 3],
                "zk_version": leader_epoch,
                "controller_epoch": 1,
            }
        ],
    }


def partition_error(response: dict[str, Any]) -> int:
    assert response["error"] == wire.NONE
    ((_topic, _partition, error),) = response["errors"]
    return int(error)


def fetch(
    replicas: ReplicaManager, replica_id: int, offset: int, current_leader_epoch: int
) -> dict[str, Any]:
    response = replicas.handle_fetch(
        {
            "replica_id": replica_id,
            "max_wait_ms": 0,
            "partitions": [
                {
                    "topic": TOPIC,
                    "partition": 0,
                    "offset": offset,
                    "current_leader_epoch": current_leader_epoch,
                }
            ],
        }
    )
    (result,) = response["partitions"]
    return dict(result)


def produce(replicas: ReplicaManager, acks: int, timeout_ms: int = 300) -> dict[str, Any]:
    return replicas.handle_produce(
        {
            "topic": TOPIC,
            "partition": 0,
            "acks": acks,
            "timeout_ms": timeout_ms,
            "records": [["k", "v"]],
        }
    )


def fenced_leader(tmp_path: Path) -> tuple[ReplicaManager, Partition, int]:
    """Broker 1 leads at epoch 5 with ISR 1,2,3; 3 stopped fetching, the shrink to 1,2 was
    refused with FENCED_LEADER_EPOCH (the controller had moved on). Returns the high watermark
    reached while all three replicated."""
    replicas = replica_manager(tmp_path)
    assert (
        partition_error(
            replicas.handle_leader_and_isr(leader_and_isr(TopicId.random(), leader_epoch=5))
        )
        == wire.NONE
    )
    partition = replicas.partitions[TP]
    for _ in range(3):
        assert produce(replicas, acks=1)["error"] == wire.NONE
    for follower in (2, 3):
        assert fetch(replicas, follower, 3, 5)["error"] == wire.NONE
    assert partition.high_watermark == 3

    def shrunk() -> bool:
        fetch(replicas, 2, 3, 5)  # 2 keeps up, 3 is silent
        replicas.shrink_isr_if_needed()
        return partition.pending_isr is not None

    assert wait_until(shrunk, timeout=10, interval=0.05)
    assert partition.pending_isr == (1, 2)
    replicas._apply_alter_isr(
        {"partitions": [{"topic": TOPIC, "partition": 0, "error": wire.FENCED_LEADER_EPOCH}]}
    )
    return replicas, partition, 3


# -- rules on one broker's replica manager ---------------------------------------------------


@pytest.mark.parametrize("kafka_version", ["2.8", "3.4"])
def test_restart_loophole_first_leader_and_isr_accepted_on_2_8_only(
    tmp_path: Path, kafka_version: str
) -> None:
    """2.8.2 cluster/Partition.scala:445-446 (no Log yet when the check runs); closed in 3.4.1
    cluster/Partition.scala:480-483 (Partition.topicId falls back to the log on disk)."""
    old, new = TopicId.random(), TopicId.random()
    PartitionLog.create(tmp_path / f"{TOPIC}-0", TOPIC, 0).assign_topic_id(old)
    replicas = replica_manager(tmp_path, kafka_version)  # the restart: logs loaded from disk

    first = partition_error(replicas.handle_leader_and_isr(leader_and_isr(new, leader_epoch=7)))
    if kafka_version == "2.8":
        assert first == wire.NONE
        partition = replicas.partitions[TP]
        assert (partition.is_leader, partition.leader_epoch) == (True, 7)
        # The log was loaded with the file's id, which the request did not change.
        assert partition.log is not None and partition.log.topic_id == old
        second = leader_and_isr(new, leader_epoch=8)
        assert partition_error(replicas.handle_leader_and_isr(second)) == wire.INCONSISTENT_TOPIC_ID
        assert partition.leader_epoch == 7
    else:
        assert first == wire.INCONSISTENT_TOPIC_ID
        assert not replicas.partitions[TP].is_leader
    metadata = (tmp_path / f"{TOPIC}-0" / PARTITION_METADATA).read_text()
    assert metadata.endswith(str(old))


def test_fenced_alter_isr_keeps_isr_pending_and_freezes_high_watermark(tmp_path: Path) -> None:
    """KafkaController.scala:2319-2321 (FENCED_LEADER_EPOCH); Partition.scala:1391-1440 (gives
    up, stays pending); Partition.scala:174, 878-905 (high watermark over the maximal ISR)."""
    replicas, partition, high_watermark = fenced_leader(tmp_path)
    assert partition.pending_isr == (1, 2)
    assert not partition.alter_isr_in_flight  # nothing more is sent
    assert partition.isr == (1, 2, 3) and partition.maximal_isr == (1, 2, 3)
    # No further ISR change is attempted: neither another shrink nor an expansion of 3.
    replicas.shrink_isr_if_needed()
    assert fetch(replicas, 3, high_watermark, 5)["error"] == wire.NONE
    assert (partition.pending_isr, partition.alter_isr_in_flight) == ((1, 2), False)
    # New records reach 2 but not 3, which is still counted: the high watermark stays.
    assert produce(replicas, acks=1)["error"] == wire.NONE
    assert fetch(replicas, 2, partition.log.log_end_offset, 5)["error"] == wire.NONE  # type: ignore[union-attr]
    assert partition.high_watermark == high_watermark


def test_frozen_high_watermark_times_out_acks_all_and_acknowledges_acks_1(tmp_path: Path) -> None:
    """Partition.scala:878-905 (high watermark over the maximal ISR); acks=all waits for it
    (REQUEST_TIMED_OUT), acks=1 does not; an epoch-aware consumer at the controller's newer
    epoch gets UNKNOWN_LEADER_EPOCH (Partition.scala:359-390)."""
    replicas, partition, high_watermark = fenced_leader(tmp_path)
    assert produce(replicas, acks=-1, timeout_ms=300)["error"] == wire.REQUEST_TIMED_OUT
    acked = produce(replicas, acks=1)
    assert acked["error"] == wire.NONE and acked["base_offset"] >= partition.high_watermark
    assert partition.high_watermark == high_watermark
    # A consumer reads up to the high watermark only ...
    read = fetch(replicas, -1, 0, -1)
    assert read["error"] == wire.NONE
    assert [offset for offset, *_ in read["records"]] == list(range(high_watermark))
    # ... and one that learnt the controller's newer epoch from metadata is refused.
    assert fetch(replicas, -1, 0, 6)["error"] == wire.UNKNOWN_LEADER_EPOCH


def test_follower_at_newer_epoch_than_its_leader_gets_unknown_leader_epoch(
    tmp_path: Path,
) -> None:
    """Partition.scala:359-390: a Fetch whose currentLeaderEpoch is newer than the leader's is
    answered UNKNOWN_LEADER_EPOCH; the follower's fetcher retries forever and replicates
    nothing. Broker 1 leads at epoch 5 (it rejected the controller's epoch 6); broker 2
    accepted epoch 6 and fetches from it."""
    (tmp_path / "leader").mkdir()
    (tmp_path / "follower").mkdir()
    topic_id = TopicId.random()
    leader = replica_manager(tmp_path / "leader")
    assert (
        partition_error(leader.handle_leader_and_isr(leader_and_isr(topic_id, leader_epoch=5)))
        == wire.NONE
    )
    assert produce(leader, acks=1)["error"] == wire.NONE
    answers: list[int] = []

    def serve_leader(request: dict[str, Any]) -> dict[str, Any]:
        if request["api"] == "OffsetsForLeaderEpoch":
            return leader.handle_offsets_for_leader_epoch(request)
        response = leader.handle_fetch(request)
        if request.get("replica_id") == 2:
            answers.extend(r["error"] for r in response["partitions"])
        return response

    port = zkserver.free_port("127.0.0.1")
    server = wire.serve("127.0.0.1", port, serve_leader)
    follower = replica_manager(tmp_path / "follower", broker_id=2)
    try:
        request = leader_and_isr(topic_id, leader=1, leader_epoch=6)
        request["live_leaders"] = {"1": ["127.0.0.1", port]}
        assert partition_error(follower.handle_leader_and_isr(request)) == wire.NONE
        assert wait_until(lambda: len(answers) >= 3, timeout=15)
        assert set(answers) == {wire.UNKNOWN_LEADER_EPOCH}
        follower_log = follower.partitions[TP].log
        assert follower_log is not None and follower_log.log_end_offset == 0
        assert leader.partitions[TP].followers[2].log_end_offset == -1
        assert leader.partitions[TP].high_watermark == 0
    finally:
        follower.shutdown()
        leader.shutdown()
        server.shutdown()
        server.server_close()


def test_a_partition_whose_fetch_fails_is_delayed_alone_and_the_others_keep_fetching(
    tmp_path: Path,
) -> None:
    """AbstractFetcherThread.scala (processFetchRequest, handlePartitionsWithErrors,
    delayPartitions): a partition whose fetch fails is delayed for replica.fetch.backoff.ms on
    its own; the fetcher keeps fetching the leader's other partitions at once. Broker 2
    follows broker 1 for two partitions: 0, where broker 2 is at a newer epoch than its leader
    (UNKNOWN_LEADER_EPOCH every time), and 1, healthy, with broker 2 out of its ISR while a
    producer appends to it all along. Broker 2 catches up with partition 1's high watermark and
    the leader takes it into the ISR; partition 0's failed fetches are a backoff apart."""
    (tmp_path / "leader").mkdir()
    (tmp_path / "follower").mkdir()
    topic_id = TopicId.random()

    def request(epochs: dict[int, int], isr: list[int]) -> dict[str, Any]:
        document = leader_and_isr(topic_id, leader_epoch=0, isr=isr)
        (template,) = document["partitions"]
        document["partitions"] = [
            {**template, "partition": n, "leader_epoch": epoch, "zk_version": epoch}
            for n, epoch in epochs.items()
        ]
        return document

    leader = replica_manager(tmp_path / "leader")
    answer = leader.handle_leader_and_isr(request({0: 5, 1: 5}, isr=[1]))
    assert [error for _t, _p, error in answer["errors"]] == [wire.NONE, wire.NONE]
    failed_at: list[float] = []

    def serve_leader(message: dict[str, Any]) -> dict[str, Any]:
        if message["api"] == "OffsetsForLeaderEpoch":
            return leader.handle_offsets_for_leader_epoch(message)
        response = leader.handle_fetch(message)
        failed_at.extend(
            time.monotonic()
            for r in response["partitions"]
            if r["partition"] == 0 and r["error"] == wire.UNKNOWN_LEADER_EPOCH
        )
        return response

    stop = threading.Event()

    def produce_to_partition_1() -> None:
        while not stop.is_set():
            leader.handle_produce(
                {
                    "topic": TOPIC,
                    "partition": 1,
                    "acks": 1,
                    "timeout_ms": 300,
                    "records": [["k", "v"]],
                }
            )
            stop.wait(0.02)

    port = zkserver.free_port("127.0.0.1")
    server = wire.serve("127.0.0.1", port, serve_leader)
    producer = threading.Thread(target=produce_to_partition_1, daemon=True)
    producer.start()
    follower = replica_manager(tmp_path / "follower", broker_id=2, fetch_wait_max_ms=100)
    try:
        follow = request({0: 6, 1: 5}, isr=[1])
        follow["live_leaders"] = {"1": ["127.0.0.1", port]}
        answer = follower.handle_leader_and_isr(follow)
        assert [error for _t, _p, error in answer["errors"]] == [wire.NONE, wire.NONE]
        healthy = leader.partitions[(TOPIC, 1)]
        assert wait_until(lambda: healthy.pending_isr == (1, 2), timeout=15, interval=0.05), (
            f"broker 2 never joined partition 1's ISR: its log end "
            f"{healthy.followers[2].log_end_offset}, the high watermark {healthy.high_watermark}"
        )
        assert wait_until(lambda: len(failed_at) >= 3, timeout=15)
        gaps = [b - a for a, b in itertools.pairwise(failed_at)]
        assert min(gaps) >= 0.9 * BACKOFF_MS / 1000, gaps
        assert leader.partitions[TP].followers[2].log_end_offset == -1
    finally:
        stop.set()
        producer.join()
        follower.shutdown()
        leader.shutdown()
        server.shutdown()
        server.server_close()


# -- rules that need the controller: a sandbox --------------------------------------------------


def settled(
    zk: KazooClient, partitions: list[int], condition: Callable[[PartitionState], bool]
) -> bool:
    """Every partition's state znode exists and meets `condition`."""
    try:
        return all(condition(s) for s in states(zk, TOPIC, partitions).values())
    except NoNodeError:
        return False


def logged_everywhere(directory: Path, brokers: list[int], line: str) -> bool:
    return all(line in server_log(directory, b, "state-change.log") for b in brokers)


def server_log(directory: Path, broker: int, name: str = "server.log") -> str:
    return (cluster.broker_dir(directory, broker) / "logs" / name).read_text()


# The rules below run on the emulator and on real Apache Kafka 2.8.2 alike: the same scenario,
# the same observations (ZooKeeper, the brokers' logs, the files), the same assertions.
KINDS = ["emulated", "real-2.8.2"]


@pytest.mark.slow
@pytest.mark.parametrize("kafka", KINDS)
def test_leader_epoch_bumps_on_every_controller_isr_or_leader_change(
    sandbox_dir: Path, kafka: str
) -> None:
    """api/LeaderAndIsr.scala:41; controlled shutdown removes a follower from the ISR
    (controller/ReplicaStateMachine.scala:295-381) or elects a new leader
    (controller/Election.scala:126-139), each +1 epoch, LeaderAndIsr to the other replicas,
    which log their new role at the new epoch (cluster/Partition.scala makeLeader and
    makeFollower: "starts at leader epoch")."""
    sandbox = cluster.up(sandbox_dir, kafka=kafka)
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)
    try:
        controller = admin.current_controller(zk)
        assert controller is not None
        broker = next(b.broker_id for b in sandbox.brokers if b.broker_id != controller.broker_id)
        admin.create_topic(zk, TOPIC, 3, 3)
        assert wait_until(lambda: settled(zk, [0, 1, 2], lambda s: len(s.isr) == 3))
        before = states(zk, TOPIC, [0, 1, 2])
        assert {s.leader == broker for s in before.values()} == {True, False}
        cluster.stop_broker(directory, broker)
        after = states(zk, TOPIC, [0, 1, 2])
        for number, state in after.items():
            assert state.leader_epoch == before[number].leader_epoch + 1
            assert broker not in state.isr
            # The other replicas were told: each logs its new role at the new epoch.
            line = f"{TOPIC}-{number} starts at leader epoch {state.leader_epoch}"
            others = [b for b in (1, 2, 3) if b != broker]
            assert wait_until(partial(logged_everywhere, directory, others, line))
    finally:
        zk.stop()
        zk.close()


def last_isr_member(directory: Path, zk: KazooClient) -> int:
    """Stop two brokers so the topic's one partition has the third as its only ISR member."""
    admin.create_topic(zk, TOPIC, 1, 3, config={"min.insync.replicas": "1"})
    assert wait_until(lambda: settled(zk, [0], lambda s: len(s.isr) == 3))
    controller = admin.current_controller(zk)
    assert controller is not None
    last = controller.broker_id
    for broker in (b for b in (1, 2, 3) if b != last):
        cluster.stop_broker(directory, broker)
    assert states(zk, TOPIC, [0])[0].isr == (last,)
    return last


@pytest.mark.slow
@pytest.mark.parametrize("kafka", KINDS)
def test_controlled_shutdown_of_last_isr_member_retries_then_stops_cleanly(
    sandbox_dir: Path, kafka: str
) -> None:
    """Controlled shutdown with no other candidate fails; the broker retries
    controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms and shuts down anyway,
    logs closed cleanly (server/KafkaServer.scala controlledShutdown: "Starting controlled
    shutdown" once, a "Retrying" warning after each failed attempt, then "Proceeding to do an
    unclean shutdown")."""
    state = cluster.up(
        sandbox_dir,
        kafka=kafka,
        properties={
            "controlled.shutdown.max.retries": "2",
            "controlled.shutdown.retry.backoff.ms": "200",
        },
    )
    directory = Path(state.directory)
    zk = cluster.zk_client(state)
    try:
        last = last_isr_member(directory, zk)
        assert cluster.stop_broker(directory, last)
        text = server_log(directory, last)
        assert text.count(f"[KafkaServer id={last}] Starting controlled shutdown") == 1
        assert text.count("Retrying controlled shutdown after the previous attempt failed") == 2
        assert "Proceeding to do an unclean shutdown" in text
        for log_dir in state.broker(last).log_dirs:
            assert (Path(log_dir) / ".kafka_cleanshutdown").exists()
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
@pytest.mark.parametrize("kafka", KINDS)
def test_last_isr_member_gone_partition_offline_until_it_returns_and_takes_zk_id(
    sandbox_dir: Path, kafka: str
) -> None:
    """Leader -1 with the ISR kept as the last member (unclean election off); on its return it is
    elected again, with partition.metadata deleted takes ZooKeeper's id, the other replicas
    follow and the ISR refills (reference, "Controlled shutdown of the last ISR member")."""
    state = cluster.up(
        sandbox_dir, kafka=kafka, properties={"controlled.shutdown.max.retries": "1"}
    )
    directory = Path(state.directory)
    zk = cluster.zk_client(state)
    try:
        last = last_isr_member(directory, zk)
        cluster.stop_broker(directory, last)
        # Every replica's file deleted, the id dropped from ZooKeeper as a legacy tool does:
        # the next controller mints a new one.
        # (A 2.8 replica writes its file only at its second LeaderAndIsr: some have none.)
        for broker in (1, 2, 3):
            (replica_dirs(state, TOPIC, 0)[broker] / PARTITION_METADATA).unlink(missing_ok=True)
        data, _ = zk.get(topic_path(TOPIC))
        topic = json.loads(data)
        old_id = topic.pop("topic_id")
        zk.set(
            topic_path(TOPIC),
            json.dumps({"version": 1, "partitions": topic["partitions"]}).encode(),
        )
        others = [b for b in (1, 2, 3) if b != last]
        for broker in others:
            cluster.start_broker(directory, broker, wait=True)
        assert wait_until(lambda: states(zk, TOPIC, [0])[0].leader == -1)
        assert states(zk, TOPIC, [0])[0].isr == (last,)
        assert wait_until(lambda: "topic_id" in json.loads(zk.get(topic_path(TOPIC))[0]))
        new_id = json.loads(zk.get(topic_path(TOPIC))[0])["topic_id"]
        assert new_id != old_id
        cluster.start_broker(directory, last, wait=True)
        assert wait_until(lambda: states(zk, TOPIC, [0])[0].leader == last, timeout=30)
        assert wait_until(lambda: len(states(zk, TOPIC, [0])[0].isr) == 3, timeout=30)
        assert set(replica_file_ids(state, TOPIC).values()) == {new_id}
    finally:
        zk.stop()
        zk.close()
