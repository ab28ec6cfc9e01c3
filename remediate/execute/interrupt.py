"""A clean stop: SIGINT (Ctrl-C) and SIGTERM during a run stop it between two actions.

A signal never cuts an action short (a backup half written, a broker half stopped): the
command line installs `install`'s handlers, and while a run is `armed` a signal only asks
for the stop. The run sees it before its next action (or inside a wait, which changes
nothing): it starts again a broker it had stopped, journals the signal and halts (exit 5),
and `resume` carries on from there. Outside a run (planning, scanning), a signal does what
it always does. A second signal is only told it is being handled; SIGKILL is what stops the
process at once (a crash, which `resume` also recovers from).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Stop:
    """The process's one stop request (signals are the process's, not a run's)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed = False
        self.requested: str | None = None


_STOP = _Stop()


def requested() -> str | None:
    """The name of the signal that asked the run to stop ("SIGTERM"), None if none did."""
    return _STOP.requested


@contextmanager
def armed() -> Iterator[None]:
    """While a run acts: a signal asks it to stop instead of interrupting it."""
    with _STOP.lock:
        _STOP.armed, _STOP.requested = True, None
    try:
        yield
    finally:
        with _STOP.lock:
            _STOP.armed = False


def install() -> None:
    """Handle SIGINT and SIGTERM as above (the main thread of a command that runs a plan)."""
    for number in SIGNALS:
        signal.signal(number, _handle)


def _handle(number: int, _frame: FrameType | None) -> None:
    name = signal.Signals(number).name
    if not _STOP.armed:
        if number == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + number)
    if _STOP.requested is None:
        _STOP.requested = name
        message = (
            f"{name}: stopping once the action in flight is done"
            " (a broker this run stopped is started again)\n"
        )
    else:
        message = f"{name}: already stopping after the action in flight\n"
    # Only os.write is safe here: the main thread may be inside a print.
    os.write(2, message.encode())
