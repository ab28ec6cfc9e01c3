"""The tests' one way to wait: for a condition, polled, never for a fixed time.

A test that must not race waits for the event it needs (a journal record, a znode, a
failpoint reached), with a bound that fails it loudly when the event never comes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path


def wait_until(
    condition: Callable[[], object],
    what: str | Callable[[], str] = "the condition",
    timeout: float = 30.0,
    *,
    interval: float = 0.1,
) -> bool:
    """Poll `condition` until it holds (True), or fail: AssertionError naming `what` (a
    callable is asked at the failure, to say what was seen by then)."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g}s waiting for {described}")
        time.sleep(interval)


def steady(read: Callable[[], object], quiet_s: float) -> Callable[[], bool]:
    """A condition that holds once `read()` has returned the same value for `quiet_s`."""
    last: list[object] = [read()]
    since = [time.monotonic()]

    def check() -> bool:
        current = read()
        if current != last[0]:
            last[0], since[0] = current, time.monotonic()
        return time.monotonic() - since[0] >= quiet_s

    return check


def process_stopped(pid: int) -> bool:
    """Every thread of the process is in state T (stopped by SIGSTOP). A stop signal reaches
    a process's threads one by one after kill() returns: a thread still running may answer one
    more request."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks]
    except OSError:
        return False
    return bool(states) and all(s in ("T", "t") for s in states)


def freeze(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOP the process, and return once every thread of it has stopped."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: process_stopped(pid), f"process {pid} to stop", timeout, interval=0.01)
