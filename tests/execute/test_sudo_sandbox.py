"""`sudo: true` on real Apache Kafka 2.8.2, through the real sshd, as an unprivileged account.

The operator account (`remediate`, the ssh user of docs/configuration.md's example) logs in
with the sandbox's key; the sandbox (brokers, their log dirs, the backups) belongs to root, in
directories the account cannot even enter. Every command the tool runs on a broker must
therefore go through sudo, and sudo runs it only while the sudoers rule docs/configuration.md
gives is in place (tests/execute/sudo_lab.py: what these tests change on the machine).

Slow: one real-Kafka sandbox for the module (about 20 s), two real broker restarts (the
repair's, the example's `systemctl`), one scan per refusal case and two for the repair.
"""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from remediate.collect.collector import collect_brokers, transports
from remediate.config import ServiceKind, load_cluster_config
from remediate.errors import SudoError
from remediate.execute.backup import backup_files
from remediate.formats.logdir import PARTITION_METADATA
from remediate.playbook import Timeouts
from remediate.ports import SERVICE_COMMANDS, CommandKind, CommandResult
from remediate.sandbox import admin, cluster
from remediate.sandbox.cluster import BrokerInfo, broker_dir, broker_pid
from remediate.sandbox.plumbing import sshd
from remediate.sandbox.reproduce import replica_file_ids
from remediate.transport import sudo_rule
from tests.execute.sandbox_tools import run_cli
from tests.execute.sudo_lab import (
    Mountpoints,
    OperatorAccount,
    Sudoers,
    docs_block,
    ensure_account,
    namespaced,
    owned_by,
    remove_account,
    systemctl_shim,
)
from tests.faults.apply_lab import PARTITIONS, TOPIC, ApplyLab
from tests.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("2.8.2")]

KAFKA = "real-2.8.2"


@pytest.fixture(scope="session")
def operator() -> Iterator[OperatorAccount]:
    """The example's ssh user, created when missing (and then removed at the end)."""
    name = yaml.safe_load(docs_block("yaml"))["ssh"]["user"]
    account = ensure_account(name)
    yield account
    remove_account(account)


@pytest.fixture(scope="session")
def sudoers(operator: OperatorAccount) -> Iterator[Sudoers]:
    """docs/configuration.md's sudoers rule, for the tests to grant and revoke."""
    text = docs_block("sudoers", containing="/bin/sh")
    assert sudo_rule(operator.name) in text.splitlines(), text
    rule = Sudoers(text)
    rule.revoke()
    yield rule
    rule.revoke()


@dataclass
class SudoLab:
    """The sandbox, its cluster.yaml logging in as the operator with `sudo: true`."""

    directory: Path
    state: cluster.SandboxState
    zk: KazooClient
    operator: OperatorAccount
    sudoers: Sudoers
    service: dict[str, str]  # the sandbox's own service commands, {broker_id} unfilled

    @property
    def config(self) -> Path:
        return self.directory / "cluster.yaml"

    @property
    def runs(self) -> ApplyLab:
        return ApplyLab(self.directory, self.state, self.zk, self.directory / "unused.yaml")

    def pids(self) -> dict[int, int | None]:
        return {b.broker_id: broker_pid(self.directory, b.broker_id) for b in self.state.brokers}


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, operator: OperatorAccount, sudoers: Sudoers
) -> Iterator[SudoLab]:
    directory = tmp_path_factory.mktemp("sudo") / "sandbox"
    state = cluster.up(directory, kafka=KAFKA, ssh=True, log_dirs_per_broker=1)
    zk = cluster.zk_client(state)
    try:
        settings: dict[str, Any] = yaml.safe_load((directory / "cluster.yaml").read_text())
        settings["ssh"].update(user=operator.name, sudo=True)
        (directory / "cluster.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        admin.create_topic(zk, TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
        replicas = {(b, p) for b in (1, 2, 3) for p in range(PARTITIONS)}
        wait_until(
            lambda: set(replica_file_ids(state, TOPIC)) >= replicas,
            "every replica to create its log",
            timeout=60,
        )
        # Kafka 2.8 writes partition.metadata only at a LeaderAndIsr that finds the log there
        # (docs/sandbox.md; remediate/sandbox/reproduce.py): a controller move sends one.
        admin.failover_controller(zk)
        wait_until(
            lambda: all(replica_file_ids(state, TOPIC).get(r) for r in replicas),
            "every replica to write partition.metadata",
            timeout=60,
        )
        yield SudoLab(directory, state, zk, operator, sudoers, dict(settings["service"]))
    finally:
        zk.stop()
        zk.close()
        cluster.down(directory)


# -- sudo refuses ------------------------------------------------------------------------------

# What the sudoers file says (None: nothing for the account), and what the error must ask for.
REFUSING = {
    "no-rule": (None, "{rule}"),
    "rule-with-password": ("{user} ALL=(root) /bin/sh\n", "{rule}"),
    "requiretty": (
        "Defaults:{user} requiretty\n{user} ALL=(root) NOPASSWD: /bin/sh\n",
        "Defaults:{user} !requiretty",
    ),
}


@pytest.mark.fault(
    "Security",
    "`sudo: true` on a broker whose sudo will not run the tool's commands: no rule for the"
    " account, a rule that asks for a password, `requiretty`",
    "check reports the broker UNKNOWN (exit 3), as scan does; the error names the broker, the"
    " command sudo did not run and the sudoers line to add; a status command sudo refused is"
    " an error, never read as a stopped broker",
)
@pytest.mark.parametrize("case", sorted(REFUSING))
def test_a_command_sudo_will_not_run_is_named_with_the_rule_to_add(lab: SudoLab, case: str) -> None:
    """`check` reports every broker UNKNOWN, each error naming the broker, the command sudo
    did not run (the first one: the read of server.properties) and what to add to sudoers;
    a status command sudo refuses is an error too, never an answer that the broker is down."""
    text, fix = REFUSING[case]
    user = lab.operator.name
    if text is None:
        lab.sudoers.revoke()
    else:
        lab.sudoers.grant(text.format(user=user))
    try:
        checked = run_cli("check", "-c", str(lab.config), "--json")
        assert checked.returncode == 3, checked.stdout[-2000:] + checked.stderr[-2000:]
        report = json.loads(checked.stdout)
        assert report["status"] == "UNKNOWN"
        details = {
            f["broker"]: f["detail"]
            for f in report["findings"]
            if f["kind"] == "BROKER_UNREACHABLE"
        }
        assert sorted(details) == [1, 2, 3], report["findings"]
        wanted = fix.format(user=user, rule=sudo_rule(user))
        for broker, detail in details.items():
            host = lab.state.broker(broker).host
            assert detail.startswith(f"broker {broker} ({user}@{host}:"), detail
            assert f"sudo did not run the {CommandKind.SERVER_PROPERTIES}" in detail, detail
            assert wanted in detail, detail

        config = load_cluster_config(lab.config)
        transport = transports(config)(2)
        try:
            with pytest.raises(SudoError, match=f"did not run the {CommandKind.STATUS}"):
                transport.run(
                    config.service_command("status", config.broker(2)),
                    timeout=60,
                    kind=CommandKind.STATUS,
                )
        finally:
            transport.close()
    finally:
        lab.sudoers.revoke()
    assert all(pid is not None for pid in lab.pids().values())


# -- the repair --------------------------------------------------------------------------------


@pytest.mark.fault(
    "Faults during apply",
    "The sudoers rule of the account the tool logs in as (`sudo: true`) missing when a run"
    " starts, or revoked before a broker is stopped",
    "apply is refused before anything changes (exit 4); a run halts at the stop command sudo"
    " refused (exit 5) with the broker still running and no file touched, the error naming the"
    " broker, the command and the line to add; `resume` with the rule stops, backs up, deletes"
    " and starts the broker, everything it wrote root's",
)
def test_a_repair_as_an_unprivileged_account_runs_every_broker_command_under_sudo(
    lab: SudoLab,
) -> None:
    """Planned with the rule; applied without it: refused before anything changes; applied
    with it and the rule revoked right before the stop: halted there, the broker untouched;
    resumed with the rule: stopped, backed up, deleted, started and healed. What the run
    wrote is root's (backups 0600 in 0700 directories), and nothing anywhere is the
    account's."""
    runs = lab.runs
    runs.wait_healthy()
    target = next(b for b in (1, 2, 3) if b != runs.controller())
    lab.sudoers.grant()
    runs.plant([target])
    plan_path = lab.directory / "plan.json"
    planned = run_cli("plan", "-c", str(lab.config), "-o", str(plan_path))
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-3000:]
    plan = json.loads(plan_path.read_text())
    (step,) = plan["steps"]
    assert step["broker"] == target and step["files"], step
    planted = runs.snapshot_files(plan)
    backups = Path(runs.settings["backup_dir"])
    pids = lab.pids()

    # Without the rule: refused at the re-read of the files, nothing changed, no run begun.
    lab.sudoers.revoke()
    refused = run_cli(
        *("apply", "-c", str(lab.config), "--plan", str(plan_path), "--approve", plan["digest"])
    )
    assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-3000:]
    assert f"sudo did not run the {CommandKind.SERVER_PROPERTIES}" in refused.stderr
    assert sudo_rule(lab.operator.name) in refused.stderr
    assert not runs.journal_dir.exists() and not backups.exists()
    assert lab.pids() == pids and runs.snapshot_files(plan) == planted

    # With it, but gone again by the time the broker is stopped: the stop command is refused.
    lab.sudoers.grant()
    pause = runs.pause("stop")
    process = runs.start_apply((plan_path, plan), failpoints=f"stop:started={pause.action}")
    pause.wait(process)
    lab.sudoers.revoke()
    pause.release()
    halted = runs.finish(process)
    assert halted.exit_code == 5, halted.stdout[-2000:] + halted.stderr[-3000:]
    (failed,) = halted.events("step-failed")
    assert failed["step"].endswith(":stop"), failed
    assert f"broker {target} (" in failed["error"]
    assert f"sudo did not run the {CommandKind.STOP}" in failed["error"]
    assert sudo_rule(lab.operator.name) in failed["error"]
    assert lab.pids() == pids and runs.snapshot_files(plan) == planted
    assert not backups.exists()

    lab.sudoers.grant()
    try:
        done = runs.resume(halted.run_id)
        assert done.exit_code == 0, done.stdout[-2000:] + done.stderr[-3000:]
        checked = run_cli("check", "-c", str(lab.config))
        assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    finally:
        lab.sudoers.revoke()
    finished = done.finished_steps()
    for action in ("stop", "backup", "delete", "start", "verify topic-ids"):
        assert any(s.endswith(f":{action}") for s in finished), (action, finished)
    assert lab.pids()[target] != pids[target]
    # Kafka 2.8 writes the deleted files again only at the broker's next LeaderAndIsr (the
    # run's verify names them `without_file_yet`, and `check` is OK meanwhile): a controller
    # move sends one, and every replica then holds ZooKeeper's id.
    admin.failover_controller(lab.zk)
    runs.wait_healthy(timeout=120)
    assert sorted(runs.backed_up(done.run_id)) == sorted(step["files"])
    runs.assert_nothing_deleted_without_backup(plan, done.run_id, planted)

    written = [backups, *backups.rglob("*")]
    assert {p.stat().st_uid for p in written} == {0}
    modes = {str(p): (p.is_dir(), stat.S_IMODE(p.stat().st_mode)) for p in written}
    assert {mode for is_dir, mode in modes.values() if is_dir} == {0o700}, modes
    assert {mode for is_dir, mode in modes.values() if not is_dir} == {0o600}, modes
    assert owned_by(lab.directory, lab.operator.uid) == []


# -- docs/configuration.md's example -------------------------------------------------------------

# Where the example's brokers keep their files, as docs/configuration.md writes them.
DATA, ETC, LOGS = Path("/var/lib/kafka/data"), Path("/etc/kafka"), Path("/var/log/kafka")
BACKUPS, LOCAL_SBIN = Path("/var/backups"), Path("/usr/local/sbin")
PASSPHRASE = "example-key-passphrase"


@dataclass
class ExampleHosts:
    """The example's brokers (ids 1 and 2), each a sshd of its own in a mount namespace that
    holds the sandbox broker's files at the example's paths (tests/execute/sudo_lab.py)."""

    directory: Path
    brokers: dict[int, BrokerInfo]
    backups: dict[int, Path]  # what each host sees as /var/backups


@pytest.fixture
def example_hosts(lab: SudoLab, tmp_path: Path) -> Iterator[ExampleHosts]:
    directory = tmp_path / "example"
    ssh_dir = directory / "ssh"
    ssh_dir.mkdir(parents=True, mode=0o700)
    # The example's key is encrypted (key_passphrase_env): `up` keeps a key already there.
    subprocess.run(
        [
            *("ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE),
            *("-C", "remediate-example", "-f", str(ssh_dir / "id_ed25519")),
        ],
        check=True,
        capture_output=True,
    )
    brokers: dict[int, BrokerInfo] = {}
    backups: dict[int, Path] = {}
    mounts: dict[int, list[tuple[Path, Path]]] = {}
    for broker in (1, 2):
        info = lab.state.broker(broker)
        brokers[broker] = BrokerInfo(broker, info.host, info.port, info.log_dirs)
        backups[broker] = directory / f"var-backups-{broker}"
        backups[broker].mkdir(mode=0o755)
        root = broker_dir(lab.directory, broker)
        shim = systemctl_shim(directory / f"sbin-{broker}", lab.service, broker)
        mounts[broker] = [
            (Path(info.log_dirs[0]), DATA),
            (root, ETC),
            (root / "logs", LOGS),
            (backups[broker], BACKUPS),
            (shim, LOCAL_SBIN),
        ]
    mountpoints = Mountpoints()
    try:
        for target in (DATA, ETC, LOGS, BACKUPS, LOCAL_SBIN):
            mountpoints.ensure(target)
        sshd.up(directory, list(brokers.values()), launcher=namespaced(mounts))
        try:
            yield ExampleHosts(directory, brokers, backups)
        finally:
            sshd.down(directory, list(brokers.values()))
    finally:
        mountpoints.remove()


def test_the_configuration_example_works_as_written(
    lab: SudoLab, example_hosts: ExampleHosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/configuration.md's cluster.yaml, loaded from the page, with only what cannot be
    the same here changed: the brokers' `host`s (kafka1/kafka2.example.com: the sandbox's
    127.0.0.11 and .12), the ssh ports (ssh.port 22 and broker 2's ssh_port 2222: each
    example host's sshd), ssh.key_file (a key of the test's, encrypted, its passphrase in
    SSH_KEY_PASSPHRASE as the example says) and ssh.known_hosts (those sshds' keys).
    ZooKeeper's connect string, its auth and TLS, and the kafka section stay as written: no
    command here reaches ZooKeeper or Kafka's listener (ZK_PASSWORD and KAFKA_PASSWORD are
    set to placeholders, since loading the file reads them). With the page's sudoers rule for
    its ssh user, over ssh as that user: its service commands (`systemctl is-active`, `stop`
    and `start kafka`, under sudo), the inventory of its log_dirs and of its
    server_properties' log.dirs with its state_change_log, and a backup into its backup_dir,
    every command through sudo as the tool runs them."""
    hosts = example_hosts
    document: dict[str, Any] = yaml.safe_load(docs_block("yaml"))
    assert document["ssh"]["user"] == lab.operator.name and document["ssh"]["sudo"] is True
    assert document["service"] == {
        "stop": "systemctl stop kafka",
        "start": "systemctl start kafka",
        "status": "systemctl is-active kafka",
    }
    assert document["backup_dir"] == f"{BACKUPS}/remediate"
    first, second = document["brokers"]
    assert first["log_dirs"] == [str(DATA)]
    assert second["server_properties"] == f"{ETC}/server.properties"
    assert second["state_change_log"] == f"{LOGS}/state-change.log"
    first["host"], second["host"] = hosts.brokers[1].host, hosts.brokers[2].host
    document["ssh"]["port"] = hosts.brokers[1].ssh_port
    second["ssh_port"] = hosts.brokers[2].ssh_port
    document["ssh"]["key_file"] = str(hosts.directory / "ssh" / "id_ed25519")
    document["ssh"]["known_hosts"] = str(hosts.directory / "ssh" / "known_hosts")
    monkeypatch.setenv(document["ssh"]["key_passphrase_env"], PASSPHRASE)
    monkeypatch.setenv(document["zookeeper"]["auth"]["password_env"], "unused")
    monkeypatch.setenv(document["kafka"]["sasl"]["password_env"], "unused")
    path = hosts.directory / "cluster.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    config = load_cluster_config(path)
    transport_for = transports(config)

    def run(broker: int, kind: CommandKind, command: str) -> CommandResult:
        transport = transport_for(broker)
        try:
            return transport.run(command, timeout=Timeouts().service_command_timeout_s, kind=kind)
        finally:
            transport.close()

    def service(broker: int, verb: ServiceKind) -> CommandResult:
        return run(
            broker, SERVICE_COMMANDS[verb], config.service_command(verb, config.broker(broker))
        )

    def registered() -> set[int]:
        return {int(b) for b in lab.zk.get_children("/brokers/ids")}

    lab.runs.wait_healthy(timeout=120)
    before = set(BACKUPS.iterdir())
    lab.sudoers.grant()
    try:
        for broker in (1, 2):
            assert (service(broker, "status").exit_code, service(broker, "status").stdout) == (
                0,
                "active\n",
            )
        reports = {r.broker_id: r for r in collect_brokers(config, transport_for=transport_for)}
        assert all(r.reachable for r in reports.values()), reports
        log_dirs = {
            b: {row["log_dir"]: row["state"] for row in r.log_dirs} for b, r in reports.items()
        }
        assert log_dirs == {
            1: {str(DATA): "present"},
            2: {lab.state.broker(2).log_dirs[0]: "present"},  # server.properties' log.dirs
        }
        for broker, report in reports.items():
            topics = {(r.topic, r.partition) for r in report.replicas if r.topic == TOPIC}
            assert topics == {(TOPIC, p) for p in range(PARTITIONS)}, (broker, report.replicas)
        assert reports[2].state_change_log == "read"

        # The broker is stopped as a run stops it, its files backed up, and started again.
        pid = broker_pid(lab.directory, 2)
        assert service(2, "stop").ok
        wait_until(lambda: 2 not in registered(), "broker 2 to leave ZooKeeper", timeout=60)
        assert broker_pid(lab.directory, 2) is None
        assert (service(2, "status").exit_code, service(2, "status").stdout) == (3, "inactive\n")
        files = sorted(
            f"{lab.state.broker(2).log_dirs[0]}/{TOPIC}-{p}/{PARTITION_METADATA}"
            for p in range(PARTITIONS)
        )
        transport = transport_for(2)
        try:
            backup = backup_files(
                transport, files, backup_dir=f"{config.backup_dir}/example", label="broker2"
            )
        finally:
            transport.close()
        assert [e.path for e in backup.entries] == files
        assert backup.archive == f"{config.backup_dir}/example/broker2/broker2.tar.gz"
        archive = hosts.backups[2] / "remediate" / "example" / "broker2" / "broker2.tar.gz"
        assert archive.stat().st_uid == 0 and stat.S_IMODE(archive.stat().st_mode) == 0o600
        assert service(2, "start").ok
        wait_until(lambda: 2 in registered(), "broker 2 to register again", timeout=180)
        assert broker_pid(lab.directory, 2) not in (None, pid)
        assert service(2, "status").exit_code == 0
    finally:
        lab.sudoers.revoke()
    # Each example host's /var/backups was its own: this machine's is as it was.
    assert set(BACKUPS.iterdir()) == before
    assert not (hosts.backups[1] / "remediate").exists()
    assert owned_by(hosts.backups[2], lab.operator.uid) == []
    lab.runs.wait_healthy(timeout=120)
