"""`remediate plan` against the sandbox after reproduce: the right brokers, in the right order,
the right files, a markdown that renders, and nothing changed by planning; then the runbook,
word for word, repairs that incident."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from remediate.sandbox import admin, cluster
from remediate.sandbox.reproduce import Incident, replica_file_ids

pytestmark = pytest.mark.slow

TOPIC = "orders"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, check=False, timeout=300
    )


def zookeeper_tree(zk: KazooClient, path: str = "/") -> dict[str, tuple[bytes, int, int]]:
    """Every znode's data, data version and modification zxid."""
    tree: dict[str, tuple[bytes, int, int]] = {}
    data, stat = zk.get(path)
    tree[path] = (data, stat.version, stat.mzxid)
    for child in zk.get_children(path):
        if path == "/" and child == "zookeeper":
            continue
        tree.update(zookeeper_tree(zk, f"{path.rstrip('/')}/{child}"))
    return tree


def disk(state: cluster.SandboxState) -> dict[str, str]:
    """sha256 of every file in every log dir but the root checkpoints, which the brokers
    rewrite on their own every few seconds (replication-offset-checkpoint and its kin, and the
    `.tmp` each is written to before its rename)."""
    digests = {}
    for broker in state.brokers:
        for log_dir in broker.log_dirs:
            for path in sorted(Path(log_dir).rglob("*")):
                own_checkpoint = path.parent == Path(log_dir) and path.name.removesuffix(
                    ".tmp"
                ).endswith("checkpoint")
                if path.is_file() and path.name != ".lock" and not own_checkpoint:
                    digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incident]:
    directory = tmp_path_factory.mktemp("plan") / "sandbox"
    cluster.up(directory)
    incident = Incident(directory, topic=TOPIC)
    incident.run()
    yield incident
    incident.close()
    cluster.down(directory)


def test_plan_lists_the_affected_brokers_controller_last_and_changes_nothing(
    reproduced: Incident, tmp_path: Path
) -> None:
    config = reproduced.directory / "cluster.yaml"
    zk_before = zookeeper_tree(reproduced.zk)
    disk_before = disk(reproduced.state)

    restarts = ("--candidate", "keep-zk-id")
    result = run_cli(
        "plan", "-c", str(config), "--json", "-o", str(tmp_path / "plan.json"), *restarts
    )
    markdown = run_cli("plan", "-c", str(config), "--format", "markdown", *restarts)
    chosen = run_cli("plan", "-c", str(config), "--json")

    assert zookeeper_tree(reproduced.zk) == zk_before, "planning wrote to ZooKeeper"
    assert disk(reproduced.state) == disk_before, "planning changed a file on a broker"

    # With two log dirs per broker, the model's choice is a repair without restarts: of the
    # two, the one that copies less (the same harm), ZooKeeper's id kept on a tie.
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    weighed = {c["name"]: c for c in json.loads(chosen.stdout)["candidates"]}
    moves = ("move-keep-zk-id", "move-restore-id")
    assert set(weighed) == {"keep-zk-id", "restore-id", *moves}
    copies = {name: sum(weighed[name]["bytes_to_copy"].values()) for name in moves}
    assert [n for n, c in weighed.items() if c["chosen"]] == [min(moves, key=copies.__getitem__)]
    # The 2.8 repair by restarts is not refused (its stale partitions are unwritable already):
    # ZooKeeper's id is kept, every broker holding the stale id is restarted, the active
    # controller last, and only the stale replicas' partition.metadata is deleted.
    assert result.returncode == 0, result.stderr[-2000:]
    plan: dict[str, Any] = json.loads(result.stdout)
    # The printed plan adds the verdict; the file holds the plan alone, as apply reads it.
    assert plan.pop("verdict") == "ready"
    assert json.loads((tmp_path / "plan.json").read_text()) == plan
    assert plan["refused"] is False and plan["refusals"] == []
    assert [c["name"] for c in plan["candidates"] if c["chosen"]] == ["keep-zk-id"]
    controller = admin.current_controller(reproduced.zk)
    assert controller is not None
    order = [step["broker"] for step in plan["steps"]]
    assert {step["kind"] for step in plan["steps"]} == {"restart"}
    assert order[-1] == controller.broker_id
    assert sorted(order) == [1, 2, 3]
    on_disk = replica_file_ids(reproduced.state, TOPIC)
    for step in plan["steps"]:
        expected = {
            (broker, partition)
            for (broker, partition), file_id in on_disk.items()
            if broker == step["broker"] and file_id != reproduced.result.new_id
        }
        assert {f"{TOPIC}-{p}" for _, p in expected} == set(step["partitions"])
        for path in step["files"]:
            directory = Path(path).parent
            assert directory.name in step["partitions"]
            assert Path(path).name == "partition.metadata"
            assert str(directory.parent) in reproduced.state.broker(step["broker"]).log_dirs
        assert len(step["files"]) == len(step["partitions"])
        assert step["order_reason"]
    # The fingerprint is the cluster as it is: read back from ZooKeeper and the disks.
    fingerprint = plan["fingerprint"]
    cluster_id = json.loads(reproduced.zk.get("/cluster/id")[0])["id"]
    epoch = int(reproduced.zk.get("/controller_epoch")[0])
    topic_version = reproduced.zk.get(f"/brokers/topics/{TOPIC}")[1].version
    registered = sorted(int(b) for b in reproduced.zk.get_children("/brokers/ids"))
    assert (fingerprint["cluster_id"], fingerprint["controller_epoch"]) == (cluster_id, epoch)
    assert fingerprint["brokers"] == registered == [1, 2, 3]
    assert fingerprint["topics"] == {TOPIC: topic_version}
    assert fingerprint["files"] == {
        f"{step['broker']}:{path}": reproduced.result.old_id
        for step in plan["steps"]
        for path in step["files"]
        if path.endswith("/partition.metadata")
    }

    assert markdown.returncode == 0, markdown.stderr[-2000:]
    text = markdown.stdout
    assert text.startswith(f"# Change: `topicid-mismatch` on `sandbox-{reproduced.directory.name}`")
    assert "REFUSED" not in text
    assert "keep-zk-id" in text and "restore-id" in text
    assert "(active controller, last)" in text
    assert "## What will be done, in order" in text


def test_allow_unsafe_records_the_override(reproduced: Incident, tmp_path: Path) -> None:
    config = reproduced.directory / "cluster.yaml"
    result = run_cli("plan", "-c", str(config), "--json", "--allow-unsafe")
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    # Nothing is refused here (the override itself is proved on plain data in
    # tests/plan/test_planner.py), so it changes no step; the plan still records it.
    plain = json.loads(run_cli("plan", "-c", str(config), "--json").stdout)
    assert plan["allow_unsafe"] is True and plan["refused"] is False and plan["refusals"] == []
    assert plan["steps"] == plain["steps"]


# -- docs/runbook.md, word for word (last in this module: it repairs the incident) -------------

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"


def runbook_block(section: str) -> str:
    """The first ```sh block under the runbook's heading `## {section}`, as written."""
    text = RUNBOOK.read_text(encoding="utf-8")
    heading = re.search(rf"^## {re.escape(section)}.*$", text, re.M)
    assert heading is not None, f"docs/runbook.md has no section '## {section}'"
    block = re.search(r"^```sh\n(.*?)^```$", text[heading.end() :], re.M | re.S)
    assert block is not None, f"docs/runbook.md's section {section} has no ```sh block"
    return block[1]


def run_block(block: str, directory: Path, config: Path) -> tuple[str, list[int]]:
    """The block run by bash as an on-call engineer pastes it, `$C` set and `remediate` on the
    PATH: its output, and the exit codes its `echo $?` lines printed."""
    env = {
        **os.environ,
        "C": str(config),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-c", block],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    codes = [int(line) for line in done.stdout.splitlines() if line.strip().isdigit()]
    return done.stdout, codes


def test_the_runbook_word_for_word_repairs_the_incident(
    reproduced: Incident, tmp_path: Path
) -> None:
    """Sections 2 to 4 of docs/runbook.md as written (check, plan and review, apply the
    reviewed digest, check again), the digest's placeholder replaced by the one plan.md shows."""
    config = reproduced.directory / "cluster.yaml"

    _, codes = run_block(runbook_block("2."), tmp_path, config)
    assert codes in ([1], [2]), f"check before the repair exited {codes}: the incident is there"

    _, codes = run_block(runbook_block("3."), tmp_path, config)
    assert codes in ([0], [6]), f"plan exited {codes}: 0 ready, 6 ready once accepted"
    review = (tmp_path / "plan.md").read_text(encoding="utf-8")
    digest = re.search(r"Plan digest \(sha256\): `([0-9a-f]{64})`", review)
    assert digest is not None, review[:2000]
    assert json.loads((tmp_path / "plan.json").read_text())["digest"] == digest[1]

    apply = runbook_block("4.")
    assert "<the digest in plan.md>" in apply
    output, codes = run_block(apply.replace("<the digest in plan.md>", digest[1]), tmp_path, config)
    assert codes == [0, 0], f"apply, then check, exited {codes}:\n{output[-3000:]}"
    assert output.rstrip().splitlines()[-2].startswith("OK"), output[-2000:]
