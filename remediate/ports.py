"""Ports: the interfaces through which the tool touches the outside world.

Only the command-line wiring builds real clients (kazoo, fabric, invoke); everything else
takes these protocols, so decisions can be tested on plain data and integration tests can
use the real services.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What one command on a broker host returned."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Transport(Protocol):
    """Runs shell commands on one broker's host (ssh or local)."""

    @property
    def description(self) -> str:
        """Where commands run, for messages (never contains secrets)."""
        ...

    def run(self, command: str, *, timeout: float) -> CommandResult:
        """Run `command` through the host's shell; raise TransportError if it could not run."""
        ...

    def close(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...
