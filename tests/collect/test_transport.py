"""Transports: local commands through invoke, ssh through fabric with verified host keys."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.errors import HostKeyError, TransportError
from remediate.sandbox import sshd
from remediate.sandbox.cluster import BrokerInfo, SandboxState
from remediate.sandbox.zkserver import free_port
from remediate.transport import LocalTransport, SshSettings, SshTransport


def test_local_transport_returns_exit_code_and_output() -> None:
    transport = LocalTransport()
    result = transport.run("printf 'out'; printf 'err' >&2; exit 3", timeout=10)
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (3, "out", "err", False)
    assert transport.run("true", timeout=10).ok


def test_local_transport_times_out() -> None:
    with pytest.raises(TransportError, match="timed out"):
        LocalTransport().run("sleep 5", timeout=0.5)


def test_local_transport_runs_in_its_directory_whatever_its_name(tmp_path: Path) -> None:
    directory = tmp_path / "lab $(touch pwned) 'x' -y"
    directory.mkdir()
    (directory / "marker").write_text("here\n")
    result = LocalTransport(cwd=directory).run("cat marker && pwd", timeout=10)
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
        "key_file": directory / "ssh" / "id_ed25519",
        "known_hosts": directory / "ssh" / "known_hosts",
        "connect_timeout_s": 5.0,
    }
    return SshSettings(**{**base, **overrides})  # type: ignore[arg-type]


def test_ssh_runs_commands_on_a_verified_host(ssh_host: tuple[Path, BrokerInfo]) -> None:
    transport = SshTransport(settings(*ssh_host))
    try:
        result = transport.run('echo "$0"; id -un; exit 4', timeout=20)
        assert result.exit_code == 4
        assert result.stdout.split()[-1] == "root"
        assert transport.run("true", timeout=20).ok  # the connection is reused
    finally:
        transport.close()
    assert transport.description == f"root@{ssh_host[1].host}:{ssh_host[1].ssh_port}"


@UNVERIFIED_HOST_KEY
def test_ssh_refuses_an_unknown_host_key(ssh_host: tuple[Path, BrokerInfo], tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError, match="not in"):
        SshTransport(settings(*ssh_host, known_hosts=empty)).run("true", timeout=10)
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
        SshTransport(settings(directory, broker, known_hosts=changed)).run("true", timeout=10)
    assert changed.read_text() == f"[{broker.host}]:{broker.ssh_port} {key_type} {key}\n"


def test_a_connection_that_dies_under_a_running_command_is_a_transport_error(
    ssh_host: tuple[Path, BrokerInfo],
) -> None:
    """Not a command that failed (its effect is unknown): the caller may check and retry."""
    transport = SshTransport(settings(*ssh_host))
    try:
        # The command kills the sshd process serving its own session, then would go on.
        with pytest.raises(TransportError, match="connection lost"):
            transport.run("kill -KILL $PPID; sleep 5; exit 0", timeout=20)
        assert transport.run("echo again", timeout=20).stdout == "again\n"  # reconnected
    finally:
        transport.close()


def test_ssh_needs_a_known_hosts_file(ssh_host: tuple[Path, BrokerInfo], tmp_path: Path) -> None:
    with pytest.raises(HostKeyError, match="does not exist"):
        SshTransport(settings(*ssh_host, known_hosts=tmp_path / "nope")).run("true", timeout=10)


def test_ssh_to_a_closed_port_is_a_transport_error(ssh_host: tuple[Path, BrokerInfo]) -> None:
    directory, broker = ssh_host
    with pytest.raises(TransportError, match="cannot connect"):
        SshTransport(settings(directory, broker, port=free_port(broker.host))).run(
            "true", timeout=10
        )


def test_ssh_passphrase_never_appears_in_descriptions_or_errors(
    ssh_host: tuple[Path, BrokerInfo], tmp_path: Path
) -> None:
    secret = "s3cr3t-passphrase-sentinel"
    transport = SshTransport(
        settings(*ssh_host, key_passphrase=secret, known_hosts=tmp_path / "nope")
    )
    with pytest.raises(HostKeyError) as caught:
        transport.run("true", timeout=10)
    assert secret not in str(caught.value)
    assert secret not in transport.description
    assert secret not in repr(transport.settings)
