"""Repairs that go wrong: the operator keeps the cluster safe, `resume` finishes the job.

Each test arms a mismatch on the sandbox (3.4 emulation, real ZooKeeper), applies the plan,
breaks something on the way — the operator itself, a broker, ZooKeeper, the controller, a
neighbour — and then checks what the safety rules promise: nothing changed without a verified
backup, the journal says what happened, `resume` completes the run, and the topic ends with a
full ISR and ZooKeeper's id in every file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from remediate.execute import steps
from remediate.execute.failpoints import ENV as FAILPOINTS
from remediate.execute.lock import lock_path
from remediate.execute.steps import RESTART_ACTIONS, RunAction, StepKey
from remediate.formats.logdir import PARTITION_METADATA, encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    CONTROLLER_EPOCH,
    MIGRATION,
    MigrationState,
    encode_migration,
)
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated.config import SANDBOX_DEFAULTS
from remediate.sandbox.plumbing import process, zkserver
from remediate.sandbox.reproduce import partition_states, replica_file_ids
from tests.collect.zkproxy import DELETE, MULTI, ZkProxy, multi_operations
from tests.execute.sandbox_tools import run_cli
from tests.faults.apply_lab import (
    AREA,
    FOREIGN,
    ApplyLab,
    Run,
    journal_has,
    runs,
    start_lab,
    stop_lab,
    wait_stopped,
)
from tests.faults.apply_lab import TOPIC as LEDGER
from tests.wait import wait_until

pytestmark = pytest.mark.slow

# A one-broker repair: its restart step, then the run's convergence gate.
ACTIONS = [*RESTART_ACTIONS, RunAction.CONVERGE]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApplyLab]:
    lab = start_lab(tmp_path_factory.mktemp("faults") / "sandbox")
    yield lab
    stop_lab(lab)


@pytest.fixture
def healthy_lab(lab: ApplyLab) -> Iterator[ApplyLab]:
    """The lab, healthy before the test and left healthy after it (or the test fails, and
    the lab is reset so that the next test does not fail for it)."""
    try:
        lab.wait_healthy()
    except AssertionError:
        lab.reset()  # a test before that failed in its body, and its own reset did not hold
    yield lab
    try:
        lab.wait_healthy(timeout=90)
    except AssertionError:
        lab.reset()
        raise


def one_broker(lab: ApplyLab) -> int:
    """A broker that is not the controller (the controller's own faults have their test)."""
    controller = lab.controller()
    return next(b for b in (1, 2, 3) if b != controller)


def armed(lab: ApplyLab) -> tuple[int, tuple[Path, dict[str, Any]], dict[str, bytes]]:
    """A broker other than the controller with the mismatch planted, its plan, and the bytes
    of the planted files (what a backup must hold)."""
    target = one_broker(lab)
    lab.plant([target])
    plan = lab.plan([target])
    return target, plan, lab.snapshot_files(plan[1])


def actions_of(run: Run) -> list[str]:
    return [StepKey.parse(key).action for key in run.finished_steps()]


def action_of_point(point: str) -> str:
    """The action a failpoint name ("delete:done") belongs to."""
    return point.rpartition(":")[0]


def assert_resumed_to_the_end(lab: ApplyLab, run: Run) -> Run:
    resumed = lab.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert resumed.run_id == run.run_id
    finished = resumed.finished_steps()
    assert len(finished) == len(set(finished)), f"an action was completed twice: {finished}"
    assert resumed.events("run-resumed") and resumed.events("run-completed")
    assert lab.status(run.run_id)["status"] == "completed"
    lab.wait_healthy()
    return resumed


# -- the operator dies ----------------------------------------------------------------------


@pytest.mark.fault(
    AREA,
    "The operator is killed (SIGKILL) at every step boundary: after each of a broker's eight"
    " actions, one crash after another in the same run",
    "After each crash the journal ends at the last finished action and `status` shows the run"
    " as running; each `resume` goes on from the next action, none is done twice, and the"
    " cluster ends healthy",
)
def test_sigkill_at_every_step_boundary(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    _target, plan, planted = armed(lab)
    run = lab.finish(lab.start_apply(plan, failpoints=f"{ACTIONS[0]}:finished=kill"))
    for number, action in enumerate(ACTIONS):
        if number > 0:
            run = lab.resume(run.run_id, failpoints=f"{action}:finished=kill")
        assert run.exit_code == -signal.SIGKILL, (action, run.stderr[-2000:])
        assert actions_of(run) == ACTIONS[: number + 1]
        assert not run.events("run-completed") and not run.events("run-halted")
        assert lab.status(run.run_id)["status"] == "running"
        lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)

    resumed = assert_resumed_to_the_end(lab, run)
    assert actions_of(resumed) == ACTIONS
    assert len(resumed.events("run-resumed")) == len(ACTIONS)
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)


@pytest.mark.fault(
    AREA,
    "The operator is killed with the backup written and with the delete done, each before it"
    " is journaled, and in the middle of the post-gate wait",
    "`resume` re-verifies the action in flight (a written archive is read back and kept,"
    " files already deleted are found in the verified backup) and finishes",
)
def test_sigkill_in_the_middle_of_an_action(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    _target, plan, planted = armed(lab)
    points = ["backup:done", "delete:done", "wait in-sync:started"]

    def in_flight(_number: int, point: str, run: Run) -> None:
        # The last step record (a health sample may follow it: a wait, or a check that the
        # broker is still down, reads the cluster, and samples it once a second).
        last = [r for r in run.records if r["event"] != "sample"][-1]
        assert last["event"] == "step-started"
        assert str(last["step"]).endswith(":" + action_of_point(point))
        assert last.get("resumed") is False
        lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)

    run = lab.killed_at_each(plan, points, then=in_flight)

    resumed = assert_resumed_to_the_end(lab, run)
    again = {
        StepKey.parse(str(r["step"])).action
        for r in resumed.events("step-started")
        if r.get("resumed")
    }
    assert again == {action_of_point(p) for p in points}, "not re-verified"
    assert actions_of(resumed) == ACTIONS
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)


@pytest.mark.fault(
    AREA,
    "The operator is killed while the backup is being written (a half-written archive and its"
    " manifest left beside the final names) and while the delete runs (one file removed, the"
    " others not)",
    "`resume` writes the archive again from the files and verifies it (never trusting the"
    " partial one), deletes only what is still there, journals the file already gone, and"
    " finishes; every deleted file is in the verified backup",
)
def test_sigkill_leaves_a_half_written_backup_and_a_half_done_delete(
    healthy_lab: ApplyLab,
) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    run = lab.finish(lab.start_apply(plan, failpoints="backup:started=kill"))
    assert run.exit_code == -signal.SIGKILL, run.stderr[-2000:]
    # What the remote script leaves when it dies inside tar, after writing the manifest.
    label = f"step1-broker{target}"
    directory = lab.backup_dir / run.run_id / label
    directory.mkdir(parents=True, mode=0o700)
    (directory / f"{label}.sha256").write_text("0" * 64 + "  a/file/that/was/never/there\n")
    (directory / f"{label}.tar.gz.partial").write_bytes(b"\x1f\x8b\x08\x00half")

    run = lab.resume(run.run_id, failpoints="delete:started=kill")
    assert run.exit_code == -signal.SIGKILL, run.stderr[-2000:]
    assert actions_of(run)[-1] == "backup"
    archived = lab.backed_up(run.run_id)  # verified: archive, manifest, every member
    assert set(archived) == set(planted)
    # The delete had removed one file when the operator died.
    first = sorted(planted)[0]
    Path(first).unlink()

    resumed = assert_resumed_to_the_end(lab, run)
    (deleted,) = [
        r["result"] for r in resumed.events("step-finished") if str(r["step"]).endswith(":delete")
    ]
    assert deleted["already_gone"] == [first]
    assert sorted(deleted["deleted"]) == sorted(set(planted) - {first})
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)


RESTORE_ACTIONS = list(steps.RESTORE_ACTIONS)
AGREED = "accounts"


def plant_agreed_mismatch(lab: ApplyLab) -> tuple[tuple[Path, dict[str, Any]], str]:
    """A topic whose replicas all hold X while ZooKeeper holds a foreign id that a controller
    has loaded (the incident after its failover, on 3.x): a restore plan with an election."""
    if not lab.zk.exists(f"/brokers/topics/{AGREED}"):
        admin.create_topic(lab.zk, AGREED, 3, 3, config={"min.insync.replicas": "2"})
        wait_until(
            lambda: len([v for v in replica_file_ids(lab.state, AGREED).values() if v]) == 9,
            "every replica to write partition.metadata",
        )
    (held,) = set(replica_file_ids(lab.state, AGREED).values())
    assert held is not None
    path = f"/brokers/topics/{AGREED}"
    data, stat = lab.zk.get(path)
    foreign = json.loads(data) | {"topic_id": str(TopicId.random())}
    lab.zk.set(path, json.dumps(foreign).encode(), version=stat.version)
    epoch = lab.controller_epoch()
    admin.failover_controller(lab.zk)
    wait_until(
        lambda: lab.controller_epoch() > epoch and admin.current_controller(lab.zk) is not None,
        "a new controller",
    )
    lab.plans.clear()  # the controller epoch moved on
    plan_path = lab.directory / f"restore-{lab.controller_epoch()}.json"
    planned = run_cli("plan", "-c", str(lab.config), "-o", str(plan_path))
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-3000:]
    document = json.loads(plan_path.read_text())
    assert [(s["kind"], s["topic"], s["reelect"]) for s in document["steps"]] == [
        ("restore", AGREED, True)
    ], document["steps"]
    return (plan_path, document), held


def assert_restored(lab: ApplyLab, held: str, pids: dict[int, int | None]) -> None:
    assignment, _ = admin.read_topic(lab.zk, AGREED)
    assert str(assignment.topic_id) == held
    assert set(replica_file_ids(lab.state, AGREED).values()) == {held}
    for number, s in partition_states(lab.zk, AGREED, [0, 1, 2]).items():
        assert sorted(s.isr) == [1, 2, 3] and s.leader >= 0, (number, s)
    assert {b: cluster.broker_pid(lab.directory, b) for b in (1, 2, 3)} == pids, "a restart"


@pytest.mark.fault(
    AREA,
    "The operator is killed (SIGKILL) at every step boundary of a restore: after the agreement"
    " gate, the znode write, the controller election, the wait and the verify",
    "Each `resume` goes on from the next action (a gate passed before the crash is checked"
    " again before the write); nothing is written or elected twice, no broker restarts, and the"
    " topic ends with the replicas' id in ZooKeeper and a full ISR",
)
def test_sigkill_at_every_step_boundary_of_a_restore(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    plan, held = plant_agreed_mismatch(lab)
    pids = {b: cluster.broker_pid(lab.directory, b) for b in (1, 2, 3)}
    run = lab.finish(lab.start_apply(plan, failpoints=f"{RESTORE_ACTIONS[0]}:finished=kill"))
    for number, action in enumerate(RESTORE_ACTIONS):
        if number > 0:
            run = lab.resume(run.run_id, failpoints=f"{action}:finished=kill")
        assert run.exit_code == -signal.SIGKILL, (action, run.stdout[-1000:], run.stderr[-2000:])
        assert actions_of(run) == RESTORE_ACTIONS[: number + 1]
        assert lab.status(run.run_id)["status"] == "running"
    resumed = assert_resumed_to_the_end(lab, run)
    assert actions_of(resumed) == RESTORE_ACTIONS
    assert len(resumed.events("step-started")) == len(RESTORE_ACTIONS)
    # The resume after the gate's crash checked it again right before the write.
    assert any(
        "the gate is checked again" in str(r.get("decision")) for r in resumed.events("note")
    )
    elections = [r for r in resumed.events("note") if "controller_epoch_before" in r]
    assert len(elections) == 1
    assert_restored(lab, held, pids)
    lab.plans.clear()


@pytest.mark.fault(
    AREA,
    "The operator is killed in the middle of a restore's znode write and of its controller"
    " election (done, not yet journaled)",
    "`resume` finds the id already in the znode and a newer controller epoch than the one it"
    " recorded before the election, and neither writes nor elects again",
)
def test_sigkill_in_the_middle_of_a_restore(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    plan, held = plant_agreed_mismatch(lab)
    pids = {b: cluster.broker_pid(lab.directory, b) for b in (1, 2, 3)}
    points = ["zk-write topic-id:done", "zk-write controller-election:done"]

    def in_flight(_number: int, point: str, run: Run) -> None:
        last = [r for r in run.records if str(r["event"]).startswith("step-")][-1]
        assert last["event"] == "step-started"
        assert str(last["step"]).endswith(":" + action_of_point(point))

    run = lab.killed_at_each(plan, points, then=in_flight)
    epoch = lab.controller_epoch()
    resumed = assert_resumed_to_the_end(lab, run)
    results = {
        StepKey.parse(str(r["step"])).action: r["result"] for r in resumed.events("step-finished")
    }
    assert results["zk-write topic-id"].get("already") is True
    assert results["zk-write controller-election"].get("already") is True
    assert lab.controller_epoch() == epoch, "the controller was elected again"
    assert_restored(lab, held, pids)
    lab.plans.clear()


@pytest.mark.fault(
    AREA,
    "The answer to the restore's election is lost: the transaction that deletes /controller"
    " reaches ZooKeeper and takes effect, and the connection drops before its answer arrives",
    "The delete is not sent again (a second one could depose the controller it elected): the"
    " run journals the lost answer, waits for the election it caused, and completes; one"
    " election in all",
)
def test_the_elections_delete_whose_answer_is_lost_is_not_sent_again(
    healthy_lab: ApplyLab,
) -> None:
    lab = healthy_lab
    plan, held = plant_agreed_mismatch(lab)
    pids = {b: cluster.broker_pid(lab.directory, b) for b in (1, 2, 3)}

    def the_election(operation: int, body: bytes) -> bool:
        return operation == MULTI and DELETE in multi_operations(body)

    proxy = ZkProxy(lab.zookeeper_address(), lose_answer_to=the_election)
    epoch = lab.controller_epoch()
    try:
        run = lab.finish(lab.start_apply(plan, config=lab.with_zookeeper(proxy.connect_string)))
    finally:
        proxy.close()
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert proxy.answers_lost == 1
    assert lab.controller_epoch() == epoch + 1, "a second election"
    (lost,) = [
        str(r["decision"])
        for r in run.events("note")
        if "answer was lost" in str(r.get("decision"))
    ]
    assert lost.startswith("the delete's answer was lost (a transaction of check of")
    assert_restored(lab, held, pids)
    lab.plans.clear()


@pytest.mark.fault(
    AREA,
    "A ZooKeeper-to-KRaft migration begins between the restore's last check and its znode"
    " write: a KRaft controller creates /migration and claims the controller, bumping"
    " /controller_epoch, while the operator holds the znode it read",
    "ZooKeeper refuses the write (one transaction with the check of /controller_epoch): the run"
    " halts (exit 5) naming the migration, nothing written; once the migration is reverted as"
    " Kafka's guide says (/migration and /controller deleted), `resume` checks again and"
    " completes",
)
def test_a_migration_begun_between_the_check_and_the_write_writes_nothing(
    healthy_lab: ApplyLab,
) -> None:
    lab = healthy_lab
    plan, held = plant_agreed_mismatch(lab)
    path = f"/brokers/topics/{AGREED}"
    pause = lab.pause("before-the-write")
    process_ = lab.start_apply(plan, failpoints=f"zk-write topic-id:read={pause.action}")
    pause.wait(process_)
    before = lab.zk.get(path)
    try:
        # What a KRaft controller does as it takes over (KafkaZkClient's
        # tryRegisterKRaftControllerAsActiveController): /migration, /controller_epoch bumped.
        lab.zk.create(MIGRATION, encode_migration(MigrationState(3000, 1, -1, -1)))
        data, stat = lab.zk.get(CONTROLLER_EPOCH)
        lab.zk.set(CONTROLLER_EPOCH, str(int(data) + 1).encode(), version=stat.version)
        pause.release()
        run = lab.finish(process_)
        assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
        (halted,) = run.events("run-halted")
        assert (
            f"{path}: nothing written: a ZooKeeper-to-KRaft migration has begun: KRaft"
            " controller 3000 (epoch 1) leads a migration"
        ) in halted["error"]
        assert lab.zk.get(path)[0] == before[0]
    finally:
        # Reverted to ZooKeeper mode (Kafka's migration guide): /migration and /controller go.
        with contextlib.suppress(NoNodeError):
            lab.zk.delete(MIGRATION)
        admin.failover_controller(lab.zk)
    resumed = assert_resumed_to_the_end(lab, run)
    assert any(
        "the gate is checked again" in str(r.get("decision")) for r in resumed.events("note")
    )
    pids = {b: cluster.broker_pid(lab.directory, b) for b in (1, 2, 3)}
    assert_restored(lab, held, pids)
    lab.plans.clear()


# -- the broker does not come back -----------------------------------------------------------


@pytest.mark.fault(
    AREA,
    "A broker's start command fails",
    "The run halts (exit 5) with the command's exit code in the journal, the broker's files"
    " backed up; after the start command is fixed, `resume` starts it and finishes",
)
def test_a_failing_start_command_halts_and_resume_finishes(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    broken = lab.with_service(start="echo 'unit kafka.service not found' >&2; exit 1")
    run = lab.finish(lab.start_apply(plan, config=broken))
    assert run.exit_code == 5, run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert "start command exited 1" in halted["error"]
    assert "unit kafka.service not found" in halted["error"]
    assert [r["step"] for r in run.events("step-failed")][-1].endswith(":start")
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    assert str(target) not in lab.zk.get_children("/brokers/ids")

    assert_resumed_to_the_end(lab, run)


@pytest.mark.fault(
    AREA,
    "A broker's process exits at once after its start command succeeds (its log dir's"
    " meta.properties names another broker.id, so it dies with Kafka's fatal startup error)",
    "The run halts (exit 5) within seconds, not at the start timeout: the status command says"
    " twice that the broker is not running; once the cause is fixed, `resume` starts it again"
    " (journaled) and finishes",
)
def test_a_broker_that_exits_at_once_halts_and_resume_starts_it(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    before = runs(lab)
    pause = lab.pause("after-delete")
    process_ = lab.start_apply(plan, failpoints=f"delete:finished={pause.action}")
    pause.wait(process_)
    assert journal_has(lab, before, "step-finished", ":delete")
    # While the operator holds after its delete, a log dir is swapped for one written by
    # another broker: Kafka refuses to start on it ("doesn't match stored broker.id").
    with lab.foreign_log_dir(target):
        pause.release()
        run = lab.finish(process_)
    assert run.exit_code == 5, run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert f"broker {target} exited after its start" in halted["error"]
    assert "timed out" not in halted["error"]
    log = lab.directory / f"broker-{target}" / "logs" / "server.log"
    assert "Fatal error during KafkaServer startup" in log.read_text()
    assert actions_of(run)[-1] == "start"
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)

    resumed = assert_resumed_to_the_end(lab, run)
    assert any("starting it again" in str(r.get("decision")) for r in resumed.events("note"))


@pytest.mark.fault(
    AREA,
    "A broker registers but never rejoins the ISR",
    "The run halts (exit 5) at the in-sync gate, naming the partitions it is missing from,"
    " and goes no further; once the cause is fixed, `resume` finishes",
)
def test_a_broker_that_never_rejoins_the_isr_halts(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    before = runs(lab)
    # While the operator holds after its delete, the stale files come back (a configuration
    # tool restoring a log dir, say): the broker starts with the foreign id again.
    pause = lab.pause("after-delete")
    process_ = lab.start_apply(plan, failpoints=f"delete:finished={pause.action}")
    pause.wait(process_)
    assert journal_has(lab, before, "step-finished", ":delete")
    for path in planted:
        if path.endswith(PARTITION_METADATA):
            Path(path).write_bytes(encode_partition_metadata(FOREIGN))
    pause.release()
    run = lab.finish(process_)
    assert run.exit_code == 5, run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert f"broker {target} back in the ISR" in halted["error"]
    assert "ledger-" in halted["error"]
    assert actions_of(run)[-1] == "wait registered"
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)

    # The operator's fix: the broker restarted without the stale files.
    assert cluster.stop_broker(lab.directory, target)
    for path in planted:
        if path.endswith(PARTITION_METADATA):
            Path(path).unlink()
    cluster.start_broker(lab.directory, target, wait=True)
    assert_resumed_to_the_end(lab, run)


# -- ZooKeeper ------------------------------------------------------------------------------


def zk_connections(lab: ApplyLab) -> int:
    """The clients connected to the lab's ZooKeeper (its `mntr`), or 0 while it is down."""
    try:
        answer = zkserver.four_letter_word(
            lab.state.zookeeper_host, lab.state.zookeeper_port, "mntr"
        )
    except OSError:
        return 0
    for line in answer.splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_num_alive_connections" and value.strip().isdigit():
            return int(value)
    return 0


@pytest.mark.fault(
    AREA,
    "The operator's ZooKeeper session expires during the run (the process is frozen longer"
    " than the session timeout)",
    "The lock is lost: the run stops before its next destructive action (the broker is not"
    " stopped) and halts (exit 5); `resume` takes the lock again and finishes",
)
def test_a_lost_session_stops_the_run_before_the_next_destructive_action(
    healthy_lab: ApplyLab,
) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    operator = lab.start_apply(plan, failpoints="gate restart-safety:finished=stop")
    try:
        wait_stopped(operator.pid)
        # Frozen, the operator cannot keep its session alive: ZooKeeper expires it, and the
        # run lock's ephemeral znode goes with it.
        locks = lock_path(lab.settings["cluster"])
        timeout = float(lab.settings["zookeeper"]["session_timeout_s"])
        wait_until(
            lambda: lab.zk.get_children(locks) == [],
            "the frozen operator's session to expire",
            timeout * 3 + 30,
        )
    finally:
        operator.send_signal(signal.SIGCONT)
    run = lab.finish(operator)
    assert run.exit_code == 5, run.stderr[-3000:]
    (failed,) = run.events("step-failed")
    assert str(failed["step"]).endswith(":stop") and "lock" in failed["error"]
    assert not any(str(s).endswith(":stop") for s in run.finished_steps())
    assert str(target) in lab.zk.get_children("/brokers/ids")
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)

    assert_resumed_to_the_end(lab, run)


@pytest.mark.fault(
    AREA,
    "ZooKeeper is down for a while (killed, restarted 6 s later) during the post-gate wait,"
    " and back within the operator's session timeout",
    "The session is suspended and comes back, never lost: the journal records both, and the"
    " run carries on and completes (exit 0). A session that does not come back halts the run"
    " (exit 5) before its next destructive action: see the lost-session row above",
)
def test_zookeeper_down_for_a_while(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    _target, plan, planted = armed(lab)
    before = runs(lab)
    # The operator's session (30 s) outlives the outage, ZooKeeper's restart and the client's
    # reconnect backoff on a loaded host; the operator holds after the wait until every
    # client ZooKeeper had before the outage is connected again, so its next read comes when
    # ZooKeeper is back.
    patient = lab.patient_config(session_timeout_s=30)
    pause = lab.pause("zookeeper-outage")
    operator = lab.start_apply(
        plan, config=patient, failpoints=f"wait registered:finished={pause.action}"
    )
    pause.wait(operator)
    assert journal_has(lab, before, "step-finished", ":wait registered")
    clients = zk_connections(lab)
    pid = cluster.zookeeper_pid(lab.directory)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    process.wait_gone(pid, timeout=30)
    wait_until(lambda: not lab.zk.connected, "the clients to lose ZooKeeper")
    cluster.start_zookeeper(lab.directory, lab.state)
    wait_until(
        lambda: lab.zk.connected and zk_connections(lab) >= clients,
        "every client to reconnect to ZooKeeper",
        60,
    )
    pause.release()
    run = lab.finish(operator)
    assert run.exit_code == 0, run.stderr[-3000:]
    assert run.events("run-completed")
    assert not run.events("run-halted")
    # The journal says the session was suspended and came back, and was never lost.
    sessions = [r["session"] for r in run.events("zookeeper")]
    assert "SUSPENDED" in sessions and sessions[-1] == "CONNECTED", sessions
    assert "LOST" not in sessions, sessions
    assert all("ZooKeeper" in r["what"] for r in run.events("retry"))
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    lab.wait_healthy(timeout=90)
    # Sessions that outlived the outage on the server may still expire at their reconnect.
    broker_session_s = int(SANDBOX_DEFAULTS["zookeeper.session.timeout.ms"]) / 1000
    lab.wait_settled(quiet_s=2 * broker_session_s)


@pytest.mark.fault(
    AREA,
    "ZooKeeper goes away in the middle of a run and does not come back within the operator's"
    " session timeout (killed while the operator is between two actions)",
    "No request waits past the session timeout: the run halts (exit 5) saying ZooKeeper could"
    " not be read, its local journal complete (ZooKeeper's copy catches up later); once"
    " ZooKeeper is back, `resume` finishes the run",
)
def test_zookeeper_gone_past_the_session_timeout_halts_the_run(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    _target, plan, planted = armed(lab)
    pause = lab.pause("zookeeper-gone")
    operator = lab.start_apply(plan, failpoints=f"wait registered:finished={pause.action}")
    pause.wait(operator)
    pid = cluster.zookeeper_pid(lab.directory)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    process.wait_gone(pid, timeout=30)
    try:
        pause.release()
        run = lab.finish(operator, timeout=180)
    finally:
        cluster.start_zookeeper(lab.directory, lab.state)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert "ZooKeeper" in halted["error"], halted
    # The local journal has the whole run, its halt included: `status` reads it.
    wait_until(lambda: lab.zk.connected, "the test's session to reconnect", 60)
    assert lab.status(run.run_id)["status"] == "halted"
    # The brokers' sessions did not outlive the outage: they register again, their partitions
    # get leaders and full ISRs again. Then the operator resumes, as on call it would.
    broker_session_s = int(SANDBOX_DEFAULTS["zookeeper.session.timeout.ms"]) / 1000
    lab.wait_settled(quiet_s=2 * broker_session_s)
    assert_resumed_to_the_end(lab, run)
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)


@pytest.mark.fault(
    AREA,
    "One broker's min.insync.replicas cannot be read: cluster.yaml names its server.properties"
    " but the file cannot be read, DescribeConfigs does not give it either, and cluster.yaml"
    " states no `min_insync_replicas_default`",
    "`plan` refuses (exit 4, nothing changed) naming the broker, why each source failed and"
    " what to do; once cluster.yaml states the value, the broker counts with it and the plan"
    " is made, saying so",
)
def test_an_unknown_min_isr_refuses_the_plan_instead_of_counting_1(
    healthy_lab: ApplyLab,
) -> None:
    lab = healthy_lab
    target = one_broker(lab)
    settings = lab.settings
    assert "min_insync_replicas_default" not in settings
    for broker in settings["brokers"]:
        if broker["id"] == target:
            broker["server_properties"] = str(lab.directory / "unreadable" / "server.properties")
    unreadable = lab.directory / "cluster-unreadable.yaml"
    unreadable.write_text(yaml.safe_dump(settings, sort_keys=False))
    lab.plant([target])
    try:
        out = lab.directory / "refused.json"
        refused = run_cli("plan", "-c", str(unreadable), "-o", str(out))
        assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-3000:]
        (refusal,) = [
            r for r in json.loads(out.read_text())["refusals"] if "min.insync.replicas" in r
        ]
        assert refusal.startswith(f"min.insync.replicas is not known for broker(s) {target} (")
        assert "server.properties" in refusal and "DescribeConfigs" in refusal
        assert refusal.endswith("as `min_insync_replicas_default` in cluster.yaml")

        # Stated (1, below the other brokers' 2): the strictest known still decides.
        stated = lab.directory / "cluster-stated.yaml"
        stated.write_text(
            yaml.safe_dump({**settings, "min_insync_replicas_default": 1}, sort_keys=False)
        )
        planned = run_cli("plan", "-c", str(stated), "-o", str(out))
        assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-3000:]
        brokers = json.loads(out.read_text())["min_isr"]["brokers"]
        assert (brokers["value"], brokers["source"]) == (2, "server.properties"), brokers
        assert brokers["detail"].endswith(f"; nothing known of broker(s) {target}"), brokers
        assert "unknown" not in brokers
    finally:
        lab.reset()  # the planted mismatch repaired for the next test


# -- the cluster and other operators -----------------------------------------------------------


@pytest.mark.fault(
    AREA,
    "The controller moves during a rolling restart, to a broker still waiting for its turn",
    "The controller is re-read before every step: the new controller goes last (the decision"
    " is journaled) and the run completes",
)
def test_a_controller_that_moves_is_still_restarted_last(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    controller = lab.controller()
    plan = lab.plan([1, 2, 3], playbook=lab.directory / "quick-rolling.yaml")
    order = [s["broker"] for s in plan[1]["steps"]]
    first, second, last = order
    assert last == controller
    before = runs(lab)
    # The first broker stays down after its stop, so it cannot take the controller.
    pause = lab.pause("after-stop")
    operator = lab.start_apply(plan, failpoints=f"stop:finished={pause.action}")
    pause.wait(operator)
    assert journal_has(lab, before, "step-finished", ":stop")
    # Hand the controller to `second`: freeze the old one so it cannot win the election.
    frozen = cluster.broker_pid(lab.directory, controller)
    assert frozen is not None
    os.kill(frozen, signal.SIGSTOP)
    try:
        admin.failover_controller(lab.zk)
        assert lab.controller() == second
    finally:
        os.kill(frozen, signal.SIGCONT)
    pause.release()
    run = lab.finish(operator)
    assert run.exit_code == 0, run.stderr[-3000:]
    started = [StepKey.parse(str(r["step"])).broker for r in run.events("step-started")]
    assert list(dict.fromkeys(started)) == [first, controller, second]
    assert any(
        f"broker {second} is now the active controller: it goes last" in str(r.get("decision"))
        for r in run.events("gate")
    )
    lab.wait_healthy(timeout=90)
    lab.plans.clear()  # the controller epoch moved on


@pytest.mark.fault(
    AREA,
    "A second, unrelated broker fails during the run",
    "The next broker's pre-gate blocks rather than take a partition below min.insync.replicas:"
    " the run halts (exit 5) before stopping it, naming the reason; once the failed broker is"
    " back, `resume` finishes",
)
def test_a_second_broker_failure_blocks_the_next_restart(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    plan = lab.plan([1, 2, 3], playbook=lab.directory / "quick-rolling.yaml")
    first, second, bystander = [s["broker"] for s in plan[1]["steps"]]
    before = runs(lab)
    pause = lab.pause("between-steps")
    operator = lab.start_apply(plan, failpoints=f"wait in-sync:finished={pause.action}")
    pause.wait(operator)
    assert journal_has(lab, before, "step-finished", ":wait in-sync")
    # A broker whose turn has not come dies while the operator holds between two steps.
    assert cluster.kill_broker(lab.directory, bystander)
    # Nothing sees a SIGKILLed broker until its ZooKeeper session expires (Kafka's controller
    # neither): the gate can only block on a failure ZooKeeper already shows.
    wait_until(
        lambda: str(bystander) not in lab.zk.get_children("/brokers/ids"),
        f"broker {bystander}'s session to expire",
        60,
    )
    pause.release()
    run = lab.finish(operator)
    assert run.exit_code == 5, run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert "pre-gate" in halted["error"]
    assert str(second) in lab.zk.get_children("/brokers/ids"), "the next broker was stopped"
    assert [s for s in run.finished_steps() if s.endswith(":stop")] == [f"0:broker-{first}:stop"]

    cluster.start_broker(lab.directory, bystander, wait=True)
    lab.wait_healthy()
    assert_resumed_to_the_end(lab, run)
    lab.plans.clear()  # the controller moved


@pytest.mark.fault(
    AREA,
    "A second, unrelated broker stalls during the run (frozen, like a long GC pause or a hung"
    " disk): still registered, but out of the ISR of the partitions it follows",
    "The next broker's pre-gate blocks on min.insync.replicas (its restart would take those"
    " partitions below it), the run halts (exit 5) before stopping it with that reason; once"
    " the stalled broker is back in sync, `resume` finishes",
)
def test_a_broker_out_of_the_isr_blocks_the_next_restart_on_min_isr(
    healthy_lab: ApplyLab,
) -> None:
    lab = healthy_lab
    plan = lab.plan([1, 2, 3], playbook=lab.directory / "quick-rolling.yaml")
    first, second, controller = [s["broker"] for s in plan[1]["steps"]]
    # The broker that stalls is the one already restarted: the controller must stay alive to
    # take it out of the ISRs (a frozen controller answers no AlterIsr).
    bystander = first
    # The operator freezes itself after the first broker is back in sync; its session must
    # outlive that pause (the bystander's own session, 6 s, must too: it stays registered).
    assert controller == lab.controller()
    patient = lab.patient_config()
    operator = lab.start_apply(plan, config=patient, failpoints="wait in-sync:finished=stop")
    stalled: int | None = None
    try:
        wait_stopped(operator.pid)
        stalled = cluster.broker_pid(lab.directory, bystander)  # restarted by the run
        assert stalled is not None
        os.kill(stalled, signal.SIGSTOP)

        def at_min_isr() -> bool:
            states = partition_states(lab.zk, LEDGER, [0, 1, 2]).values()
            return any(
                bystander not in s.isr and second in s.isr and len(s.isr) == 2 for s in states
            )

        wait_until(at_min_isr, f"broker {bystander} to leave an ISR", timeout=20)
        assert str(bystander) in lab.zk.get_children("/brokers/ids")
        operator.send_signal(signal.SIGCONT)
        run = lab.finish(operator)
    finally:
        if stalled is not None:
            os.kill(stalled, signal.SIGCONT)
        operator.send_signal(signal.SIGCONT)
    assert run.exit_code == 5, run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert f"pre-gate for broker {second}" in halted["error"]
    assert "has exactly min.insync.replicas=2 in sync" in halted["error"]
    assert f"restarting broker {second} would take it below" in halted["error"]
    assert [s for s in run.finished_steps() if s.endswith(":stop")] == [f"0:broker-{first}:stop"]
    assert str(second) in lab.zk.get_children("/brokers/ids"), "the next broker was stopped"

    lab.wait_healthy(timeout=60)
    assert_resumed_to_the_end(lab, run)
    lab.plans.clear()  # the controller may have moved


# -- SSH ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ssh_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApplyLab]:
    lab = start_lab(tmp_path_factory.mktemp("faults-ssh") / "sandbox", ssh=True)
    yield lab
    stop_lab(lab)


def drop_ssh_connections(lab: ApplyLab, broker: int) -> int:
    """Kill the sshd processes serving connections to `broker` (the listener stays up)."""
    ssh_dir = lab.directory / "ssh"
    listener = process.read_pid(ssh_dir / f"sshd-{broker}.pid")
    assert listener is not None
    children = Path(f"/proc/{listener}/task/{listener}/children").read_text().split()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)
    return len(children)


def stop_command_running(lab: ApplyLab, broker: int) -> bool:
    """The sandbox's stop command for `broker` runs (over ssh: a child of an sshd session)."""
    wanted = f" broker stop --id {broker} --dir {lab.directory}"
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return any(wanted in process.command_line(pid) for pid in pids)


@pytest.mark.fault(
    AREA,
    "The SSH connection to a broker drops while its stop command runs over it",
    "The command is retried (bounded) only after re-checking whether it already took effect,"
    " the retry is journaled with its error, and the run completes",
)
def test_a_dropped_ssh_connection_during_a_step(ssh_lab: ApplyLab) -> None:
    lab = ssh_lab
    lab.wait_healthy()
    target, plan, planted = armed(lab)
    before = runs(lab)
    operator = lab.start_apply(plan)
    lab.await_journal(operator, before, "step-started", ":stop", "the stop")
    wait_until(
        lambda: stop_command_running(lab, target) or operator.poll() is not None,
        "the stop command to run",
        timeout=60,
    )
    dropped = drop_ssh_connections(lab, target)
    run = lab.finish(operator)
    assert dropped >= 1
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-3000:]
    retries = run.events("retry")
    assert any(
        r["what"] == f"broker {target}'s stop command" and "connection lost" in r["error"]
        for r in retries
    ), retries
    assert run.events("run-completed")
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    lab.wait_healthy(timeout=90)


@pytest.mark.fault(
    AREA,
    "A broker's SSH host key changes during the run (the host was rebuilt, or someone is in"
    " the middle), while the broker is stopped",
    "The next connection is refused, never retried: the run halts (exit 5) with the host key"
    " error in the journal, nothing deleted and known_hosts untouched; once the new key is"
    " verified and put in known_hosts, `resume` finishes",
)
def test_a_changed_host_key_halts_the_run_and_resume_finishes(ssh_lab: ApplyLab) -> None:
    lab = ssh_lab
    lab.wait_healthy()
    target, plan, planted = armed(lab)
    patient = lab.patient_config()
    ssh_dir = lab.directory / "ssh"
    known_hosts = ssh_dir / "known_hosts"
    trusted = known_hosts.read_text()
    host_key = ssh_dir / f"host-{target}_ed25519"
    operator = lab.start_apply(plan, config=patient, failpoints="stop:finished=stop")
    try:
        wait_stopped(operator.pid)
        # sshd reads its host key at every new connection: a new key, and no old connection.
        host_key.unlink()
        host_key.with_suffix(".pub").unlink()
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True
        )
        drop_ssh_connections(lab, target)
    finally:
        operator.send_signal(signal.SIGCONT)
    run = lab.finish(operator)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    (halted,) = run.events("run-halted")
    assert "host key has CHANGED" in halted["error"]
    failed = run.events("step-failed")
    assert failed and "host key has CHANGED" in failed[-1]["error"]
    assert not any("host key" in str(r.get("error")) for r in run.events("retry"))
    assert not [s for s in run.finished_steps() if s.endswith((":backup", ":delete"))]
    assert lab.snapshot_files(plan[1]) == planted, "a file changed"
    assert known_hosts.read_text() == trusted

    # The operator checks the new key out of band and records it; then resumes.
    key_type, key, *_ = host_key.with_suffix(".pub").read_text().split()
    broker = lab.state.broker(target)
    entry = f"[{broker.host}]:{broker.ssh_port}"
    lines = trusted.splitlines()
    assert sum(line.split()[0] == entry for line in lines) == 1
    known_hosts.write_text(
        "\n".join(
            f"{entry} {key_type} {key}" if line.split()[0] == entry else line for line in lines
        )
        + "\n"
    )
    assert known_hosts.read_text() != trusted
    assert_resumed_to_the_end(lab, run)
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)


# -- input and secrets, on the same sandbox ------------------------------------------------------


@pytest.mark.fault(
    "Bad input",
    "A topic named like a shell option (`-rf`), its replica out of step",
    "Repaired like any other: every path is quoted and passed after `--`, the backup holds"
    " exactly its files, and no other partition's partition.metadata is touched",
)
def test_a_topic_named_like_a_shell_option_is_repaired(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    topic = "-rf"
    admin.create_topic(lab.zk, topic, 1, 3, config={"min.insync.replicas": "2"})
    target = one_broker(lab)
    log_dirs = [Path(d) for d in lab.state.broker(target).log_dirs]

    def replica_file() -> Path | None:
        found = [d / f"{topic}-0" / PARTITION_METADATA for d in log_dirs]
        return next((p for p in found if p.exists()), None)

    wait_until(lambda: replica_file() is not None, "the replica's partition.metadata", 60)
    path = replica_file()
    assert path is not None
    others = {p: p.read_bytes() for d in log_dirs for p in d.rglob("*") if p.is_file()}
    path.write_bytes(encode_partition_metadata(FOREIGN))
    plan_path = lab.directory / "plan-rf.json"
    planned = run_cli(
        "plan", "-c", str(lab.config), "--playbook", str(lab.playbook), "-o", str(plan_path)
    )
    assert planned.returncode == 0, planned.stderr[-3000:]
    plan = json.loads(plan_path.read_text())
    (step,) = plan["steps"]
    assert step["broker"] == target and step["partitions"] == [f"{topic}-0"]
    planted = lab.snapshot_files(plan)
    run = lab.finish(lab.start_apply((plan_path, plan)))
    assert run.exit_code == 0, run.stderr[-3000:]
    assert sorted(lab.backed_up(run.run_id)) == sorted(step["files"])
    lab.assert_nothing_deleted_without_backup(plan, run.run_id, planted)
    zk_id = str(admin.read_topic(lab.zk, topic)[0].topic_id)
    assert zk_id.encode() in path.read_bytes()
    # The broker rewrites its own checkpoints when leaders move on its restart; the repair
    # itself touches no other partition: their partition.metadata are as they were.
    untouched = {p for p in others if f"/{topic}-0/" not in str(p) and p.name == PARTITION_METADATA}
    assert untouched
    assert {p for p in untouched if not p.exists() or p.read_bytes() != others[p]} == set()
    lab.plans.clear()


SECRET = "zk-Secret-Sentinel-7f3a"


@pytest.mark.fault(
    "Security",
    "ZooKeeper digest auth, with the cluster's lock znodes under a digest ACL; a password"
    " in cluster.yaml",
    "With the credentials the repair runs; without them the run is refused at the lock;"
    " the password appears in no output, log, journal or report",
)
def test_digest_auth_against_acls_and_no_secret_anywhere(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    settings = lab.settings
    settings["zookeeper"]["auth"] = {
        "scheme": "digest",
        "username": "remediate",
        "password": SECRET,
    }
    authed = lab.directory / "cluster-auth.yaml"
    authed.write_text(yaml.safe_dump(settings, sort_keys=False))
    locks = f"/remediate/locks/{settings['cluster']}"
    lab.zk.ensure_path(locks)
    acl = [make_digest_acl("remediate", SECRET, all=True)]
    admin_zk = KazooClient(lab.state.zk_connect, auth_data=[("digest", f"remediate:{SECRET}")])
    admin_zk.start(timeout=15)
    try:
        for path in ("/remediate", "/remediate/locks", locks):
            lab.zk.set_acls(path, acl)
        target = one_broker(lab)
        lab.plant([target])
        plan_path = lab.directory / "plan-auth.json"
        outputs = []
        planned = run_cli(
            "plan", "-c", str(authed), "--playbook", str(lab.playbook), "-o", str(plan_path)
        )
        outputs += [planned.stdout, planned.stderr]
        assert planned.returncode == 0, planned.stderr[-3000:]
        plan = json.loads(plan_path.read_text())

        refused = lab.finish(lab.start_apply((plan_path, plan)))
        outputs += [refused.stdout, refused.stderr]
        assert refused.exit_code != 0
        assert "lock" in refused.stderr.lower() or "auth" in refused.stderr.lower()
        assert lab.healthy() is not None, "the unauthenticated run changed something"

        run = lab.finish(lab.start_apply((plan_path, plan), config=authed))
        outputs += [run.stdout, run.stderr]
        assert run.exit_code == 0, run.stderr[-3000:]
        for command in (["check", "--json"], ["status", "--json"], ["scan", "--json"]):
            shown = run_cli(command[0], "-c", str(authed), *command[1:])
            outputs += [shown.stdout, shown.stderr]
        assert not [o for o in outputs if SECRET in o]
        written = [
            p
            for root in (lab.journal_dir, lab.backup_dir)
            for p in root.rglob("*")
            if p.is_file() and SECRET.encode() in p.read_bytes()
        ]
        assert written == []
    finally:
        # What the authenticated runs created (the journal's copy) carries their identity's
        # ACL: open again for the module's next tests, as the lock's path is.
        opened = ["/remediate"]
        while opened:
            path = opened.pop()
            admin_zk.set_acls(path, OPEN_ACL_UNSAFE)
            opened += [f"{path}/{child}" for child in admin_zk.get_children(path)]
        admin_zk.stop()
        admin_zk.close()
    lab.plans.clear()


# -- the operator's host is lost; the operator is told to stop ------------------------------


def other_host(lab: ApplyLab) -> Path:
    """The same cluster.yaml on another host: its journal_dir empty."""
    settings = lab.settings
    settings["journal_dir"] = str(lab.directory / f"other-host-{os.urandom(3).hex()}")
    path = lab.directory / "cluster-other-host.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def journal_of(directory: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (directory / run_id / "journal.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.fault(
    AREA,
    "The operator's host is lost in the middle of a run (SIGKILL with the backup made);"
    " another host with the same cluster.yaml and an empty journal_dir takes over",
    "`status` there shows the run, read from ZooKeeper's copy; `resume` there rebuilds the"
    " journal from ZooKeeper and finishes the run without repeating an action; ZooKeeper then"
    " keeps that run's copy and no older one",
)
def test_resume_from_another_host(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    _target, plan, planted = armed(lab)
    run = lab.finish(lab.start_apply(plan, failpoints="backup:finished=kill"))
    assert run.exit_code == -signal.SIGKILL, run.stderr[-2000:]
    config = other_host(lab)
    elsewhere = Path(yaml.safe_load(config.read_text())["journal_dir"])

    shown = run_cli("status", "-c", str(config), "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    document = json.loads(shown.stdout)
    assert (document["run_id"], document["status"]) == (run.run_id, "running")
    assert document["journal"].startswith("zookeeper"), document["journal"]
    assert not elsewhere.exists(), "status wrote a journal"

    resumed = run_cli("resume", "-c", str(config), "--json")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    records = journal_of(elsewhere, run.run_id)
    assert records[: len(run.records)] == run.records
    finished = [r["step"] for r in records if r["event"] == "step-finished"]
    assert len(finished) == len(set(finished)), f"an action was completed twice: {finished}"
    assert records[-1]["event"] == "run-completed"
    cluster_name = lab.settings["cluster"]
    assert lab.zk.get_children(f"/remediate/journals/{cluster_name}") == [run.run_id]
    # The first host, back, reads the longer copy: ZooKeeper's.
    assert lab.status(run.run_id)["status"] == "completed"
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    lab.wait_healthy()


@pytest.mark.fault(
    AREA,
    "A terminal's Ctrl-C (SIGINT to the operator's whole process group) while a broker's local"
    " stop command runs (transport: local)",
    "The stop command, in a session of its own, is not interrupted and completes; the operator"
    " stops cleanly between actions: the broker is started again, the run halts (exit 5) with"
    " SIGINT journaled and no failed step, and `resume` finishes it",
)
def test_ctrl_c_reaches_the_operator_and_not_the_stop_command(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    held = lab.directory / "pauses" / f"stop-command-{uuid.uuid4().hex[:8]}"
    held.parent.mkdir(parents=True, exist_ok=True)
    stop = str(lab.settings["service"]["stop"])
    # A stop command that holds until the test releases it (a slow controlled shutdown).
    slow = lab.with_service(
        stop=f"touch {held}.reached && while [ ! -e {held}.release ]; do sleep 0.1; done && {stop}"
    )
    operator = lab.start_apply(plan, config=slow, own_group=True)
    wait_until(
        lambda: held.with_name(held.name + ".reached").exists() or operator.poll() is not None,
        "the stop command to start",
    )
    assert operator.poll() is None, operator.communicate(timeout=10)
    os.killpg(operator.pid, signal.SIGINT)
    wait_until(lambda: signal_delivered(operator.pid, signal.SIGINT), "the signal to be handled")
    held.with_name(held.name + ".release").touch()
    run = lab.finish(operator)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.events("stop-requested")[0]["signal"] == "SIGINT"
    assert not run.events("step-failed"), run.events("step-failed")
    assert actions_of(run)[-2:] == ["stop", "start again"]
    wait_until(lambda: lab.zk.exists(f"/brokers/ids/{target}"), "the broker to be started again")
    assert all(Path(name).read_bytes() == data for name, data in planted.items())
    # The stop undone (the broker started again before its files were deleted) is done again.
    assert [StepKey.parse(r["step"]).action for r in run.events("step-undone")] == ["stop"]
    resumed = lab.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert resumed.events("run-completed")
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    lab.wait_healthy()


@pytest.mark.fault(
    AREA,
    "The operator is told to stop (SIGTERM) while a rollback puts a broker's files back",
    "The restore in flight is finished and the broker the rollback stopped is started again;"
    " the rollback halts (exit 5) with the signal journaled, and `rollback` again carries it"
    " out whole",
)
def test_sigterm_stops_a_rollback_between_actions(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    run = lab.finish(lab.start_apply(plan))
    assert run.exit_code == 0, run.stdout[-2000:] + run.stderr[-3000:]
    pause = lab.pause("rollback-restore")
    rollback = lab.start_rollback(run.run_id, failpoints=f"restore:started={pause.action}")
    stopped = interrupted(lab, rollback, pause, signal.SIGTERM)
    assert stopped.exit_code == 5, stopped.stdout[-2000:] + stopped.stderr[-3000:]
    assert stopped.events("stop-requested")[-1]["signal"] == "SIGTERM"
    finished = [str(r["step"]) for r in stopped.events("step-finished")]
    assert finished[-2:] == [
        f"rollback0:broker-{target}:restore",
        f"rollback0:broker-{target}:start",
    ]
    wait_until(lambda: lab.zk.exists(f"/brokers/ids/{target}"), "the broker to be started again")
    # The restore in flight was finished: the files are the planted ones again.
    assert all(Path(name).read_bytes() == data for name, data in planted.items())
    again = lab.finish(lab.start_rollback(run.run_id))
    assert again.exit_code == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert again.events("rollback-finished")
    lab.reset()  # the rollback put the mismatch back: repaired for the next test


def signal_delivered(pid: int, number: int) -> bool:
    """`number` is no longer pending for the process: its handler has it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    pending = 0
    for row in status.splitlines():
        if row.startswith(("SigPnd:", "ShdPnd:")):
            pending |= int(row.split()[1], 16)
    return not pending & (1 << (number - 1))


def interrupted(lab: ApplyLab, process: subprocess.Popen[str], pause: Any, number: int) -> Run:
    """`number` sent to the operator held at `pause`, then the operator released."""
    pause.wait(process)
    process.send_signal(number)
    wait_until(lambda: signal_delivered(process.pid, number), "the signal to be handled")
    pause.release()
    return lab.finish(process)


@pytest.mark.fault(
    AREA,
    "The operator is told to stop (SIGTERM while it backs up a stopped broker, then SIGINT"
    " on resume while it deletes)",
    "The action in flight is finished; a broker the run stopped is started again (before the"
    " delete: the stop and backup are undone and done again on resume; after it: the step's own"
    " start); the run halts (exit 5) with the signal journaled, and `resume` finishes it",
)
def test_sigterm_and_sigint_stop_between_actions(healthy_lab: ApplyLab) -> None:
    lab = healthy_lab
    target, plan, planted = armed(lab)
    at_backup = lab.pause("backup")
    process = lab.start_apply(plan, failpoints=f"backup:started={at_backup.action}")
    run = interrupted(lab, process, at_backup, signal.SIGTERM)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.events("stop-requested")[0]["signal"] == "SIGTERM"
    assert run.events("run-halted")[-1]["signal"] == "SIGTERM"
    assert actions_of(run)[-2:] == ["backup", "start again"]
    assert [StepKey.parse(r["step"]).action for r in run.events("step-undone")] == [
        "backup",
        "stop",
    ]
    assert lab.zk.exists(f"/brokers/ids/{target}"), "the stopped broker was not started"
    assert all(Path(name).read_bytes() == data for name, data in planted.items())
    assert lab.status(run.run_id)["status"] == "halted"

    at_delete = lab.pause("delete")
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "remediate"),
            *("resume", "-c", str(lab.config), "--run", run.run_id, "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, FAILPOINTS: f"delete:done={at_delete.action}"},
    )
    run = interrupted(lab, process, at_delete, signal.SIGINT)
    assert run.exit_code == 5, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.events("run-halted")[-1]["signal"] == "SIGINT"
    assert actions_of(run)[-3:] == ["backup", "delete", "start"]

    resumed = lab.resume(run.run_id)
    assert resumed.exit_code == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert resumed.events("run-completed")
    lab.assert_nothing_deleted_without_backup(plan[1], run.run_id, planted)
    lab.wait_healthy()
