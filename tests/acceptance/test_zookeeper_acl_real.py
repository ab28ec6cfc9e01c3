"""ZooKeeper as production runs it, on real Apache Kafka 3.6.2 (`sandbox up --zookeeper-acl`):
ZooKeeper takes SASL logins, the brokers log in as `kafka` with zookeeper.set.acl=true (what
they create is theirs, and but for `/config/brokers` and `/config/users` readable by anyone),
and the tool logs in as `remediate`, an identity of its own.

The tool is given exactly the rights docs/configuration.md lists beyond what anyone has here,
with the page's own `setAcl` lines run in ZooKeeper's shell as Kafka: READ on
`/config/brokers` (before the incident, as an operator sets it up) and WRITE on the znode of
the one topic the restore writes (once the plan names it). With
those and no more: `doctor` names the topics it could not restore (WARNING) and nothing else,
the scan and the plan read the cluster, the restore is killed once after its write and
`resume`d, and the cluster heals; what the tool created in ZooKeeper (its lock's and journal's
znodes) is its own and Kafka's, nobody else's.

Slow: the incident on real Kafka 3.6.2 (about a minute), a plan, a restore killed once and
resumed (each resume waits out the killed operator's session, 4 s here).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.security import ACL, Id, Permissions

from remediate.sandbox import cluster
from remediate.sandbox.cluster import java_executable
from remediate.sandbox.plumbing import zkserver
from remediate.sandbox.real import zk_auth
from tests.acceptance.repair_lab import TOPIC, Reproduced, reproduce_and_plan, unconverged
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import ApplyLab

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("3.6.2")]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

TOOL = Id("sasl", zk_auth.TOOL_USER)
KAFKA = Id("sasl", zk_auth.KAFKA_USER)


def docs_set_acl(path: str) -> str:
    """docs/configuration.md's setAcl line for `path`, as written."""
    for line in DOCS.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words[:2] == ["setAcl", path]:
            return " ".join(words)
    raise AssertionError(f"docs/configuration.md has no setAcl line for {path}")


def zookeeper_shell(state: cluster.SandboxState, line: str) -> None:
    """One line of ZooKeeper's own shell (ZooKeeperMain, which Kafka's zookeeper-shell.sh
    runs), logged in as Kafka with Kafka's JAAS file, as an operator adds the tool's rights."""
    classpath = [zkserver.CONF_DIR, zkserver.ZOOKEEPER_JAR, zkserver.SLF4J_SIMPLE]
    argv = [
        java_executable(),
        *zk_auth.broker_jvm_flags(state.zk_auth_files),
        "-cp",
        ":".join(str(p) for p in classpath if p.exists()),
        "org.apache.zookeeper.ZooKeeperMain",
        "-server",
        state.zk_connect,
        *shlex.split(line),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{line}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def grant_config_reads(directory: Path, state: cluster.SandboxState) -> None:
    """Before the incident, as an operator sets the tool up: the docs' line for
    /config/brokers (the sandbox's brokers have no dynamic settings: no children yet)."""
    zk = cluster.zk_client(state)
    try:
        assert zk.get_children("/config/brokers") == []
    finally:
        zk.stop()
        zk.close()
    zookeeper_shell(state, docs_set_acl("/config/brokers"))


@pytest.fixture(scope="module")
def secured_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reproduced]:
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp("zk-acl") / "sandbox",
        kafka="real-3.6.2",
        zookeeper_acl=True,
        session_timeout_s=4,
        prepare=grant_config_reads,
    )
    yield lab
    lab.close()


def test_kafka_owns_what_it_created_and_the_tool_reads_it_with_its_own_identity(
    secured_zk: Reproduced,
) -> None:
    lab = secured_zk
    auth = lab.settings["zookeeper"]["auth"]
    assert (auth["scheme"], auth["username"]) == ("sasl", zk_auth.TOOL_USER)
    assert "password" not in auth  # a file, never the secret itself
    acls, _ = lab.zk.get_acls(f"/brokers/topics/{TOPIC}")
    assert set(acls) == {ACL(Permissions.ALL, KAFKA), ACL(Permissions.READ, Id("world", "anyone"))}
    sensitive, _ = lab.zk.get_acls("/config/brokers")
    assert ACL(Permissions.READ, Id("world", "anyone")) not in sensitive
    # The plan was made with the tool's identity: the scan read every broker and topic.
    assert lab.plan["steps"] and [s["kind"] for s in lab.plan["steps"]] == ["restore"]


@pytest.mark.timeout(600)
def test_a_restore_and_its_resume_with_exactly_the_documented_rights(
    secured_zk: Reproduced,
) -> None:
    lab = secured_zk
    doctor = run_cli("doctor", "-c", str(lab.config), "--json")
    assert doctor.stdout, doctor.stderr[-3000:]
    document: dict[str, Any] = json.loads(doctor.stdout)
    problems = [(f["item"], f["status"]) for f in document["findings"] if f["status"] != "OK"]
    assert (doctor.returncode, problems) == (1, [("restore: topic ids", "WARNING")]), document
    restore = next(f for f in document["findings"] if f["item"] == "restore: topic ids")
    assert f"sasl:{zk_auth.TOOL_USER} lacks WRITE on" in restore["detail"]
    assert f"/brokers/topics/{TOPIC}" in restore["detail"]

    zookeeper_shell(lab.state, docs_set_acl(f"/brokers/topics/{TOPIC}"))
    acls, _ = lab.zk.get_acls(f"/brokers/topics/{TOPIC}")
    assert ACL(Permissions.WRITE, TOOL) in acls and ACL(Permissions.ALL, KAFKA) in acls
    ops = ApplyLab(lab.directory, lab.state, lab.zk, playbook=lab.directory / "unused.yaml")
    run = ops.killed_at_each((lab.plan_path, lab.plan), ("zk-write topic-id:done",))
    resumed = ops.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    # The tool's own znodes: its identity and Kafka's, nobody else.
    owned = [f"/remediate/journals/{lab.settings['cluster']}/{run.run_id}"]
    for path in owned:
        acls, _ = lab.zk.get_acls(path)
        assert set(acls) == {ACL(Permissions.ALL, TOOL), ACL(Permissions.ALL, KAFKA)}, acls
