"""One OpenSSH server per sandbox broker, on the broker's own loopback address.

`sandbox up --ssh` generates a host key per broker, one client key and a known_hosts file
listing every broker's host key, so that the tool connects with strict host-key checking as
it would to real brokers. The client key logs in as any local user (root in the sandbox's
cluster.yaml; an unprivileged account with sudo in the tests of `sudo: true`): sshd reads the
sandbox's authorized key as root, through AuthorizedKeysCommand, since another user cannot
read the sandbox's directory. `up` can start each sshd through a launcher of the caller's
(for one, a private mount namespace in which the broker's directories sit at a production
host's paths).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from remediate.errors import SandboxError
from remediate.sandbox.plumbing import process, zkserver

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")
CAT = Path("/bin/cat")


class SshBroker(Protocol):
    """What an sshd needs of a sandbox broker (the sandbox's BrokerInfo): its id, its loopback
    address and the port its sshd listens on, which `up` chooses when it is None."""

    broker_id: int
    host: str
    ssh_port: int | None


def _keygen(path: Path, comment: str) -> None:
    if path.exists():
        return
    ssh_keygen = shutil.which("ssh-keygen")
    if ssh_keygen is None:
        raise SandboxError(
            "ssh-keygen is missing: run `make setup` or `apt-get install openssh-client`"
        )
    subprocess.run(
        [ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _config(ssh_dir: Path, broker_id: int, host: str, port: int, *, forwarding: bool) -> Path:
    path = ssh_dir / f"sshd-{broker_id}.conf"
    path.write_text(
        "\n".join(
            [
                f"ListenAddress {host}:{port}",
                f"HostKey {ssh_dir / f'host-{broker_id}_ed25519'}",
                f"PidFile {ssh_dir / f'sshd-{broker_id}.pid'}",
                "AuthorizedKeysFile none",
                f"AuthorizedKeysCommand {CAT} {ssh_dir / 'authorized_keys'}",
                "AuthorizedKeysCommandUser root",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PrintMotd no",
                "X11Forwarding no",
                # A jump host forwards the client's connections (ssh's ProxyJump); a broker not.
                f"AllowTcpForwarding {'yes' if forwarding else 'no'}",
                "LogLevel INFO",
                "",
            ]
        )
    )
    return path


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


# The argv that starts one broker's sshd, from the broker and sshd's own argv (which
# daemonizes: the launcher's command returns once sshd listens in the background).
Launcher = Callable[[SshBroker, list[str]], list[str]]


def up(
    directory: Path,
    brokers: Sequence[SshBroker],
    *,
    launcher: Launcher | None = None,
    forwarding: bool = False,
) -> None:
    """Start an sshd for each of `brokers` (`forwarding`: as jump hosts, which forward
    connections), and list their host keys in the sandbox's known_hosts, beside the entries
    of hosts started before."""
    if not SSHD.exists():
        raise SandboxError(
            f"{SSHD} is missing: run `make setup` or `apt-get install openssh-server`"
        )
    ssh_dir = directory / "ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    _keygen(ssh_dir / "id_ed25519", "remediate-sandbox-client")
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text((ssh_dir / "id_ed25519.pub").read_text())
    os.chmod(authorized, 0o600)
    known_hosts: list[str] = []
    for broker in brokers:
        _keygen(ssh_dir / f"host-{broker.broker_id}_ed25519", f"sandbox-broker-{broker.broker_id}")
        if broker.ssh_port is None:
            broker.ssh_port = zkserver.free_port(broker.host)
        config = _config(
            ssh_dir, broker.broker_id, broker.host, broker.ssh_port, forwarding=forwarding
        )
        key_type, key, *_ = (ssh_dir / f"host-{broker.broker_id}_ed25519.pub").read_text().split()
        known_hosts.append(f"[{broker.host}]:{broker.ssh_port} {key_type} {key}")
        if not _listening(broker.host, broker.ssh_port):
            argv = [
                str(SSHD),
                "-f",
                str(config),
                "-E",
                str(ssh_dir / f"sshd-{broker.broker_id}.log"),
            ]
            started = subprocess.run(
                argv if launcher is None else launcher(broker, argv),
                check=False,
                capture_output=True,
                text=True,
            )
            if started.returncode != 0:
                raise SandboxError(
                    f"sshd for broker {broker.broker_id} did not start: {started.stderr.strip()}"
                )
        deadline = time.monotonic() + 15
        while not _listening(broker.host, broker.ssh_port):
            if time.monotonic() > deadline:
                log = ssh_dir / f"sshd-{broker.broker_id}.log"
                raise SandboxError(f"sshd for broker {broker.broker_id} did not start; see {log}")
            time.sleep(0.1)
    path = ssh_dir / "known_hosts"
    listed = {line.split(" ", 1)[0] for line in known_hosts}
    kept = [
        line
        for line in (path.read_text().splitlines() if path.exists() else [])
        if line.strip() and line.split(" ", 1)[0] not in listed
    ]
    path.write_text("\n".join(kept + known_hosts) + "\n")


def down(directory: Path, brokers: Sequence[SshBroker]) -> list[str]:
    ssh_dir = directory / "ssh"
    stopped = []
    for broker in brokers:
        pid = process.read_pid(ssh_dir / f"sshd-{broker.broker_id}.pid")
        marker = str(ssh_dir / f"sshd-{broker.broker_id}.conf")
        if pid is not None and process.terminate(pid, marker, timeout=5):
            stopped.append(f"sshd {broker.broker_id}")
    return stopped
