"""Kafka's errors inside the journal, on real Kafka 2.8.2 (3 brokers, two log dirs each, after
the incident): a moving broker killed in the middle of the move-keep-zk-id repair makes its
admin requests fail. The run journals the failure and halts (exit 5), saying the copy throttle
is still set; once the broker is back, having forgotten its moves, `resume` asks them again,
finishes them, and nothing acknowledged is lost.

Slow: real Kafka's incident (about 20 s), a plan, a run, a broker restart and a resume.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.ports import MOVE_THROTTLE
from remediate.sandbox import admin, cluster
from remediate.sandbox.plumbing import process
from tests.acceptance.repair_lab import TOPIC, Reproduced, lost, reproduce_and_plan, unconverged
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import ApplyLab

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("2.8.2")]

MOVE_KEEP = "move-keep-zk-id"
# The least throttle Kafka takes: the copies are still going on when the broker is killed.
THROTTLE = 1024


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reproduced]:
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp("kafka-errors") / "sandbox",
        kafka="real-2.8.2",
        session_timeout_s=4,
        candidate=MOVE_KEEP,
        move_throttle=THROTTLE,
    )
    yield lab
    lab.close()


@pytest.mark.fault(
    "Faults during apply",
    "A broker is killed in the middle of a repair that moves replicas (real Kafka 2.8.2, the"
    " copy throttle set, the moves submitted): its admin requests fail",
    "The wait's DescribeLogDirs fails: the run journals the failed step and halts (exit 5),"
    " naming the request and the broker and saying that the copy throttle is still set; once"
    " the broker is back (its future logs lost with it, so it has forgotten its moves),"
    " `resume` asks its moves again, finishes them, puts the throttle back and the cluster"
    " converges with every acknowledged record readable",
)
def test_a_broker_killed_in_the_middle_of_a_move_halts_the_run(reproduced: Reproduced) -> None:
    lab = reproduced
    (step,) = [s for s in lab.plan["steps"] if s["kind"] == "move"]
    victim = sorted({m["broker"] for m in step["moves"]})[0]
    ops = ApplyLab(lab.directory, lab.state, lab.zk, playbook=lab.directory / "unused.yaml")
    pause = ops.pause("moves-submitted")
    operator = ops.start_apply(
        (lab.plan_path, lab.plan), failpoints=f"wait moved:started={pause.action}"
    )
    pause.wait(operator)
    pid = cluster.broker_pid(lab.directory, victim)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    process.wait_gone(pid, timeout=30)
    # Its copies were under way (one KiB/s): gone with it, as for a broker that died before it
    # made its future logs, which then starts with its replicas where they were.
    futures = [path for d in lab.state.broker(victim).log_dirs for path in Path(d).glob("*-future")]
    assert futures, lab.state.broker(victim).log_dirs
    for path in futures:
        shutil.rmtree(path)
    pause.release()
    run = ops.finish(operator)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    (failed,) = run.events("step-failed")
    assert str(failed["step"]).endswith(":wait moved")
    (halted,) = run.events("run-halted")
    assert "DescribeLogDirs" in halted["error"], halted["error"]
    assert f"{MOVE_THROTTLE}={THROTTLE}) is still set on broker(s)" in halted["error"]
    assert "Traceback" not in run.stderr
    assert ops.status(run.run_id)["status"] == "halted"

    cluster.start_broker(lab.directory, victim, wait=True)
    resumed = ops.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.events("run-completed")
    (waited,) = [
        r for r in resumed.events("step-finished") if str(r["step"]).endswith(":wait moved")
    ]
    # Moves whose future log was lost (`<topic>-<n>.<id>-future`) asked again: those the
    # broker had not swapped yet when it was killed.
    forgotten = {f"{p.name.rsplit('.', 1)[0]} on broker {victim}" for p in futures}
    sent_again = set(waited["result"].get("sent_again", []))
    assert sent_again and sent_again <= forgotten, (waited, forgotten)
    for broker in lab.state.brokers:
        assert MOVE_THROTTLE not in admin.broker_settings(lab.zk, broker.broker_id)
    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    assert lost(lab, TOPIC, lab.acked) == []
