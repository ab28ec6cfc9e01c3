"""The sandbox's single steps through the command line, as a person reproducing the incident by
hand runs them: create a topic, produce, consume, add partitions the legacy way, fail the
controller over, restart a broker. Each command's effect is read back from ZooKeeper."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from remediate.formats.znodes import decode_topic, topic_path
from remediate.sandbox import admin, cluster

pytestmark = pytest.mark.slow


def remediate(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), "sandbox", *args, "--dir", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_single_steps_from_the_command_line(sandbox: cluster.SandboxState) -> None:
    directory = Path(sandbox.directory)
    zk = cluster.zk_client(sandbox)

    def topic_znode(topic: str) -> tuple[dict[int, tuple[int, ...]], str | None]:
        data, _ = zk.get(topic_path(topic))
        assignment = decode_topic(data, source=topic)
        topic_id = str(assignment.topic_id) if assignment.topic_id is not None else None
        return dict(assignment.partitions), topic_id

    try:
        created = remediate(
            directory, "admin", "create-topic", "--topic", "orders", "--partitions", "2",
            "--replication-factor", "3",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        partitions, old_id = topic_znode("orders")
        assert sorted(partitions) == [0, 1] and all(len(r) == 3 for r in partitions.values())
        assert old_id is not None and f"topic_id={old_id}" in created.stdout

        produced = remediate(
            directory, "produce", "--topic", "orders", "--count", "20", "--key-prefix", "cli",
            "--retries", "10", "--json",
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        assert json.loads(produced.stdout)["acked"] == 20

        consumed = remediate(directory, "consume", "--topic", "orders", "--json")
        assert consumed.returncode == 0, consumed.stderr
        records = json.loads(consumed.stdout)["records"]
        assert sorted(key for _, _, key, _ in records) == sorted(f"cli-{i}" for i in range(20))

        added = remediate(
            directory, "admin", "add-partitions", "--topic", "orders", "--partitions", "4",
            "--legacy",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        data, _ = zk.get(topic_path("orders"))
        assert json.loads(data)["version"] == 1
        partitions, dropped = topic_znode("orders")
        assert sorted(partitions) == [0, 1, 2, 3] and dropped is None

        failover = remediate(directory, "admin", "failover-controller")
        assert failover.returncode == 0, failover.stderr
        assert "controller moved from broker" in failover.stdout
        _, new_id = topic_znode("orders")
        assert new_id is not None and new_id != old_id

        restarted = remediate(directory, "admin", "restart-broker", "--id", "2")
        assert restarted.returncode == 0, restarted.stderr
        assert 2 in admin.live_brokers(zk)

        # Errors are reported per partition, and the exit code says some records failed.
        strict = remediate(
            directory, "admin", "create-topic", "--topic", "strict", "--partitions", "2",
            "--replication-factor", "3", "--config", "min.insync.replicas=4",
        )  # fmt: skip
        assert strict.returncode == 0, strict.stderr
        refused = remediate(
            directory, "produce", "--topic", "strict", "--count", "20", "--retries", "2",
            "--json",
        )  # fmt: skip
        assert refused.returncode == 1
        report = json.loads(refused.stdout)
        assert report["acked"] == 0
        assert set(report["errors"]) == {"0", "1"}
        assert all(set(e) == {"NOT_ENOUGH_REPLICAS"} for e in report["errors"].values())

        bad = remediate(
            directory, "admin", "create-topic", "--topic", "x", "--partitions", "1",
            "--replication-factor", "1", "--config", "no-equals-sign",
        )  # fmt: skip
        assert bad.returncode != 0 and "expected KEY=VALUE" in bad.stderr
    finally:
        zk.stop()
        zk.close()
