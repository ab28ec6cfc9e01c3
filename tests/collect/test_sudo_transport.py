"""sudo as a transport: the command it sends, how it tells a refusal from a command's own
failure, what a refusal says, and real sudo running compound commands whole.

The refusals below are what sudo 1.9 (Debian 12) printed for `sudo -n` over ssh: no rule for
the account, a rule that asks for a password, `requiretty`, and no sudo on the host (the
login shell's error). Over the real sshd, with a real sudoers, the same cases run in
tests/execute/test_sudo_sandbox.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.collect.collector import transports
from remediate.config import parse_cluster_config
from remediate.errors import HostKeyError, SudoError, TransportError
from remediate.execute.probes import dropped_connection
from remediate.ports import CommandKind, CommandResult
from remediate.transport import (
    SUDO_MARK,
    LocalTransport,
    ServiceSudoTransport,
    SudoTransport,
    sudo_command,
    sudo_refusal,
    sudo_refused,
    sudo_rule,
    sudoers_lines,
    without_sudo_mark,
)

CHDIR = "Could not chdir to home directory /home/remediate: No such file or directory"
PASSWORD = "sudo: a password is required"
TTY = "sudo: sorry, you must have a tty to run sudo"
NOT_FOUND = "sh: 1: sudo: not found"


@given(st.text(alphabet=st.characters(blacklist_characters="\0")))
def test_the_command_reaches_the_root_shell_as_one_word_whatever_it_holds(command: str) -> None:
    assert shlex.split(sudo_command(command)) == [
        *("sudo", "-n", "--", "/bin/sh", "-c"),
        f"echo {SUDO_MARK} >&2\n{command}",
    ]


@pytest.mark.parametrize(
    ("result", "refusal"),
    [
        (CommandResult(1, "", f"{PASSWORD}\n"), PASSWORD),
        (CommandResult(1, "", f"{CHDIR}\n{PASSWORD}\n"), PASSWORD),  # sshd's noise left out
        (CommandResult(1, "", f"{TTY}\n"), TTY),
        (CommandResult(127, "", f"{NOT_FOUND}\n"), NOT_FOUND),
        # sudo in another language: its own lines still start with its name.
        (CommandResult(1, "", "sudo: es ist ein Passwort notwendig\n"), "sudo: es ist ein"),
        (CommandResult(1, "", ""), "exit status 1 and no message"),
        # The command ran (the mark is there) and failed: its own answer, not a refusal.
        (CommandResult(3, "", f"{SUDO_MARK}\n"), None),
        (CommandResult(1, "", f"{SUDO_MARK}\ncat: /x: No such file or directory\n"), None),
        (CommandResult(1, "", f"sudo: unable to resolve host b1\n{SUDO_MARK}\n"), None),
        (CommandResult(0, "out\n", ""), None),
    ],
)
def test_a_refusal_is_a_failure_without_the_root_shells_mark(
    result: CommandResult, refusal: str | None
) -> None:
    found = sudo_refusal(result)
    if refusal is None:
        assert found is None
    else:
        assert found is not None and found.startswith(refusal), found


def test_the_commands_own_stderr_keeps_everything_but_the_mark() -> None:
    result = CommandResult(3, "x\n", f"sudo: unable to resolve host b1\n{SUDO_MARK}\nerr\n")
    assert without_sudo_mark(result) == CommandResult(
        3, "x\n", "sudo: unable to resolve host b1\nerr\n"
    )
    assert without_sudo_mark(CommandResult(0, "", "")) == CommandResult(0, "", "")


@pytest.mark.parametrize(
    ("refusal", "exit_code", "fix"),
    [
        (PASSWORD, 1, "`sudo -n` never prompts: add `remediate ALL=(root) NOPASSWD: /bin/sh`"),
        (TTY, 1, "add `Defaults:remediate !requiretty`"),
        (NOT_FOUND, 127, "install sudo there"),
    ],
)
def test_a_refusal_names_the_broker_the_command_and_what_to_change(
    refusal: str, exit_code: int, fix: str
) -> None:
    message = sudo_refused(
        broker=2,
        where="remediate@kafka2:22",
        kind=CommandKind.STOP,
        user="remediate",
        refusal=refusal,
        exit_code=exit_code,
    )
    assert message.startswith(
        f"broker 2 (remediate@kafka2:22): sudo did not run the stop command ({refusal})"
    )
    assert fix in message
    assert message.endswith('see docs/configuration.md, "sudo"')
    assert sudo_rule("remediate") == "remediate ALL=(root) NOPASSWD: /bin/sh"


def test_a_refusal_is_never_retried_as_a_dropped_connection() -> None:
    assert dropped_connection(TransportError("connection lost"))
    assert not dropped_connection(SudoError("broker 1: sudo did not run the stop command"))
    assert not dropped_connection(HostKeyError("changed"))


# -- real sudo, as root here (root needs no rule and no password) -----------------------------


@pytest.mark.parametrize(
    ("command", "exit_code", "stdout", "stderr"),
    [
        ("cd /tmp && pwd", 0, "/tmp\n", ""),
        ("pwd", 0, "{cwd}\n", ""),  # the local transport's directory, kept through sudo
        ("id -u; echo err >&2; exit 3", 3, "0\n", "err\n"),
        (
            """printf '%s|' "it's" '$HOME' "$(echo sub)" `echo tick`""",
            0,
            "it's|$HOME|sub|tick|",
            "",
        ),
        ("false || { echo 'or else'; exit 7; }", 7, "or else\n", ""),
        ("echo a\necho b", 0, "a\nb\n", ""),
    ],
)
def test_real_sudo_runs_a_compound_command_whole_as_root(
    tmp_path: Path, command: str, exit_code: int, stdout: str, stderr: str
) -> None:
    assert os.geteuid() == 0, "runs real sudo as root, as CI does"
    transport = SudoTransport(LocalTransport(cwd=tmp_path), broker=1, user="root")
    result = transport.run(command, timeout=30, kind=CommandKind.START)
    assert result == CommandResult(exit_code, stdout.format(cwd=tmp_path), stderr)
    assert transport.description == "local (sudo)"


def test_sudo_applies_to_the_brokers_that_say_so(tmp_path: Path) -> None:
    """One place decides: `transports(config)` wraps a broker's transport in sudo when its
    own `sudo`, else ssh.sudo, says so; every command then runs as root."""
    document = {
        "cluster": "c",
        "zookeeper": {"connect": "127.0.0.1:2181"},
        "brokers": [
            {"id": 1, "host": "127.0.0.1", "transport": "local", "log_dirs": ["d1"]},
            {"id": 2, "host": "127.0.0.1", "transport": "local", "log_dirs": ["d2"], "sudo": True},
        ],
        "service": {"stop": "true", "start": "true"},
    }
    config = parse_cluster_config(document, source="cluster.yaml", base_dir=tmp_path)
    transport_for = transports(config)
    plain, sudo = transport_for(1), transport_for(2)
    assert isinstance(sudo, SudoTransport) and not isinstance(plain, SudoTransport)
    # sudo says what it ran: the root shell, given the command whole.
    result = sudo.run('printf %s "$SUDO_COMMAND"; pwd >&2', timeout=30, kind=CommandKind.INVENTORY)
    assert result.stdout.startswith(f"/bin/sh -c echo {SUDO_MARK} >&2")
    assert result.stdout.endswith('printf %s "$SUDO_COMMAND"; pwd >&2')
    assert result.stderr == f"{tmp_path}\n"


# -- sudo for the service commands only (`sudo: services`) -------------------------------------


@pytest.mark.parametrize(
    ("commands", "lines"),
    [
        (
            ["/usr/bin/systemctl stop kafka", "/usr/bin/systemctl start kafka"],
            [
                "kafka ALL=(root) NOPASSWD: /usr/bin/systemctl stop kafka",
                "kafka ALL=(root) NOPASSWD: /usr/bin/systemctl start kafka",
            ],
        ),
        # One line per distinct command, in order.
        (["/usr/bin/true a", "/usr/bin/true a"], ["kafka ALL=(root) NOPASSWD: /usr/bin/true a"]),
        # A program alone: `""`, or sudoers would let it run with any arguments.
        (
            ["/usr/local/bin/ka-stop"],
            ['kafka ALL=(root) NOPASSWD: /usr/local/bin/ka-stop ""'],
        ),
        # What sudoers reads in an argument is escaped: the line permits that argument only.
        (
            ["/opt/ctl --opt=a,b:c x"],
            ["kafka ALL=(root) NOPASSWD: /opt/ctl --opt\\=a\\,b\\:c x"],
        ),
    ],
)
def test_sudoers_lines_name_each_service_command_exactly(
    commands: list[str], lines: list[str]
) -> None:
    assert sudoers_lines("kafka", commands) == lines


def test_real_visudo_accepts_the_lines(
    tmp_path: Path,
) -> None:
    """visudo parses the lines as written (a file of the test's: nothing on this machine
    changes; the sandbox test grants such lines for real)."""
    commands = ["/usr/bin/systemctl stop kafka", "/opt/ctl --opt=a,b:c x", "/usr/bin/true"]
    path = tmp_path / "sudoers"
    path.write_text("\n".join(sudoers_lines("kafka", commands)) + "\n")
    checked = subprocess.run(
        ["/usr/sbin/visudo", "-c", "-q", "-f", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


class Recorded:
    """A transport that records each command and answers from a table: the port's plain-data
    double, for what ServiceSudoTransport sends and how it reads the answers."""

    description = "kafka@broker1:22"

    def __init__(self, answers: dict[str, CommandResult]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, CommandKind]] = []

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        self.sent.append((command, kind))
        for prefix, answer in self.answers.items():
            if command.startswith(prefix):
                return answer
        return CommandResult(0, "", "")

    def close(self) -> None:
        return None


def test_only_the_service_commands_go_through_sudo_each_as_one_program() -> None:
    inner = Recorded({})
    transport = ServiceSudoTransport(inner, broker=1, user="kafka")
    transport.run("find /data -name partition.metadata", timeout=5, kind=CommandKind.INVENTORY)
    transport.run("rm -f -- /data/t-0/partition.metadata", timeout=5, kind=CommandKind.DELETE)
    transport.run("/usr/bin/systemctl stop kafka", timeout=5, kind=CommandKind.STOP)
    assert inner.sent == [
        ("find /data -name partition.metadata", CommandKind.INVENTORY),
        ("rm -f -- /data/t-0/partition.metadata", CommandKind.DELETE),
        # Asked first (runs nothing), then run: argv, no shell.
        ("sudo -n -l -- /usr/bin/systemctl stop kafka", CommandKind.STOP),
        ("sudo -n -- /usr/bin/systemctl stop kafka", CommandKind.STOP),
    ]


@pytest.mark.parametrize(
    ("stderr", "fix"),
    [
        ("", "add `kafka ALL=(root) NOPASSWD: /usr/bin/systemctl is-active kafka`"),
        (f"{PASSWORD}\n", "add `kafka ALL=(root) NOPASSWD: /usr/bin/systemctl is-active kafka`"),
        (f"{TTY}\n", "Defaults:kafka !requiretty"),
        (f"{NOT_FOUND}\n", "install sudo there"),
    ],
)
def test_a_service_command_sudo_will_not_run_is_a_refusal_never_its_answer(
    stderr: str, fix: str
) -> None:
    """A status command sudo would not run must not read as "stopped": the refusal is a
    SudoError naming the broker, the command and the line to add, and the command is never
    sent."""
    inner = Recorded({"sudo -n -l": CommandResult(1, "", stderr)})
    transport = ServiceSudoTransport(inner, broker=4, user="kafka")
    with pytest.raises(SudoError) as info:
        transport.run("/usr/bin/systemctl is-active kafka", timeout=5, kind=CommandKind.STATUS)
    message = str(info.value)
    assert message.startswith("broker 4 (kafka@broker1:22): sudo will not run the status")
    assert fix in message and "docs/configuration.md" in message, message
    assert [c for c, _ in inner.sent] == ["sudo -n -l -- /usr/bin/systemctl is-active kafka"]


def test_a_service_commands_own_failure_is_its_answer() -> None:
    inner = Recorded({"sudo -n --": CommandResult(3, "inactive\n", "")})
    transport = ServiceSudoTransport(inner, broker=1, user="kafka")
    result = transport.run("/usr/bin/systemctl is-active kafka", timeout=5, kind=CommandKind.STATUS)
    assert result == CommandResult(3, "inactive\n", "")


def test_real_sudo_runs_a_service_command_without_a_shell(tmp_path: Path) -> None:
    """As root (who needs no rule): the service command is what sudo ran, as argv; the
    others ran without sudo."""
    assert os.geteuid() == 0, "runs real sudo as root, as CI does"
    transport = ServiceSudoTransport(LocalTransport(cwd=tmp_path), broker=1, user="root")
    ran = transport.run("/usr/bin/printenv SUDO_COMMAND", timeout=30, kind=CommandKind.STATUS)
    assert ran == CommandResult(0, "/usr/bin/printenv SUDO_COMMAND\n", "")
    plain = transport.run('printf %s "${SUDO_COMMAND-none}"', timeout=30, kind=CommandKind.BACKUP)
    assert plain == CommandResult(0, "none", "")
