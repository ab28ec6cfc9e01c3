"""The executor on an in-memory cluster (tests/execute/fake_cluster.py): resume after a crash
at every action, the controller moving mid-run, the restore's gate checked again on resume, a
gate that times out and a lock lost before a destructive action, every action left out
journaled with its reason, and a rollback journaled action by action like a run. Real
journals, real backup scripts on temporary log dirs; no sandbox, no real sleeping."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from remediate.errors import HaltedError, LockLostError
from remediate.execute import steps
from remediate.execute.executor import Executor, RunOutcome, Services
from remediate.execute.journal import Journal, JournalEvent, replay
from remediate.execute.lock import RunLock
from remediate.execute.steps import RunAction, StepKey
from remediate.formats.logdir import encode_partition_metadata
from remediate.formats.znodes import decode_topic, topic_path
from remediate.plan import FileKey, Fingerprint, Plan, Prediction, RestartStep, RestoreStep
from remediate.playbook import Action, Timeouts
from remediate.ports import Transport
from remediate.state import TopicPartition
from tests.execute.fake_cluster import (
    OLD_ID,
    ZK_ID,
    FakeClock,
    FakeHost,
    FakeKafka,
    FakeZooKeeper,
    Topic,
    cluster_config,
)

RUN = "20261122T103400Z-abc123"
GATES = Timeouts(stability_window_s=0.1, stop_timeout_s=5, start_timeout_s=5, in_sync_timeout_s=5)
BROKERS = (1, 2, 3)
PAYMENTS = {0: (1, 2, 3), 1: (2, 3, 1)}
PAYMENTS_0 = TopicPartition("payments", 0)
# A repair's actions: its one restart step's, then the run's convergence gate.
RUN_ACTIONS = [*steps.RESTART_ACTIONS, RunAction.CONVERGE]


class Crash(BaseException):
    """The process dies here: nothing after it runs, nothing is journaled."""


@dataclass
class World:
    root: Path
    zk: FakeZooKeeper
    kafka: FakeKafka
    clock: FakeClock
    with_properties: tuple[int, ...] = ()
    with_server_log: tuple[int, ...] = ()
    gates: Timeouts = field(default_factory=lambda: GATES)

    @property
    def journals(self) -> Path:
        return self.root / "journal"

    def transport(self, broker: int) -> Transport:
        return FakeHost(self.kafka, broker)

    def services(self, failpoint: Callable[[str], None]) -> Services:
        return Services(
            config=cluster_config(
                self.root,
                self.kafka.brokers,
                with_properties=self.with_properties,
                with_server_log=self.with_server_log,
            ),
            zk=self.zk,
            transport_for=self.transport,
            clock=self.clock,
            gates={
                "topicid-mismatch": self.gates,
                "rolling-restart": self.gates,
                "restore-zk-topic-id": self.gates,
            },
            failpoint=failpoint,
        )

    def run(
        self, plan: Plan, *, failpoint: Callable[[str], None] = lambda _point: None
    ) -> RunOutcome:
        """One process of the run: a new journal the first time, `resume` after that."""
        if (self.journals / RUN).exists():
            journal = Journal.open(self.journals, RUN)
            journal.append(JournalEvent.RUN_RESUMED, now=self.clock.now(), by="test")
        else:
            journal = Journal.create(self.journals, RUN, plan.to_json(), now=self.clock.now())
        lock = RunLock(self.zk, "fake", run_id=RUN)
        lock.acquire()
        try:
            return Executor(plan, self.services(failpoint), journal, lock).run()
        finally:
            # The process ends: its lock goes with its session.
            lock.release()

    def rollback(
        self, plan: Plan, *, failpoint: Callable[[str], None] = lambda _point: None
    ) -> dict[int, list[str]]:
        """One process of `rollback` for the run."""
        journal = Journal.open(self.journals, RUN)
        lock = RunLock(self.zk, "fake", run_id=RUN)
        lock.acquire()
        try:
            return Executor(plan, self.services(failpoint), journal, lock).rollback()
        finally:
            lock.release()

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        records = Journal.open(self.journals, RUN).records()
        return [r for r in records if event is None or r["event"] == event]

    def cluster_writes(self) -> list[tuple[str, str]]:
        """The executor's znode writes, its lock's own nodes left out."""
        return [(verb, p) for verb, p in self.zk.writes if not p.startswith("/remediate/locks")]

    def actions(self, event: str) -> list[str]:
        return [StepKey.parse(str(r["step"])).action for r in self.records(event)]


def world(tmp_path: Path, topics: dict[str, Topic], **kafka: Any) -> World:
    zk = FakeZooKeeper()
    fake = FakeKafka(zk, tmp_path, BROKERS, topics, **kafka)
    return World(tmp_path, zk, fake, FakeClock())


def plan_of(
    steps_: list[RestartStep | RestoreStep],
    *,
    playbook: str = "topicid-mismatch",
    files: dict[str, str | None] | None = None,
    controller: int | None = 1,
) -> Plan:
    return Plan(
        cluster="fake",
        cluster_id="Cl-us_ter-id-abcdefghij",
        playbook=playbook,
        playbook_version=1,
        controller=controller,
        fingerprint=Fingerprint(
            cluster_id=None,
            brokers=tuple(BROKERS),
            controller_epoch=None,
            files={FileKey.parse(key): file_id for key, file_id in (files or {}).items()},
        ),
        steps=tuple(steps_),
        skipped=(),
        refusals=(),
        allow_unsafe=False,
        estimate_s=0.0,
    )


def restart(broker: int, actions: tuple[Action, ...], **fields: Any) -> RestartStep:
    return RestartStep(
        broker=broker,
        reason="test",
        partitions=fields.get("partitions", ()),
        files=fields.get("files", ()),
        actions=actions,
        impact=(),
        is_controller=False,
    )


# -- a broker repaired by restart: resume after a crash anywhere ------------------------------


@pytest.fixture
def stale(tmp_path: Path) -> tuple[World, Plan, Path]:
    """Broker 3 holds an old id for payments-0 and is out of its ISR: the repair's case."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(3, "payments", 0)])
    held = w.kafka.metadata(3, "payments", 0)
    held.write_bytes(encode_partition_metadata(OLD_ID))
    step = restart(3, steps.RESTART_ACTIONS, partitions=(PAYMENTS_0,), files=(str(held),))
    return w, plan_of([step], files={f"3:{held}": str(OLD_ID)}), held


def assert_repaired(w: World, held: Path) -> None:
    assert held.read_bytes() == encode_partition_metadata(ZK_ID)
    assert w.kafka.commands == ["svc stop 3", "svc start 3"], "a service command was repeated"
    assert 3 in w.kafka.isr[("payments", 0)]


def test_a_repair_runs_every_action_once(stale: tuple[World, Plan, Path]) -> None:
    w, plan, held = stale
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    assert w.actions("step-finished") == RUN_ACTIONS
    assert outcome.deleted == (str(held),)
    assert_repaired(w, held)
    assert w.records("sample"), "no health sample"


POINTS = [f"{a}:{p}" for a in RUN_ACTIONS for p in ("started", "done", "finished")]


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_point_resumes_without_repeating_anything_destructive(
    stale: tuple[World, Plan, Path], point: str
) -> None:
    w, plan, held = stale

    def crash(at: str) -> None:
        if at == point:
            raise Crash(at)

    with pytest.raises(Crash):
        w.run(plan, failpoint=crash)
    action = point.rpartition(":")[0]
    crashed = replay(w.records())
    in_flight = crashed.in_flight
    if point.endswith(":finished"):
        assert in_flight is None
    else:
        assert in_flight is not None and StepKey.parse(in_flight).action == action

    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    finished = w.actions("step-finished")
    assert sorted(finished) == sorted(RUN_ACTIONS), "an action finished twice"
    assert_repaired(w, held)
    # The deletion is in the outcome once, whichever process did it, and in the backup.
    assert outcome.deleted == (str(held),)
    (backup,) = outcome.backups
    assert [e["path"] for e in backup["entries"]] == [str(held)]
    if in_flight is not None:
        (resumed,) = [r for r in w.records("step-started") if r["resumed"]]
        assert resumed["step"] == in_flight


def test_a_crash_after_the_delete_finds_the_files_gone_and_says_so(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale

    def crash(at: str) -> None:
        if at == "delete:done":
            raise Crash(at)

    with pytest.raises(Crash):
        w.run(plan, failpoint=crash)
    assert not held.exists()
    assert w.run(plan).status == "completed"
    (deleted,) = [r["result"] for r in w.records("step-finished") if r["step"].endswith(":delete")]
    assert deleted == {"deleted": [], "already_gone": [str(held)]}


# -- the controller goes last, even when it moves ---------------------------------------------


def test_the_controller_moving_mid_run_is_restarted_last(tmp_path: Path) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}, controller=1)
    w.kafka.boot()
    actions = (
        Action.GATE_RESTART_SAFETY,
        Action.STOP,
        Action.START,
        Action.WAIT_REGISTERED,
        Action.WAIT_IN_SYNC,
    )
    # The plan puts the controller (1) last; during broker 2's restart, broker 3 takes over.
    plan = plan_of(
        [restart(2, actions), restart(3, actions), restart(1, actions)], playbook="rolling-restart"
    )

    def move(at: str) -> None:
        if at == "wait in-sync:started" and w.kafka.controller == 1 and 2 in w.kafka.running:
            w.kafka.elect(3)

    outcome = w.run(plan, failpoint=move)
    assert outcome.status == "completed", outcome.error
    stops = [c for c in w.kafka.commands if c.startswith("svc stop")]
    assert stops == ["svc stop 2", "svc stop 1", "svc stop 3"]
    (order,) = [r for r in w.records("gate") if r["step"].endswith(":order")]
    assert order["step"] == "1:broker-3:order"
    assert order["decision"] == (
        "broker 3 is now the active controller: it goes last; broker 1 goes first"
    )


def test_the_controller_keeps_its_place_where_the_order_is_the_repairs(tmp_path: Path) -> None:
    """After a restore's election, say, the new controller is the plan's first restart: the
    plan's prediction counts on that order, so the controller is not moved last."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}, controller=2)
    w.kafka.boot()
    actions = (Action.GATE_RESTART_SAFETY, Action.STOP, Action.START, Action.WAIT_REGISTERED)
    first = replace(
        restart(2, actions), predicted=Prediction(during=(TopicPartition("payments", 0),))
    )
    plan = plan_of([first, restart(3, actions), restart(1, actions)], playbook="rolling-restart")
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    stops = [c for c in w.kafka.commands if c.startswith("svc stop")]
    assert stops == ["svc stop 2", "svc stop 3", "svc stop 1"]
    (order,) = [r for r in w.records("gate") if r["step"].endswith(":order")]
    assert order["step"] == "0:broker-2:order"
    assert "broker 2 is now the active controller but keeps its place" in order["decision"]


def test_a_step_started_before_a_crash_is_finished_first(tmp_path: Path) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}, controller=1)
    w.kafka.boot()
    actions = (Action.GATE_RESTART_SAFETY, Action.STOP, Action.START, Action.WAIT_REGISTERED)
    plan = plan_of([restart(2, actions), restart(1, actions)], playbook="rolling-restart")

    def crash(at: str) -> None:
        if at == "stop:done" and not w.kafka.commands[1:]:
            raise Crash(at)

    with pytest.raises(Crash):
        w.run(plan, failpoint=crash)
    # Broker 2 is down and now the controller is 1... but 2's step was started: it goes on.
    w.kafka.elect(2 if 2 in w.kafka.running else 1)
    assert w.run(plan).status == "completed"
    assert w.kafka.commands == ["svc stop 2", "svc start 2", "svc stop 1", "svc start 1"]
    assert not [r for r in w.records("gate") if r["step"].endswith(":order")]


# -- a restore: the gate is checked again right before the write on resume --------------------


@pytest.fixture
def lost_id(tmp_path: Path) -> tuple[World, Plan]:
    """ZooKeeper lost the id of `orders`; every replica holds ZK_ID: a restore without an
    election."""
    topic = Topic("orders", {0: (1, 2), 1: (2, 3)})
    w = world(tmp_path, {"orders": topic})
    w.kafka.boot()
    topic.topic_id = None
    w.kafka.write_topic(topic)
    version = w.zk.nodes[topic_path("orders")].version
    restore = RestoreStep(
        topic="orders",
        topic_id=str(ZK_ID),
        zk_topic_id=None,
        znode_version=version,
        reelect=False,
        reason="test",
        partitions=(TopicPartition("orders", 0), TopicPartition("orders", 1)),
        actions=tuple(a for a in steps.RESTORE_ACTIONS if a != Action.ZK_WRITE_CONTROLLER_ELECTION),
        impact=(),
        playbook="restore-zk-topic-id",
    )
    return w, plan_of([restore], playbook="restore-zk-topic-id")


def zk_topic_id(w: World) -> str | None:
    data, _ = w.zk.get(topic_path("orders"))
    found = decode_topic(data, source="test").topic_id
    return None if found is None else str(found)


def crash_after_the_gate(at: str) -> None:
    if at == f"{Action.GATE_AGREEMENT}:finished":
        raise Crash(at)


def test_a_restore_checks_its_gate_again_before_writing_on_resume(
    lost_id: tuple[World, Plan],
) -> None:
    w, plan = lost_id
    with pytest.raises(Crash):
        w.run(plan, failpoint=crash_after_the_gate)
    assert zk_topic_id(w) is None
    assert w.run(plan).status == "completed"
    assert zk_topic_id(w) == str(ZK_ID)
    gates = [r for r in w.records("gate") if r["step"] == "topic-orders:agreement"]
    assert [g["blocker"] for g in gates] == [None, None]
    (note,) = w.records("note")
    assert note["decision"] == "resumed: the gate is checked again"
    assert w.cluster_writes() == [("set", topic_path("orders"))]


def test_a_resumed_restore_whose_gate_no_longer_passes_writes_nothing(
    lost_id: tuple[World, Plan],
) -> None:
    w, plan = lost_id
    with pytest.raises(Crash):
        w.run(plan, failpoint=crash_after_the_gate)
    # Between the two processes a replica took another id.
    w.kafka.metadata(3, "orders", 1).write_bytes(encode_partition_metadata(OLD_ID))
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error == (
        f"restore of orders refused: replicas do not all hold {ZK_ID}: orders-1 on broker 3:"
        f" {OLD_ID}"
    )
    assert zk_topic_id(w) is None
    assert w.cluster_writes() == []


def test_a_restore_without_a_crash_checks_its_gate_once(lost_id: tuple[World, Plan]) -> None:
    w, plan = lost_id
    assert w.run(plan).status == "completed"
    assert len([r for r in w.records("gate") if r["step"] == "topic-orders:agreement"]) == 1
    assert w.records("note") == []


# -- halts -------------------------------------------------------------------------------------


def test_a_gate_that_times_out_halts_the_run_with_its_reason(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, _held = stale
    w.kafka.start_silently_fails.add(3)  # started, but never registers
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error == (
        "timed out after 5s waiting for broker 3 to register; last seen: broker 3 is not registered"
    )
    assert w.actions("step-failed") == [Action.WAIT_REGISTERED]
    assert w.actions("step-started")[-1] == Action.WAIT_REGISTERED, "went on after the halt"
    (halted,) = w.records("run-halted")
    assert halted["error"] == outcome.error
    assert 5 < w.clock.monotonic() < 6


def test_a_stop_command_sudo_will_not_run_halts_at_once_and_stops_nothing(
    stale: tuple[World, Plan, Path],
) -> None:
    """Never retried (a sudoers rule does not appear between two attempts): the first
    refusal halts the run, with the broker, the command and the rule to add."""
    w, plan, held = stale
    w.kafka.refused_by_sudo.add("stop")
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error is not None
    assert "broker 3 (broker 3 (fake)): sudo did not run the stop command" in outcome.error
    assert "remediate ALL=(root) NOPASSWD: /bin/sh" in outcome.error
    assert w.records("retry") == []
    assert w.actions("step-failed") == [Action.STOP]
    assert w.kafka.commands == [] and 3 in w.kafka.running
    assert held.read_bytes() == encode_partition_metadata(OLD_ID)


def test_a_status_command_sudo_will_not_run_halts_the_start_wait_at_once(
    stale: tuple[World, Plan, Path],
) -> None:
    """While the wait for registration asks the status command whether the broker still
    runs, a refusal is not "unknown, wait on": it halts at the first ask, not at the start
    timeout (5 s here)."""
    w, plan, _held = stale
    w.kafka.start_silently_fails.add(3)

    def revoke(at: str) -> None:
        if at == f"{Action.START}:finished":
            w.kafka.refused_by_sudo.add("status")

    outcome = w.run(plan, failpoint=revoke)
    assert outcome.status == "halted"
    assert outcome.error is not None and "sudo did not run the status command" in outcome.error
    assert w.actions("step-failed") == [Action.WAIT_REGISTERED]
    assert w.clock.monotonic() < 5


def test_a_lock_lost_before_a_destructive_action_destroys_nothing(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale

    def lose(at: str) -> None:
        if at == f"{Action.STOP}:started":
            w.zk.lose_session()

    outcome = w.run(plan, failpoint=lose)
    assert outcome.status == "halted"
    assert outcome.error is not None and "the ZooKeeper session that held it expired" in (
        outcome.error
    )
    assert w.kafka.commands == [], "the broker was stopped"
    assert held.read_bytes() == encode_partition_metadata(OLD_ID)
    (failed,) = w.records("step-failed")
    assert failed["step"] == "0:broker-3:stop"
    sessions = [r["session"] for r in w.records("zookeeper")]
    assert sessions == ["SUSPENDED", "LOST", "CONNECTED"]


def test_lock_lost_is_what_the_lock_raises(stale: tuple[World, Plan, Path]) -> None:
    w, _plan, _held = stale
    lock = RunLock(w.zk, "fake", run_id=RUN)
    lock.acquire()
    w.zk.lose_session()
    with pytest.raises(LockLostError, match="expired"):
        lock.ensure_held()


def test_retries_of_zookeeper_reads_are_journaled(stale: tuple[World, Plan, Path]) -> None:
    w, plan, held = stale

    def drop(at: str) -> None:
        if at == f"{Action.GATE_RESTART_SAFETY}:started":
            w.zk.drops = 2  # the gate's read meets two dropped connections

    assert w.run(plan, failpoint=drop).status == "completed"
    retries = w.records("retry")
    assert [(r["what"], r["attempt"]) for r in retries] == [
        ("a ZooKeeper read", 1),
        ("a ZooKeeper read", 2),
    ]
    assert_repaired(w, held)


def test_rollback_puts_back_what_the_run_deleted(stale: tuple[World, Plan, Path]) -> None:
    w, plan, held = stale
    assert w.run(plan).status == "completed"
    restored = w.rollback(plan)
    assert restored == {3: [str(held)]}
    assert held.read_bytes() == encode_partition_metadata(OLD_ID)
    assert w.kafka.commands[2:] == ["svc stop 3", "svc start 3"]
    events = [r["event"] for r in w.records() if str(r["event"]).startswith("rollback-")]
    assert events == ["rollback-started", "rollback-restored", "rollback-finished"]
    assert [r["step"] for r in w.records("rollback-finished")] == ["rollback0:broker-3:rollback"]


# -- every action left out is journaled, with the reason --------------------------------------


def skipped(w: World) -> list[tuple[str, str]]:
    return [(r["step"], r["reason"]) for r in w.records(JournalEvent.STEP_SKIPPED)]


NOT_REPEATED = "finished earlier in this run: not repeated"


def test_a_resumed_run_journals_every_action_it_does_not_carry_out_again(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale
    with pytest.raises(Crash):
        w.run(plan, failpoint=lambda at: _crash(at, "delete:finished"))
    assert skipped(w) == []
    assert w.run(plan).status == "completed"
    assert skipped(w) == [
        (
            "0:broker-3:gate restart-safety",
            "broker 3 was stopped by this run already (0:broker-3:stop): the gate before its"
            " stop is not checked again",
        ),
        ("0:broker-3:stop", NOT_REPEATED),
        ("0:broker-3:backup", NOT_REPEATED),
        ("0:broker-3:delete", NOT_REPEATED),
    ]
    # Each record comes where its action would have run: after the resume, before the start.
    events = [(r["event"], r.get("step")) for r in w.records()]
    resumed = events.index((JournalEvent.RUN_RESUMED, None))
    start = events.index((JournalEvent.STEP_STARTED, "0:broker-3:start"))
    assert [e for e, _ in events[resumed + 1 : start]].count(JournalEvent.STEP_SKIPPED) == 4
    assert_repaired(w, held)


def test_a_restore_resumed_after_its_write_journals_why_its_gate_is_not_checked(
    lost_id: tuple[World, Plan],
) -> None:
    w, plan = lost_id
    with pytest.raises(Crash):
        w.run(plan, failpoint=lambda at: _crash(at, f"{Action.ZK_WRITE_TOPIC_ID}:finished"))
    assert w.run(plan).status == "completed"
    assert skipped(w) == [
        (
            "0:topic-orders:gate agreement",
            "0:topic-orders:zk-write topic-id was done by this run already: the gate before it"
            " is not checked again",
        ),
        ("0:topic-orders:zk-write topic-id", NOT_REPEATED),
        ("1:cluster:wait converged", CONVERGED_BY_THE_STEPS),
    ]
    assert w.cluster_writes() == [("set", topic_path("orders"))]


def test_a_restore_whose_zookeeper_held_no_id_journals_why_it_elects_no_controller(
    lost_id: tuple[World, Plan],
) -> None:
    w, plan = lost_id
    (restore,) = plan.restores
    # A plan that lists the election for a topic ZooKeeper held no id for (the planner leaves
    # it out): there is no loaded id to replace, so no election.
    with_election = plan_of(
        [replace(restore, actions=steps.RESTORE_ACTIONS)], playbook="restore-zk-topic-id"
    )
    assert w.run(with_election).status == "completed"
    assert (
        "0:topic-orders:zk-write controller-election",
        "ZooKeeper held no id for orders that a controller could have loaded: no election is"
        " needed",
    ) in skipped(w)
    assert w.cluster_writes() == [("set", topic_path("orders"))]


CONVERGED_BY_THE_STEPS = (
    "the plan deletes no file: nothing converges after its last step that its steps' own gates"
    " did not wait for"
)


def test_a_run_that_deletes_no_file_journals_why_it_has_no_convergence_gate(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    actions = (Action.GATE_RESTART_SAFETY, Action.STOP, Action.START, Action.WAIT_REGISTERED)
    assert w.run(plan_of([restart(3, actions)], playbook="rolling-restart")).status == "completed"
    assert skipped(w) == [("1:cluster:wait converged", CONVERGED_BY_THE_STEPS)]
    assert RunAction.CONVERGE not in w.actions(JournalEvent.STEP_STARTED)


def test_a_run_that_skips_nothing_journals_no_skip(stale: tuple[World, Plan, Path]) -> None:
    w, plan, _held = stale
    assert w.run(plan).status == "completed"
    assert skipped(w) == []


def _crash(at: str, point: str) -> None:
    if at == point:
        raise Crash(at)


# -- a rollback goes through the recorder like every action -----------------------------------


def rollback_keys(*actions: str) -> list[str]:
    return [f"rollback0:broker-3:{a}" for a in actions]


def test_rollback_journals_each_of_its_actions_before_and_after(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale
    assert w.run(plan).status == "completed"
    before = len(w.records())
    assert w.rollback(plan) == {3: [str(held)]}
    records = w.records()[before:]
    shown = [
        (r["event"], r["step"])
        for r in records
        if r["event"] not in (JournalEvent.SAMPLE, JournalEvent.ZOOKEEPER)
    ]
    gate, stop, restore, start, registered = rollback_keys(*steps.ROLLBACK_ACTIONS)
    assert shown == [
        (JournalEvent.ROLLBACK_STARTED, "rollback0:broker-3:rollback"),
        (JournalEvent.STEP_STARTED, gate),
        (JournalEvent.GATE, "rollback0:broker-3:gate"),
        (JournalEvent.STEP_FINISHED, gate),
        (JournalEvent.STEP_STARTED, stop),
        (JournalEvent.STEP_FINISHED, stop),
        (JournalEvent.STEP_STARTED, restore),
        (JournalEvent.ROLLBACK_RESTORED, restore),
        (JournalEvent.STEP_FINISHED, restore),
        (JournalEvent.STEP_STARTED, start),
        (JournalEvent.STEP_FINISHED, start),
        (JournalEvent.STEP_STARTED, registered),
        (JournalEvent.STEP_FINISHED, registered),
        (JournalEvent.ROLLBACK_FINISHED, "rollback0:broker-3:rollback"),
    ]
    results = {r["step"]: r["result"] for r in records if r["event"] == JournalEvent.STEP_FINISHED}
    assert results == {
        gate: {"blocker": None, "registered": True},
        stop: {"stopped": 3},
        restore: {"restored": [str(held)]},
        start: {"started": 3},
        registered: {"registered": 3},
    }
    assert replay(w.records()).status == "completed", "a rollback does not change the run's"


ROLLBACK_POINTS = [
    f"{action}:{point}"
    for action in steps.ROLLBACK_ACTIONS
    for point in ("started", "done", "finished")
]


def test_rollback_hits_a_failpoint_at_every_action_like_a_run(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, _held = stale
    assert w.run(plan).status == "completed"
    hit: list[str] = []
    w.rollback(plan, failpoint=hit.append)
    assert hit == ROLLBACK_POINTS


@pytest.mark.parametrize("point", ROLLBACK_POINTS)
def test_a_rollback_killed_anywhere_is_carried_out_whole_when_asked_again(
    stale: tuple[World, Plan, Path], point: str
) -> None:
    w, plan, held = stale
    assert w.run(plan).status == "completed"
    with pytest.raises(Crash):
        w.rollback(plan, failpoint=lambda at: _crash(at, point))
    (in_flight,) = [r for r in w.records(JournalEvent.STEP_STARTED)][-1:]
    assert in_flight["step"] == f"rollback0:broker-3:{point.rpartition(':')[0]}"
    assert w.rollback(plan) == {3: [str(held)]}
    assert held.read_bytes() == encode_partition_metadata(OLD_ID)
    assert 3 in w.kafka.running and w.zk.exists("/brokers/ids/3") is not None
    # Asked again, a rollback does every action again: none is skipped as done.
    assert skipped(w) == []
    finished = w.actions(JournalEvent.STEP_FINISHED)
    assert finished[-len(steps.ROLLBACK_ACTIONS) :] == list(steps.ROLLBACK_ACTIONS)
    # The broker is stopped only if it ran; it is started exactly once after the restore.
    after_run = w.kafka.commands[2:]
    assert after_run[-1] == "svc start 3"
    assert after_run.count("svc stop 3") + after_run.count("svc start 3") == len(after_run)


def test_a_rollback_its_gate_refuses_journals_the_failed_action_and_stops_nothing(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale
    assert w.run(plan).status == "completed"
    # payments-0 is at exactly min.insync.replicas=2 with broker 3 in its ISR.
    w.kafka.isr[("payments", 0)].remove(2)
    w.kafka.write_states()
    with pytest.raises(HaltedError, match="rollback of broker 3 refused"):
        w.rollback(plan)
    (failed,) = w.records(JournalEvent.STEP_FAILED)
    assert failed["step"] == "rollback0:broker-3:gate restart-safety"
    assert failed["error"].startswith("rollback of broker 3 refused: payments-0 has exactly")
    assert w.kafka.commands[2:] == [], "the broker was stopped"
    assert held.read_bytes() == encode_partition_metadata(ZK_ID)
