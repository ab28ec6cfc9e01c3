"""The tests' one way to wait: for a condition, polled, never for a fixed time.

A test that must not race waits for the event it needs (a journal record, a znode, a
failpoint reached), with a bound that fails it loudly when the event never comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable


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
