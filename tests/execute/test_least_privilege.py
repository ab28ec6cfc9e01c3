"""`sudo: services` through the sandbox's sshd: the tool logs in as the account that owns the
log dirs, and sudo lets that account run the service commands and nothing else: the exact
lines `sudoers_lines` writes (and docs/configuration.md shows for its example), one per
command, no shell.

The sandbox here lives outside pytest's temporary directory (which only root may enter), so
that the account reaches its log dirs as a broker's owner does; its log dirs and the backup
dir are the account's. The brokers themselves are processes of this test, run by root, as the
service commands (under sudo) start them; what the tool touches on disk is the account's.
tests/execute/sudo_lab.py: the account and the sudoers file, created and removed.

Slow: an emulated sandbox with sshds (about 10 s) and one restart repair, halted once.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from remediate.config import ServiceKind, load_cluster_config
from remediate.sandbox import cluster
from remediate.sandbox.cluster import broker_pid
from remediate.transport import sudoers_lines
from tests.execute.sandbox_tools import run_cli
from tests.execute.sudo_lab import (
    OperatorAccount,
    Sudoers,
    docs_block,
    ensure_account,
    remove_account,
)
from tests.faults.apply_lab import ApplyLab, start_lab, stop_lab

pytestmark = pytest.mark.slow

# The account Kafka runs as, as on most production hosts: docs/configuration.md's example.
EXAMPLE = yaml.safe_load(docs_block("yaml", containing="user: kafka"))
ACCOUNT = EXAMPLE["ssh"]["user"]
SUDOERS = Path("/etc/sudoers.d/remediate-least-privilege")  # no dot: sudo skips such names
SERVICE: tuple[ServiceKind, ...] = ("stop", "start", "status")


def test_the_documented_sudoers_lines_are_the_ones_for_the_documented_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/configuration.md's `sudo: services` example, put into its full example, loads; its
    sudoers block is exactly what `sudoers_lines` gives for its service commands."""
    document = yaml.safe_load(docs_block("yaml"))
    document["ssh"].update(EXAMPLE["ssh"])
    document["service"] = EXAMPLE["service"]
    for name in ("SSH_KEY_PASSPHRASE", "ZK_PASSWORD", "KAFKA_PASSWORD"):
        monkeypatch.setenv(name, "unused")
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    config = load_cluster_config(path)
    assert config.sudo_mode(1) == "services" and config.ssh is not None
    commands = [config.service_command(k, config.broker(1)) for k in SERVICE]
    documented = [
        line
        for line in docs_block("sudoers", containing="systemctl stop").splitlines()
        if line and not line.startswith("#")
    ]
    assert config.ssh.user == ACCOUNT
    assert documented == sudoers_lines(ACCOUNT, commands)


@dataclass
class ServicesLab:
    runs: ApplyLab
    account: OperatorAccount
    sudoers: Sudoers
    backups: Path

    def pids(self) -> dict[int, int | None]:
        return {
            b.broker_id: broker_pid(self.runs.directory, b.broker_id)
            for b in self.runs.state.brokers
        }

    def service_lines(self, broker: int, *kinds: ServiceKind) -> list[str]:
        config = load_cluster_config(self.runs.config)
        commands = [config.service_command(k, config.broker(broker)) for k in kinds]
        return sudoers_lines(self.account.name, commands)


def give_tree(root: Path, uid: int, gid: int) -> None:
    """`root` and everything under it owned by uid:gid (a running broker adds and removes
    files meanwhile: one gone before it is reached is skipped)."""
    os.lchown(root, uid, gid)
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            try:
                os.lchown(Path(parent) / name, uid, gid)
            except FileNotFoundError:
                continue


@pytest.fixture(scope="module")
def lab() -> Iterator[ServicesLab]:
    account = ensure_account(ACCOUNT)
    base = Path(tempfile.mkdtemp(prefix="remediate-least-privilege-"))
    base.chmod(0o755)  # the account may pass through, as through /var/lib
    sudoers = Sudoers("", path=SUDOERS)
    try:
        runs = start_lab(base / "sandbox", ssh=True)
        try:
            gid = pwd.getpwnam(account.name).pw_gid
            for broker in runs.state.brokers:
                for log_dir in broker.log_dirs:
                    give_tree(Path(log_dir), account.uid, gid)
            backups = runs.backup_dir
            backups.mkdir(mode=0o700)
            os.chown(backups, account.uid, gid)
            settings = runs.settings
            settings["ssh"].update(user=account.name, sudo="services")
            # The sandbox's own service commands, each one program with its arguments.
            executable = cluster.remediate_executable()
            settings["service"] = {
                kind: f"{executable} sandbox broker {kind} --id {{broker_id}}"
                f" --dir {runs.directory}"
                for kind in SERVICE
            }
            runs.config.write_text(yaml.safe_dump(settings, sort_keys=False))
            config = load_cluster_config(runs.config)
            commands = [config.service_command(k, b) for b in config.brokers for k in SERVICE]
            sudoers.text = "\n".join(sudoers_lines(account.name, commands)) + "\n"
            yield ServicesLab(runs, account, sudoers, backups)
        finally:
            sudoers.revoke()
            stop_lab(runs)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        remove_account(account)


def test_doctor_names_each_missing_sudoers_line_and_is_ok_with_them(lab: ServicesLab) -> None:
    """Without the lines: CRITICAL, each service command of each broker named with its line
    (asked with `sudo -n -l`, nothing stopped or started); with them, every item in place."""
    pids = lab.pids()
    lab.sudoers.revoke()
    refused = run_cli("doctor", "-c", str(lab.runs.config), "--json")
    document = json.loads(refused.stdout)
    assert refused.returncode == 2, document
    sudo = {
        (f["where"], f["item"]): f for f in document["findings"] if f["item"].startswith("sudo")
    }
    assert len(sudo) == 9 and all(f["status"] == "CRITICAL" for f in sudo.values()), sudo
    (line,) = lab.service_lines(2, "start")
    assert line in sudo[("broker 2", "sudo: start")]["fix"]
    lab.sudoers.grant()
    try:
        done = run_cli("doctor", "-c", str(lab.runs.config), "--json")
    finally:
        lab.sudoers.revoke()
    document = json.loads(done.stdout)
    problems = [f for f in document["findings"] if f["status"] != "OK"]
    assert (done.returncode, problems) == (0, []), document
    assert lab.pids() == pids


@pytest.mark.fault(
    "Security",
    "`sudo: services` (the ssh user owns the log dirs; sudo for the service commands only)"
    " without the sudoers lines when a run reaches its first stop",
    "the run halts at the stop command (exit 5), the broker untouched and no file changed, the"
    " error naming the broker, the command and the exact line to add; `resume` with the lines"
    " stops, backs up, deletes and starts the broker, everything it wrote the account's",
)
def test_a_restart_repair_as_the_log_dirs_owner_with_sudo_for_the_service_commands_only(
    lab: ServicesLab,
) -> None:
    """Planned; applied without the sudoers lines: halted at the first service command with
    nothing changed, the error naming the exact line to add; resumed with the lines: stopped,
    backed up, deleted, started, healed. Everything the run wrote on the broker is the
    account's, and nothing ran as root but the service commands (sudo allows nothing else)."""
    runs = lab.runs
    runs.wait_healthy()
    target = next(b for b in (1, 2, 3) if b != runs.controller())
    runs.plant([target])
    plan = runs.plan([target])
    (step,) = plan[1]["steps"]
    assert step["broker"] == target and step["files"], step
    planted = runs.snapshot_files(plan[1])
    pids = lab.pids()

    lab.sudoers.revoke()
    halted = runs.finish(runs.start_apply(plan))
    assert halted.exit_code == 5, halted.stdout[-2000:] + halted.stderr[-3000:]
    (failed,) = halted.events("step-failed")
    assert failed["step"].endswith(":stop"), failed
    (line,) = lab.service_lines(target, "stop")
    assert f"broker {target} (" in failed["error"] and line in failed["error"], failed["error"]
    assert lab.pids() == pids and runs.snapshot_files(plan[1]) == planted
    assert list(lab.backups.iterdir()) == []

    lab.sudoers.grant()  # visudo checks the lines first
    try:
        done = runs.resume(halted.run_id)
        assert done.exit_code == 0, done.stdout[-2000:] + done.stderr[-3000:]
        checked = run_cli("check", "-c", str(runs.config))
        assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    finally:
        lab.sudoers.revoke()
    finished = done.finished_steps()
    for action in ("stop", "backup", "delete", "start"):
        assert any(s.endswith(f":{action}") for s in finished), (action, finished)
    assert lab.pids()[target] != pids[target]
    runs.wait_healthy(timeout=90)
    assert sorted(runs.backed_up(done.run_id)) == sorted(step["files"])
    runs.assert_nothing_deleted_without_backup(plan[1], done.run_id, planted)
    written = list(lab.backups.rglob("*"))
    assert written and {p.stat().st_uid for p in written} == {lab.account.uid}
    modes = {str(p): (p.is_dir(), stat.S_IMODE(p.stat().st_mode)) for p in written}
    assert {mode for is_dir, mode in modes.values() if is_dir} == {0o700}, modes
    assert {mode for is_dir, mode in modes.values() if not is_dir} == {0o600}, modes
