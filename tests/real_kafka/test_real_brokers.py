"""Real Apache Kafka brokers in the sandbox layout (`sandbox up --kafka real-2.8.2`): Kafka's
production defaults but for the two-core few, the service commands the tool is given, a
broker that cannot start named with its log, a killed broker restarted, and `down` stopping
its own processes only.

Slow: each real broker is a JVM (about 2 s to start here); the killed broker waits out
Kafka's default ZooKeeper session timeout (18 s) before it can register again.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediate.errors import SandboxError
from remediate.formats.properties import load_properties
from remediate.sandbox import cluster
from remediate.sandbox.plumbing import process
from remediate.sandbox.real import class_archive, jvm_broker, releases
from tests.execute.sandbox_tools import run_cli
from tests.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("2.8.2")]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("real-brokers") / "sandbox"
    up = run_cli("sandbox", "up", "--dir", str(directory), "--kafka", "real-2.8.2", "--json")
    assert up.returncode == 0, up.stderr[-3000:]
    yield directory
    cluster.down(directory)


def service(directory: Path) -> dict[str, str]:
    settings: dict[str, Any] = yaml.safe_load((directory / "cluster.yaml").read_text())
    return {k: str(v) for k, v in settings["service"].items()}


def run_service(directory: Path, action: str, broker_id: int) -> subprocess.CompletedProcess[str]:
    command = service(directory)[action].replace("{broker_id}", str(broker_id))
    return subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, check=False, timeout=300
    )


def test_up_runs_real_kafka_with_its_defaults_in_the_sandbox_layout(real: Path) -> None:
    status = json.loads(run_cli("sandbox", "status", "--dir", str(real), "--json").stdout)
    assert status["kafka"] == "real-2.8.2" and status["kafka_version"] == "2.8"
    assert [(b["running"], b["registered"]) for b in status["brokers"]] == [(True, True)] * 3
    for broker in (1, 2, 3):
        path = real / f"broker-{broker}" / "server.properties"
        props = load_properties(path.read_bytes(), source=str(path))
        fixed = {"broker.id", "listeners", "log.dirs", "zookeeper.connect"}
        internal = {
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
        }
        # Broker-wide, as production clusters with RF 3 set it; the tool reads it here.
        assert props["min.insync.replicas"] == "2"
        # Kafka's defaults for everything else (leader rebalancing, the inter-broker protocol
        # and every timer but the two the suite waits for: its tuning, tests/conftest.py).
        assert status["tuning"] == "test"
        assert set(props) == fixed | internal | {"min.insync.replicas"} | set(
            jvm_broker.TWO_CORE_SETTINGS
        ) | set(jvm_broker.TEST_TIMERS)
        assert {k: props[k] for k in jvm_broker.TEST_TIMERS} == jvm_broker.TEST_TIMERS
        command = process.command_line(cluster.broker_pid(real, broker) or -1)
        assert "kafka.Kafka" in command and str(path) in command
        assert all(flag in command for flag in jvm_broker.TEST_JVM_FLAGS)
        # The release's class-data archive, which `make setup` builds, is mapped.
        archive = class_archive.usable(releases.release("2.8.2"))
        assert archive is not None and f"-XX:SharedArchiveFile={archive}" in command
    # The tool finds the log dirs in server.properties, as on a production broker.
    brokers = yaml.safe_load((real / "cluster.yaml").read_text())["brokers"]
    assert all("log_dirs" not in b and b["server_properties"] for b in brokers)
    checked = run_cli("check", "-c", str(real / "cluster.yaml"), "--json")
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert json.loads(checked.stdout)["status"] == "OK"


def test_the_service_commands_stop_start_and_tell_the_status(real: Path) -> None:
    assert run_service(real, "status", 2).returncode == 0
    stopped = run_service(real, "stop", 2)
    assert stopped.returncode == 0, stopped.stderr
    log = (real / "broker-2" / "logs" / "server.log").read_text()
    assert "[KafkaServer id=2] Controlled shutdown succeeded" in log
    assert "[KafkaServer id=2] shut down completed" in log
    assert run_service(real, "status", 2).returncode == 3
    assert 2 not in cluster.registered_brokers_now(cluster.load_state(real))
    started = run_service(real, "start", 2)
    assert started.returncode == 0, started.stderr
    state = cluster.load_state(real)
    assert wait_until(lambda: 2 in cluster.registered_brokers_now(state), timeout=120)
    assert run_service(real, "status", 2).returncode == 0


def test_a_killed_broker_starts_again_once_its_session_has_expired(real: Path) -> None:
    """After SIGKILL the broker's registration lives until its session expires; a broker
    started meanwhile would refuse (NODEEXISTS). `broker start` waits it out."""
    state = cluster.load_state(real)
    assert cluster.kill_broker(real, 3)
    assert 3 in cluster.registered_brokers_now(state)
    started = run_cli("sandbox", "broker", "start", "--id", "3", "--wait", "--dir", str(real))
    assert started.returncode == 0, started.stderr[-3000:]
    assert 3 in cluster.registered_brokers_now(state)
    log = (real / "broker-3" / "logs" / "server.log").read_text()
    assert "NodeExists" not in log
    # The new process's startup is over, not only the killed one's: Kafka logs `starting`
    # without the `[KafkaServer id=N] ` prefix it gives `started`.
    assert log.rindex("[KafkaServer id=3] started") > log.rindex(
        "INFO starting (kafka.server.KafkaServer)"
    )


def test_a_broker_that_cannot_start_is_named_with_the_end_of_its_log(tmp_path: Path) -> None:
    directory = tmp_path / "broken"
    try:
        with pytest.raises(SandboxError) as failure:
            cluster.up(
                directory, kafka="real-2.8.2", brokers=1, properties={"num.io.threads": "none"}
            )
        said = str(failure.value)
        assert "broker 1 (Apache Kafka 2.8.2) exited during startup" in said
        assert "num.io.threads" in said and "server.log" in said
    finally:
        cluster.down(directory)


def test_down_stops_its_own_brokers_and_no_one_elses(real: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    # As Kafka ships (the demo's and the matrix's tuning): none of the suite's timers, and
    # the JVM settings of Kafka's scripts.
    cluster.up(other, kafka="real-2.8.2", brokers=1, tuning=jvm_broker.Tuning.KAFKA)
    mine = {b: cluster.broker_pid(real, b) for b in (1, 2, 3)}
    theirs = cluster.broker_pid(other, 1)
    assert theirs is not None and None not in mine.values()
    path = other / "broker-1" / "server.properties"
    assert not set(jvm_broker.TEST_TIMERS) & set(load_properties(path.read_bytes(), source="t"))
    command = process.command_line(theirs)
    assert all(flag in command for flag in jvm_broker.JVM_FLAGS), command
    assert cluster.down(other) == ["broker 1", "zookeeper"]
    assert not process.is_alive(theirs)
    assert {b: cluster.broker_pid(real, b) for b in (1, 2, 3)} == mine
    assert all(process.is_alive(pid) for pid in mine.values() if pid is not None)
