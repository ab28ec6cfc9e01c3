"""The restore's two writes in ZooKeeper, each one transaction conditioned on the controller's
fence (`/controller_epoch` at the version read with `/migration`): never sent again blind
when their answer is lost, never deposing a controller elected since the read, never landing
once a migration has begun (in-memory cluster, tests/execute/fake_cluster.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from remediate.errors import HaltedError, OutcomeUnknownError
from remediate.execute import steps
from remediate.formats.logdir import encode_partition_metadata
from remediate.formats.znodes import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    MIGRATION,
    MigrationState,
    decode_topic,
    encode_controller_epoch,
    encode_migration,
    topic_path,
)
from remediate.plan import Plan, RestoreStep
from remediate.playbook import Action
from remediate.ports import DeleteNode, SetData, ZkOp
from remediate.state import TopicPartition
from tests.execute.fake_cluster import OLD_ID, ZK_ID, Topic
from tests.execute.test_executor import (
    PAYMENTS,
    PAYMENTS_0,
    Crash,
    World,
    plan_of,
    restart,
    world,
)

TOPIC = topic_path("orders")


@pytest.fixture
def loaded_wrong_id(tmp_path: Path) -> tuple[World, Plan]:
    """Every replica of `orders` holds ZK_ID; ZooKeeper holds OLD_ID, which the controller has
    loaded: the restore writes ZK_ID and has the controller re-elected."""
    topic = Topic("orders", {0: (1, 2), 1: (2, 3)})
    w = world(tmp_path, {"orders": topic})
    w.kafka.boot()
    topic.topic_id = OLD_ID
    w.kafka.write_topic(topic)
    step = RestoreStep(
        topic="orders",
        topic_id=str(ZK_ID),
        zk_topic_id=str(OLD_ID),
        znode_version=w.zk.nodes[TOPIC].version,
        reelect=True,
        reason="test",
        partitions=(TopicPartition("orders", 0), TopicPartition("orders", 1)),
        actions=steps.RESTORE_ACTIONS,
        impact=(),
        playbook="restore-zk-topic-id",
    )
    return w, plan_of([step], playbook="restore-zk-topic-id")


def zk_topic_id(w: World) -> str | None:
    found = decode_topic(w.zk.get(TOPIC)[0], source="test").topic_id
    return None if found is None else str(found)


def on_commit_of(
    kind: type[SetData | DeleteNode], then: Callable[[], None]
) -> Callable[[Sequence[ZkOp]], None]:
    """A `before_commit` hook that calls `then()` before the transaction holding a `kind`."""

    def hook(ops: Sequence[ZkOp]) -> None:
        if any(isinstance(op, kind) for op in ops):
            then()

    return hook


def notes(w: World) -> list[str]:
    return [str(r["decision"]) for r in w.records("note") if "decision" in r]


def test_both_writes_are_fenced_and_the_restore_completes(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    w, plan = loaded_wrong_id
    epoch = w.kafka.epoch
    seen: list[Sequence[ZkOp]] = []
    w.zk.before_commit = seen.append
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    assert zk_topic_id(w) == str(ZK_ID)
    assert w.kafka.epoch == epoch + 1
    assert w.cluster_writes() == [("set", TOPIC), ("delete", CONTROLLER)]
    # Each write is one transaction with the check of /controller_epoch.
    assert [[type(op).__name__ for op in ops] for ops in seen] == [
        ["CheckVersion", "SetData"],
        ["CheckVersion", "DeleteNode"],
    ]
    assert all(ops[0].path == CONTROLLER_EPOCH for ops in seen)


def test_the_elections_delete_whose_answer_was_lost_is_not_sent_again(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    w, plan = loaded_wrong_id
    epoch = w.kafka.epoch

    def lose_the_answer() -> None:
        w.zk.answers_lost = 1

    w.zk.before_commit = on_commit_of(DeleteNode, lose_the_answer)
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    # One election: the delete took effect, and was not sent a second time.
    assert w.kafka.epoch == epoch + 1
    assert w.cluster_writes() == [("set", TOPIC), ("delete", CONTROLLER)]
    (lost,) = [n for n in notes(w) if "answer was lost" in n]
    assert lost.startswith("the delete's answer was lost (a transaction: no answer")
    assert lost.endswith(
        "not sent again; the wait for a new controller shows whether it took effect"
    )


def test_a_controller_elected_between_the_read_and_the_delete_is_not_deposed(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    w, plan = loaded_wrong_id
    epoch = w.kafka.epoch
    # Another election, after the topic's write: the controller it made loaded the right id.
    w.zk.before_commit = on_commit_of(DeleteNode, lambda: w.kafka.elect(3))
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    assert w.kafka.epoch == epoch + 1
    assert w.kafka.controller == 3
    assert w.cluster_writes() == [("set", TOPIC)]
    assert (
        "a controller took over since the read (its election loaded the id written):"
        " /controller not deleted"
    ) in notes(w)


def start_a_migration(w: World) -> None:
    """What a KRaft controller in migration mode does as it takes over: /migration, and
    /controller_epoch bumped in the transaction that claims /controller."""
    w.zk.put(MIGRATION, encode_migration(MigrationState(3000, 1, -1, -1)))
    w.kafka.epoch += 1
    w.zk.put(CONTROLLER_EPOCH, encode_controller_epoch(w.kafka.epoch))


def test_a_migration_begun_between_the_check_and_the_topic_write_stops_it(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    w, plan = loaded_wrong_id
    w.zk.before_commit = on_commit_of(SetData, lambda: start_a_migration(w))
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error is not None
    assert outcome.error.startswith(
        f"{TOPIC}: nothing written: a ZooKeeper-to-KRaft migration has begun: KRaft controller"
        " 3000 (epoch 1) leads a migration whose metadata is not yet copied into KRaft"
    ), outcome.error
    assert zk_topic_id(w) == str(OLD_ID)
    assert w.cluster_writes() == []


def test_a_migration_begun_between_the_check_and_the_election_stops_it(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    w, plan = loaded_wrong_id
    w.zk.before_commit = on_commit_of(DeleteNode, lambda: start_a_migration(w))
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error is not None
    assert outcome.error.startswith(
        "controller election refused: nothing written: a ZooKeeper-to-KRaft migration has begun"
    ), outcome.error
    assert w.cluster_writes() == [("set", TOPIC)]
    assert CONTROLLER in w.zk.nodes


def test_a_topic_write_whose_answer_was_lost_is_read_again(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    w, plan = loaded_wrong_id

    def lose_the_answer() -> None:
        w.zk.answers_lost = 1

    w.zk.before_commit = on_commit_of(SetData, lose_the_answer)
    outcome = w.run(plan)
    assert outcome.status == "completed", outcome.error
    assert w.cluster_writes() == [("set", TOPIC), ("delete", CONTROLLER)]
    assert any(
        n.startswith("the write's answer was lost") and n.endswith("read again: it took effect")
        for n in notes(w)
    ), notes(w)


def test_a_topic_write_lost_on_its_way_halts_with_nothing_written(
    loaded_wrong_id: tuple[World, Plan],
) -> None:
    """The connection drops before the write reaches ZooKeeper: the answer is lost as well,
    the read finds the znode unchanged, the run halts (and `resume` checks again)."""
    w, plan = loaded_wrong_id

    def lost_on_its_way() -> None:
        raise OutcomeUnknownError("a transaction: no answer (ConnectionLoss)")

    w.zk.before_commit = on_commit_of(SetData, lost_on_its_way)
    outcome = w.run(plan)
    assert outcome.status == "halted"
    assert outcome.error == (
        f"{TOPIC}: the write's answer was lost and the znode does not hold {ZK_ID}: nothing"
        " written; `resume` checks again"
    )
    assert zk_topic_id(w) == str(OLD_ID)
    w.zk.before_commit = None
    assert w.run(plan).status == "completed"
    assert zk_topic_id(w) == str(ZK_ID)


# -- the writes on a broker's disk: a fresh read of the migration right before each -----------


@pytest.fixture
def stale(tmp_path: Path) -> tuple[World, Plan, Path]:
    """Broker 3 holds an old id for payments-0 and is out of its ISR: a restart repair."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(3, "payments", 0)])
    held = w.kafka.metadata(3, "payments", 0)
    held.write_bytes(encode_partition_metadata(OLD_ID))
    step = restart(3, steps.RESTART_ACTIONS, partitions=(PAYMENTS_0,), files=(str(held),))
    return w, plan_of([step], files={f"3:{held}": str(OLD_ID)}), held


def test_a_migration_begun_while_a_broker_was_down_stops_its_delete(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale

    def migrate_before_the_delete(at: str) -> None:
        if at == f"{Action.DELETE}:started":
            start_a_migration(w)

    outcome = w.run(plan, failpoint=migrate_before_the_delete)
    assert outcome.status == "halted"
    assert outcome.error is not None
    assert outcome.error.startswith(
        "deletion on broker 3 refused: a ZooKeeper-to-KRaft migration has begun"
    ), outcome.error
    assert held.read_bytes() == encode_partition_metadata(OLD_ID)  # nothing deleted


def test_a_rollback_of_a_broker_that_is_down_is_refused_once_a_migration_has_begun(
    stale: tuple[World, Plan, Path],
) -> None:
    w, plan, held = stale

    def stop_after_the_delete(at: str) -> None:
        if at == f"{Action.DELETE}:finished":
            raise Crash(at)

    with pytest.raises(Crash):
        w.run(plan, failpoint=stop_after_the_delete)
    assert not held.exists() and 3 not in w.kafka.running
    start_a_migration(w)
    with pytest.raises(HaltedError, match=r"^rollback of broker 3 refused: a ZooKeeper-to-KRaft"):
        w.rollback(plan)
    assert not held.exists()  # the backup was not written back
