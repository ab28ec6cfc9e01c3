"""What the tests of `sudo: true` change on this machine, and undo: an unprivileged operator
account, the sudoers rule of docs/configuration.md, and broker hosts laid out as production
hosts are (sshds in private mount namespaces).

- The account is the ssh user of docs/configuration.md's example (`remediate`): a system
  account with no password (it logs in with the sandbox's key only), `/` as its home and
  /bin/sh as its shell. It is created when missing and removed afterwards only if it was
  created here.
- The sudoers rule is the one docs/configuration.md gives, for that account, written to
  /etc/sudoers.d/remediate-tests (checked by `visudo -c` first) while a test grants it,
  removed when it revokes it and at the end.
- An example host is a sshd of its own in a private mount namespace (`unshare --mount`), in
  which a sandbox broker's directories are bind-mounted where a production host keeps them
  (/var/lib/kafka/data, /etc/kafka, /var/log/kafka), /var/backups is a directory of the test's,
  and /usr/local/sbin (first on sudo's secure_path on Debian) holds a `systemctl` that maps
  `systemctl stop|start|is-active kafka` to the sandbox's service commands of that broker.
  The mounts are seen by that sshd and what its sessions start, nothing else, and die with
  them; the mount points that did not exist on this machine are created empty and removed.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from remediate.sandbox.plumbing import sshd

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
SUDOERS_FILE = Path("/etc/sudoers.d/remediate-tests")  # no dot: sudo skips such names
VISUDO = "/usr/sbin/visudo"


def docs_block(language: str, containing: str = "") -> str:
    """The first fenced block of `language` in docs/configuration.md (that holds
    `containing`), as written."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", DOCS.read_text(), re.M | re.S)
    found = [block for block in blocks if containing in block]
    assert found, f"docs/configuration.md has no ```{language} block holding {containing!r}"
    return str(found[0])


@dataclass(frozen=True)
class OperatorAccount:
    name: str
    uid: int
    created: bool  # by these tests: removed at the end


def ensure_account(name: str) -> OperatorAccount:
    if os.geteuid() != 0:
        raise AssertionError(
            "the tests of sudo need root (CI runs them as root): they create the account"
            f" {name!r} and a rule in /etc/sudoers.d"
        )
    try:
        return OperatorAccount(name, pwd.getpwnam(name).pw_uid, created=False)
    except KeyError:
        pass
    subprocess.run(
        [
            *("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/"),
            # '*': no password to log in with, and not a locked account, which sshd refuses.
            *("--shell", "/bin/sh", "--password", "*", name),
        ],
        check=True,
        capture_output=True,
    )
    return OperatorAccount(name, pwd.getpwnam(name).pw_uid, created=True)


def remove_account(account: OperatorAccount) -> None:
    if account.created:
        subprocess.run(["userdel", account.name], check=True, capture_output=True)


@dataclass
class Sudoers:
    """A sudoers file of the tests': granted (written) or revoked (absent)."""

    text: str
    path: Path = SUDOERS_FILE

    def grant(self, text: str | None = None) -> None:
        """Write `text` (the rule by default), checked by visudo before sudo can read it."""
        staged = self.path.with_name(f".{self.path.name}.new")
        staged.write_text(self.text if text is None else text)
        staged.chmod(0o440)
        checked = subprocess.run(
            [VISUDO, "-c", "-q", "-f", str(staged)], capture_output=True, text=True, check=False
        )
        if checked.returncode != 0:
            staged.unlink()
            raise AssertionError(f"visudo refuses the rule: {checked.stdout}{checked.stderr}")
        staged.replace(self.path)

    def revoke(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class Mountpoints:
    """Directories bind mounts need; those missing are created, and removed by `remove`."""

    created: list[Path] = field(default_factory=list)

    def ensure(self, path: Path) -> None:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for directory in reversed(missing):
            directory.mkdir(mode=0o755)
            self.created.append(directory)

    def remove(self) -> None:
        for directory in reversed(self.created):
            directory.rmdir()
        self.created.clear()


def namespaced(mounts: Mapping[int, Sequence[tuple[Path, Path]]]) -> sshd.Launcher:
    """A launcher of each broker's sshd in a private mount namespace with its bind mounts
    (source, target); sshd then daemonizes there."""

    def launch(broker: sshd.SshBroker, argv: list[str]) -> list[str]:
        binds = [
            f"mount --bind {shlex.quote(str(s))} {shlex.quote(str(t))}"
            for s, t in mounts[broker.broker_id]
        ]
        script = " && ".join([*binds, 'exec "$@"'])
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            *argv,
        ]

    return launch


def systemctl_shim(directory: Path, service: Mapping[str, str], broker_id: int) -> Path:
    """A directory holding a `systemctl` for one broker host: `stop|start|is-active kafka`
    run that broker's sandbox service commands (is-active prints active or inactive and exits
    0 or 3, as systemd's does); anything else fails."""
    commands = {verb: service[verb].format(broker_id=broker_id) for verb in service}
    directory.mkdir(mode=0o755)
    script = directory / "systemctl"
    script.write_text(
        "#!/bin/sh\n"
        f"# systemctl on the example's broker host {broker_id}: the sandbox's broker {broker_id}\n"
        '[ "$#" = 2 ] && [ "$2" = kafka ] || {\n'
        '  echo "systemctl (test shim): only stop|start|is-active kafka, not: $*" >&2; exit 1; }\n'
        'case "$1" in\n'
        f"  stop) exec {commands['stop']} ;;\n"
        f"  start) exec {commands['start']} ;;\n"
        f"  is-active) if ( {commands['status']} ) >/dev/null 2>&1;"
        " then echo active; else echo inactive; exit 3; fi ;;\n"
        '  *) echo "systemctl (test shim): unknown verb $1" >&2; exit 1 ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return directory


def owned_by(root: Path, uid: int) -> list[Path]:
    """Every path under `root` (itself included) owned by `uid` (running brokers add and
    remove files meanwhile: one gone before it is looked at is nobody's)."""
    found = [root] if root.lstat().st_uid == uid else []
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(parent) / name
            try:
                if path.lstat().st_uid == uid:
                    found.append(path)
            except FileNotFoundError:
                continue
    return found
