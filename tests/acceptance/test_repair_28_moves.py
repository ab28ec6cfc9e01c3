"""Acceptance of the repair without restarts on Kafka 2.8 JBOD brokers (candidate
"move-keep-zk-id"), on real Apache Kafka 2.8.2 and on the 2.8 emulation, 3 brokers with two
log dirs each: after `sandbox reproduce`, the plan the model chooses moves every replica that
holds the stale id to another log dir of its broker, then reassigns each old partition to its
own replicas; `fix --yes` carries it out under an acks=all producer with retries. No broker
restarts, no file is deleted, and the cluster ends converged with every acknowledged record
readable.

Slow: the incident on each kind (real Kafka: about 20 s), a plan and fix's own scans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from remediate.sandbox import cluster
from tests.acceptance.repair_lab import (
    BYSTANDER,
    TOPIC,
    Reproduced,
    RetryingProducer,
    lost,
    metadata_files,
    named_by_plan,
    reproduce_and_plan,
    unconverged,
)
from tests.execute.sandbox_tools import HealthSampler, run_cli

pytestmark = pytest.mark.slow

MOVE = "move-keep-zk-id"


@pytest.fixture(scope="module", params=["emulated", "real-2.8.2"])
def reproduced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reproduced]:
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp(f"moves-{request.param}") / "sandbox", kafka=request.param
    )
    yield lab
    lab.close()


def test_the_model_chooses_the_moves_and_shows_what_they_copy(reproduced: Reproduced) -> None:
    plan = reproduced.plan
    candidates = {c["name"]: c for c in plan["candidates"]}
    assert candidates[MOVE]["chosen"] and candidates[MOVE]["restarts"] == 0
    stale_brokers = {int(p.split("/broker-")[1].split("/")[0]) for p in reproduced.stale_files}
    copied = {int(b): n for b, n in candidates[MOVE]["bytes_to_copy"].items()}
    assert set(copied) == stale_brokers and all(n > 0 for n in copied.values())
    assert [s["kind"] for s in plan["steps"]] == ["move", "trigger"]
    move, trigger = plan["steps"]
    moved = {(m["broker"], m["partition"]) for m in move["moves"]}
    assert {f"{TOPIC}-{p}" for p in reproduced.result.old_partitions} == set(trigger["partitions"])
    assert {p for _, p in moved} == set(trigger["partitions"])
    assert all(m["from_dir"] != m["to_dir"] for m in move["moves"])
    assert plan["newly_unavailable"] == {}
    assert "Move replicas to another log dir of their broker (no restart)" in reproduced.markdown


@pytest.mark.timeout(600)
def test_fix_heals_the_incident_with_no_restart(reproduced: Reproduced) -> None:
    lab = reproduced
    partitions = sorted(lab.result.old_partitions + lab.result.new_partitions)
    pids = {b.broker_id: cluster.broker_pid(lab.directory, b.broker_id) for b in lab.state.brokers}
    with (
        HealthSampler(lab.state) as sampler,
        RetryingProducer(lab.state, TOPIC, partitions) as producer,
    ):
        fixed = run_cli("fix", "-c", str(lab.config), "--yes", "--json", timeout=600)
    assert fixed.returncode == 0, fixed.stdout[-4000:] + fixed.stderr[-3000:]
    document: dict[str, Any] = json.loads(fixed.stdout)
    assert document["applied"] is True and document["check"]["status"] == "OK"
    assert [s["kind"] for s in document["plan"]["steps"]] == ["move", "trigger"]
    run = document["run"]
    assert run["deleted"] == [] and run["backups"] == []
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
