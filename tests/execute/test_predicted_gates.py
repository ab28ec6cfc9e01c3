"""The executor held to the plan's prediction, on the in-memory cluster: a partition the plan
predicts unavailable does not block the pre-gate and one it does not predict does; the
post-gate does not wait for the ISRs the broker cannot rejoin, and halts on a partition newly
offline that the plan did not name; the stop timeout allows for a controlled shutdown that
retries; the convergence gate after the last step waits, and halts on its timeout."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from remediate.execute import steps
from remediate.execute.steps import RunAction
from remediate.formats.logdir import encode_partition_metadata
from remediate.plan import Plan, Prediction, RestartStep
from remediate.playbook import Action
from remediate.report.markdown import report_markdown
from remediate.report.model import build_report
from remediate.state import TopicPartition
from tests.execute.fake_cluster import OLD_ID, Topic, server_properties
from tests.execute.test_executor import PAYMENTS, PAYMENTS_0, World, plan_of, restart, world

Failpoint = Callable[[str], None]
ROLL = (
    Action.GATE_RESTART_SAFETY,
    Action.STOP,
    Action.START,
    Action.WAIT_REGISTERED,
    Action.WAIT_IN_SYNC,
)


NOTHING = Prediction()


def roll(broker: int, predicted: Prediction = NOTHING) -> Plan:
    """A rolling restart of `broker` with the given prediction (no file changes)."""
    step: RestartStep = replace(restart(broker, ROLL), predicted=predicted)
    return plan_of([step], playbook="rolling-restart")


def at_min_isr(tmp_path: Path) -> World:
    """payments-0's ISR is {1, 3}: exactly min.insync.replicas=2, broker 3 in it."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(2, "payments", 0)])
    return w


# -- the pre-gate ------------------------------------------------------------------------------


def test_a_partition_the_plan_predicts_unavailable_does_not_block_the_pre_gate(
    tmp_path: Path,
) -> None:
    w = at_min_isr(tmp_path)
    outcome = w.run(roll(3, Prediction(during=(TopicPartition("payments", 0),))))
    assert outcome.status == "completed", outcome.error
    assert w.kafka.commands == ["svc stop 3", "svc start 3"]
    (gate,) = w.records("gate")
    assert gate["blocker"] is None
    (pre,) = [
        r for r in w.records("step-finished") if r["step"].endswith(Action.GATE_RESTART_SAFETY)
    ]
    assert pre["result"]["predicted"]["during"] == ["payments-0"]


def test_a_partition_the_plan_does_not_predict_still_blocks_the_pre_gate(tmp_path: Path) -> None:
    w = at_min_isr(tmp_path)
    outcome = w.run(roll(3, Prediction(during=(TopicPartition("payments", 1),))))
    assert outcome.status == "halted"
    assert outcome.error == (
        "pre-gate for broker 3: payments-0 has exactly min.insync.replicas=2 in sync"
        " (isr [1, 3]); restarting broker 3 would take it below"
    )
    assert w.kafka.commands == [], "the broker was stopped"


# -- the post-gate -----------------------------------------------------------------------------


def test_the_post_gate_does_not_wait_for_an_isr_the_plan_says_the_broker_cannot_rejoin(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    w.kafka.stays_out.add((3, "payments", 1))  # its leader refuses broker 3 for now
    outcome = w.run(roll(3, Prediction(out_of_isr_after=(TopicPartition("payments", 1),))))
    assert outcome.status == "completed", outcome.error
    assert 3 not in w.kafka.isr[("payments", 1)]
    (waited,) = [r for r in w.records("step-finished") if r["step"].endswith(Action.WAIT_IN_SYNC)]
    assert waited["result"]["excused"] == ["payments-1"]
    assert w.clock.monotonic() < 1, "the post-gate waited for the excused ISR"


def test_without_the_prediction_the_post_gate_waits_for_that_isr_and_halts(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    w.kafka.stays_out.add((3, "payments", 1))
    outcome = w.run(roll(3))
    assert outcome.status == "halted"
    assert outcome.error == (
        "timed out after 5s waiting for broker 3 back in the ISR of every partition it hosts;"
        " last seen: 1 partition(s) without broker 3 in the ISR: payments-1"
    )


def lose_leader_of_payments_1(w: World) -> Failpoint:
    def lose(at: str) -> None:
        if at == f"{Action.WAIT_IN_SYNC}:started":
            w.kafka.leaderless.add(("payments", 1))
            w.kafka.write_states()

    return lose


def test_an_unpredicted_newly_offline_partition_halts_the_run_naming_it(tmp_path: Path) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    outcome = w.run(roll(3), failpoint=lose_leader_of_payments_1(w))
    assert outcome.status == "halted"  # exit 5: a gate halted the run
    assert outcome.error == (
        "timed out after 5s waiting for broker 3 back in the ISR of every partition it hosts;"
        " last seen: newly offline: payments-1 (the plan did not predict them)"
    )
    assert w.actions("step-failed") == [Action.WAIT_IN_SYNC]


def test_a_partition_predicted_unavailable_after_the_step_may_be_offline(tmp_path: Path) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    plan = roll(3, Prediction(after=(TopicPartition("payments", 1),)))
    outcome = w.run(plan, failpoint=lose_leader_of_payments_1(w))
    assert outcome.status == "completed", outcome.error
    (waited,) = [r for r in w.records("step-finished") if r["step"].endswith(Action.WAIT_IN_SYNC)]
    assert waited["result"]["unavailable_after"] == ["payments-1"]
    samples = w.records("sample")
    assert ["payments-1"] in [s["offline_partitions"] for s in samples]
    # The run report shows the prediction against what the samples saw.
    report = build_report(w.records(), plan.to_json())
    (row,) = report.availability
    assert (row.partition, row.predicted, row.unpredicted) == ("payments-1", ("after step 1",), ())
    assert "after step 1" in row.observed
    assert "| payments-1 | after step 1 |" in report_markdown(report)


# -- the stop timeout --------------------------------------------------------------------------


def lingering_stop(w: World, after_s: float) -> Failpoint:
    """Broker 3's stop command returns at once; the broker stops `after_s` later (its
    controlled shutdown retries: no other ISR member can lead)."""
    w.kafka.stop_lingers.add(3)

    def linger(at: str) -> None:
        if at == f"{Action.STOP}:started":
            w.clock.at(after_s, lambda: w.kafka.stop(3))

    return linger


def test_the_stop_timeout_allows_for_the_controlled_shutdown_retries_of_server_properties(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.with_properties = (3,)
    server_properties(tmp_path, 3).write_text(
        f"log.dirs={w.kafka.log_dir(3)}\n"
        "controlled.shutdown.max.retries=2\n"
        "controlled.shutdown.retry.backoff.ms=3000\n"
    )
    w.kafka.boot()
    linger = lingering_stop(w, after_s=8)  # over the playbook's 5 s, within 5 + 2 x 3 s
    outcome = w.run(
        roll(3, Prediction(last_in_isr=(TopicPartition("payments", 0),))), failpoint=linger
    )
    assert outcome.status == "completed", outcome.error
    (stopped,) = [r for r in w.records("step-finished") if r["step"].endswith(":stop")]
    assert stopped["result"]["stop_timeout_s"] == 11
    assert stopped["result"]["controlled_shutdown"] == {
        "max_retries": 2,
        "retry_backoff_ms": 3000,
        "allowance_s": 6.0,
        "source": f"broker 3:{server_properties(tmp_path, 3)}",
    }


def test_without_server_properties_kafkas_defaults_are_allowed(tmp_path: Path) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    linger = lingering_stop(w, after_s=18)  # within 5 s + 3 x 5 s
    outcome = w.run(
        roll(3, Prediction(last_in_isr=(TopicPartition("payments", 0),))), failpoint=linger
    )
    assert outcome.status == "completed", outcome.error
    (stopped,) = [r for r in w.records("step-finished") if r["step"].endswith(":stop")]
    assert stopped["result"]["stop_timeout_s"] == 20
    assert stopped["result"]["controlled_shutdown"]["source"] == "defaults"


def test_without_a_last_in_isr_partition_the_stop_timeout_is_the_playbooks(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    outcome = w.run(roll(3), failpoint=lingering_stop(w, after_s=8))
    assert outcome.status == "halted"
    assert outcome.error is not None
    assert outcome.error.startswith("timed out after 5s waiting for broker 3 to stop")


# -- the convergence gate ----------------------------------------------------------------------


def stale_repair(tmp_path: Path) -> tuple[World, Plan]:
    """Broker 3 holds an old id for payments-0 (out of its ISR); the plan repairs it."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(3, "payments", 0)])
    held = w.kafka.metadata(3, "payments", 0)
    held.write_bytes(encode_partition_metadata(OLD_ID))
    step = restart(3, steps.RESTART_ACTIONS, partitions=(PAYMENTS_0,), files=(str(held),))
    return w, plan_of([step], files={f"3:{held}": str(OLD_ID)})


def out_of_isr_at_convergence(w: World, *, back_after_s: float | None) -> Failpoint:
    """Broker 2 drops out of payments-1's ISR as the convergence gate starts; it comes back
    `back_after_s` later (or never)."""

    def drop(at: str) -> None:
        if at != f"{RunAction.CONVERGE}:started":
            return
        w.kafka.isr[("payments", 1)].remove(2)
        w.kafka.write_states()
        if back_after_s is not None:
            w.clock.at(back_after_s, rejoin)

    def rejoin() -> None:
        w.kafka.isr[("payments", 1)].append(2)
        w.kafka.write_states()

    return drop


def test_the_convergence_gate_waits_for_every_partition_to_converge(tmp_path: Path) -> None:
    w, plan = stale_repair(tmp_path)
    outcome = w.run(plan, failpoint=out_of_isr_at_convergence(w, back_after_s=2))
    assert outcome.status == "completed", outcome.error
    (converged,) = [r for r in w.records("step-finished") if r["step"].endswith(RunAction.CONVERGE)]
    assert converged["step"] == "1:cluster:wait converged"
    assert converged["result"]["topics"] == ["payments"]
    assert converged["result"]["converged_after_s"] >= 2


def test_the_convergence_gate_halts_when_a_partition_does_not_converge(tmp_path: Path) -> None:
    w, plan = stale_repair(tmp_path)
    outcome = w.run(plan, failpoint=out_of_isr_at_convergence(w, back_after_s=None))
    assert outcome.status == "halted"
    assert outcome.error == (
        "timed out after 5s waiting for every partition of the plan's topics to converge (a"
        " leader, its full ISR, ZooKeeper's id in every file); last seen: 1 partition(s)"
        " without a leader and their full ISR: payments-1"
    )
    assert w.actions("step-failed") == [RunAction.CONVERGE]


def test_the_convergence_gate_halts_on_a_file_that_disagrees_with_zookeeper(
    tmp_path: Path,
) -> None:
    w, plan = stale_repair(tmp_path)

    def plant(at: str) -> None:
        if at == f"{RunAction.CONVERGE}:started":
            w.kafka.metadata(1, "payments", 1).write_bytes(encode_partition_metadata(OLD_ID))

    outcome = w.run(plan, failpoint=plant)
    assert outcome.status == "halted"
    assert outcome.error is not None
    assert outcome.error.endswith(
        f"last seen: files still disagree with ZooKeeper: payments-1 holds {OLD_ID} on broker 1"
    )


def test_a_rolling_restart_has_no_convergence_gate(tmp_path: Path) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    assert w.run(roll(3)).status == "completed"
    assert RunAction.CONVERGE not in w.actions("step-started")
