"""Replication in the sandbox: ISR shrink and expand, truncation by leader epoch or, without
leader-epoch-checkpoint, to the high watermark."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from remediate.formats.logdir import LEADER_EPOCH_CHECKPOINT, parse_leader_epoch_checkpoint
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import client, wire
from remediate.sandbox.emulated.storage import PartitionLog
from tests.sandbox.helpers import replica_dirs, states
from tests.wait import freeze, wait_until

pytestmark = pytest.mark.slow


def pause(directory: Path, broker: int) -> int:
    pid = cluster.broker_pid(directory, broker)
    assert pid is not None
    freeze(pid)
    return pid


def fetchers(zk: KazooClient, broker: int, *, pause: bool) -> dict[str, object]:
    """The emulated broker's fetchers paused (answered once none has a fetch in flight) or
    resumed: the sandbox's PauseFetchers, for fault injection."""
    host, port = admin.broker_endpoint(zk, broker)
    return wire.call_once(host, port, {"api": "PauseFetchers", "pause": pause, "timeout_s": 10})


def read_log(
    state: cluster.SandboxState, topic: str, broker: int
) -> list[tuple[int, int, str | None, str]]:
    directory = replica_dirs(state, topic, 0)[broker]
    log = PartitionLog.load(directory, topic, 0)
    return [(r.offset, r.leader_epoch, r.key, r.value) for r in log.records]


def test_a_stalled_follower_leaves_the_isr_and_rejoins_after_catching_up(
    sandbox: cluster.SandboxState,
) -> None:
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)
    try:
        admin.create_topic(zk, "lag", 1, 3, config={"min.insync.replicas": "2"})
        assert wait_until(lambda: zk.exists("/brokers/topics/lag/partitions/0/state") is not None)
        leader = states(zk, "lag", [0])[0].leader
        controller = admin.current_controller(zk)
        assert controller is not None
        follower = next(b for b in (1, 2, 3) if b not in (leader, controller.broker_id))
        pid = pause(directory, follower)
        try:
            # Past replica.lag.time.max.ms (3 s) the leader shrinks the ISR through AlterIsr.
            assert wait_until(lambda: follower not in states(zk, "lag", [0])[0].isr, timeout=15)
            report = client.produce(zk, "lag", count=20, key_prefix="while-out")
            assert (
                len(report.acked) == 20
            )  # two in-sync replicas still satisfy min.insync.replicas=2
        finally:
            os.kill(pid, signal.SIGCONT)
        assert wait_until(lambda: follower in states(zk, "lag", [0])[0].isr, timeout=15)
        assert read_log(sandbox, "lag", follower) == read_log(sandbox, "lag", leader)
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize(
    "epoch_checkpoint",
    [
        pytest.param(True, id="by-leader-epoch"),
        # The manual repair deletes leader-epoch-checkpoint: the follower then truncates to its
        # high watermark (replication-offset-checkpoint) and fetches the rest again.
        pytest.param(False, id="to-high-watermark-without-epoch-checkpoint"),
    ],
)
def test_a_returning_leader_truncates_what_it_never_replicated(
    sandbox: cluster.SandboxState, epoch_checkpoint: bool
) -> None:
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)
    try:
        admin.create_topic(zk, "diverge", 1, 3, config={"min.insync.replicas": "2"})
        assert wait_until(
            lambda: zk.exists("/brokers/topics/diverge/partitions/0/state") is not None
        )
        controller = admin.current_controller(zk)
        assert controller is not None
        leader = states(zk, "diverge", [0])[0].leader
        # The leader must not be the controller; an election may pick the same broker again.
        for _ in range(20):
            if controller.broker_id != leader:
                break
            _, controller = admin.failover_controller(zk)
        assert controller.broker_id != leader
        committed = client.produce(
            zk, "diverge", count=10, key_prefix="committed", retries=10
        ).acked
        assert len(committed) == 10
        followers = [b for b in (1, 2, 3) if b != leader]
        try:
            # The followers stop fetching, and say so once none has a fetch in flight: no
            # response can still carry what comes next.
            for follower in followers:
                assert fetchers(zk, follower, pause=True) == {"error": wire.NONE, "idle": True}
            # acks=1: the leader alone has these; nobody can fetch them before it dies.
            tail = client.produce(zk, "diverge", count=5, key_prefix="unreplicated", acks=1).acked
            assert len(tail) == 5
            assert cluster.kill_broker(directory, leader)
        finally:
            for follower in followers:
                fetchers(zk, follower, pause=False)
        assert wait_until(lambda: states(zk, "diverge", [0])[0].leader in followers, timeout=30)
        new_leader = states(zk, "diverge", [0])[0].leader
        after = client.produce(zk, "diverge", count=10, key_prefix="new-epoch", retries=20).acked
        assert len(after) == 10
        checkpoint = replica_dirs(sandbox, "diverge", 0)[leader] / LEADER_EPOCH_CHECKPOINT
        assert checkpoint.exists()
        if not epoch_checkpoint:
            checkpoint.unlink()
        cluster.start_broker(directory, leader)
        assert wait_until(lambda: leader in states(zk, "diverge", [0])[0].isr, timeout=30)
        returned = read_log(sandbox, "diverge", leader)
        assert returned == read_log(sandbox, "diverge", new_leader)
        assert not any(key and key.startswith("unreplicated") for _, _, key, _ in returned)
        assert [k for _, _, k, _ in returned] == [a.key for a in committed + after]
        epochs = parse_leader_epoch_checkpoint(checkpoint.read_bytes(), source="test")
        if epoch_checkpoint:
            assert [e.epoch for e in epochs] == sorted({epoch for _, epoch, _, _ in returned})
        else:
            # Rebuilt from what it fetched again: at least the new leader's epoch.
            assert {e.epoch for e in epochs} <= {epoch for _, epoch, _, _ in returned}
            assert max(e.epoch for e in epochs) == max(epoch for _, epoch, _, _ in returned)
    finally:
        zk.stop()
        zk.close()
