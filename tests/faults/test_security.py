"""Hostile paths and secrets on a sandbox reached over SSH (3.4 emulation, real ZooKeeper).

One sandbox for the module, every broker behind its own sshd, the client key encrypted with a
passphrase and a ZooKeeper digest password configured, both read from the environment as
cluster.yaml says. Each broker's log dirs live under a path that is a shell command if it is
ever interpolated without quoting (the broker itself reaches them through a symlink, so only
the operator ever handles the hostile spelling): a scan and a whole repair go through it.
Host keys, backup modes and rollback archives have their own tests (tests/collect,
tests/execute); the digest ACLs on the lock have theirs in test_apply_faults.py.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from remediate.sandbox import cluster
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import TOPIC, ApplyLab, start_lab, stop_lab

pytestmark = pytest.mark.slow

AREA = "Security"
PASSPHRASE_ENV = "REMEDIATE_TEST_SSH_PASSPHRASE"
ZK_PASSWORD_ENV = "REMEDIATE_TEST_ZK_PASSWORD"
PASSPHRASE = f"ssh-Passphrase-Sentinel-{uuid.uuid4().hex[:8]}"
ZK_PASSWORD = f"zk-Password-Sentinel-{uuid.uuid4().hex[:8]}"

# Every marker a planted command would create starts with this; absolute ones go to /tmp.
MARK = f"pwned-{uuid.uuid4().hex}"
# A path (several directories: it holds '/') that runs a command in sh however it is
# interpolated unquoted: bare (`;`, `$(...)`, backticks), in double quotes (`$(...)`,
# backticks) or in naive single quotes (the quoted `$(...)` then stands outside them).
HOSTILE_ROOT = (
    f"a $(touch /tmp/{MARK}-dollar) b`touch /tmp/{MARK}-backtick`;touch /tmp/{MARK}-semicolon;"
    f"c '$(touch /tmp/{MARK}-quote)' d"
)
# Directory names cannot hold '/': these markers land in the shell's working directory.
HOSTILE_NAMES = [
    f"$(touch {MARK}-name)-0",
    f"`touch {MARK}-name`-1",
    f"x;touch {MARK}-name;-0",
    f"'$(touch {MARK}-name)'-0",
]


class SecureLab(ApplyLab):
    """The apply lab with encrypted ssh keys, ZooKeeper auth and hostile log dir paths."""

    hostile: Path

    def log_dirs(self, broker: int) -> list[Path]:
        """The broker's log dirs as cluster.yaml names them (the hostile spelling)."""
        return [self.hostile / f"broker-{broker}" / f"data-{n}" for n in range(2)]


def markers(lab: SecureLab) -> list[Path]:
    """Every marker file a planted command created, wherever its shell was."""
    places = {Path("/tmp"), Path("/"), Path.home(), Path.cwd(), lab.directory, lab.hostile}
    places |= {d for b in (1, 2, 3) for d in lab.log_dirs(b)}
    return sorted(p for place in places if place.is_dir() for p in place.glob(f"{MARK}*"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureLab]:
    root = tmp_path_factory.mktemp("security")
    directory = root / "sandbox"
    hostile = Path(f"{root}/{HOSTILE_ROOT}")
    # `sandbox up --ssh` keeps a client key that is already there: this one is encrypted.
    ssh_dir = directory / "ssh"
    ssh_dir.mkdir(parents=True, mode=0o700)
    subprocess.run(
        [
            *("ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE),
            *("-C", "remediate-test", "-f", str(ssh_dir / "id_ed25519")),
        ],
        check=True,
        capture_output=True,
    )
    for broker in (1, 2, 3):
        (directory / f"broker-{broker}").mkdir(parents=True)
        for n in range(2):
            real = hostile / f"broker-{broker}" / f"data-{n}"
            real.mkdir(parents=True)
            (directory / f"broker-{broker}" / f"data-{n}").symlink_to(real)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(PASSPHRASE_ENV, PASSPHRASE)
        env.setenv(ZK_PASSWORD_ENV, ZK_PASSWORD)
        try:
            started = start_lab(directory, ssh=True)
        except BaseException:
            if (directory / cluster.STATE_FILE).exists():
                cluster.down(directory)
            raise
        lab = SecureLab(started.directory, started.state, started.zk, started.playbook)
        lab.hostile = hostile
        try:
            settings = lab.settings
            settings["ssh"]["key_passphrase_env"] = PASSPHRASE_ENV
            settings["zookeeper"]["auth"] = {
                "scheme": "digest",
                "username": "remediate",
                "password_env": ZK_PASSWORD_ENV,
            }
            for entry in settings["brokers"]:
                entry["log_dirs"] = [str(d) for d in lab.log_dirs(entry["id"])]
            settings["backup_dir"] = str(hostile / "backups")
            lab.config.write_text(yaml.safe_dump(settings, sort_keys=False))
            yield lab
        finally:
            stop_lab(lab)


def other_broker(lab: SecureLab) -> int:
    controller = lab.controller()
    return next(b for b in (1, 2, 3) if b != controller)


@pytest.mark.fault(
    AREA,
    "Shell syntax on a broker reached over SSH: `$(touch /tmp/pwned-…)`, backticks and `;` in"
    " the log dir path the repair works in, and in directory names beside the partitions",
    "scan reports the odd directories as they are and a repair of that broker (inventory,"
    " stop, backup, delete, start, verify) completes; no planted command ever runs (no marker"
    " file appears)",
)
def test_shell_syntax_in_paths_never_runs_during_scan_or_repair(lab: SecureLab) -> None:
    lab.wait_healthy()
    target = other_broker(lab)
    for name in HOSTILE_NAMES:
        (lab.log_dirs(target)[0] / name).mkdir()
    lab.plant([target])

    scanned = run_cli("scan", "-c", str(lab.config), "--json")
    assert scanned.returncode == 1, scanned.stderr[-3000:]
    findings = json.loads(scanned.stdout)["findings"]
    orphans = {f["dir"] for f in findings if f["kind"] == "ORPHAN_DIR" and f["broker"] == target}
    assert orphans == set(HOSTILE_NAMES)
    mismatched = [f for f in findings if f["kind"] == "TOPIC_ID_MISMATCH"]
    assert {(f["broker"], f["topic"]) for f in mismatched} == {(target, TOPIC)}
    assert {f["log_dir"] for f in mismatched} <= {str(d) for d in lab.log_dirs(target)}

    plan_path, plan = lab.plan([target])
    (step,) = plan["steps"]
    assert step["files"] and all(f.startswith(str(lab.hostile)) for f in step["files"])
    planted = lab.snapshot_files(plan)
    run = lab.finish(lab.start_apply((plan_path, plan)))
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert sorted(lab.backed_up(run.run_id)) == sorted(step["files"])
    lab.assert_nothing_deleted_without_backup(plan, run.run_id, planted)
    lab.wait_healthy()
    assert all((lab.log_dirs(target)[0] / name).is_dir() for name in HOSTILE_NAMES)
    assert markers(lab) == [], "a path was run as a command"
    lab.plans.clear()


@pytest.mark.fault(
    AREA,
    "Secrets in cluster.yaml (read from the environment): the passphrase of an encrypted SSH"
    " key and the ZooKeeper digest password, through scan, plan, apply, status and report"
    " over SSH",
    "Used, never shown: neither appears in any command's stdout or stderr (--log-json"
    " included), the journal, the run log, the report, the plan, the scan's output or the"
    " backups; a wrong passphrase is an unreachable broker whose error does not echo it",
)
def test_secrets_are_used_and_never_written(lab: SecureLab, tmp_path: Path) -> None:
    lab.wait_healthy()
    encrypted = subprocess.run(
        ["ssh-keygen", "-y", "-P", "", "-f", str(lab.directory / "ssh" / "id_ed25519")],
        capture_output=True,
        check=False,
    )
    assert encrypted.returncode != 0, "the client key is not encrypted"
    target = other_broker(lab)
    lab.plant([target])
    outputs: list[str] = []

    def remediate(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = run_cli(*args)
        outputs.extend([done.stdout, done.stderr])
        assert done.returncode == code, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    scan_dir = tmp_path / "scan"
    remediate("scan", "-c", str(lab.config), "--json", "--out", str(scan_dir), code=1)
    plan_path = tmp_path / "plan.json"
    remediate(
        *("plan", "-c", str(lab.config), "--playbook", str(lab.playbook), "-o", str(plan_path))
    )
    digest = json.loads(plan_path.read_text())["digest"]
    applied = remediate(
        *("apply", "-c", str(lab.config), "--plan", str(plan_path), "--approve", digest),
        *("--json", "--log-json"),
    )
    run_id = json.loads(applied.stdout)["run_id"]
    remediate("status", "-c", str(lab.config), "--run", run_id, "--json")
    remediate("report", "-c", str(lab.config), "--run", run_id, "--format", "markdown")
    lab.wait_healthy()

    wrong = f"wrong-{PASSPHRASE}-wrong"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(PASSPHRASE_ENV, wrong)
        refused = remediate("check", "-c", str(lab.config), "--json", code=3)
    findings = json.loads(refused.stdout)["findings"]
    assert {f["kind"] for f in findings} == {"BROKER_UNREACHABLE"}
    assert wrong not in refused.stdout + refused.stderr

    journal = lab.journal_dir / run_id
    assert (journal / "journal.jsonl").is_file() and (journal / "log.jsonl").is_file()
    written = [
        p
        for where in (journal, lab.hostile / "backups" / run_id, tmp_path)
        for p in where.rglob("*")
        if p.is_file()
    ]
    assert {"report.html", "journal.jsonl", "log.jsonl"} <= {p.name for p in written}
    assert any(p.name.endswith(".tar.gz") for p in written)
    assert {"findings.jsonl", "summary.json", "plan.json"} <= {p.name for p in written}
    for secret in (PASSPHRASE, ZK_PASSWORD):
        assert [o for o in outputs if secret in o] == [], f"{secret} in a command's output"
        assert [p for p in written if _holds(p, secret)] == [], f"{secret} in a written file"
    lab.plans.clear()


def _holds(path: Path, secret: str) -> bool:
    """The file holds the secret (a backup archive is looked at inside its compression)."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data += gzip.decompress(data)
    return secret.encode() in data
