"""The operator's hooks around each batch of broker restarts (cluster.yaml `hooks`): commands
on this host, such as silencing the batch's alerts or pausing a rebalancer, run with the run
id, the batch's broker ids and hosts in their environment. A hook that fails or outlasts its
timeout halts the run (HaltedError, journaled by the recorder): before the batch, nothing of
it has been stopped; after it, the batch is back and healthy.

Only the exit code and the time a hook took are journaled, never its output (which is the
operator's, and may hold anything)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from remediate.errors import HaltedError

SHELL = "/bin/sh"
BEFORE, AFTER = "before_batch", "after_batch"


def hook_environment(
    *,
    hook: str,
    run_id: str,
    cluster: str,
    step: int,
    brokers: Sequence[int],
    hosts: Sequence[str],
) -> dict[str, str]:
    """What a hook is told: which hook, which run, which batch (ids and hosts, space-separated,
    in the same order)."""
    return {
        "REMEDIATE_HOOK": hook,
        "REMEDIATE_RUN_ID": run_id,
        "REMEDIATE_CLUSTER": cluster,
        "REMEDIATE_STEP": str(step),
        "REMEDIATE_BATCH_BROKERS": " ".join(str(b) for b in brokers),
        "REMEDIATE_BATCH_HOSTS": " ".join(hosts),
    }


def run_hook(
    hook: str, command: str, *, env: Mapping[str, str], cwd: Path, timeout_s: float
) -> dict[str, Any]:
    """Run `command` (cluster.yaml's, trusted as the operator's own) with `env` added to this
    process's environment, in a session of its own (a terminal's Ctrl-C is the run's to
    handle); its exit code and duration, or HaltedError."""
    started = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S602 (cluster.yaml's command, run as the operator wrote it)
            command,
            shell=True,
            executable=SHELL,
            cwd=cwd,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise HaltedError(
            f"the {hook} hook did not finish within {timeout_s:g}s (hooks.timeout_s): {command}"
        ) from exc
    except OSError as exc:
        raise HaltedError(f"the {hook} hook could not run: {exc}") from exc
    took = round(time.monotonic() - started, 3)
    if done.returncode != 0:
        said = " / ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise HaltedError(
            f"the {hook} hook exited {done.returncode}: {command}"
            + (f" ({said[-300:]})" if said else "")
        )
    return {"hook": hook, "exit_code": 0, "seconds": took}
