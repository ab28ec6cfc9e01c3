"""`remediate doctor` on the emulated sandbox reached over its sshds: in place, it exits 0; each
item broken on purpose (in a copy of cluster.yaml, or on the sandbox and put back), doctor
names it, where, and how to fix it, and exits as `check` would.

Slow: one sandbox with sshds for the module (about 10 s), a doctor run per case (a few
seconds: every broker over ssh).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from kazoo.security import ACL, Id, Permissions, make_digest_acl

from remediate.execute.lock import lock_path
from remediate.sandbox import admin, cluster
from remediate.sandbox.plumbing.zkserver import free_port
from tests.execute.sandbox_tools import run_cli
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"


@dataclass
class DoctorLab:
    directory: Path
    state: cluster.SandboxState
    zk: KazooClient

    @property
    def settings(self) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load((self.directory / "cluster.yaml").read_text())
        return loaded

    def variant(self, name: str, change: Callable[[dict[str, Any]], object]) -> Path:
        settings = self.settings
        change(settings)
        path = self.directory / f"cluster-{name}.yaml"
        path.write_text(yaml.safe_dump(settings, sort_keys=False))
        return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DoctorLab]:
    directory = tmp_path_factory.mktemp("doctor") / "sandbox"
    state = cluster.up(directory, ssh=True)
    zk = cluster.zk_client(state)
    try:
        admin.create_topic(zk, TOPIC, 3, 3)
        yield DoctorLab(directory, state, zk)
    finally:
        zk.stop()
        zk.close()
        cluster.down(directory)


def doctor(config: Path) -> tuple[int, dict[str, Any]]:
    done = run_cli("doctor", "-c", str(config), "--json", timeout=120)
    assert done.stdout, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["exit_code"] == done.returncode, document
    return done.returncode, document


def finding(document: dict[str, Any], item: str, where: str) -> dict[str, Any]:
    found = [f for f in document["findings"] if f["item"] == item and f["where"] == where]
    assert len(found) == 1, (item, where, document["findings"])
    one: dict[str, Any] = found[0]
    return one


def not_ok(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (f["where"], f["item"], f["status"]) for f in document["findings"] if f["status"] != "OK"
    ]


def test_in_place_everything_is_ok(lab: DoctorLab) -> None:
    code, document = doctor(lab.directory / "cluster.yaml")
    assert (code, not_ok(document)) == (0, []), document
    items = {(f["where"], f["item"]) for f in document["findings"]}
    for broker in ("broker 1", "broker 2", "broker 3"):
        for item in ("ssh", "sudo", "status command", "server.properties", "backup dir"):
            assert (broker, item) in items, (broker, item)
        assert (broker, "kafka release") in items
    for item in ("zookeeper", "zookeeper reads", "lock and journal", "restore: topic ids"):
        assert ("cluster", item) in items
    assert ("this host", "journal dir") in items
    text = run_cli("doctor", "-c", str(lab.directory / "cluster.yaml"))
    assert text.returncode == 0 and text.stdout.startswith("doctor OK:"), text.stdout


def test_zookeeper_out_of_reach(lab: DoctorLab) -> None:
    port = free_port("127.0.0.1")

    def change(s: dict[str, Any]) -> None:
        s["zookeeper"].update(connect=f"127.0.0.1:{port}", connect_timeout_s=2)

    code, document = doctor(lab.variant("no-zk", change))
    assert code == 2
    assert finding(document, "zookeeper", "cluster")["status"] == "CRITICAL"
    assert f"127.0.0.1:{port}" in finding(document, "zookeeper", "cluster")["detail"]
    assert finding(document, "zookeeper rights", "cluster")["status"] == "UNKNOWN"
    assert finding(document, "kafka listener", "cluster")["status"] == "UNKNOWN"
    # The brokers are still looked at.
    assert finding(document, "ssh", "broker 1")["status"] == "OK"


def test_rights_another_identity_holds_and_a_topic_the_restore_cannot_write(
    lab: DoctorLab,
) -> None:
    """The tool's lock znode made by someone else, under an ACL of theirs; a topic znode
    whose ACL takes away WRITE: the lock is CRITICAL (every run needs it), the topic a
    WARNING (only the restore writes it); each names the znode and how to give the right."""
    lock = lock_path(lab.settings["cluster"])
    topic = f"/brokers/topics/{TOPIC}"
    lab.zk.ensure_path(lock.rsplit("/", 1)[0])  # its parents as a first run leaves them
    lab.zk.create(lock, b"", acl=[make_digest_acl("someone", "else", all=True)])
    lab.zk.set_acls(topic, [ACL(Permissions.ALL & ~Permissions.WRITE, Id("world", "anyone"))])
    try:
        code, document = doctor(lab.directory / "cluster.yaml")
    finally:
        lab.zk.set_acls(topic, [ACL(Permissions.ALL, Id("world", "anyone"))])
        lab.zk.delete(lock)  # DELETE is the parent's right: no listing of what it cannot read
        lab.zk.delete("/remediate", recursive=True)
    assert code == 2, not_ok(document)
    locked = [f for f in document["findings"] if f["item"] == "lock and journal"]
    assert [f["status"] for f in locked] == ["CRITICAL", "OK"], locked
    assert f"lacks READ, WRITE, CREATE, DELETE on {lock}" in locked[0]["detail"]
    assert "setAcl" in locked[0]["fix"]
    restore = finding(document, "restore: topic ids", "cluster")
    assert restore["status"] == "WARNING" and f"lacks WRITE on {topic}" in restore["detail"]


def test_no_kafka_section(lab: DoctorLab) -> None:
    code, document = doctor(lab.variant("no-kafka", lambda s: s.pop("kafka")))
    assert code == 2
    listener = finding(document, "kafka listener", "cluster")
    assert listener["status"] == "CRITICAL" and "plan with steps is refused" in listener["detail"]


def test_a_kafka_listener_out_of_reach(lab: DoctorLab) -> None:
    port = free_port("127.0.0.1")

    def change(s: dict[str, Any]) -> None:
        s["kafka"] = {"bootstrap": [f"127.0.0.1:{port}"], "request_timeout_s": 2}

    code, document = doctor(lab.variant("kafka-away", change))
    assert code == 2
    listener = finding(document, "kafka listener", "cluster")
    assert listener["status"] == "CRITICAL" and f"127.0.0.1:{port}" in listener["detail"]
    assert "bootstrap" in listener["fix"]


def test_a_host_key_not_in_known_hosts(lab: DoctorLab) -> None:
    known = Path(lab.settings["ssh"]["known_hosts"])
    broker = lab.state.broker(2)
    kept = [
        line
        for line in known.read_text().splitlines()
        if not line.startswith(f"[{broker.host}]:{broker.ssh_port} ")
    ]
    partial = lab.directory / "known_hosts-partial"
    partial.write_text("\n".join(kept) + "\n")
    code, document = doctor(
        lab.variant("partial-keys", lambda s: s["ssh"].update(known_hosts=str(partial)))
    )
    assert code == 2
    ssh = finding(document, "ssh", "broker 2")
    assert ssh["status"] == "CRITICAL" and "is not in" in ssh["detail"]
    assert "known_hosts" in ssh["fix"]
    assert finding(document, "files and dirs", "broker 2")["status"] == "UNKNOWN"
    assert finding(document, "ssh", "broker 1")["status"] == "OK"


def test_files_dirs_and_the_journal_that_cannot_be_used(lab: DoctorLab) -> None:
    blocker = lab.directory / "a-file"
    blocker.write_text("not a directory\n")

    def change(s: dict[str, Any]) -> None:
        first = s["brokers"][0]
        first["server_properties"] = str(lab.directory / "no-such" / "server.properties")
        first["log_dirs"] = [*first["log_dirs"], str(lab.directory / "no-such-dir")]
        second = s["brokers"][1]
        second.pop("state_change_log"), second.pop("server_log", None)
        s["journal_dir"] = str(blocker / "journal")
        s["backup_dir"] = str(blocker / "backups")

    code, document = doctor(lab.variant("files", change))
    assert code == 2
    assert finding(document, "server.properties", "broker 1")["status"] == "CRITICAL"
    dirs = [f for f in document["findings"] if (f["where"], f["item"]) == ("broker 1", "log dir")]
    missing = [f for f in dirs if f["status"] == "CRITICAL"]
    assert len(missing) == 1 and "no-such-dir does not exist" in missing[0]["detail"]
    assert finding(document, "state-change.log", "broker 2")["status"] == "WARNING"
    journal = finding(document, "journal dir", "this host")
    assert (
        journal["status"] == "CRITICAL"
        and "a-file is not a writable directory" in (journal["detail"])
    )
    backups = finding(document, "backup dir", "broker 3")
    assert backups["status"] == "CRITICAL" and "cannot be written" in backups["detail"]
    assert "install -d" in backups["fix"]


def test_a_stopped_broker(lab: DoctorLab) -> None:
    cluster.stop_broker(lab.directory, 3)
    try:
        code, document = doctor(lab.directory / "cluster.yaml")
    finally:
        cluster.start_broker(lab.directory, 3, wait=True)
        wait_until(lambda: "3" in lab.zk.get_children("/brokers/ids"), "broker 3 to register again")
    assert code == 1, not_ok(document)
    assert not_ok(document) == [("broker 3", "status command", "WARNING")]
    assert "not running" in finding(document, "status command", "broker 3")["detail"]


@pytest.mark.parametrize("mode", [True, "services"])
def test_sudo_as_cluster_yaml_asks_for_it(lab: DoctorLab, mode: object) -> None:
    """As root here, sudo runs anything: both modes are in place. Under `services` the status
    command is the sandbox's own, one program (cluster.yaml refuses shell syntax there), and
    sudo is asked for each service command without running stop or start."""
    executable = cluster.remediate_executable()

    def change(s: dict[str, Any]) -> None:
        s["ssh"]["sudo"] = mode
        if mode == "services":
            s["service"] = {
                kind: f"{executable} sandbox broker {kind} --id {{broker_id}} --dir {lab.directory}"
                for kind in ("stop", "start", "status")
            }

    pids = {b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers}
    code, document = doctor(lab.variant(f"sudo-{mode}", change))
    assert (code, not_ok(document)) == (0, []), document
    items = {f["item"] for f in document["findings"] if f["where"] == "broker 1"}
    expected = {"sudo: stop", "sudo: start", "sudo: status"} if mode == "services" else {"sudo"}
    assert expected <= items, items
    after = {b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers}
    assert after == pids  # nothing was stopped or started
