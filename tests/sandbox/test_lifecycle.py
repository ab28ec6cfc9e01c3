"""Starting, stopping and crashing the sandbox: up twice, down, SIGKILL, corrupt files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remediate.formats.logdir import PARTITION_METADATA
from remediate.formats.znodes import BROKER_IDS
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import client
from remediate.sandbox.plumbing import process
from remediate.sandbox.reproduce import Incident, mismatch_lines, replica_file_ids
from tests.sandbox.helpers import lost_records, replica_dirs, states
from tests.wait import wait_until

pytestmark = pytest.mark.slow

REMEDIATE = [sys.executable, "-m", "remediate.cli.main"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, check=False, timeout=120
    )


def all_pids(directory: Path, state: cluster.SandboxState) -> dict[str, int | None]:
    pids: dict[str, int | None] = {"zookeeper": cluster.zookeeper_pid(directory)}
    for broker in state.brokers:
        pids[f"broker-{broker.broker_id}"] = cluster.broker_pid(directory, broker.broker_id)
    return pids


def test_up_twice_is_safe_and_down_stops_everything_by_pid(sandbox_dir: Path) -> None:
    first = run_cli("sandbox", "up", "--dir", str(sandbox_dir), "--json")
    assert first.returncode == 0, first.stderr
    status = json.loads(first.stdout)
    assert status["zookeeper"]["running"] and status["controller"] in (1, 2, 3)
    assert [b["registered"] for b in status["brokers"]] == [True, True, True]
    state = cluster.load_state(sandbox_dir)
    pids = all_pids(sandbox_dir, state)
    assert all(pids.values())

    second = run_cli("sandbox", "up", "--dir", str(sandbox_dir), "--json")
    assert second.returncode == 0, second.stderr
    assert all_pids(sandbox_dir, state) == pids
    assert json.loads(second.stdout)["brokers"] == status["brokers"]

    down = run_cli("sandbox", "down", "--dir", str(sandbox_dir), "--json")
    assert down.returncode == 0, down.stderr
    assert sorted(json.loads(down.stdout)["stopped"]) == [
        "broker 1",
        "broker 2",
        "broker 3",
        "zookeeper",
    ]
    assert not any(process.is_alive(pid) for pid in pids.values() if pid)
    after = json.loads(run_cli("sandbox", "status", "--dir", str(sandbox_dir), "--json").stdout)
    assert not after["zookeeper"]["running"]
    assert not any(b["running"] for b in after["brokers"])


def test_broker_status_command_follows_lsb_exit_codes(sandbox: cluster.SandboxState) -> None:
    directory = Path(sandbox.directory)
    assert (
        run_cli("sandbox", "broker", "status", "--id", "2", "--dir", str(directory)).returncode == 0
    )
    assert (
        run_cli("sandbox", "broker", "stop", "--id", "2", "--dir", str(directory)).returncode == 0
    )
    assert (
        run_cli("sandbox", "broker", "status", "--id", "2", "--dir", str(directory)).returncode == 3
    )
    assert (
        run_cli("sandbox", "broker", "start", "--id", "2", "--dir", str(directory)).returncode == 0
    )
    assert (
        run_cli("sandbox", "broker", "status", "--id", "2", "--dir", str(directory)).returncode == 0
    )


def test_two_brokers_killed_with_sigkill_come_back(sandbox: cluster.SandboxState) -> None:
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)
    try:
        admin.create_topic(zk, "events", 6, 3, config={"min.insync.replicas": "2"})
        assert wait_until(
            lambda: (
                len(states(zk, "events", list(range(6)))) == 6
                if zk.exists("/brokers/topics/events/partitions/5/state")
                else False
            )
        )
        acked = client.produce(zk, "events", count=60, key_prefix="before", retries=20).acked
        assert len(acked) == 60
        controller = admin.current_controller(zk)
        assert controller is not None
        victims = sorted({controller.broker_id, 1 if controller.broker_id != 1 else 2})
        survivor = ({1, 2, 3} - set(victims)).pop()
        for broker in victims:
            assert cluster.kill_broker(directory, broker)
        # Their ephemeral znodes expire with the session; the survivor becomes controller
        # and leads every partition, alone in the ISR.
        assert wait_until(lambda: zk.get_children(BROKER_IDS) == [str(survivor)], timeout=30)
        assert wait_until(
            lambda: all(
                s.leader == survivor and s.isr == (survivor,)
                for s in states(zk, "events", list(range(6))).values()
            ),
            timeout=30,
        )
        # min.insync.replicas=2: acks=all is refused rather than acknowledged unsafely.
        refused = client.produce(zk, "events", count=6, key_prefix="refused")
        assert refused.acked == []
        assert {e for c in refused.errors.values() for e in c} == {"NOT_ENOUGH_REPLICAS"}
        for broker in victims:
            cluster.start_broker(directory, broker)
        assert wait_until(
            lambda: all(len(s.isr) == 3 for s in states(zk, "events", list(range(6))).values()),
            timeout=60,
        )
        after = client.produce(zk, "events", count=60, key_prefix="after", retries=20).acked
        assert len(after) == 60
        assert lost_records(sandbox, zk, "events", acked + after) == []
    finally:
        zk.stop()
        zk.close()


def test_corrupt_partition_metadata_stops_a_2_8_broker_from_starting(
    sandbox: cluster.SandboxState,
) -> None:
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)
    try:
        admin.create_topic(zk, "fragile", 1, 3)
        assert wait_until(lambda: len(replica_dirs(sandbox, "fragile", 0)) == 3)
    finally:
        zk.stop()
        zk.close()
    cluster.stop_broker(directory, 2)
    (replica_dirs(sandbox, "fragile", 0)[2] / PARTITION_METADATA).write_bytes(
        b"version: 0\ntopic_id: not-an-id"
    )
    pid = cluster.start_broker(directory, 2)
    assert process.wait_gone(pid, 30)
    server_log = (cluster.broker_dir(directory, 2) / "logs" / "server.log").read_text()
    assert "Fatal error during KafkaServer startup" in server_log
    assert "partition.metadata: topic_id: expected" in server_log


def test_corrupt_partition_metadata_takes_a_3_4_log_dir_offline(sandbox_dir: Path) -> None:
    state = cluster.up(sandbox_dir, kafka_version="3.4", log_dirs_per_broker=2)
    zk = cluster.zk_client(state)
    try:
        admin.create_topic(zk, "fragile", 4, 3)
        assert wait_until(
            lambda: all(len(replica_dirs(state, "fragile", p)) == 3 for p in range(4))
        )
        cluster.stop_broker(sandbox_dir, 2)
        broken = replica_dirs(state, "fragile", 0)[2]
        (broken / PARTITION_METADATA).write_bytes(b"version: 7\ntopic_id: x")
        cluster.start_broker(sandbox_dir, 2, wait=True)
        server_log = cluster.broker_dir(sandbox_dir, 2) / "logs" / "server.log"
        assert wait_until(
            lambda: f"Error while loading log dir {broken.parent}" in server_log.read_text()
        )
        # The broker took the dir offline and carries on; it did not stop.
        assert cluster.broker_pid(sandbox_dir, 2) is not None
        # The replicas in the other log dir rejoin; the ones in the offline dir cannot.
        healthy = [
            p for p in range(4) if replica_dirs(state, "fragile", p)[2].parent != broken.parent
        ]
        assert healthy
        assert wait_until(
            lambda: all(
                2 in s.isr for p, s in states(zk, "fragile", list(range(4))).items() if p in healthy
            )
        )
        assert 2 not in states(zk, "fragile", [0])[0].isr
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize("kafka", ["emulated", "real-3.4.1"])
def test_kafka_3_4_refuses_at_restart_and_writes_ids_at_log_creation(
    sandbox_dir: Path, kafka: str
) -> None:
    """The 3.4 incident, on the emulator and on real Apache Kafka 3.4.1: the same facts."""
    cluster.up(sandbox_dir, kafka_version="3.4", kafka=kafka)
    incident = Incident(sandbox_dir)
    try:
        incident.run()
        result = incident.result
        ids = replica_file_ids(incident.state, result.topic)
        # 3.x creates the new partitions' logs with the controller's cached id X, so after the
        # failover every replica, old and new, disagrees with ZooKeeper.
        assert set(ids.values()) == {result.old_id}
        lines = mismatch_lines(sandbox_dir, result.restarted_broker)
        assert any(
            "Topic ID in memory: " in line
            and f"does not match the topic ID for partition {result.topic}-" in line
            and line.endswith(f"received: {result.new_id}. (state.change.logger)")
            for line in lines
        )
        current = states(incident.zk, result.topic, result.old_partitions + result.new_partitions)
        assert all(result.restarted_broker not in s.isr for s in current.values())
    finally:
        incident.close()


def test_an_emulated_log_recovery_delays_the_registration_and_a_stop_cuts_it_short(
    sandbox_dir: Path,
) -> None:
    """`sandbox up --log-recovery-ms`: a starting broker loads its logs for that long before it
    registers, as a real broker's log recovery does; a SIGTERM meanwhile stops it unregistered."""
    up = run_cli(
        "sandbox", "up", "--dir", str(sandbox_dir), "--brokers", "1", "--log-recovery-ms", "1500"
    )
    assert up.returncode == 0, up.stderr[-2000:]
    settings = cluster.broker_settings(sandbox_dir, 1)
    assert settings.get_int("sandbox.log.recovery.ms") == 1500
    state = cluster.load_state(sandbox_dir)
    zk = cluster.zk_client(state)
    try:
        assert cluster.stop_broker(sandbox_dir, 1)
        started = time.monotonic()
        cluster.start_broker(sandbox_dir, 1)
        assert wait_until(lambda: zk.exists(f"{BROKER_IDS}/1") is not None, timeout=30)
        assert time.monotonic() - started >= 1.5

        assert cluster.stop_broker(sandbox_dir, 1)
        cluster.start_broker(sandbox_dir, 1)
        assert cluster.stop_broker(sandbox_dir, 1, timeout=10)
        assert zk.exists(f"{BROKER_IDS}/1") is None
    finally:
        zk.stop()
        zk.close()
