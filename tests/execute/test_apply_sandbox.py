"""apply, fix, status and rollback against the sandbox, with the real ZooKeeper.

Two repairs: after the incident (every replica holds the old id: restored in ZooKeeper with
no restart), and a planted mismatch on one broker (backed up, deleted, restarted). Through
both, an acks=all producer and a consumer run and ZooKeeper is sampled every 100 ms.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from remediate.execute.journal import Journal
from remediate.execute.lock import RunLock
from remediate.execute.steps import RESTART_ACTIONS, RunAction, StepKey
from remediate.formats.logdir import PARTITION_METADATA, encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import MIGRATION, MigrationState, encode_migration
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import client
from remediate.sandbox.reproduce import Incident, partition_states, replica_file_ids
from remediate.zookeeper import KazooZooKeeper
from tests.execute.sandbox_tools import (
    BackgroundConsumer,
    HealthSampler,
    archive_members,
    run_cli,
)
from tests.plan.test_plan_sandbox import disk, zookeeper_tree
from tests.sandbox.helpers import BackgroundProducer, lost_records
from tests.wait import steady, wait_until

pytestmark = pytest.mark.slow

ORDERS = "orders"
PAYMENTS = "payments"


def zk_ids(incident_zk: KazooClient, topic: str) -> str:
    assignment, _ = admin.read_topic(incident_zk, topic)
    return str(assignment.topic_id)


def assert_healed(
    state: cluster.SandboxState, zk: KazooClient, topic: str, partitions: int
) -> None:
    zk_id = zk_ids(zk, topic)
    ids = replica_file_ids(state, topic)
    assert len(ids) == 3 * partitions
    assert set(ids.values()) == {zk_id}, ids
    for number, s in partition_states(zk, topic, list(range(partitions))).items():
        assert sorted(s.isr) == [1, 2, 3], (number, s)
        assert s.leader >= 0


def fix_yes(config: Path) -> dict[str, Any]:
    """`fix --yes`, the form for when there is no time to review: its plan and its run."""
    fixed = run_cli("fix", "-c", str(config), "--yes", "--json")
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-1000:]
    document = json.loads(fixed.stdout)
    assert document["applied"] is True
    assert document["check"]["status"] == "OK"
    return {"plan": document["plan"], "run": document["run"]}


@pytest.mark.parametrize(
    "kafka",
    # Real Kafka, where the 3.x rules are the truth: 3.4.1, and 3.9.2, the last ZooKeeper-mode
    # release. The 3.4 emulator's restore runs in tests/execute/test_restore_sandbox.py; the
    # reviewed form (plan, then apply --approve) word for word in
    # tests/plan/test_plan_sandbox.py (the runbook); a whole repair over ssh in
    # tests/execute/test_sudo_sandbox.py.
    ["real-3.4.1", "real-3.9.2"],
    ids=["real-kafka-3.4.1-fix", "real-kafka-3.9.2-fix"],
)
def test_the_incident_is_healed_without_a_restart(tmp_path: Path, kafka: str) -> None:
    """On real Apache Kafka 3.4.1 and 3.9.2 (Kafka's defaults, the real 1.0 client's legacy
    write, confluent-kafka's producer and consumer): a restore, no restart. One log dir per
    broker, as most brokers have (tests/acceptance/test_resume_real.py runs these releases
    with two)."""
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka=kafka, log_dirs_per_broker=1)
    try:
        incident = Incident(directory, topic=ORDERS)
        bystander = healthy_bystander(incident)
        result = incident.run()
        config = directory / "cluster.yaml"
        assert run_cli("check", "-c", str(config)).returncode == 2
        # As it stands once its brokers have written what the incident's leader changes gave
        # it (a leader-epoch-checkpoint is written after the change, later on a busy machine).
        wait_until(
            steady(lambda: bystander_view(incident), BYSTANDER_QUIET_S),
            f"{bystander}'s files and leaders unchanged for {BYSTANDER_QUIET_S:g} s",
            timeout=120,
        )
        untouched = bystander_view(incident)
        pids = {
            b.broker_id: cluster.broker_pid(directory, b.broker_id) for b in incident.state.brokers
        }
        with (
            HealthSampler(incident.state) as sampler,
            BackgroundProducer(incident.state, ORDERS, 6, prefix="fix") as producer,
            BackgroundConsumer(incident.state, ORDERS) as consumer,
        ):
            run = fix_yes(config)
        assert [s["kind"] for s in run["plan"]["steps"]] == ["restore"]
        assert run["run"]["status"] == "completed"
        assert run["run"]["deleted"] == [] and run["run"]["backups"] == []
        # No broker restarted: the very same processes run.
        assert {
            b.broker_id: cluster.broker_pid(directory, b.broker_id) for b in incident.state.brokers
        } == pids
        assert zk_ids(incident.zk, ORDERS) == result.old_id
        assert_healed(incident.state, incident.zk, ORDERS, 6)
        assert_restore_journaled(directory, run["run"]["run_id"], result.old_id)
        # A topic without findings is never touched: not in the plan, nothing of it backed up,
        # every file of its replicas as it was, its leaders and leader epochs unchanged.
        planned = [p for s in run["plan"]["steps"] for p in s.get("partitions", [])]
        assert not [p for p in planned if p.startswith(f"{bystander}-")]
        assert_untouched(incident, untouched)
        assert sampler.samples > 10
        assert sampler.offline == set()
        # Before the fix, the restarted broker had left the old partitions' ISRs (down to min
        # ISR 2); the repair never took any partition below that.
        assert sampler.below_min_isr == set()
        assert producer.acked and consumer.reads > 0
        acked = incident.acked + producer.acked
        assert lost_records(incident.state, incident.zk, ORDERS, acked) == []
        assert run_cli("check", "-c", str(config)).returncode == 0
        status = run_cli("status", "-c", str(config), "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["status"] == "completed"
        incident.close()
    finally:
        cluster.down(directory)


BYSTANDER = "audit"
# Quiet long enough for a leader-epoch-checkpoint written behind a leader change.
BYSTANDER_QUIET_S = 3.0


def healthy_bystander(incident: Incident) -> str:
    """A topic with its id everywhere, created before the incident: it has no findings."""
    admin.create_topic(incident.zk, BYSTANDER, 3, 3, config={"min.insync.replicas": "2"})
    wait_until(
        lambda: len([v for v in replica_file_ids(incident.state, BYSTANDER).values() if v]) == 9,
        f"every replica of {BYSTANDER} to write partition.metadata",
    )
    return BYSTANDER


def bystander_view(incident: Incident) -> tuple[dict[str, str], dict[int, tuple[int, int]]]:
    """Every file of the bystander's replicas (sha256) and each partition's leader and epoch."""
    files = {
        path: digest for path, digest in disk(incident.state).items() if f"/{BYSTANDER}-" in path
    }
    states = partition_states(incident.zk, BYSTANDER, [0, 1, 2])
    return files, {n: (s.leader, s.leader_epoch) for n, s in states.items()}


def assert_untouched(
    incident: Incident, before: tuple[dict[str, str], dict[int, tuple[int, int]]]
) -> None:
    """The bystander as it was: every file and every leader and epoch. With one exception on
    real Kafka, whose auto leader rebalancing is on by default: every controller election
    (the restore's too) has the new controller move the leadership of partitions led by
    another than their preferred replica back to it, 5 s later (KafkaController's
    onControllerFailover schedules the check). Such a partition gets its preferred leader at
    the next epoch, and its replicas' leader-epoch-checkpoint says so; nothing else changes."""
    files_before, leaders_before = before
    files_after, leaders_after = bystander_view(incident)
    assignment = admin.read_topic(incident.zk, BYSTANDER)[0].partitions
    rebalanced = {
        n
        for n, (leader, epoch) in leaders_after.items()
        if incident.state.real_kafka is not None
        and leaders_before[n][0] != assignment[n][0]
        and (leader, epoch) == (assignment[n][0], leaders_before[n][1] + 1)
    }
    assert {n: v for n, v in leaders_after.items() if n not in rebalanced} == {
        n: v for n, v in leaders_before.items() if n not in rebalanced
    }

    def settled(files: dict[str, str]) -> dict[str, str]:
        moved = tuple(f"/{BYSTANDER}-{n}/leader-epoch-checkpoint" for n in rebalanced)
        return {path: digest for path, digest in files.items() if not path.endswith(moved)}

    assert settled(files_after) == settled(files_before)


def assert_restore_journaled(directory: Path, run_id: str, topic_id: str) -> None:
    """The znode write and the election each have a record before and after, with what they
    did: the version written and the id, the controller epoch before and after."""
    records = Journal.open(directory / "journal", run_id).records()

    def of(event: str, action: str) -> list[dict[str, Any]]:
        return [r for r in records if r["event"] == event and str(r.get("step")).endswith(action)]

    for action in (":zk-write topic-id", ":zk-write controller-election"):
        assert len(of("step-started", action)) == 1 and len(of("step-finished", action)) == 1
    (written,) = of("step-finished", ":zk-write topic-id")
    assert written["result"]["topic_id"] == topic_id
    assert isinstance(written["result"]["znode_version"], int)
    (before,) = of("note", ":zk-write controller-election")
    (elected,) = of("step-finished", ":zk-write controller-election")
    assert elected["result"]["controller_epoch"] > before["controller_epoch_before"]
    assert elected["result"]["controller"] in (1, 2, 3)
    order = [r["step"] for r in records if r["event"] == "step-finished"]
    assert order.index(written["step"]) < order.index(elected["step"])


def topic_files(state: cluster.SandboxState) -> dict[str, str]:
    """The topic's files (the brokers rewrite their root checkpoints on their own)."""
    return {path: digest for path, digest in disk(state).items() if f"/{PAYMENTS}-" in path}


def planned_mismatch(
    directory: Path, incident: Incident, tmp_path: Path
) -> tuple[Path, Path, dict[str, Any]]:
    """cluster.yaml, and the plan file and plan made on the planted mismatch (planted here when
    the test runs on its own: make fault-table)."""
    config = directory / "cluster.yaml"
    if not incident.zk.exists(f"/brokers/topics/{PAYMENTS}"):
        plant_mismatch(directory, incident.state, incident.zk, 3)
    plan_path = tmp_path / "plan.json"
    planned = run_cli("plan", "-c", str(config), "--json", "-o", str(plan_path))
    plan: dict[str, Any] = json.loads(plan_path.read_text())
    assert planned.returncode == 0 and plan["steps"], planned.stderr[-2000:]
    return config, plan_path, plan


def plant_mismatch(
    directory: Path, state: cluster.SandboxState, zk: KazooClient, broker: int
) -> str:
    """Broker `broker`'s replicas of PAYMENTS get a foreign id while it is down (a log dir
    restored from elsewhere); once started it refuses them and leaves their ISRs."""
    admin.create_topic(
        zk,
        PAYMENTS,
        3,
        3,
        config={"min.insync.replicas": "2"},
    )
    expected = {(b, p) for b in (1, 2, 3) for p in range(3)}
    wait_until(
        lambda: expected <= {k for k, v in replica_file_ids(state, PAYMENTS).items() if v},
        "every replica to write partition.metadata",
    )
    report = client.produce(zk, PAYMENTS, count=90, key_prefix="before")
    assert len(report.acked) == 90
    cluster.stop_broker(directory, broker)
    foreign = TopicId.random()
    for log_dir in state.broker(broker).log_dirs:
        for path in Path(log_dir).glob(f"{PAYMENTS}-*/{PARTITION_METADATA}"):
            path.write_bytes(encode_partition_metadata(foreign))
    cluster.start_broker(directory, broker, wait=True)
    wait_until(
        lambda: all(
            broker not in s.isr for s in partition_states(zk, PAYMENTS, [0, 1, 2]).values()
        ),
        f"broker {broker} to leave every ISR of {PAYMENTS}",
        timeout=90,
    )
    return str(foreign)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Incident]]:
    directory = tmp_path_factory.mktemp("apply") / "sandbox"
    cluster.up(directory, kafka_version="3.4")
    incident = Incident(directory, topic=PAYMENTS)
    yield directory, incident
    incident.close()
    cluster.down(directory)


def test_plan_then_apply_repairs_a_planted_mismatch_by_restart(
    planted: tuple[Path, Incident], tmp_path: Path
) -> None:
    directory, incident = planted
    state, zk = incident.state, incident.zk
    config = directory / "cluster.yaml"
    foreign = plant_mismatch(directory, state, zk, 3)
    plan_path = tmp_path / "plan.json"
    planned = run_cli("plan", "-c", str(config), "--json", "-o", str(plan_path))
    assert planned.returncode == 0, planned.stderr[-3000:]
    plan = json.loads(plan_path.read_text())
    assert [(s["kind"], s["broker"]) for s in plan["steps"]] == [("restart", 3)]
    assert set(plan["fingerprint"]["files"].values()) == {foreign}

    # Refusals change nothing: no approval, a wrong digest, an edited plan.
    zk_before, disk_before = zookeeper_tree(zk), topic_files(state)
    for args in (
        [],
        ["--approve", "0" * 64],
    ):
        refused = run_cli("apply", "-c", str(config), "--plan", str(plan_path), *args)
        assert refused.returncode == 4, refused.stderr
        assert "nothing was changed" in refused.stderr
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**plan, "estimate_s": 1.0}))
    refused = run_cli(
        "apply", "-c", str(config), "--plan", str(edited), "--approve", plan["digest"]
    )
    assert refused.returncode == 4 and "edited" in refused.stderr
    assert zookeeper_tree(zk) == zk_before and topic_files(state) == disk_before
    journal_dir = Path(yaml.safe_load(config.read_text())["journal_dir"])
    assert not journal_dir.exists() or list(journal_dir.iterdir()) == []

    with (
        HealthSampler(state) as sampler,
        BackgroundProducer(state, PAYMENTS, 3, prefix="apply") as producer,
        BackgroundConsumer(state, PAYMENTS) as consumer,
    ):
        applied = run_cli(
            "apply",
            "-c",
            str(config),
            "--plan",
            str(plan_path),
            "--approve",
            plan["digest"],
            "--json",
        )
    assert applied.returncode == 0, applied.stderr[-3000:]
    outcome = json.loads(applied.stdout)
    assert outcome["status"] == "completed"
    expected_deleted = sorted(plan["steps"][0]["files"])
    assert sorted(outcome["deleted"]) == expected_deleted
    (backup,) = outcome["backups"]
    archive = Path(backup["archive"])
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    assert sorted("/" + name for name in archive_members(archive)) == expected_deleted
    assert_healed(state, zk, PAYMENTS, 3)
    assert sampler.offline == set() and sampler.below_min_isr == set()
    assert producer.acked and consumer.reads > 0
    assert lost_records(state, zk, PAYMENTS, producer.acked) == []
    assert run_cli("check", "-c", str(config)).returncode == 0

    # The journal has a record before and after every action, and the run is complete.
    run_id = outcome["run_id"]
    records = [
        json.loads(line)
        for line in (journal_dir / run_id / "journal.jsonl").read_text().splitlines()
    ]
    started = [r["step"] for r in records if r["event"] == "step-started"]
    finished = [r["step"] for r in records if r["event"] == "step-finished"]
    assert started == finished
    assert [StepKey.parse(s).action for s in started] == [*RESTART_ACTIONS, RunAction.CONVERGE]
    assert any(r["event"] == "sample" for r in records)
    log_lines = (journal_dir / run_id / "log.jsonl").read_text().splitlines()
    assert all(json.loads(line)["run_id"] == run_id for line in log_lines)

    # Rollback puts the backed-up files back (and the broker leaves the ISR again).
    rolled = run_cli("rollback", "-c", str(config), "--run", run_id, "--broker", "3", "--json")
    assert rolled.returncode == 0, rolled.stderr[-3000:]
    assert sorted(json.loads(rolled.stdout)["restored"]["3"]) == expected_deleted
    ids = replica_file_ids(state, PAYMENTS)
    assert {ids[(3, p)] for p in range(3)} == {foreign}


@pytest.mark.fault(
    "Faults during apply",
    "The cluster changes between plan and apply (here: the controller moved)",
    "apply refuses (exit 4), shows every difference from the plan's fingerprint, and changes"
    " nothing",
)
def test_apply_refuses_after_drift_and_changes_nothing(
    planted: tuple[Path, Incident], tmp_path: Path
) -> None:
    directory, incident = planted
    state, zk = incident.state, incident.zk
    config, plan_path, plan = planned_mismatch(directory, incident, tmp_path)
    admin.failover_controller(zk)
    zk_before, disk_before = zookeeper_tree(zk), topic_files(state)
    refused = run_cli(
        "apply", "-c", str(config), "--plan", str(plan_path), "--approve", plan["digest"]
    )
    assert refused.returncode == 4, refused.stderr[-2000:]
    assert "changed since the plan was made" in refused.stderr
    assert "controller epoch" in refused.stderr
    assert topic_files(state) == disk_before
    after = zookeeper_tree(zk)
    assert {k: v for k, v in after.items() if not k.startswith("/remediate")} == {
        k: v for k, v in zk_before.items() if not k.startswith("/remediate")
    }


@pytest.mark.fault(
    "Faults during apply",
    "A ZooKeeper-to-KRaft migration begins between plan and apply (`/migration` written as a"
    " KRaft controller writes it)",
    "check reports KRAFT_MIGRATION; plan, apply, fix --yes, resume and rollback refuse (exit 4)"
    " and change nothing",
)
def test_every_change_is_refused_once_a_migration_to_kraft_has_begun(
    planted: tuple[Path, Incident], tmp_path: Path
) -> None:
    directory, incident = planted
    state, zk = incident.state, incident.zk
    config, plan_path, plan = planned_mismatch(directory, incident, tmp_path)
    # What a 3.9 KRaft controller in migration mode writes when it claims the migration.
    zk.create(MIGRATION, encode_migration(MigrationState(3000, 1, -1, -1)))
    try:
        checked = run_cli("check", "-c", str(config), "--json")
        findings = json.loads(checked.stdout)["findings"]
        (migration,) = [f for f in findings if f["kind"] == "KRAFT_MIGRATION"]
        assert migration["evidence"]["migration"]["kraft_controller_id"] == 3000
        assert "not yet copied into KRaft" in migration["detail"]

        zk_before, disk_before = zookeeper_tree(zk), topic_files(state)
        again = run_cli("plan", "-c", str(config), "--json")
        assert again.returncode == 4, again.stderr[-2000:]
        refusals = json.loads(again.stdout)["refusals"]
        assert refusals[0].startswith("a ZooKeeper-to-KRaft migration has begun: KRaft")
        for args in (
            ("apply", "--plan", str(plan_path), "--approve", plan["digest"]),
            ("fix", "--yes", "--accept-unavailable"),
            ("resume",),
            ("rollback", "--run", "any-run"),
        ):
            refused = run_cli(args[0], "-c", str(config), *args[1:])
            assert refused.returncode == 4, (args, refused.stdout[-2000:], refused.stderr[-2000:])
            assert "migration has begun" in refused.stdout + refused.stderr, args
        assert topic_files(state) == disk_before
        assert zookeeper_tree(zk) == zk_before  # not even the lock was taken
    finally:
        zk.delete(MIGRATION)


def _journal_records(journal_dir: Path) -> tuple[str, list[dict[str, object]]]:
    runs = sorted(p for p in journal_dir.iterdir() if (p / "journal.jsonl").exists())
    run = runs[-1]
    lines = (run / "journal.jsonl").read_text().splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return run.name, records


def test_a_run_killed_after_its_stop_is_finished_by_resume(
    planted: tuple[Path, Incident], tmp_path: Path
) -> None:
    """SIGKILL the operator once the broker is down; `resume` completes without repeating."""
    directory, incident = planted
    state, zk = incident.state, incident.zk
    config = directory / "cluster.yaml"
    journal_dir = Path(yaml.safe_load(config.read_text())["journal_dir"])
    plan_path = tmp_path / "plan.json"
    planned = run_cli("plan", "-c", str(config), "--json", "-o", str(plan_path))
    plan = json.loads(plan_path.read_text())
    assert planned.returncode == 0 and plan["steps"], planned.stderr[-2000:]
    before = set(journal_dir.iterdir()) if journal_dir.exists() else set()
    script = Path(sys.executable).parent / "remediate"
    process = subprocess.Popen(
        [
            str(script),
            "apply",
            "-c",
            str(config),
            "--plan",
            str(plan_path),
            "--approve",
            plan["digest"],
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def stopped() -> bool:
            runs = set(journal_dir.iterdir()) - before if journal_dir.exists() else set()
            return any(
                '"event": "step-finished"' in line and ':stop"' in line
                for run in runs
                if (run / "journal.jsonl").exists()
                for line in (run / "journal.jsonl").read_text().splitlines()
            )

        wait_until(stopped, "the run to stop its broker", timeout=120)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    run_id, records = _journal_records(journal_dir)
    assert not any(r["event"] in ("run-completed", "run-halted") for r in records)
    status = json.loads(run_cli("status", "-c", str(config), "--json").stdout)
    assert status["status"] == "running"

    resumed = run_cli("resume", "-c", str(config), "--json")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["status"] == "completed"
    run_id_after, records = _journal_records(journal_dir)
    assert run_id_after == run_id
    finished = [str(r["step"]) for r in records if r["event"] == "step-finished"]
    assert len(finished) == len(set(finished)), "an action was completed twice"
    assert any(r["event"] == "run-resumed" for r in records)
    assert_healed(state, zk, PAYMENTS, 3)


@pytest.mark.fault(
    "Faults during apply",
    "Another operator starts a run while one holds the cluster's lock",
    "The second run is refused (exit 4) before it checks or changes anything, naming the run"
    " that holds the lock",
)
def test_a_second_run_is_refused_while_the_lock_is_held(
    planted: tuple[Path, Incident], tmp_path: Path
) -> None:
    directory, incident = planted
    config = directory / "cluster.yaml"
    name = yaml.safe_load(config.read_text())["cluster"]
    zk = cluster.zk_client(incident.state)
    holder = RunLock(KazooZooKeeper(zk), name, run_id="other-operator-run")
    holder.acquire()
    try:
        plan_path = tmp_path / "plan.json"
        # A plan with nothing to do still takes the lock before it checks anything.
        run_cli("plan", "-c", str(config), "--json", "-o", str(plan_path))
        plan = json.loads(plan_path.read_text())
        refused = run_cli(
            "apply", "-c", str(config), "--plan", str(plan_path), "--approve", plan["digest"]
        )
        assert refused.returncode == 4, refused.stderr[-2000:]
        assert "other-operator-run" in refused.stderr
    finally:
        holder.release()
        zk.stop()
        zk.close()
