"""The restore-zk-topic-id playbook on the sandbox: prevent the incident before a failover."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remediate.execute.failpoints import ENV as FAILPOINTS
from remediate.execute.journal import Journal, latest_run
from remediate.formats.logdir import PARTITION_METADATA, encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.sandbox import admin, cluster
from remediate.sandbox.reproduce import Incident, partition_states, replica_file_ids
from tests.execute.sandbox_tools import run_cli
from tests.plan.test_plan_sandbox import disk, zookeeper_tree
from tests.wait import steady, wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"


def partition_files(state: cluster.SandboxState) -> dict[str, str]:
    """The topic's files (the brokers rewrite their root checkpoints on their own)."""
    return {path: digest for path, digest in disk(state).items() if f"/{TOPIC}-" in path}


def legacy_add(directory: Path) -> Incident:
    """Steps 1 to 4 of the incident: the id is gone from ZooKeeper, no failover yet."""
    incident = Incident(directory, topic=TOPIC)
    for step in (
        incident.create_topic,
        incident.produce,
        incident.consume,
        incident.add_partitions_legacy,
    ):
        step()
    assert admin.read_topic(incident.zk, TOPIC)[0].topic_id is None
    return incident


def test_fix_restores_a_lost_id_without_a_restart_and_the_failover_is_harmless(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "sandbox"
    cluster.up(directory)  # Kafka 2.8: the added partitions have no partition.metadata yet
    try:
        incident = legacy_add(directory)
        config = str(directory / "cluster.yaml")
        check = run_cli("check", "-c", config, "--json")
        assert check.returncode == 1
        (lost,) = [
            f for f in json.loads(check.stdout)["findings"] if f["kind"] == "ZK_TOPIC_ID_MISSING"
        ]
        assert lost["file_topic_id"] == incident.result.old_id
        assert "it can be restored" in lost["detail"]
        pids = {
            b.broker_id: cluster.broker_pid(directory, b.broker_id) for b in incident.state.brokers
        }

        # Without --yes, fix is a dry run: the plan, and nothing changed.
        zk_before = zookeeper_tree(incident.zk)
        dry = run_cli("fix", "-c", config, "--json")
        assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-1000:]
        assert json.loads(dry.stdout)["applied"] is False
        assert zookeeper_tree(incident.zk) == zk_before

        fixed = run_cli("fix", "-c", config, "--yes", "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-1000:]
        document = json.loads(fixed.stdout)
        (step,) = document["plan"]["steps"]
        assert (step["kind"], step["topic"], step["topic_id"], step["reelect"]) == (
            "restore",
            TOPIC,
            incident.result.old_id,
            False,
        )
        assert document["run"]["status"] == "completed"
        assert {
            b.broker_id: cluster.broker_pid(directory, b.broker_id) for b in incident.state.brokers
        } == pids, "a broker was restarted"
        assignment, _ = admin.read_topic(incident.zk, TOPIC)
        assert str(assignment.topic_id) == incident.result.old_id
        assert assignment.version == 3

        # What used to start the incident: a failover, then every broker restarted.
        admin.failover_controller(incident.zk)
        for broker in incident.state.brokers:
            cluster.stop_broker(directory, broker.broker_id)
            cluster.start_broker(directory, broker.broker_id, wait=True)

            def in_every_isr(b: int = broker.broker_id) -> bool:
                return all(
                    b in s.isr
                    for s in partition_states(incident.zk, TOPIC, list(range(6))).values()
                )

            wait_until(in_every_isr, f"broker {broker.broker_id} back in every ISR", timeout=90)
        assert set(replica_file_ids(incident.state, TOPIC).values()) == {incident.result.old_id}
        assert run_cli("check", "-c", config).returncode == 0
        incident.close()
    finally:
        cluster.down(directory)


def test_a_disagreement_among_the_replicas_is_refused_with_the_reason(tmp_path: Path) -> None:
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka_version="3.4")
    try:
        incident = legacy_add(directory)
        broker = incident.state.brokers[1]
        planted = TopicId.random()
        (path,) = [
            p
            for log_dir in broker.log_dirs
            for p in Path(log_dir).glob(f"{TOPIC}-0/{PARTITION_METADATA}")
        ]
        path.write_bytes(encode_partition_metadata(planted))
        # Once the brokers have written what the new id gives them (a replica without
        # partition.metadata writes it when its broker learns the id).
        wait_until(
            steady(lambda: partition_files(incident.state), 3.0),
            "the replicas' files unchanged for 3 s",
            timeout=120,
        )
        zk_before, disk_before = zookeeper_tree(incident.zk), partition_files(incident.state)
        fixed = run_cli("fix", "-c", str(directory / "cluster.yaml"), "--yes", "--json")
        assert fixed.returncode == 4, fixed.stdout[-3000:] + fixed.stderr[-1000:]
        document = json.loads(fixed.stdout)
        assert document["applied"] is False
        reasons = " ".join(document["plan"]["refusals"])
        assert "ZooKeeper lost its topic id and it cannot be restored automatically" in reasons
        assert "replicas disagree" in reasons and str(planted) in reasons
        assert zookeeper_tree(incident.zk) == zk_before
        assert partition_files(incident.state) == disk_before
        incident.close()
    finally:
        cluster.down(directory)


def journal(directory: Path, run_id: str) -> list[dict[str, Any]]:
    return Journal.open(directory / "journal", run_id).records()


def without_lock(tree: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in tree.items() if not k.startswith("/remediate")}


def plan_to(config: Path, path: Path) -> dict[str, Any]:
    planned = run_cli("plan", "-c", str(config), "-o", str(path), "--json")
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-2000:]
    document: dict[str, Any] = json.loads(path.read_text())
    assert [s["kind"] for s in document["steps"]] == ["restore"], document["steps"]
    return document


def apply_command(config: Path, plan_path: Path, digest: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "remediate"),
        *("apply", "-c", str(config), "--plan", str(plan_path), "--approve", digest, "--json"),
    ]


def test_a_znode_that_changes_after_the_plan_is_never_overwritten(tmp_path: Path) -> None:
    """Another writer between plan and apply: refused by the drift check; another writer
    between the operator's read and its write: the CAS loses, nothing is written; a plan made
    afterwards restores the id and keeps what that writer put in the znode."""
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka_version="3.4")
    try:
        incident = legacy_add(directory)
        zk, config, path = incident.zk, directory / "cluster.yaml", f"/brokers/topics/{TOPIC}"

        # 1. Between plan and apply, an admin tool rewrites the znode (same content, new version).
        first = plan_to(config, tmp_path / "first.json")
        data, stat = zk.get(path)
        zk.set(path, data, version=stat.version)
        zk_before, disk_before = zookeeper_tree(zk), partition_files(incident.state)
        refused = run_cli(*apply_command(config, tmp_path / "first.json", first["digest"])[1:])
        assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-2000:]
        assert "changed since the plan was made" in refused.stderr
        assert (
            f"topic {TOPIC} znode: plan version {stat.version}, now version {stat.version + 1}"
            in refused.stderr
        )
        assert without_lock(zookeeper_tree(zk)) == without_lock(zk_before)
        assert partition_files(incident.state) == disk_before

        # 2. The operator has read the znode and is about to write it when a reassignment tool
        #    (2.4-2.7: version 2, no id) writes it: the compare-and-set loses.
        second = plan_to(config, tmp_path / "second.json")
        point = tmp_path / "read"
        env = {**os.environ, FAILPOINTS: f"zk-write topic-id:read=pause:{point}"}
        process = subprocess.Popen(
            apply_command(config, tmp_path / "second.json", second["digest"]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

        reached = tmp_path / "read.reached"
        wait_until(
            lambda: reached.exists() or process.poll() is not None,
            "the operator to read the znode and hold before its write",
        )
        assert reached.exists(), process.communicate(timeout=10)
        assignment, version = admin.read_topic(zk, TOPIC)
        reassigning = {
            "version": 2,
            "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
            "adding_replicas": {"0": [assignment.partitions[0][0]]},
            "removing_replicas": {"1": [assignment.partitions[1][-1]]},
        }
        zk.set(path, json.dumps(reassigning).encode(), version=version)
        (tmp_path / "read.release").touch()
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 5, stdout[-2000:] + stderr[-2000:]
        records = journal(directory, str(latest_run(directory / "journal")))
        (halted,) = [r for r in records if r["event"] == "run-halted"]
        assert f"{path} changed while writing; nothing written" in halted["error"]
        failed = [r for r in records if r["event"] == "step-failed"]
        assert failed and str(failed[-1]["step"]).endswith(":zk-write topic-id")
        assert json.loads(zk.get(path)[0]) == reassigning  # the other writer's, untouched

        # 3. A new plan restores the id and keeps the reassignment's fields.
        third = plan_to(config, tmp_path / "third.json")
        (step,) = third["steps"]
        # Applied the way a person does, without --json: the report's path is printed.
        human = apply_command(config, tmp_path / "third.json", third["digest"])
        applied = run_cli(*human[1:-1])
        assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
        run_id = str(latest_run(directory / "journal"))
        (shown,) = [
            line.removeprefix("report: ")
            for line in applied.stderr.splitlines()
            if line.startswith("report: ")
        ]
        assert Path(shown) == directory / "journal" / run_id / "report.html"
        assert run_id in Path(shown).read_text()
        data, stat = zk.get(path)
        assert json.loads(data) == {
            **reassigning,
            "version": 3,
            "topic_id": incident.result.old_id,
        }
        records = journal(directory, run_id)
        written = [
            r
            for r in records
            if r["event"] == "step-finished" and str(r["step"]).endswith(":zk-write topic-id")
        ]
        assert [r["result"] for r in written] == [
            {"znode_version": stat.version, "topic_id": incident.result.old_id}
        ]
        assert step["znode_version"] == stat.version - 1
        assert not any("controller-election" in str(r.get("step")) for r in records)
        incident.close()
    finally:
        cluster.down(directory)


def test_fix_applies_only_the_plan_that_was_reviewed(tmp_path: Path) -> None:
    """The runbook's `fix` dry run prints the plan's digest; `fix --yes --approve DIGEST`
    applies the plan made then only if it is that very plan. Made twice from the same state a
    plan has the same digest; after a controller failover the plan is another one, and the
    approval of the old one changes nothing."""
    directory = tmp_path / "sandbox"
    cluster.up(directory)
    try:
        incident = legacy_add(directory)
        config = str(directory / "cluster.yaml")
        first = json.loads(run_cli("fix", "-c", config, "--json").stdout)
        again = run_cli("fix", "-c", config)
        reviewed = first["plan"]["digest"]
        assert first["outcome"] == "dry-run" and first["plan"]["steps"]
        assert again.returncode == 0, again.stderr[-2000:]
        assert f"fix --yes --approve {reviewed}" in again.stderr

        # The cluster changes after the review: a failover mints a new id.
        admin.failover_controller(incident.zk)
        wait_until(
            lambda: admin.read_topic(incident.zk, TOPIC)[0].topic_id is not None,
            "the new controller minted an id",
            timeout=60,
        )
        # Once the brokers have written what the new id gives them (a replica without
        # partition.metadata writes it when its broker learns the id).
        wait_until(
            steady(lambda: partition_files(incident.state), 3.0),
            "the replicas' files unchanged for 3 s",
            timeout=120,
        )
        zk_before, disk_before = zookeeper_tree(incident.zk), partition_files(incident.state)
        stale = run_cli("fix", "-c", config, "--yes", "--approve", reviewed, "--json")
        assert stale.returncode == 4, stale.stdout[-3000:] + stale.stderr[-1000:]
        document = json.loads(stale.stdout)
        assert (document["outcome"], document["applied"]) == ("not-reviewed", False)
        assert reviewed in document["message"] and document["plan"]["digest"] != reviewed
        assert zookeeper_tree(incident.zk) == zk_before
        assert partition_files(incident.state) == disk_before

        # Reviewed again, approved, applied.
        now = json.loads(run_cli("fix", "-c", config, "--json").stdout)["plan"]["digest"]
        fixed = run_cli("fix", "-c", config, "--yes", "--approve", now, "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-1000:]
        done = json.loads(fixed.stdout)
        assert (done["outcome"], done["plan"]["digest"]) == ("applied", now)
        assert done["run"]["status"] == "completed"
        approvals = [
            r for r in journal(directory, done["run"]["run_id"]) if r["event"] == "approved"
        ]
        assert [
            (r["digest"], r["approved_by"].endswith("(fix --yes --approve)")) for r in approvals
        ] == [(now, True)]
        incident.close()
    finally:
        cluster.down(directory)
