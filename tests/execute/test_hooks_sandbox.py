"""cluster.yaml's hooks around each batch of restarts, on the emulated sandbox: the hook is a
script in cluster.yaml's directory that writes what it was told and fails while a file says
so, as an alert silencer that is down would.

Slow: an emulated sandbox (about 5 s) and one restart repair, halted once by its hook.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediate.errors import HaltedError
from remediate.execute.hooks import hook_environment, run_hook
from remediate.sandbox.cluster import broker_pid
from tests.faults.apply_lab import ApplyLab, start_lab, stop_lab

HOOK = """#!/bin/sh
printf '%s|%s|%s|%s|%s\\n' "$REMEDIATE_HOOK" "$REMEDIATE_RUN_ID" "$REMEDIATE_STEP" \\
  "$REMEDIATE_BATCH_BROKERS" "$REMEDIATE_BATCH_HOSTS" >> hooks.log
if [ -e "fail-$REMEDIATE_HOOK" ]; then echo "the alert silencer is down" >&2; exit 4; fi
"""


# -- the hook runner, on this machine's shell ---------------------------------------------------


def test_a_hook_is_told_its_batch_and_runs_in_its_directory(tmp_path: Path) -> None:
    env = hook_environment(
        hook="before_batch", run_id="r1", cluster="c", step=2, brokers=[4, 5], hosts=["a", "b"]
    )
    result = run_hook(
        "before_batch",
        'printf "%s;%s;%s" "$REMEDIATE_BATCH_BROKERS" "$REMEDIATE_BATCH_HOSTS" "$PWD" > out',
        env=env,
        cwd=tmp_path,
        timeout_s=10,
    )
    assert result["exit_code"] == 0 and result["hook"] == "before_batch"
    assert (tmp_path / "out").read_text() == f"4 5;a b;{tmp_path}"


@pytest.mark.parametrize(
    ("command", "timeout_s", "said"),
    [
        (
            "echo nope >&2; exit 7",
            10,
            "the after_batch hook exited 7: echo nope >&2; exit 7 (nope)",
        ),
        ("exit 1", 10, "the after_batch hook exited 1: exit 1"),
        ("exec sleep 30", 0.5, "did not finish within 0.5s (hooks.timeout_s)"),
    ],
)
def test_a_failing_hook_halts_saying_which_and_why(
    tmp_path: Path, command: str, timeout_s: float, said: str
) -> None:
    with pytest.raises(HaltedError) as info:
        run_hook("after_batch", command, env={}, cwd=tmp_path, timeout_s=timeout_s)
    assert said in str(info.value)


# -- around a restart, on the sandbox ---------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApplyLab]:
    runs = start_lab(tmp_path_factory.mktemp("hooks") / "sandbox")
    try:
        (runs.directory / "hook.sh").write_text(HOOK)
        (runs.directory / "hook.sh").chmod(0o755)
        settings = runs.settings
        settings["hooks"] = {"before_batch": "./hook.sh", "after_batch": "./hook.sh"}
        runs.config.write_text(yaml.safe_dump(settings, sort_keys=False))
        yield runs
    finally:
        stop_lab(runs)


def steps(records: list[dict[str, Any]], event: str) -> list[str]:
    return [str(r["step"]).split(":", 2)[-1] for r in records if r["event"] == event]


@pytest.mark.slow
@pytest.mark.fault(
    "Faults during apply",
    "cluster.yaml's `before_batch` hook fails (an alert silencer that is down)",
    "the run halts before the batch's broker is stopped (exit 5), naming the hook, its exit"
    " code and its stderr, nothing changed; `resume` runs the hook again and finishes, the"
    " `after_batch` hook once the broker is back in sync",
)
def test_hooks_around_a_restart_a_failing_one_halts_before_the_stop(lab: ApplyLab) -> None:
    lab.wait_healthy()
    target = next(b for b in (1, 2, 3) if b != lab.controller())
    lab.plant([target])
    plan = lab.plan([target])
    planted = lab.snapshot_files(plan[1])
    pid = broker_pid(lab.directory, target)
    log = lab.directory / "hooks.log"
    failing = lab.directory / "fail-before_batch"
    failing.touch()

    halted = lab.finish(lab.start_apply(plan))
    assert halted.exit_code == 5, halted.stdout[-2000:] + halted.stderr[-3000:]
    (failed,) = halted.events("step-failed")
    assert failed["step"].endswith(":hook before-batch"), failed
    assert "exited 4: ./hook.sh (the alert silencer is down)" in failed["error"]
    assert "stop" not in steps(halted.records, "step-started")
    assert broker_pid(lab.directory, target) == pid and lab.snapshot_files(plan[1]) == planted

    failing.unlink()
    done = lab.resume(halted.run_id)
    assert done.exit_code == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert broker_pid(lab.directory, target) != pid
    host = lab.state.broker(target).host
    told = [line.split("|") for line in log.read_text().splitlines()]
    assert told == [
        ["before_batch", halted.run_id, "1", str(target), host],  # failed: halted the run
        ["before_batch", halted.run_id, "1", str(target), host],  # resumed
        ["after_batch", halted.run_id, "1", str(target), host],
    ]
    # Journaled in order: the before hook ends before the stop starts, the after hook once
    # the broker is back in sync.
    order = steps(done.records, "step-finished")
    assert order.index("hook before-batch") < order.index("stop")
    assert order.index("wait in-sync") < order.index("hook after-batch")
    lab.wait_healthy(timeout=90)
