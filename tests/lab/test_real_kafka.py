"""scan, plan and fix against real Kafka 2.8 brokers: the lab in docker-compose.yml.

Marked `lab`: they run where a Docker engine (with the compose plugin) answers, and are
reported as not run elsewhere (tests/conftest.py). Each test starts the lab from nothing with
lab/reset.sh, drives the incident with lab/reproduce.sh (Kafka 1.0's kafka-topics for the
legacy steps) and leaves the lab reset.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from remediate.config import load_cluster_config
from remediate.formats.logdir import parse_partition_metadata
from remediate.formats.znodes import decode_partition_state, decode_topic
from remediate.sandbox.reproduce import wait_for
from tests.execute.sandbox_tools import run_cli

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab"
CONFIG = LAB / "cluster.yaml"
TOPIC = "incident"
BROKERS = (1, 2, 3)


def sh(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=ROOT, capture_output=True, text=True, check=False, timeout=timeout
    )


def compose(*args: str) -> subprocess.CompletedProcess[str]:
    return sh("docker", "compose", "-f", str(ROOT / "docker-compose.yml"), *args)


def cli_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(*args, "-c", str(CONFIG), "--json")
    assert result.stdout.strip(), result.stderr[-3000:]
    document: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, document


def file_ids() -> dict[str, str]:
    """`<broker>:<partition dir>` -> the topic id in its partition.metadata."""
    ids = {}
    for broker in BROKERS:
        for path in sorted(
            (LAB / "data" / f"kafka-{broker}").glob(f"{TOPIC}-*/partition.metadata")
        ):
            parsed = parse_partition_metadata(path.read_bytes(), source=str(path))
            ids[f"{broker}:{path.parent.name}"] = str(parsed.topic_id)
    return ids


def file_bytes() -> dict[Path, bytes]:
    return {
        path: path.read_bytes() for path in (LAB / "data").glob("kafka-*/*/*") if path.is_file()
    }


@pytest.fixture
def zk() -> Iterator[KazooClient]:
    config = load_cluster_config(CONFIG)
    client = KazooClient(hosts=config.zookeeper.connect)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def fresh_lab() -> Iterator[None]:
    reset = sh(str(LAB / "reset.sh"))
    assert reset.returncode == 0, reset.stdout + reset.stderr
    yield
    sh(str(LAB / "reset.sh"))


def zk_topic_id(zk: KazooClient) -> str | None:
    data, _ = zk.get(f"/brokers/topics/{TOPIC}")
    topic_id = decode_topic(data, source=TOPIC).topic_id
    return None if topic_id is None else str(topic_id)


def healthy(zk: KazooClient) -> bool:
    if sorted(int(b) for b in zk.get_children("/brokers/ids")) != list(BROKERS):
        return False
    for partition in zk.get_children(f"/brokers/topics/{TOPIC}/partitions"):
        path = f"/brokers/topics/{TOPIC}/partitions/{partition}/state"
        data, stat = zk.get(path)
        state = decode_partition_state(data, source=path, zk_version=stat.version)
        if state.leader < 0 or sorted(state.isr) != list(BROKERS):
            return False
    return True


def test_the_restore_prevents_the_incident_on_real_kafka(fresh_lab: None, zk: KazooClient) -> None:
    reproduced = sh(str(LAB / "reproduce.sh"), "--until", "4")
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr
    zk.start(timeout=30)
    assert zk_topic_id(zk) is None
    agreed = set(file_ids().values())
    assert len(agreed) == 1 and len(file_ids()) == 9  # 3 partitions x RF 3, one id

    code, checked = cli_json("check")
    assert code == 1, checked  # WARNING
    assert {f["kind"] for f in checked["findings"]} == {"ZK_TOPIC_ID_MISSING"}

    fixed = run_cli("fix", "-c", str(CONFIG), "--yes")
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    assert zk_topic_id(zk) == agreed.pop()

    # The failover that used to mint a new id, then every broker restarted: nothing mismatches.
    zk.delete("/controller")
    wait_for(lambda: zk.exists("/controller") is not None, "a new controller", timeout=180)
    for broker in BROKERS:
        restarted = compose("restart", f"kafka-{broker}")
        assert restarted.returncode == 0, restarted.stderr
        wait_for(lambda: healthy(zk), f"the topic to be healthy after restarting {broker}", 300)
    code, checked = cli_json("check")
    assert code == 0, checked
    assert set(file_ids().values()) == {zk_topic_id(zk)}


def test_the_incident_on_real_kafka_is_found_and_repaired(fresh_lab: None, zk: KazooClient) -> None:
    reproduced = sh(str(LAB / "reproduce.sh"))
    assert reproduced.returncode == 0, reproduced.stdout + reproduced.stderr
    assert "does not match the topic Id" in reproduced.stdout  # Kafka 2.8's own log line
    zk.start(timeout=30)
    zk_id = zk_topic_id(zk)
    assert zk_id is not None

    code, checked = cli_json("check")
    assert code == 2, checked  # CRITICAL
    kinds = {f["kind"] for f in checked["findings"]}
    assert "TOPIC_ID_MISMATCH_OUT_OF_ISR" in kinds, kinds
    assert all(f["zk_topic_id"] == zk_id for f in checked["findings"] if f["topic"] == TOPIC)

    before = file_bytes()
    code, plan = cli_json("plan")
    assert code == 0 and not plan["refused"], plan
    assert plan["steps"] and plan["steps"][-1]["is_controller"], plan
    dry_run = run_cli("fix", "-c", str(CONFIG))
    assert dry_run.returncode in (0, 4), dry_run.stdout[-3000:] + dry_run.stderr[-3000:]
    assert file_bytes() == before  # a dry run changes nothing
    # The repair: --accept-unavailable only where the plan says it makes working partitions
    # unavailable.
    accept = ["--accept-unavailable"] if plan["newly_unavailable"] else []
    fixed = run_cli("fix", "-c", str(CONFIG), "--yes", *accept)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    code, checked = cli_json("check")
    assert code == 0, checked
    assert set(file_ids().values()) == {zk_id}
