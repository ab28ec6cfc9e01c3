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
    SudoTransport,
    sudo_command,
    sudo_refusal,
    sudo_refused,
    sudo_rule,
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
