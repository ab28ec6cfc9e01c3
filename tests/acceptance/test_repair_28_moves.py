"""Acceptance of the repairs without restarts on Kafka 2.8 JBOD brokers, on real Apache Kafka
2.8.2, 3 brokers with two log dirs each, after `sandbox reproduce` (the 2.8 emulation's moves
are proved in the fault suite, tests/faults/test_moves_faults.py):

- "move-keep-zk-id": every replica holding the stale id moves to another log dir of its
  broker, then each old partition is reassigned to its own replicas;
- "move-restore-id": every replica holding ZooKeeper's id (the partitions the legacy client
  added) moves, then the old id is written back and the controller re-elected.

`fix --yes` carries each out under an acks=all producer with retries, with cluster.yaml's
copy throttle: no broker restarts, no file is deleted, each throttle is put back, and the
cluster ends converged with every acknowledged record readable.

Slow: the incident on each kind and candidate (real Kafka: about 20 s), a plan and fix's own
scans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from remediate.ports import MOVE_THROTTLE
from remediate.sandbox import admin, cluster
from remediate.sandbox.traffic import RetryingProducer
from tests.acceptance.repair_lab import (
    BYSTANDER,
    TOPIC,
    Reproduced,
    journal_records,
    lost,
    metadata_files,
    named_by_plan,
    reproduce_and_plan,
    unconverged,
)
from tests.execute.sandbox_tools import HealthSampler, run_cli

pytestmark = pytest.mark.slow

MOVE_KEEP, MOVE_RESTORE = "move-keep-zk-id", "move-restore-id"
STEPS = {MOVE_KEEP: ["move", "trigger"], MOVE_RESTORE: ["move", "restore"]}
# The copy throttle cluster.yaml sets (bytes per second): set on each moving broker, then
# put back as it was (there was none).
THROTTLE = 64 << 20
# Real Kafka only: the emulator's moves run to the end in the fault suite, killed at every
# action and resumed (tests/faults/test_moves_faults.py).
LABS = [("real-2.8.2", candidate) for candidate in (MOVE_KEEP, MOVE_RESTORE)]


@pytest.fixture(scope="module", params=LABS, ids=[f"{k}-{c}" for k, c in LABS])
def reproduced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reproduced]:
    kafka, candidate = request.param
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp(f"moves-{kafka}") / "sandbox",
        kafka=kafka,
        candidate=candidate,
        move_throttle=THROTTLE,
    )
    yield lab
    lab.close()


def chosen(lab: Reproduced) -> str:
    (name,) = [c["name"] for c in lab.plan["candidates"] if c["chosen"]]
    return str(name)


def test_both_moves_are_weighed_and_show_what_they_copy(reproduced: Reproduced) -> None:
    plan, name = reproduced.plan, chosen(reproduced)
    candidates = {c["name"]: c for c in plan["candidates"]}
    assert {MOVE_KEEP, MOVE_RESTORE} <= set(candidates)
    assert candidates[MOVE_KEEP]["restarts"] == candidates[MOVE_RESTORE]["restarts"] == 0
    old = {f"{TOPIC}-{p}" for p in reproduced.result.old_partitions}
    new = {f"{TOPIC}-{p}" for p in reproduced.result.new_partitions}
    stale_brokers = {int(p.split("/broker-")[1].split("/")[0]) for p in reproduced.stale_files}
    copied = {int(b): n for b, n in candidates[name]["bytes_to_copy"].items()}
    assert all(n > 0 for n in copied.values())
    assert [s["kind"] for s in plan["steps"]] == STEPS[name]
    move, then = plan["steps"]
    assert move["throttle_bytes_per_s"] == THROTTLE
    assert all(m["from_dir"] != m["to_dir"] for m in move["moves"])
    moved = {m["partition"] for m in move["moves"]}
    if name == MOVE_KEEP:
        assert set(copied) == stale_brokers
        assert moved == old == set(then["partitions"])
    else:
        # Only the partitions the legacy client added move; the old id is written back.
        assert moved == new
        assert then["topic"] == TOPIC and then["topic_id"] == reproduced.result.old_id
        assert then["reelect"] is True and then["rolled_later"] == []
    assert plan["newly_unavailable"] == {}
    assert "Move replicas to another log dir of their broker (no restart)" in reproduced.markdown
    assert f"throttled to {THROTTLE >> 20}.0 MiB/s per broker" in reproduced.markdown


@pytest.mark.timeout(600)
def test_fix_heals_the_incident_with_no_restart(reproduced: Reproduced) -> None:
    lab, name = reproduced, chosen(reproduced)
    partitions = sorted(lab.result.old_partitions + lab.result.new_partitions)
    pids = {b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers}
    with (
        HealthSampler(lab.state) as sampler,
        RetryingProducer(lab.state, TOPIC, partitions) as producer,
    ):
        fixed = run_cli(
            "fix", "-c", str(lab.config), "--yes", "--json", "--candidate", name, timeout=600
        )
    assert fixed.returncode == 0, fixed.stdout[-4000:] + fixed.stderr[-3000:]
    document: dict[str, Any] = json.loads(fixed.stdout)
    assert document["applied"] is True and document["check"]["status"] == "OK"
    assert [s["kind"] for s in document["plan"]["steps"]] == STEPS[name]
    run = document["run"]
    assert run["deleted"] == [] and run["backups"] == []
    # Each moving broker's copy throttle was set, then put back as it was (none).
    records = journal_records(lab, run["run_id"])
    (throttled,) = [
        r["result"]
        for r in records
        if r["event"] == "step-finished" and r["step"].endswith(":throttle set")
    ]
    assert throttled["throttle"] == str(THROTTLE)
    assert set(throttled["before"].values()) == {None}
    assert [r for r in records if r["event"] == "step-finished" and "throttle remove" in r["step"]]
    for broker in lab.state.brokers:
        assert MOVE_THROTTLE not in admin.broker_settings(lab.zk, broker.broker_id)
    # The very same broker processes: nothing was restarted.
    assert {
        b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers
    } == pids
    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0
    # Every partition took writes during the run or after, and nothing acknowledged is lost.
    assert set(producer.acked_at) == set(partitions), producer.error_summary()
    after = lab.kafka.produce(TOPIC, count=3 * len(partitions), key_prefix="after", retries=20)
    assert len(after.acked) == 3 * len(partitions), after.to_json()
    assert lost(lab, TOPIC, lab.acked + producer.acked + after.acked) == []
    named = named_by_plan(document["plan"])
    assert sampler.samples > 3
    assert sampler.offline <= named and sampler.below_min_isr <= named
    assert metadata_files(lab.state, BYSTANDER) == lab.bystander_files
