"""Restarts in batches on the emulated sandbox: five brokers, the topic replicated 3 times with
min.insync.replicas 1, so that two brokers may restart together (each partition keeps an
in-sync replica holding ZooKeeper's id outside the batch). The plan puts them in one batch;
`apply` stops, backs up, deletes and starts them as one step, with the hooks once around it;
it resumes after SIGKILL at each boundary, halts when a broker of the batch does not come back
and finishes once it can, and lets a broker that became the controller leave its batch.

Slow: a five-broker sandbox (about 6 s) and several runs of one or two batches.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediate.execute.steps import StepKey
from remediate.sandbox import admin, cluster
from tests.faults.apply_lab import ApplyLab, Run, journal_has, runs, start_lab, stop_lab
from tests.wait import wait_until

AREA = "Faults during apply"
HOOK = """#!/bin/sh
printf '%s|%s|%s|%s\\n' "$REMEDIATE_HOOK" "$REMEDIATE_RUN_ID" "$REMEDIATE_BATCH_BROKERS" \\
  "$REMEDIATE_BATCH_HOSTS" >> hooks.log
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApplyLab]:
    started = start_lab(tmp_path_factory.mktemp("batches") / "sandbox", brokers=5, min_isr=1)
    try:
        (started.directory / "hook.sh").write_text(HOOK)
        (started.directory / "hook.sh").chmod(0o755)
        settings = started.settings
        settings["hooks"] = {"before_batch": "./hook.sh", "after_batch": "./hook.sh"}
        started.config.write_text(yaml.safe_dump(settings, sort_keys=False))
        yield started
    finally:
        stop_lab(started)


@pytest.fixture
def healthy_lab(lab: ApplyLab) -> Iterator[ApplyLab]:
    """The lab, healthy before the test and left healthy after it (or the test fails, and the
    lab is reset so that the next test does not fail for it)."""
    try:
        lab.wait_healthy(timeout=90)
    except AssertionError:
        lab.reset()
    yield lab
    try:
        lab.wait_healthy(timeout=90)
    except AssertionError:
        lab.reset()
        raise


def pair(lab: ApplyLab) -> tuple[int, int]:
    """Two brokers other than the controller: every partition holding both has its third
    replica, with ZooKeeper's id, outside them."""
    controller = lab.controller()
    first, second = [b for b in range(1, 6) if b != controller][:2]
    return first, second


def batch_plan(lab: ApplyLab) -> tuple[tuple[int, int], tuple[Path, dict[str, Any]], Any]:
    lab.wait_healthy(timeout=90)
    together = pair(lab)
    lab.plant(together)
    plan = lab.plan(together)
    assert [s["batch"] for s in plan[1]["steps"]] == [list(together)] * 2, plan[1]["steps"]
    return together, plan, lab.snapshot_files(plan[1])


def step_of(record: dict[str, Any]) -> StepKey:
    return StepKey.parse(str(record["step"]))


def records_of(run: Run, action: str) -> list[tuple[str, int | None]]:
    return [
        (str(r["event"]), step_of(r).broker)
        for r in run.records
        if r["event"] in ("step-started", "step-finished") and step_of(r).action == action
    ]


def hook_calls(lab: ApplyLab, run_id: str) -> list[list[str]]:
    log = lab.directory / "hooks.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split("|") for line in lines if line.split("|")[1] == run_id]


@pytest.mark.slow
def test_a_batch_restarts_its_brokers_together_and_heals(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    (a, b), plan, _ = batch_plan(lab)
    document = plan[1]
    assert "restart together" in document["steps"][0]["batch_reason"]
    chosen = document["batchings"][0]
    assert chosen["chosen"] and chosen["batches"] == [[a, b]], document["batchings"]

    run = lab.finish(lab.start_apply(plan))
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-3000:]
    # Side by side: both stops and both starts began before either finished.
    for action in ("stop", "start"):
        seen = records_of(run, action)
        assert seen[:2] == [("step-started", a), ("step-started", b)] or seen[:2] == [
            ("step-started", b),
            ("step-started", a),
        ], (action, seen)
    # Each stop read the clean-shutdown markers of every log dir: Kafka's clean stop.
    for record in run.events("step-finished"):
        if step_of(record).action == "stop":
            clean = record["result"]["clean_shutdown"]
            assert clean and all(clean.values()), record
    hosts = f"{lab.state.broker(a).host} {lab.state.broker(b).host}"
    assert hook_calls(lab, run.run_id) == [
        ["before_batch", run.run_id, f"{a} {b}", hosts],
        ["after_batch", run.run_id, f"{a} {b}", hosts],
    ]
    lab.wait_healthy(timeout=90)


@pytest.mark.slow
@pytest.mark.fault(
    AREA,
    "The operator is SIGKILLed at each boundary of a batch of two brokers: after a stop, a"
    " deletion, a start, a registration",
    "After each kill the run is still running; each `resume` carries on from the journal (the"
    " before hook again while a broker of the batch is still up) and the last one completes;"
    " every file deleted was backed up first",
)
def test_a_batch_resumes_after_sigkill_at_each_boundary(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    _, plan, planted = batch_plan(lab)
    run = lab.killed_at_each(
        plan,
        ["stop:finished", "delete:finished", "start:finished", "wait registered:finished"],
    )
    done = lab.resume(run.run_id)
    assert done.exit_code == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    lab.wait_healthy(timeout=90)


@pytest.mark.slow
@pytest.mark.fault(
    AREA,
    "A broker of a batch does not come back: its process exits at once after the batch's"
    " start (its log dir's meta.properties names another broker.id)",
    "The batch's other broker registers and rejoins; the run halts (exit 5) naming the broker"
    " that did not; once the cause is fixed, `resume` starts it again and finishes",
)
def test_a_broker_of_a_batch_that_does_not_come_back_halts_the_run(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    (a, b), plan, planted = batch_plan(lab)
    before = runs(lab)
    pause = lab.pause("batch-after-delete")
    operator = lab.start_apply(plan, failpoints=f"delete:finished={pause.action}")
    pause.wait(operator)
    assert journal_has(lab, before, "step-finished", ":delete")
    with lab.foreign_log_dir(b):
        pause.release()
        run = lab.finish(operator)
        said = run.stdout[-2000:] + run.stderr[-3000:] + str(run.events("step-failed"))
        assert run.exit_code == 5, said
        (halted,) = run.events("run-halted")
        assert f"broker {b} exited after its start" in halted["error"], said
        registered = {int(x) for x in lab.zk.get_children("/brokers/ids")}
        assert a in registered and b not in registered, (registered, said)
        lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    done = lab.resume(run.run_id)
    assert done.exit_code == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lab.wait_healthy(timeout=90)


@pytest.mark.slow
@pytest.mark.fault(
    AREA,
    "The controller moves, during a rolling restart in batches, to a broker of a batch still"
    " to come",
    "The controller is read again before each batch: the new controller leaves its batch"
    " (journaled) and restarts alone and last; the run completes",
)
def test_a_broker_that_becomes_the_controller_leaves_its_batch(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    lab.wait_healthy(timeout=90)
    # Two brokers at most per batch: two batches of two, then the controller.
    plan = lab.plan(
        [1, 2, 3, 4, 5],
        playbook=lab.directory / "quick-rolling.yaml",
        options=("--max-batch-size", "2"),
    )
    batches: list[list[int]] = []
    for step in plan[1]["steps"]:
        batch = step.get("batch") or [step["broker"]]
        if not batches or batches[-1] != batch:
            batches.append(batch)
    later = next((batch for batch in batches[1:] if len(batch) > 1), None)
    assert later is not None, batches
    target, mate = later[-1], later[0]
    before = runs(lab)
    pause = lab.pause("after-first-batch")
    operator = lab.start_apply(plan, failpoints=f"wait in-sync:finished={pause.action}")
    pause.wait(operator)
    assert journal_has(lab, before, "step-finished", ":wait in-sync")
    # Hand the controller to `target`: every other running broker frozen while it is elected.
    frozen = [
        pid
        for broker in range(1, 6)
        if broker != target and (pid := cluster.broker_pid(lab.directory, broker)) is not None
    ]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        admin.failover_controller(lab.zk)
        wait_until(lambda: lab.controller() == target, f"broker {target} to be the controller")
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    pause.release()
    run = lab.finish(operator)
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-3000:]
    left = f"broker {target} is now the active controller: it leaves its batch"
    assert any(left in str(r.get("decision")) for r in run.events("gate"))
    stops = [step_of(r).broker for r in run.events("step-started") if step_of(r).action == "stop"]
    assert stops[-1] == target and stops.index(mate) < stops.index(target), stops
    lab.wait_healthy(timeout=90)
    lab.plans.clear()  # the controller epoch moved on
