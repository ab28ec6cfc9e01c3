"""Failpoints: named places in a run where a test can make the operator crash or pause.

The fault-injection suite needs the operator to die at an exact point (after a backup was
written but before the journal says so, say), which no outside observer can time. A failpoint
is inert unless `REMEDIATE_FAILPOINTS` names it, as `<point>=<action>[,<point>=<action>...]`:

- `kill`: SIGKILL this process (no cleanup, no journal record: a crash);
- `stop`: SIGSTOP this process (a frozen host or a long pause; SIGCONT resumes it);
- `sleep:<seconds>`: pause this thread;
- `raise`: raise an unexpected error (RuntimeError: what a bug does);
- `pause:<path>`: create `<path>.reached`, then hold this thread until `<path>.release`
  exists: the test does what it must at that very point, then releases the operator (no
  guessed duration, no race).

Points are `<action>:started` (journaled as started, nothing done yet), `<action>:done` (done,
not yet journaled) and `<action>:finished` (journaled as finished), for every action of a plan
step and of a rollback, e.g. `backup:done`, `wait in-sync:started` or (a rollback's)
`restore:done`; and a few inside an action, where a race or a crash can fall: `zk-write
topic-id:read` (the znode read and checked, not yet written); and `command:<name>` as a
command starts (`command:check`). Never set it in production.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ENV = "REMEDIATE_FAILPOINTS"


def parse(spec: str) -> dict[str, str]:
    """`point=action` pairs; anything malformed is ignored (a failpoint never breaks a run)."""
    points: dict[str, str] = {}
    for item in spec.split(","):
        point, sep, action = item.partition("=")
        if sep and point.strip():
            points[point.strip()] = action.strip()
    return points


def hit(point: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    action = parse(spec).get(point)
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        raise RuntimeError(f"failpoint {point}")
    elif action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action is not None and action.startswith("sleep:"):
        try:
            time.sleep(float(action.removeprefix("sleep:")))
        except ValueError:
            return
    elif action is not None and action.startswith("pause:"):
        pause(Path(action.removeprefix("pause:")))


def pause(path: Path) -> None:
    """Say the point is reached, then wait for the release (a test's, never production's)."""
    if not path.name:
        return
    try:
        path.with_name(path.name + ".reached").touch()
    except OSError:
        return
    release = path.with_name(path.name + ".release")
    while not release.exists():
        time.sleep(0.02)
