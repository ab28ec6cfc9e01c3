"""docker-compose.yml and lab/: valid for Compose, and consistent with lab/cluster.yaml.

These run everywhere: `docker-compose config` (Debian's docker-compose, installed by `make
setup`) reads and validates the file without a Docker engine.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from remediate.config import load_cluster_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
LAB = ROOT / "lab"
BROKERS = (1, 2, 3)
DATA_DIR = "/var/lib/kafka/data"  # cp-kafka's log.dirs when KAFKA_LOG_DIRS is not set


def compose(*args: str) -> subprocess.CompletedProcess[str]:
    command = shutil.which("docker-compose")
    assert command is not None, "docker-compose is missing: `make setup` installs it"
    return subprocess.run(
        [command, "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def normalized() -> dict[str, Any]:
    """The compose file as Compose itself resolves it (anchors merged, paths absolute)."""
    validated = compose("config", "-q")
    assert validated.returncode == 0, validated.stderr
    resolved = compose("--profile", "legacy", "config")
    assert resolved.returncode == 0, resolved.stderr
    document: dict[str, Any] = yaml.safe_load(resolved.stdout)
    return document


def test_compose_validates_the_file_and_knows_its_services() -> None:
    plain = compose("config", "--services")
    assert plain.returncode == 0, plain.stderr
    legacy = compose("--profile", "legacy", "config", "--services")
    assert legacy.returncode == 0, legacy.stderr
    assert set(legacy.stdout.split()) == {
        "zookeeper",
        "kafka-1",
        "kafka-2",
        "kafka-3",
        "kafka-legacy",
    }


def test_compose_rejects_a_broken_file(tmp_path: Path) -> None:
    """The validation is real: the same check fails on a file Compose cannot accept."""
    broken = yaml.safe_load(COMPOSE_FILE.read_text())
    broken["services"]["kafka-1"]["stop_grace_period"] = ["not", "a", "duration"]
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    command = shutil.which("docker-compose")
    assert command is not None
    result = subprocess.run(
        [command, "-f", str(path), "config", "-q"], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "stop_grace_period" in result.stderr


@pytest.mark.parametrize("broker", BROKERS)
def test_each_broker_is_kafka_2_8_in_zookeeper_mode(
    normalized: dict[str, Any], broker: int
) -> None:
    service = normalized["services"][f"kafka-{broker}"]
    assert re.fullmatch(r"confluentinc/cp-kafka:6\.2\.\d+", service["image"])  # Kafka 2.8.x
    environment = service["environment"]
    assert str(environment["KAFKA_BROKER_ID"]) == str(broker)
    assert environment["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper:2181"
    assert environment["KAFKA_INTER_BROKER_PROTOCOL_VERSION"] == "2.8"
    assert environment["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://kafka-{broker}:9092"
    assert "KAFKA_LOG_DIRS" not in environment and "KAFKA_PROCESS_ROLES" not in environment


def test_the_legacy_profile_has_kafka_1_0_tools(normalized: dict[str, Any]) -> None:
    service = normalized["services"]["kafka-legacy"]
    assert re.fullmatch(r"confluentinc/cp-kafka:4\.0\.\d+", service["image"])  # Kafka 1.0.x
    assert service["profiles"] == ["legacy"]  # not started by `docker compose up`
    assert service["command"][:3] == ["kafka-topics", "--zookeeper", "zookeeper:2181"]


def test_cluster_yaml_finds_each_brokers_bind_mounted_data_dir(normalized: dict[str, Any]) -> None:
    config = load_cluster_config(LAB / "cluster.yaml")
    assert config.broker_ids == BROKERS
    for broker in config.brokers:
        volumes = normalized["services"][f"kafka-{broker.id}"]["volumes"]
        mounts = {
            PurePosixPath(target): PurePosixPath(source)
            for source, target, *_ in (str(volume).split(":") for volume in volumes)
        }
        assert broker.transport == "local"
        assert broker.log_dirs == (mounts[PurePosixPath(DATA_DIR)],)
        assert broker.log_dirs[0] == PurePosixPath(LAB / "data" / f"kafka-{broker.id}")


def test_cluster_yaml_reaches_the_published_zookeeper(normalized: dict[str, Any]) -> None:
    config = load_cluster_config(LAB / "cluster.yaml")
    (published,) = normalized["services"]["zookeeper"]["ports"]
    host_ip, host_port, container_port = str(published).split(":")
    assert config.zookeeper.servers == ((host_ip, int(host_port)),)
    assert container_port.split("/")[0] == "2181"


def test_cluster_yaml_service_commands_drive_compose(normalized: dict[str, Any]) -> None:
    config = load_cluster_config(LAB / "cluster.yaml")
    for broker in config.brokers:
        name = f"kafka-{broker.id}"
        assert name in normalized["services"]
        compose_file = "-f ../docker-compose.yml"
        assert (
            config.service_command("stop", broker) == f"docker compose {compose_file} stop {name}"
        )
        assert (
            config.service_command("start", broker) == f"docker compose {compose_file} start {name}"
        )
        status = config.service_command("status", broker)
        assert status.endswith(f"grep -qx {name}")
        # Run from lab/, which is where local service commands run (cluster.yaml's directory).
        assert (config.base_dir / "../docker-compose.yml").resolve() == COMPOSE_FILE
    # Controlled shutdown gets time before Compose sends SIGKILL.
    for broker_id in BROKERS:
        grace = normalized["services"][f"kafka-{broker_id}"]["stop_grace_period"]
        assert grace == "2m0s" or grace == "120s"


def test_the_lab_scripts_pass_shellcheck() -> None:
    command = shutil.which("shellcheck")
    assert command is not None, "shellcheck is missing: `make setup` installs it"
    scripts = sorted(str(path) for path in LAB.glob("*.sh"))
    assert len(scripts) >= 2
    result = subprocess.run([command, *scripts], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
