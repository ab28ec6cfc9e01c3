"""The repair on Kafka 2.8 (the incident after its failover and restart: every old partition's
replicas restarted with partition.metadata deleted, the active controller last) with the
operator killed between its steps; `resume` finishes it each time.

Slow: one sandbox (about 10 s with the incident), one scan for the plan (about 20 s on 2 cores),
one restart per broker (the playbook's 10 s stability window each) and one operator process
per kill, each resume waiting for the killed operator's ZooKeeper session (4 s here) to free
the lock. About 2 to 3 minutes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from remediate.execute.steps import StepKey
from tests.acceptance.repair_lab import TOPIC, Reproduced, lost, reproduce_and_plan, unconverged
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import AREA, ApplyLab, Run

pytestmark = pytest.mark.slow

# The run's closing action after a repair's last step (remediate/execute/steps.py).
CONVERGE = "wait converged"


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reproduced]:
    # The restart repair, which the operator asks for (with two log dirs per broker the model
    # would move the replicas instead).
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp("repair28-faults") / "sandbox",
        session_timeout_s=4,
        candidate="keep-zk-id",
    )
    yield lab
    lab.close()


def operator(lab: Reproduced) -> ApplyLab:
    """The fault suite's way of starting, killing and resuming the operator, on this sandbox
    (its own playbook plays no part: the plan names the one it was made with)."""
    return ApplyLab(lab.directory, lab.state, lab.zk, playbook=lab.directory / "unused.yaml")


def steps_done(run: Run) -> dict[int, list[str]]:
    """Plan step index -> its actions the journal has finished, in order (the run's closing
    convergence wait is keyed with the index after the last step)."""
    done: dict[int, list[str]] = {}
    for text in run.finished_steps():
        key = StepKey.parse(text)
        if key.index is not None:
            done.setdefault(key.index, []).append(key.action)
    return done


@pytest.mark.fault(
    AREA,
    "The operator is killed (SIGKILL) at every step boundary of the restart repair on Kafka"
    " 2.8 (old partitions already unwritable, their outage predicted by the plan): after each"
    " broker's last action, the active controller's included, one crash after another in the"
    " same run",
    "Each `resume` goes on with the next broker: no broker is restarted twice, nothing is"
    " deleted twice or without its verified backup; the last `resume` sees the partitions"
    " converge, and the cluster ends with a leader and its full ISR everywhere, ZooKeeper's id"
    " in every file, `check` 0 and every acknowledged record readable",
)
@pytest.mark.timeout(900)
def test_sigkill_at_every_step_boundary_of_the_28_repair(reproduced: Reproduced) -> None:
    lab = reproduced
    ops = operator(lab)
    plan = (lab.plan_path, lab.plan)
    steps = lab.plan["steps"]
    assert len(steps) >= 2, steps
    planted = ops.snapshot_files(lab.plan)
    boundary = [f"{s['actions'][-1]}:finished" for s in steps]

    def after_step(number: int, _point: str, run: Run) -> None:
        where = f"after step {number + 1} (broker {steps[number]['broker']})"
        done = steps_done(run)
        assert done == {i: list(steps[i]["actions"]) for i in range(number + 1)}, (where, done)
        ops.assert_nothing_deleted_without_backup(lab.plan, run.run_id, planted)

    run = ops.killed_at_each(plan, boundary, then=after_step, timeout=600)

    resumed = ops.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.run_id == run.run_id
    finished = resumed.finished_steps()
    assert len(finished) == len(set(finished)), f"an action was completed twice: {finished}"
    done = steps_done(resumed)
    assert {i: done.get(i) for i in range(len(steps))} == {
        i: list(s["actions"]) for i, s in enumerate(steps)
    }
    assert done.get(len(steps)) == [CONVERGE], "the run did not wait for convergence once"
    stops: list[int] = []
    for t in finished:
        if t.endswith(":stop"):
            broker = StepKey.parse(t).broker
            assert broker is not None, t  # a stop is a broker's action
            stops.append(broker)
    assert sorted(stops) == sorted(s["broker"] for s in steps), f"restarts: {stops}"
    assert len(resumed.events("run-resumed")) == len(steps)
    assert resumed.events("run-completed")
    assert ops.status(run.run_id)["status"] == "completed"
    ops.assert_nothing_deleted_without_backup(lab.plan, run.run_id, planted)

    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    assert lost(lab, TOPIC, lab.acked) == []
