"""Acceptance of the repair on Kafka 2.8: the incident of `sandbox reproduce` on real Apache
Kafka 2.8.2 (3 brokers, the real 1.0 client's legacy write, confluent-kafka's producer), and
on the 2.8 emulation with 5 brokers (the topic has RF 3 either way: not every broker holds
every partition; the emulator's 3 brokers run the same repair in the fault suite), is planned
with both candidate repairs weighed, then repaired by `fix --yes` under an acks=all producer
with retries, and ends converged with every acknowledged record readable.

The 3.4 emulation's repair (a restore, no restart) is proved by
tests/execute/test_apply_sandbox.py::test_the_incident_is_healed_without_a_restart, which also
proves that a topic without findings is never touched there (no backup, no file changed, its
leader epochs unchanged). The operator killed at every step boundary of this repair is in the
fault suite: tests/faults/test_repair_28_faults.py.

Slow: each kind starts one sandbox (about 10 s with the incident), scans it three times (the
plan, and fix's own plan and check: about 20 s each on 2 cores) and restarts every broker
that holds the stale id one after the other (the playbook's 10 s stability window each).
About 2 min for the 5 emulated brokers and 3 min for real Kafka.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remediate.kafka_admin import KafkaPythonAdmin
from remediate.ports import DescribedSetting
from remediate.sandbox.traffic import RetryingProducer
from tests.acceptance.repair_lab import (
    BYSTANDER,
    TOPIC,
    Reproduced,
    backed_up_paths,
    every_partition,
    journal_records,
    lost,
    metadata_files,
    named_by_plan,
    observed_in_samples,
    predicted_in_journal,
    reproduce_and_plan,
    step_prediction,
    unconverged,
)
from tests.execute.sandbox_tools import HealthSampler, run_cli

pytestmark = pytest.mark.slow

# With two log dirs per broker the model would move the stale replicas instead (no restart:
# tests/acceptance/test_repair_28_moves.py); this module proves the restart repair, which
# the operator asks for.
KEEP = "keep-zk-id"
LEDGER = "ledger"
CANDIDATES = {KEEP, "restore-id", "move-keep-zk-id", "move-restore-id"}


@pytest.fixture(
    scope="module",
    params=[(5, "emulated"), (3, "real-2.8.2")],
    ids=["5-brokers-rf3", "real-kafka-2.8.2"],
)
def reproduced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reproduced]:
    """The incident reproduced, and `plan -o plan.json --format markdown` made on it (before
    any test of the module changes anything). On real Kafka 2.8.2 the brokers keep Kafka's
    defaults (controlled shutdown, auto leader rebalancing and every timer), but for the few
    that cannot work on two cores (remediate/sandbox/real/jvm_broker.py)."""
    brokers, kafka = request.param
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp(f"repair28-{brokers}-{kafka}") / "sandbox",
        brokers=brokers,
        kafka=kafka,
        candidate=KEEP,
        # On real Kafka, the proof that the brokers' min.insync.replicas is the one planned
        # with: a topic it makes unwritable while either of its two replicas restarts.
        replication_2_topic=LEDGER if kafka.startswith("real") else None,
    )
    yield lab
    lab.close()


def test_the_plan_weighs_both_candidates_and_orders_the_restarts_by_the_model(
    reproduced: Reproduced,
) -> None:
    lab = reproduced
    plan = lab.plan
    assert not plan["refused"] and plan["refusals"] == [], plan["refusals"]

    # Every candidate, each with its cost; exactly one chosen: the restart repair the lab
    # asks for (with two log dirs per broker the model itself would move the replicas,
    # which makes nothing newly unavailable: tests/acceptance/test_repair_28_moves.py).
    candidates = {c["name"]: c for c in plan["candidates"]}
    assert set(candidates) == CANDIDATES, plan["candidates"]
    chosen = [c for c in plan["candidates"] if c["chosen"]]
    assert len(chosen) == 1, plan["candidates"]
    (choice,) = chosen
    for candidate in plan["candidates"]:
        assert candidate["converges"] is True, candidate
        assert isinstance(candidate["restarts"], int) and candidate["restarts"] >= 0
        assert isinstance(candidate["unavailable_phases"], int)
        if candidate["name"].startswith("move-"):
            assert candidate["restarts"] == 0 and candidate["newly_unavailable"] == []
    assert choice["name"] == KEEP
    assert set(plan["newly_unavailable"]) == set(choice["newly_unavailable"])

    # The chosen repair: keep ZooKeeper's id; delete only partition.metadata of every stale
    # replica; the brokers in the ZooKeeper ISR of stale partitions back to back, the active
    # controller last, each position with a reason.
    # Every rule is checked and all that fail are reported together.
    problems: list[str] = []
    if choice["name"] != "keep-zk-id":
        problems.append(f"chosen: {choice['name']}, not keep-zk-id")
    if {s["kind"] for s in plan["steps"]} != {"restart"}:
        problems.append(f"step kinds {[s['kind'] for s in plan['steps']]}, not only restarts")
    files = {f for s in plan["steps"] for f in s["files"]}
    if files != lab.stale_files:
        extra = sorted({Path(f).name for f in files - lab.stale_files})
        problems.append(
            f"files: {len(files - lab.stale_files)} beyond the stale partition.metadata"
            f" (named {extra}), {len(lab.stale_files - files)} stale ones missing"
        )
    stale_brokers = {int(Path(f).parts[-4].removeprefix("broker-")) for f in lab.stale_files}
    order = [s["broker"] for s in plan["steps"] if s["kind"] == "restart"]
    if sorted(order) != sorted(stale_brokers):
        problems.append(f"restarted {order}, brokers holding the stale id {sorted(stale_brokers)}")
    if not order or order[-1] != plan["controller"]:
        problems.append(f"order {order}: the controller ({plan['controller']}) is not last")
    # Back to back: no broker out of those ISRs between two that are in them. Where the
    # out-of-ISR brokers go is the model's choice (after the block when the stale partitions
    # are all broken already, as on 3 brokers; before it when the block newly breaks
    # partitions that the out-of-ISR brokers do not host, as on 5).
    others = [b for b in order if b != plan["controller"]]
    block = [i for i, b in enumerate(others) if b in lab.in_stale_isr]
    if block and block != list(range(block[0], block[-1] + 1)):
        problems.append(
            f"order {order}: the brokers in the stale partitions' ZooKeeper ISRs"
            f" ({sorted(lab.in_stale_isr)}) are not restarted back to back"
        )
    stale_partitions = {f"{TOPIC}-{n}" for n in lab.result.old_partitions}
    ranks = [0 if b in lab.in_stale_isr else 1 for b in others]
    if stale_partitions <= set(plan["unavailable_now"]) and ranks != sorted(ranks):
        problems.append(
            f"order {order}: every stale partition is unavailable already, so the brokers out"
            f" of their ISRs ({sorted(set(others) - lab.in_stale_isr)}) must come after the"
            " ones in them (first, they would cost a whole restart of outage)"
        )
    for step in plan["steps"]:
        if not step.get("order_reason"):
            problems.append(f"broker {step.get('broker')}'s position has no reason")
        if not set(step["predicted"]) >= {"during", "after", "out_of_isr_after", "last_in_isr"}:
            problems.append(f"broker {step.get('broker')}: prediction {step['predicted']}")
    if [f for f in files if f"/{BYSTANDER}-" in f]:
        problems.append(f"files of {BYSTANDER}, a topic without findings, are in the plan")
    assert problems == []


def test_the_markdown_shows_both_candidates_and_every_unavailable_partition_with_its_steps(
    reproduced: Reproduced,
) -> None:
    plan, markdown = reproduced.plan, reproduced.markdown
    candidates = {c["name"]: c for c in plan["candidates"]}
    assert set(candidates) == CANDIDATES, plan["candidates"]
    # Both candidates with their costs ...
    for name, candidate in candidates.items():
        assert name in markdown, f"candidate {name} is not in the markdown"
        assert re.search(rf"\b{candidate['restarts']}\b.*restart", markdown), (
            f"{name}'s cost ({candidate['restarts']} restarts) is not in the markdown"
        )
    # ... and names every partition that will be unavailable, with its steps.
    for name, candidate in candidates.items():
        for partition, phases in candidate["windows"].items():
            lines = [line for line in markdown.splitlines() if partition in line]
            assert lines, f"{partition} ({name}: unavailable {phases}) is not in the markdown"
            steps = [p for p in phases if p.startswith(("step", "after step"))]
            if steps:
                assert any("step" in line for line in lines), (
                    f"{partition}'s steps {steps} ({name}) are not in the markdown: {lines}"
                )
    for step in plan["steps"]:
        for partition in step_prediction(step):
            assert partition in markdown, f"{partition} (step for broker {step['broker']})"
    for partition in plan["newly_unavailable"]:
        head, _, _ = markdown.partition(partition)
        assert plan["digest"] in head, f"{partition} is not listed under the digest"


def test_min_isr_is_the_brokers_and_the_partitions_it_makes_unavailable_need_acceptance(
    reproduced: Reproduced,
) -> None:
    """min.insync.replicas=2 is set broker-wide in server.properties and the topics have no
    override: the plan says so. On real Kafka, the topic with two replicas is unwritable
    (acks=all) while either restarts: the plan names it, and `fix --yes` refuses without
    --accept-unavailable, saying which min.insync.replicas and from where (nothing changed)."""
    lab = reproduced
    for topic in (TOPIC, LEDGER):
        if lab.zk.exists(f"/config/topics/{topic}"):
            assert b"min.insync.replicas" not in lab.zk.get(f"/config/topics/{topic}")[0]
    for broker in lab.state.brokers:
        path = lab.directory / f"broker-{broker.broker_id}" / "server.properties"
        assert "min.insync.replicas=2" in path.read_text().splitlines()
    ids = ", ".join(str(b.broker_id) for b in lab.state.brokers)
    brokers = {"value": 2, "source": "server.properties", "detail": f"broker(s) {ids}"}
    assert lab.plan["min_isr"]["brokers"] == brokers
    assert lab.plan["min_isr"]["topics"][TOPIC] == brokers
    assert "min.insync.replicas without a topic override: 2 (server.properties" in lab.markdown
    if lab.state.real_kafka is None:
        return
    assert lab.plan["min_isr"]["topics"][LEDGER] == brokers
    # DescribeConfigs (the way for brokers whose file cluster.yaml does not name) agrees.
    kafka = KafkaPythonAdmin([f"{b.host}:{b.port}" for b in lab.state.brokers])
    try:
        described = kafka.effective_setting(lab.state.brokers[0].broker_id, "min.insync.replicas")
    finally:
        kafka.close()
    assert described == DescribedSetting("2", "STATIC_BROKER_CONFIG"), described
    assert f"{LEDGER}-0" in lab.plan["newly_unavailable"], lab.plan["newly_unavailable"]
    before = metadata_files(lab.state, TOPIC)
    refused = run_cli("fix", "-c", str(lab.config), "--yes", "--json", "--candidate", KEEP)
    assert refused.returncode == 6, refused.stdout[-2000:] + refused.stderr[-2000:]
    document: dict[str, Any] = json.loads(refused.stdout)
    assert document["applied"] is False
    assert document["outcome"] == "needs-acceptance", document["outcome"]
    said = document["message"]
    assert f"{LEDGER}-0 (" in said, said
    assert f"min.insync.replicas 2 (server.properties: broker(s) {ids})" in said, said
    assert set(document["plan"]["newly_unavailable"]) == set(lab.plan["newly_unavailable"])
    assert metadata_files(lab.state, TOPIC) == before


@pytest.mark.timeout(900)
def test_fix_repairs_the_incident_under_an_acks_all_producer(reproduced: Reproduced) -> None:
    lab = reproduced
    plan = lab.plan
    accept = ["--accept-unavailable"] if plan["newly_unavailable"] else []
    partitions = sorted(lab.result.old_partitions + lab.result.new_partitions)
    with (
        HealthSampler(lab.state) as sampler,
        RetryingProducer(lab.state, TOPIC, partitions) as producer,
    ):
        fixed = run_cli(
            "fix",
            "-c",
            str(lab.config),
            "--yes",
            "--json",
            "--candidate",
            KEEP,
            *accept,
            # On real Kafka the repair is classified on Spark, as `fix` does unless told
            # otherwise: the suite's other commands run on DuckDB (tests/conftest.py).
            *(["--engine", "spark"] if lab.state.kafka.startswith("real") else []),
            timeout=900,
        )
    assert fixed.returncode == 0, (
        f"fix exited {fixed.returncode}:\n{fixed.stdout[-4000:]}\n{fixed.stderr[-3000:]}"
    )
    document: dict[str, Any] = json.loads(fixed.stdout)
    assert document["applied"] is True
    assert document["check"]["status"] == "OK", document["check"]  # what `check` exits 0 on
    ran = document["plan"]
    assert [s["broker"] for s in ran["steps"]] == [s["broker"] for s in plan["steps"]]
    run_id = document["run"]["run_id"]

    # Converged: a leader and the full ISR everywhere, ZooKeeper's id in every file.
    assert unconverged(lab) == []
    assert run_cli("check", "-c", str(lab.config)).returncode == 0

    # The producer ran through the whole repair and every partition takes writes again; every
    # acknowledged record, the incident's and the producer's, is read back.
    assert set(producer.acked_at) == set(partitions), (
        f"partitions never acknowledged during the run: {producer.error_summary()}"
    )
    after = lab.kafka.produce(TOPIC, count=3 * len(partitions), key_prefix="after", retries=20)
    assert len(after.acked) == 3 * len(partitions), after.to_json()
    assert lost(lab, TOPIC, lab.acked + producer.acked + after.acked) == []

    # No partition was seen offline or below min.insync.replicas that the plan did not name.
    named = named_by_plan(ran)
    assert sampler.samples > 10
    assert sampler.offline <= named, f"offline, not in the plan: {sampler.offline - named}"
    assert sampler.below_min_isr <= named, (
        f"below min ISR, not in the plan: {sampler.below_min_isr - named}"
    )

    # The journal holds, per step, the prediction its gates were held to, and the health
    # samples of the whole run: none saw a partition offline or under min ISR that the plan did
    # not name.
    records = journal_records(lab, run_id)
    assert predicted_in_journal(records) == {i: s["predicted"] for i, s in enumerate(ran["steps"])}
    samples = [r for r in records if r["event"] == "sample"]
    assert samples and all("offline_partitions" in r for r in samples)
    seen = observed_in_samples(records)
    assert set(seen) <= named, f"observed unavailable, not named by the plan: {set(seen) - named}"
    # The run report shows, per partition, the predicted and the observed phases, and says
    # that nothing was seen unavailable that the plan did not name.
    shown = run_cli("report", "-c", str(lab.config), "--run", run_id, "--format", "markdown")
    assert shown.returncode == 0, shown.stderr[-2000:]
    report = shown.stdout
    assert "Unavailable partitions" in report, report[-3000:]
    assert "no partition was seen unavailable that the plan did not name" in report
    assert "NOT PREDICTED" not in report
    table = report[report.index("Unavailable partitions") :]
    for partition in sorted(named | set(seen)):
        assert partition in table, f"{partition} is not in the report's availability table"

    # The bystander topic was never touched: not planned, not backed up, its files unchanged.
    assert not [p for p in backed_up_paths(lab.backup_dir, run_id) if f"/{BYSTANDER}-" in p]
    assert metadata_files(lab.state, BYSTANDER) == lab.bystander_files
    assert set(every_partition(lab.zk)) >= {f"{BYSTANDER}-{n}" for n in range(3)}
    # Only partition.metadata was deleted, and only the stale replicas'.
    deleted = set(document["run"]["deleted"])
    assert deleted == lab.stale_files, (
        f"deleted beyond the stale partition.metadata: {sorted(deleted - lab.stale_files)},"
        f" not deleted: {sorted(lab.stale_files - deleted)}"
    )
