"""The repairs without restarts on the 2.8 emulation (3 brokers, two log dirs each, after the
incident) with the operator killed at each of their destructive actions after the action took
effect and before the journal says so, then once more after the moves are over; `resume`
finishes each time, never starting a second move, a second trigger or a second election.

Slow: one sandbox per candidate (about 10 s with the incident), one scan for the plan, and one
operator process per kill, each resume waiting for the killed operator's ZooKeeper session
(4 s here) to free the lock. About 2 minutes per candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from remediate.ports import MOVE_THROTTLE
from remediate.sandbox import admin, cluster
from tests.acceptance.repair_lab import TOPIC, Reproduced, lost, reproduce_and_plan, unconverged
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import AREA, ApplyLab, Run

pytestmark = pytest.mark.slow

MOVE_KEEP, MOVE_RESTORE = "move-keep-zk-id", "move-restore-id"
THROTTLE = 32 << 20
# Where the operator is killed, in the order the run reaches them: each destructive action
# done and not yet journaled (`:done`), and the moves' wait journaled as finished.
KILLS = {
    MOVE_KEEP: (
        "throttle set:done",
        "move replicas:done",
        "wait moved:finished",
        "throttle remove:done",
        "trigger reassignment:done",
    ),
    MOVE_RESTORE: (
        "throttle set:done",
        "move replicas:done",
        "wait moved:finished",
        "throttle remove:done",
        "zk-write topic-id:done",
        "zk-write controller-election:done",
    ),
}
# What a resumed action reports when the crash came after it took effect.
NOT_AGAIN: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "move replicas": lambda result: result["moving"] == [] and result["already"],
    "trigger reassignment": lambda result: result["reassigned"] == [] and result["already"],
    "zk-write topic-id": lambda result: result.get("already") is True,
    "zk-write controller-election": lambda result: result.get("already") is True,
}


@pytest.fixture(scope="module", params=[MOVE_KEEP, MOVE_RESTORE])
def reproduced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reproduced]:
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp(f"moves-faults-{request.param}") / "sandbox",
        session_timeout_s=4,
        candidate=request.param,
        move_throttle=THROTTLE,
    )
    yield lab
    lab.close()


def finished_results(run: Run, action: str) -> list[dict[str, object]]:
    return [
        dict(r.get("result") or {})
        for r in run.events("step-finished")
        if str(r["step"]).endswith(f":{action}")
    ]


@pytest.mark.fault(
    AREA,
    "The operator is killed (SIGKILL) during each repair without restarts on Kafka 2.8"
    " (move-keep-zk-id, move-restore-id), one crash after another in the same run: with the"
    " copy throttle set, with the replica moves submitted, after the moves are over, with the"
    " throttle put back, and with the trigger sent (or the old id written back and the"
    " controller re-elected), each before the journal records it",
    "Each `resume` reads where the replicas are and what ZooKeeper holds before acting: no"
    " replica is moved twice, no partition reassigned twice, nothing written or elected"
    " twice, the throttle put back as it was before the run; no broker restarts and the"
    " cluster ends converged with `check` 0 and every acknowledged record readable",
)
@pytest.mark.timeout(900)
def test_sigkill_at_every_action_of_the_repairs_without_restarts(reproduced: Reproduced) -> None:
    lab = reproduced
    (name,) = [c["name"] for c in lab.plan["candidates"] if c["chosen"]]
    kills = KILLS[name]
    ops = ApplyLab(lab.directory, lab.state, lab.zk, playbook=lab.directory / "unused.yaml")
    pids = {b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers}

    run = ops.killed_at_each((lab.plan_path, lab.plan), kills)

    resumed = ops.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.events("run-completed")
    finished = resumed.finished_steps()
    assert len(finished) == len(set(finished)), f"an action was completed twice: {finished}"
    # Every action killed after it took effect was found done on resume, not done again.
    for point in kills:
        action, _, when = point.rpartition(":")
        results = finished_results(resumed, action)
        assert len(results) == 1, (action, results)
        if when == "done" and action in NOT_AGAIN:
            assert NOT_AGAIN[action](results[0]), (action, results[0])
    (throttled,) = finished_results(resumed, "throttle set")
    assert set(dict(throttled["before"]).values()) == {None}  # type: ignore[call-overload]
    for broker in lab.state.brokers:
        assert MOVE_THROTTLE not in admin.broker_settings(lab.zk, broker.broker_id)

    assert {
        b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers
    } == pids
    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    assert lost(lab, TOPIC, lab.acked) == []
