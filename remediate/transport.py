"""Transports: run a shell command on a broker's host, locally (invoke) or over ssh (fabric);
where cluster.yaml says `sudo: true`, every one of them through `sudo -n` (SudoTransport), and
where it says `sudo: services`, only the service commands, each as its own program with no
shell (ServiceSudoTransport).

SSH host keys are always verified against the configured known_hosts file: fabric's default
policy (accept and remember any key) is replaced by paramiko's RejectPolicy, system and user
ssh configs are not consulted, and an unknown or changed key is a HostKeyError, never a
connection.

Under sudo, each command is one quoted word given to `sudo -n -- /bin/sh -c`, so a compound
command (`cd /opt/kafka && bin/kafka-server-stop.sh`) runs whole as root, and the sudoers rule
an operator writes names one program. The root shell first prints a mark on stderr: a command
that fails without it never ran, sudo refused it (a password or a terminal it would need), and
that is a SudoError naming the broker, the command and the rule to add, never the command's
own answer.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE, Popen
from typing import Any

import paramiko
from fabric import Config, Connection
from fabric.runners import Remote
from invoke.config import Config as InvokeConfig
from invoke.context import Context
from invoke.exceptions import CommandTimedOut, UnexpectedExit
from invoke.runners import Local

from remediate.errors import CommandTimeoutError, HostKeyError, SudoError, TransportError
from remediate.ports import CommandKind, CommandResult, Transport

SHELL = "/bin/sh"
# invoke reads command output 1000 bytes at a time; an inventory is megabytes.
READ_CHUNK = 64 * 1024
# paramiko reports -1 when a channel closes without the command's exit status.
NO_EXIT_STATUS = -1


def timed_out(where: str, kind: CommandKind, timeout: float) -> CommandTimeoutError:
    """The error of a command that ran out of time: where, what and how long."""
    return CommandTimeoutError(
        f"{where}: the {kind} did not finish within {timeout:g}s (timed out; whether it took"
        " effect is unknown)",
        timeout,
    )


# invoke's runners tell a timed-out command by its timer thread being over
# (`Runner.timed_out`), but that thread is the one that kills the command: the command's end
# can be seen while it is still alive, and a timed-out command then reads as finished (over
# SSH, with no exit status: "connection lost"). The runners below remember the kill instead;
# only the timer calls `kill`.


class _Local(Local):
    read_chunk_size = READ_CHUNK
    _killed = False

    def start(self, command: str, shell: str, env: dict[str, Any]) -> None:
        # In a session of its own: a terminal's Ctrl-C goes to the operator's process group,
        # which stops the run cleanly between actions, and never to the stop or start
        # command in flight (nor to a broker it starts). Never with a pty here (hide=True).
        # The shell as invoke runs it: the commands are cluster.yaml's, with every untrusted
        # part quoted by their callers.
        self.process = Popen(  # noqa: S602
            command,
            shell=True,
            executable=shell,
            env=env,
            stdout=PIPE,
            stderr=PIPE,
            stdin=PIPE,
            start_new_session=True,
        )

    def kill(self) -> None:
        self._killed = True
        super().kill()

    @property
    def timed_out(self) -> bool:
        return self._killed or super().timed_out


class _Remote(Remote):  # type: ignore[misc]  # fabric ships no type hints
    read_chunk_size = READ_CHUNK
    _killed = False

    def kill(self) -> None:
        self._killed = True
        super().kill()

    @property
    def timed_out(self) -> bool:
        return self._killed or bool(super().timed_out)


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

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        if self._cwd is not None:
            command = f"cd -- {shlex.quote(str(self._cwd))} && {command}"
        try:
            result = self._context.run(
                command, hide=True, warn=True, in_stream=False, timeout=timeout
            )
        except CommandTimedOut as exc:
            raise timed_out(self._description, kind, timeout) from exc
        except (UnexpectedExit, OSError) as exc:
            raise TransportError(f"{self._description}: could not run the {kind}: {exc}") from exc
        if result is None:  # pragma: no cover - only for disowned or asynchronous runs
            raise TransportError(f"{self._description}: the command returned no result")
        return CommandResult(int(result.exited), str(result.stdout), str(result.stderr))

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class SshSettings:
    """One ssh connection, resolved (remediate/ssh_options.py): where, as whom, with which
    keys (files, and ssh-agent's when `agent`), and through which jump host."""

    host: str
    port: int
    user: str
    key_files: tuple[Path, ...]
    known_hosts: Path
    connect_timeout_s: float = 10.0
    key_passphrase: str | None = field(default=None, repr=False)  # never printed
    agent: bool = False
    jump: SshSettings | None = None

    @property
    def description(self) -> str:
        via = f" via {self.jump.description}" if self.jump is not None else ""
        return f"{self.user}@{self.host}:{self.port}{via}"


def _strict_connection(s: SshSettings, gateway: Connection | None = None) -> Connection:
    """A fabric connection whose host key must be in `s.known_hosts` (paramiko's RejectPolicy:
    an unknown key is refused, never learnt), no ssh config of fabric's own, and only the
    keys `s` names."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(s.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    connect_kwargs: dict[str, object] = {"look_for_keys": False, "allow_agent": s.agent}
    if s.key_files:
        connect_kwargs["key_filename"] = [str(path) for path in s.key_files]
    if s.key_passphrase is not None:
        connect_kwargs["passphrase"] = s.key_passphrase
    connection = Connection(
        s.host,
        user=s.user,
        port=s.port,
        config=Config(overrides={"load_ssh_configs": False, "runners": {"remote": _Remote}}),
        connect_timeout=int(max(1, s.connect_timeout_s)),
        connect_kwargs=connect_kwargs,
        gateway=gateway,
    )
    connection.client = client
    return connection


def _open(connection: Connection, s: SshSettings, description: str) -> None:
    """Open `connection`, its host key verified: a changed or unknown key is a HostKeyError
    naming the host (the jump host's own, when it is that one)."""
    try:
        connection.open()
    except paramiko.BadHostKeyException as exc:
        got = f"{exc.key.get_name()} {exc.key.get_fingerprint().hex()}"
        raise HostKeyError(
            f"{description}: the host key has CHANGED since {s.known_hosts} was"
            f" written (got {got}); refusing to connect"
        ) from exc
    except paramiko.SSHException as exc:
        if "not found in known_hosts" in str(exc):
            raise HostKeyError(
                f"{description}: the host key is not in {s.known_hosts}; refusing to connect"
            ) from exc
        raise TransportError(f"{description}: ssh failed: {exc}") from exc
    except (OSError, EOFError) as exc:
        raise TransportError(f"{description}: cannot connect: {exc}") from exc


class SshTransport:
    """Commands run over ssh with a strictly verified host key (the jump host's too)."""

    def __init__(self, settings: SshSettings) -> None:
        self.settings = settings
        self._connection: Connection | None = None
        self._gateway: Connection | None = None

    @property
    def description(self) -> str:
        return self.settings.description

    def _connect(self) -> Connection:
        if self._connection is not None and self._connection.is_connected:
            return self._connection
        s = self.settings
        for hop in (s, s.jump):
            if hop is not None and not hop.known_hosts.is_file():
                raise HostKeyError(
                    f"{self.description}: known_hosts file {hop.known_hosts} does not exist;"
                    " refusing to connect to a host whose key cannot be verified"
                )
        gateway = None
        if s.jump is not None:
            gateway = _strict_connection(s.jump)
            _open(gateway, s.jump, f"{self.description}: the jump host {s.jump.description}")
            self._gateway = gateway
        connection = _strict_connection(s, gateway)
        try:
            _open(connection, s, self.description)
        except BaseException:
            self._close_gateway()
            raise
        self._connection = connection
        return connection

    def _close_gateway(self) -> None:
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        connection = self._connect()
        try:
            result = connection.run(command, hide=True, warn=True, in_stream=False, timeout=timeout)
        except CommandTimedOut as exc:
            self.close()
            raise timed_out(self.description, kind, timeout) from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise TransportError(f"{self.description}: connection lost: {exc}") from exc
        if result.exited == NO_EXIT_STATUS:
            # The channel closed before the command's exit status came back: the connection
            # died under a running command, whose effect is unknown (not a failed command).
            self.close()
            raise TransportError(
                f"{self.description}: connection lost while the {kind} ran (no exit status)"
            )
        return CommandResult(int(result.exited), str(result.stdout), str(result.stderr))

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._close_gateway()


# -- sudo --------------------------------------------------------------------------------------

# The program every command runs as under sudo: the one the sudoers rule names.
SUDO_SHELL = "/bin/sh"
# The root shell's first line on stderr: without it, a failed command never ran.
SUDO_MARK = "remediate-sudo-ran"
# Where the sudoers rule is explained.
SUDO_DOCS = 'docs/configuration.md, "sudo"'


def sudo_command(command: str) -> str:
    """`command`, whole, run as root by /bin/sh through `sudo -n` (which never prompts)."""
    script = f"echo {SUDO_MARK} >&2\n{command}"
    return f"sudo -n -- {SUDO_SHELL} -c {shlex.quote(script)}"


def sudo_refusal(result: CommandResult) -> str | None:
    """Why sudo did not run the command, in its own words (None: it ran it): its own lines of
    stderr (`sudo: ...`, whatever the language) when there are any, else all of it."""
    if result.ok or _mark_at(result.stderr) is not None:
        return None
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("sudo:")] or lines
    return " / ".join(said)[-300:] or f"exit status {result.exit_code} and no message"


def without_sudo_mark(result: CommandResult) -> CommandResult:
    """The command's own result: its stderr without the root shell's mark."""
    at = _mark_at(result.stderr)
    if at is None:
        return result
    lines = result.stderr.splitlines(keepends=True)
    return CommandResult(result.exit_code, result.stdout, "".join(lines[:at] + lines[at + 1 :]))


def _mark_at(stderr: str) -> int | None:
    for index, line in enumerate(stderr.splitlines()):
        if line == SUDO_MARK:
            return index
    return None


def sudo_rule(user: str) -> str:
    """The sudoers line that lets `user` run every command the tool runs on a broker."""
    return f"{user} ALL=(root) NOPASSWD: {SUDO_SHELL}"


def _host_fix(refusal: str, user: str, *, no_sudo: bool) -> str | None:
    """What to change on the host when sudo is missing or wants a terminal; None: a rule."""
    if no_sudo:
        return f"install sudo there (or put it on the PATH of {user}'s login shell)"
    if "tty" in refusal:
        return (
            f"its sudoers requires a terminal (requiretty): add `Defaults:{user} !requiretty`"
            " beside the rule"
        )
    return None


def sudo_refused(
    *, broker: int, where: str, kind: CommandKind, user: str, refusal: str, exit_code: int
) -> str:
    """The message for a command sudo would not run: which broker, which command, what sudo
    said and what to change on that host."""
    fix = _host_fix(refusal, user, no_sudo=exit_code == 127 and "not found" in refusal) or (
        f"`sudo -n` never prompts: add `{sudo_rule(user)}` to that host's sudoers"
        " (visudo -f /etc/sudoers.d/remediate)"
    )
    what = f"broker {broker} ({where}): sudo did not run the {kind} ({refusal})"
    return f"{what}; {fix}; see {SUDO_DOCS}"


class SudoTransport:
    """Every command on one broker host as root, through `sudo -n` over `inner` (ssh or
    local); `user` is who logs in there, for the sudoers rule a refusal asks for."""

    def __init__(self, inner: Transport, *, broker: int, user: str) -> None:
        self._inner = inner
        self._broker = broker
        self._user = user

    @property
    def description(self) -> str:
        return f"{self._inner.description} (sudo)"

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        result = self._inner.run(sudo_command(command), timeout=timeout, kind=kind)
        refusal = sudo_refusal(result)
        if refusal is not None:
            raise SudoError(
                sudo_refused(
                    broker=self._broker,
                    where=self._inner.description,
                    kind=kind,
                    user=self._user,
                    refusal=refusal,
                    exit_code=result.exit_code,
                )
            )
        return without_sudo_mark(result)

    def close(self) -> None:
        self._inner.close()


# -- sudo for the service commands only ---------------------------------------------------------

SERVICE_KINDS = frozenset({CommandKind.STOP, CommandKind.START, CommandKind.STATUS})
# Characters sudoers gives a meaning to in a command's arguments: escaped with a backslash.
_SUDOERS_SPECIAL = frozenset(",:=\\*?[]")


def sudoers_word(word: str) -> str:
    """One argument as a sudoers line must write it (`,`, `:`, `=`, `\\` and glob characters
    escaped), so that the line permits that argument and nothing wider."""
    return "".join(f"\\{c}" if c in _SUDOERS_SPECIAL else c for c in word)


def sudoers_command(command: str) -> str:
    """A service command (one program by absolute path, and its arguments) as a sudoers line
    names it. A program without arguments is written with `""`: sudoers lets a bare path run
    with any arguments."""
    words = [sudoers_word(word) for word in shlex.split(command)]
    return " ".join(words if len(words) > 1 else [*words, '""'])


def sudoers_lines(user: str, commands: Iterable[str]) -> list[str]:
    """The sudoers lines that let `user` run exactly `commands` (service commands, each one
    program and its arguments) as root without a password, and nothing else."""
    named = list(dict.fromkeys(sudoers_command(c) for c in commands))
    return [f"{user} ALL=(root) NOPASSWD: {command}" for command in named]


def service_refused(
    *, broker: int, where: str, kind: CommandKind, user: str, command: str, refusal: str
) -> str:
    """The message for a service command sudo will not run under `sudo: services`."""
    fix = _host_fix(refusal, user, no_sudo="not found" in refusal and "sudo" in refusal)
    if fix is None:
        (line,) = sudoers_lines(user, [command])
        fix = f"add `{line}` to that host's sudoers (visudo -f /etc/sudoers.d/remediate)"
    what = f"broker {broker} ({where}): sudo will not run the {kind} `{command}` ({refusal})"
    return f"{what}; {fix}; see {SUDO_DOCS}"


class ServiceSudoTransport:
    """The service commands on one broker host through `sudo -n`, each as one program with its
    arguments (no shell: the sudoers lines name exactly those commands); every other command
    (the inventory, the reads, the backups, the deletions) as the ssh user itself, who owns
    the log dirs. Before a service command runs, `sudo -n -l` asks whether sudo would run it,
    which runs nothing: a refusal is a SudoError naming the line to add, never read as the
    command's own failure (a status command that did not run does not mean "stopped")."""

    def __init__(self, inner: Transport, *, broker: int, user: str) -> None:
        self._inner = inner
        self._broker = broker
        self._user = user

    @property
    def description(self) -> str:
        return f"{self._inner.description} (sudo for the service commands)"

    @property
    def user(self) -> str:
        """Who logs in there: the account the sudoers lines name."""
        return self._user

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        if kind not in SERVICE_KINDS:
            return self._inner.run(command, timeout=timeout, kind=kind)
        argv = " ".join(shlex.quote(word) for word in shlex.split(command))
        allowed = self._inner.run(f"sudo -n -l -- {argv}", timeout=timeout, kind=kind)
        if not allowed.ok:
            lines = [line.strip() for line in allowed.stderr.splitlines() if line.strip()]
            refusal = " / ".join(lines)[-300:] or "no rule lets it run without a password"
            raise SudoError(
                service_refused(
                    broker=self._broker,
                    where=self._inner.description,
                    kind=kind,
                    user=self._user,
                    command=command,
                    refusal=refusal,
                )
            )
        return self._inner.run(f"sudo -n -- {argv}", timeout=timeout, kind=kind)

    def close(self) -> None:
        self._inner.close()
