"""The operator killed (SIGKILL) mid-repair on real Apache Kafka, then `resume`d: at a restore
boundary and at a restart boundary on real 2.8.2 (the `restore-id` repair: the old id written
back and the controller re-elected, then the rolling restart of the brokers whose replicas took
the new id), and at both of the restore's boundaries on real 3.4.1 and 3.9.2, the last
ZooKeeper-mode release (on 3.x the repair is the restore alone). Each kill comes after the
action took effect and before the journal says so (`:done`), or right after a broker was stopped
(`stop:finished`). The run ends with the acceptance's checks: `check` 0, ZooKeeper's id in every
partition.metadata, a leader and the full ISR everywhere, every record acknowledged before and
during the run read back, nothing done twice, and no partition seen unavailable that the plan
did not name. The brokers have one log dir each on 2.8.2 and two on 3.x (the other
real-Kafka acceptances have the other count).

Slow: one real-Kafka sandbox per case (about a minute with the incident), one scan for the
plan, and one operator per kill, each resume waiting out the killed operator's ZooKeeper
session (4 s here) for the lock. About 3 minutes for 2.8.2 (three real broker restarts) and 2
for each 3.x release. On 3.x the plan also says why it offers no repair without restarts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from remediate.sandbox.real import releases
from remediate.sandbox.traffic import RetryingProducer
from tests.acceptance.repair_lab import (
    TOPIC,
    Reproduced,
    lost,
    named_by_plan,
    reproduce_and_plan,
    unconverged,
)
from tests.execute.sandbox_tools import HealthSampler, run_cli
from tests.faults.apply_lab import ApplyLab

pytestmark = pytest.mark.slow

# (kafka, candidate, where the operator is killed in the order the run reaches them)
CASES = {
    "real-2.8.2": ("restore-id", ("zk-write topic-id:done", "stop:finished")),
    "real-3.4.1": ("auto", ("zk-write topic-id:done", "zk-write controller-election:done")),
    "real-3.9.2": ("auto", ("zk-write topic-id:done", "zk-write controller-election:done")),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def reproduced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reproduced]:
    candidate, _ = CASES[request.param]
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp(f"resume-{request.param}") / "sandbox",
        kafka=request.param,
        session_timeout_s=4,
        candidate=candidate,
        # Every release runs the acceptance with one log dir per broker and with two: 2.8.2
        # here with one (with two in test_repair_28*.py), 3.4.1 and 3.9.2 here with two (with
        # one in tests/execute/test_apply_sandbox.py's fix under a producer).
        log_dirs=1 if request.param == "real-2.8.2" else 2,
    )
    yield lab
    lab.close()


@pytest.mark.timeout(900)
def test_killed_at_a_restore_and_a_restart_boundary_then_resumed_ends_healthy(
    reproduced: Reproduced,
) -> None:
    lab = reproduced
    _, kills = CASES[lab.state.kafka]
    kinds = [s["kind"] for s in lab.plan["steps"]]
    assert kinds[0] == "restore" and (
        "restart" in kinds if "stop:finished" in kills else kinds == ["restore"]
    ), kinds
    line = releases.release(lab.state.kafka).line
    # Read from the brokers' ApiVersions, not assumed, and named by the plan.
    assert lab.plan["kafka"] == {"brokers": dict.fromkeys(("1", "2", "3"), line), "unknown": {}}
    if line != "2.8":
        # No repair without restarts on Kafka 3.x.
        assert not {"move-keep-zk-id", "move-restore-id"} & {
            c["name"] for c in lab.plan["candidates"]
        }
        assert any(
            "a moved replica keeps its id on Kafka 3.0 and later (KAFKA-12426), and broker(s)"
            f" 1, 2, 3 do not run 2.8 (Kafka {line} on broker(s) 1, 2, 3)" in note
            for note in lab.plan["notes"]
        ), lab.plan["notes"]
        # From 3.1 the plan says the failover already stopped current consumers.
        assert any("INCONSISTENT_TOPIC_ID" in note for note in lab.plan["notes"]), lab.plan["notes"]
    ops = ApplyLab(lab.directory, lab.state, lab.zk, playbook=lab.directory / "unused.yaml")
    partitions = sorted(lab.result.old_partitions + lab.result.new_partitions)
    with (
        HealthSampler(lab.state) as sampler,
        RetryingProducer(lab.state, TOPIC, partitions) as producer,
    ):
        run = ops.killed_at_each((lab.plan_path, lab.plan), kills)
        resumed = ops.resume(run.run_id)
        assert resumed.exit_code == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.events("run-completed")
    finished = resumed.finished_steps()
    assert len(finished) == len(set(finished)), f"an action was completed twice: {finished}"
    # The restore's write and election, killed after they took effect, were found done.
    for action in ("zk-write topic-id", "zk-write controller-election"):
        (result,) = [
            r.get("result") or {}
            for r in resumed.events("step-finished")
            if str(r["step"]).endswith(f":{action}")
        ]
        if f"{action}:done" in kills:
            assert result.get("already") is True, (action, result)

    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    assert set(producer.acked_at) == set(partitions), producer.error_summary()
    assert lost(lab, TOPIC, lab.acked + producer.acked) == []
    named = named_by_plan(lab.plan)
    assert sampler.samples > 10
    assert sampler.offline <= named, f"offline, not in the plan: {sampler.offline - named}"
