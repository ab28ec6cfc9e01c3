"""Transports: run a shell command on a broker's host, locally (invoke) or over ssh (fabric).

SSH host keys are always verified against the configured known_hosts file: fabric's default
policy (accept and remember any key) is replaced by paramiko's RejectPolicy, system and user
ssh configs are not consulted, and an unknown or changed key is a HostKeyError, never a
connection.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from fabric import Config, Connection
from fabric.runners import Remote
from invoke.config import Config as InvokeConfig
from invoke.context import Context
from invoke.exceptions import CommandTimedOut, UnexpectedExit
from invoke.runners import Local

from remediate.errors import HostKeyError, TransportError
from remediate.ports import CommandResult

SHELL = "/bin/sh"
# invoke reads command output 1000 bytes at a time; an inventory is megabytes.
READ_CHUNK = 64 * 1024
# paramiko reports -1 when a channel closes without the command's exit status.
NO_EXIT_STATUS = -1


class _Local(Local):
    read_chunk_size = READ_CHUNK


class _Remote(Remote):  # type: ignore[misc]  # fabric ships no type hints
    read_chunk_size = READ_CHUNK


class LocalTransport:
    """Commands run on this machine (the sandbox, or a tool running on the broker itself), in
    `cwd` when one is given (cluster.yaml's directory, so relative paths in its commands work)."""

    def __init__(self, description: str = "local", *, cwd: Path | None = None) -> None:
        self._description = description
        self._cwd = cwd
        self._context = Context(
            InvokeConfig(overrides={"run": {"shell": SHELL}, "runners": {"local": _Local}})
        )

    @property
    def description(self) -> str:
        return self._description

    def run(self, command: str, *, timeout: float) -> CommandResult:
        if self._cwd is not None:
            command = f"cd -- {shlex.quote(str(self._cwd))} && {command}"
        try:
            result = self._context.run(
                command, hide=True, warn=True, in_stream=False, timeout=timeout
            )
        except CommandTimedOut as exc:
            raise TransportError(
                f"{self._description}: command timed out after {timeout:.0f}s"
            ) from exc
        except (UnexpectedExit, OSError) as exc:
            raise TransportError(f"{self._description}: could not run the command: {exc}") from exc
        if result is None:  # pragma: no cover - only for disowned or asynchronous runs
            raise TransportError(f"{self._description}: the command returned no result")
        return CommandResult(int(result.exited), str(result.stdout), str(result.stderr))

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class SshSettings:
    host: str
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    connect_timeout_s: float = 10.0
    key_passphrase: str | None = field(default=None, repr=False)  # never printed


class SshTransport:
    """Commands run over ssh with a strictly verified host key."""

    def __init__(self, settings: SshSettings) -> None:
        self.settings = settings
        self._connection: Connection | None = None

    @property
    def description(self) -> str:
        s = self.settings
        return f"{s.user}@{s.host}:{s.port}"

    def _connect(self) -> Connection:
        if self._connection is not None and self._connection.is_connected:
            return self._connection
        s = self.settings
        if not s.known_hosts.is_file():
            raise HostKeyError(
                f"{self.description}: known_hosts file {s.known_hosts} does not exist;"
                " refusing to connect to a host whose key cannot be verified"
            )
        client = paramiko.SSHClient()
        client.load_host_keys(str(s.known_hosts))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        connect_kwargs: dict[str, object] = {
            "key_filename": str(s.key_file),
            "look_for_keys": False,
            "allow_agent": False,
        }
        if s.key_passphrase is not None:
            connect_kwargs["passphrase"] = s.key_passphrase
        connection = Connection(
            s.host,
            user=s.user,
            port=s.port,
            config=Config(overrides={"load_ssh_configs": False, "runners": {"remote": _Remote}}),
            connect_timeout=int(max(1, s.connect_timeout_s)),
            connect_kwargs=connect_kwargs,
        )
        connection.client = client
        try:
            connection.open()
        except paramiko.BadHostKeyException as exc:
            got = f"{exc.key.get_name()} {exc.key.get_fingerprint().hex()}"
            raise HostKeyError(
                f"{self.description}: the host key has CHANGED since {s.known_hosts} was"
                f" written (got {got}); refusing to connect"
            ) from exc
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(
                    f"{self.description}: the host key is not in {s.known_hosts};"
                    " refusing to connect"
                ) from exc
            raise TransportError(f"{self.description}: ssh failed: {exc}") from exc
        except (OSError, EOFError) as exc:
            raise TransportError(f"{self.description}: cannot connect: {exc}") from exc
        self._connection = connection
        return connection

    def run(self, command: str, *, timeout: float) -> CommandResult:
        connection = self._connect()
        try:
            result = connection.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except CommandTimedOut as exc:
            self.close()
            raise TransportError(
                f"{self.description}: command timed out after {timeout:.0f}s"
            ) from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise TransportError(f"{self.description}: connection lost: {exc}") from exc
        if result.exited == NO_EXIT_STATUS:
            # The channel closed before the command's exit status came back: the connection
            # died under a running command, whose effect is unknown (not a failed command).
            self.close()
            raise TransportError(
                f"{self.description}: connection lost while the command ran (no exit status)"
            )
        return CommandResult(int(result.exited), str(result.stdout), str(result.stderr))

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
