"""Transports: local commands through invoke, ssh through fabric with verified host keys."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fabric.runners import Remote
from invoke.runners import Local, Runner

from remediate.errors import CommandTimeoutError, HostKeyError, TransportError
from remediate.ports import CommandKind
from remediate.sandbox.cluster import BrokerInfo, SandboxState
from remediate.sandbox.plumbing import sshd
from remediate.sandbox.plumbing.zkserver import free_port
from remediate.transport import LocalTransport, SshSettings, SshTransport

KIND = CommandKind.INVENTORY


def test_local_transport_returns_exit_code_and_output() -> None:
    transport = LocalTransport()
    result = transport.run("printf 'out'; printf 'err' >&2; exit 3", timeout=10, kind=KIND)
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (3, "out", "err", False)
    assert transport.run("true", timeout=10, kind=KIND).ok


def test_local_transport_times_out_naming_the_command_and_how_long() -> None:
    with pytest.raises(CommandTimeoutError) as caught:
        LocalTransport("local (broker 1)").run("sleep 5", timeout=0.5, kind=CommandKind.STOP)
    assert str(caught.value) == (
        "local (broker 1): the stop command did not finish within 0.5s"
        " (timed out; whether it took effect is unknown)"
    )
    assert caught.value.timeout_s == 0.5


@pytest.fixture
def lingering_kill(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """invoke's and fabric's `kill` (the timeout timer's) keep their thread alive after the
    kill, as a loaded machine may: the command's end is seen while the timer still runs."""
    released = threading.Event()
    runners: tuple[type[Runner], ...] = (Local, Remote)
    for runner in runners:
        original = runner.kill

        def kill(self: Runner, original: Callable[[Runner], None] = original) -> None:
            original(self)
            released.wait(30)

        monkeypatch.setattr(runner, "kill", kill)
    yield
    released.set()


def test_local_timeout_is_told_while_the_timer_thread_still_runs(lingering_kill: None) -> None:
    with pytest.raises(CommandTimeoutError, match=r"did not finish within 0\.5s"):
        # exec: the kill reaches the sleep itself, whose end then closes the pipes at once
        LocalTransport().run("exec sleep 30", timeout=0.5, kind=CommandKind.STOP)


def test_local_transport_runs_in_its_directory_whatever_its_name(tmp_path: Path) -> None:
    directory = tmp_path / "lab $(touch pwned) 'x' -y"
    directory.mkdir()
    (directory / "marker").write_text("here\n")
    result = LocalTransport(cwd=directory).run("cat marker && pwd", timeout=10, kind=KIND)
    assert result.ok, result.stderr
    assert result.stdout.splitlines() == ["here", str(directory)]
    assert not (directory / "pwned").exists() and not (tmp_path / "pwned").exists()


@pytest.fixture(scope="module")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, BrokerInfo]]:
    """One real sshd on 127.0.0.21, with the sandbox's generated keys."""
    directory = tmp_path_factory.mktemp("sshd")
    broker = BrokerInfo(broker_id=11, host="127.0.0.21", port=0, log_dirs=[])
    state = SandboxState(str(directory), "127.0.0.1", 0, "2.8", brokers=[broker], ssh=True)
    sshd.up(directory, state.brokers)
    yield directory, broker
    sshd.down(directory, state.brokers)


# One row of the fault table (docs/faults.md), proved by the two tests below.
UNVERIFIED_HOST_KEY = pytest.mark.fault(
    "Security",
    "A broker whose SSH host key is not in known_hosts, or changed since it was written",
    "Refused with a host-key error (saying the key CHANGED when it did) before any command"
    " runs; known_hosts is left as it was",
)


def settings(directory: Path, broker: BrokerInfo, **overrides: object) -> SshSettings:
    base = {
        "host": broker.host,
        "port": broker.ssh_port,
        "user": "root",
        "key_files": (directory / "ssh" / "id_ed25519",),
        "known_hosts": directory / "ssh" / "known_hosts",
        "connect_timeout_s": 5.0,
    }
    return SshSettings(**{**base, **overrides})  # type: ignore[arg-type]


def test_ssh_runs_commands_on_a_verified_host(ssh_host: tuple[Path, BrokerInfo]) -> None:
    transport = SshTransport(settings(*ssh_host))
    try:
        result = transport.run('echo "$0"; id -un; exit 4', timeout=20, kind=KIND)
        assert result.exit_code == 4
        assert result.stdout.split()[-1] == "root"
        assert transport.run("true", timeout=20, kind=KIND).ok  # the connection is reused
    finally:
        transport.close()
    assert transport.description == f"root@{ssh_host[1].host}:{ssh_host[1].ssh_port}"


@UNVERIFIED_HOST_KEY
def test_ssh_refuses_an_unknown_host_key(ssh_host: tuple[Path, BrokerInfo], tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError, match="not in"):
        SshTransport(settings(*ssh_host, known_hosts=empty)).run("true", timeout=10, kind=KIND)
    assert empty.read_text() == ""


@UNVERIFIED_HOST_KEY
def test_ssh_refuses_a_changed_host_key(ssh_host: tuple[Path, BrokerInfo], tmp_path: Path) -> None:
    directory, broker = ssh_host
    other = tmp_path / "other_ed25519"
    shutil.copy(directory / "ssh" / "id_ed25519.pub", other)  # any other key will do
    key_type, key, *_ = other.read_text().split()
    changed = tmp_path / "known_hosts"
    changed.write_text(f"[{broker.host}]:{broker.ssh_port} {key_type} {key}\n")
    with pytest.raises(HostKeyError, match="CHANGED"):
        SshTransport(settings(directory, broker, known_hosts=changed)).run(
            "true", timeout=10, kind=KIND
        )
    assert changed.read_text() == f"[{broker.host}]:{broker.ssh_port} {key_type} {key}\n"


def test_a_connection_that_dies_under_a_running_command_is_a_transport_error(
    ssh_host: tuple[Path, BrokerInfo],
) -> None:
    """Not a command that failed (its effect is unknown): the caller may check and retry."""
    transport = SshTransport(settings(*ssh_host))
    try:
        # The command kills the sshd process serving its own session, then would go on.
        with pytest.raises(TransportError, match="connection lost"):
            transport.run("kill -KILL $PPID; sleep 5; exit 0", timeout=20, kind=KIND)
        assert transport.run("echo again", timeout=20, kind=KIND).stdout == "again\n"  # reconnected
    finally:
        transport.close()


def test_an_ssh_command_that_times_out_names_itself_and_how_long(
    ssh_host: tuple[Path, BrokerInfo],
) -> None:
    transport = SshTransport(settings(*ssh_host))
    try:
        with pytest.raises(CommandTimeoutError) as caught:
            transport.run("sleep 30", timeout=1, kind=CommandKind.START)
        assert str(caught.value) == (
            f"{transport.description}: the start command did not finish within 1s"
            " (timed out; whether it took effect is unknown)"
        )
        assert transport.run("echo again", timeout=20, kind=KIND).stdout == "again\n"
    finally:
        transport.close()


def test_an_ssh_timeout_is_told_while_the_timer_thread_still_runs(
    ssh_host: tuple[Path, BrokerInfo], lingering_kill: None
) -> None:
    """Not "connection lost": the channel the timer closed gave no exit status."""
    transport = SshTransport(settings(*ssh_host))
    try:
        with pytest.raises(CommandTimeoutError, match="did not finish within 1s"):
            transport.run("sleep 30", timeout=1, kind=CommandKind.START)
    finally:
        transport.close()


def test_ssh_needs_a_known_hosts_file(ssh_host: tuple[Path, BrokerInfo], tmp_path: Path) -> None:
    with pytest.raises(HostKeyError, match="does not exist"):
        SshTransport(settings(*ssh_host, known_hosts=tmp_path / "nope")).run(
            "true", timeout=10, kind=KIND
        )


def test_ssh_to_a_closed_port_is_a_transport_error(ssh_host: tuple[Path, BrokerInfo]) -> None:
    directory, broker = ssh_host
    with pytest.raises(TransportError, match="cannot connect"):
        SshTransport(settings(directory, broker, port=free_port(broker.host))).run(
            "true", timeout=10, kind=KIND
        )


def test_ssh_passphrase_never_appears_in_descriptions_or_errors(
    ssh_host: tuple[Path, BrokerInfo], tmp_path: Path
) -> None:
    secret = "s3cr3t-passphrase-sentinel"
    transport = SshTransport(
        settings(*ssh_host, key_passphrase=secret, known_hosts=tmp_path / "nope")
    )
    with pytest.raises(HostKeyError) as caught:
        transport.run("true", timeout=10, kind=KIND)
    assert secret not in str(caught.value)
    assert secret not in transport.description
    assert secret not in repr(transport.settings)
