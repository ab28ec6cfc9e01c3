"""The executor's gates and the drift check, on plain data."""

from __future__ import annotations

from dataclasses import replace

import pytest

from remediate.collect.snapshot import ReplicaRow
from remediate.execute.drift import differences, observed_files
from remediate.formats.znodes import MigrationState, PartitionState
from remediate.gates import (
    StaleIdHolder,
    health_sample,
    in_sync_blocker,
    migration_blocker,
    missing_id_blocker,
    pre_restart_blocker,
    stopped_blocker,
    topic_in_sync_blocker,
)
from remediate.minisr import MinIsrRule
from remediate.plan import FileKey, Fingerprint
from remediate.state import ClusterState, ReplicaRef, TopicPartition
from tests.plan.model import NEW, OLD, cluster

ORDERS = {"orders": {0: [1, 2, 3], 1: [2, 3, 1]}}


def with_isr(
    state: ClusterState, tp: tuple[str, int], isr: list[int], leader: int | None = None
) -> ClusterState:
    partitions = dict(state.partitions)
    key = TopicPartition(*tp)
    old = partitions[key]
    partitions[key] = PartitionState(
        leader=old.leader if leader is None else leader,
        leader_epoch=old.leader_epoch + 1,
        isr=tuple(isr),
        controller_epoch=old.controller_epoch,
    )
    return replace(state, partitions=partitions)


HEALTHY = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1)


@pytest.mark.parametrize(
    ("state", "broker", "expected"),
    [
        (HEALTHY, 3, None),
        (
            replace(HEALTHY, brokers={1: HEALTHY.brokers[1], 2: HEALTHY.brokers[2]}),
            3,
            "broker 3 is not registered in ZooKeeper",
        ),
        (
            with_isr(HEALTHY, ("orders", 1), [2, 1]),
            3,
            "1 partition(s) without broker 3 in the ISR: orders-1",
        ),
        (
            with_isr(HEALTHY, ("orders", 0), [1, 2, 3], leader=-1),
            2,
            "1 partition(s) without broker 2 in the ISR: orders-0",
        ),
    ],
)
def test_in_sync_blocker(state: ClusterState, broker: int, expected: str | None) -> None:
    assert in_sync_blocker(state, broker) == expected


def test_topic_in_sync_ignores_unregistered_replicas_but_not_a_missing_leader() -> None:
    assert topic_in_sync_blocker(HEALTHY, "orders") is None
    down = replace(HEALTHY, brokers={1: HEALTHY.brokers[1], 2: HEALTHY.brokers[2]})
    assert topic_in_sync_blocker(with_isr(down, ("orders", 0), [1, 2]), "orders") is None
    out = with_isr(HEALTHY, ("orders", 0), [1, 2])
    assert topic_in_sync_blocker(out, "orders") == (
        "1 partition(s) without a leader and every registered replica in the ISR: orders-0"
    )
    assert topic_in_sync_blocker(HEALTHY, "gone") == "topic gone is not in ZooKeeper"


def test_topic_in_sync_excuses_the_replicas_offline_until_a_later_restart() -> None:
    # Kafka 3.0: broker 3 marked orders-0 Offline; the plan restarts it after the restore.
    out = with_isr(HEALTHY, ("orders", 0), [1, 2])
    offline = ReplicaRef(3, TopicPartition("orders", 0))
    assert topic_in_sync_blocker(out, "orders", [offline]) is None
    # Only that replica: another one out of the ISR, or no leader, still blocks.
    other = ReplicaRef(3, TopicPartition("orders", 1))
    assert topic_in_sync_blocker(out, "orders", [other]) is not None
    leaderless = with_isr(HEALTHY, ("orders", 0), [1, 2], leader=-1)
    assert topic_in_sync_blocker(leaderless, "orders", [offline]) == (
        "1 partition(s) without a leader and every registered replica in the ISR: orders-0"
    )


def test_stopped_and_missing_id_blockers() -> None:
    assert stopped_blocker(HEALTHY, 2) == "broker 2 is still registered in ZooKeeper"
    assert stopped_blocker(replace(HEALTHY, brokers={}), 2) is None
    topics = dict(HEALTHY.topics)
    topics["orders"] = replace(
        topics["orders"], assignment=replace(topics["orders"].assignment, topic_id=None)
    )
    lost = replace(HEALTHY, topics=topics)
    assert missing_id_blocker(HEALTHY) is None
    assert "orders have no topic id" in (missing_id_blocker(lost) or "")
    assert missing_id_blocker(lost, restored={"orders"}) is None


def test_pre_restart_blocker_first_reason_wins() -> None:
    nobody = StaleIdHolder({})
    kwargs = {"expected": [1, 2, 3], "stale": nobody, "min_isr": MinIsrRule(1)}
    assert pre_restart_blocker(HEALTHY, 3, targeted=(), **kwargs) is None  # type: ignore[arg-type]
    # Broker 3 out of the ISR of a partition at min ISR: its own repair, so it may go.
    degraded = with_isr(HEALTHY, ("orders", 0), [1, 2])
    assert (
        pre_restart_blocker(degraded, 3, targeted={("orders", 0)}, **kwargs)  # type: ignore[arg-type]
        is None
    )
    # ... but broker 2 may not: orders-0 would drop below min ISR 2.
    reason = pre_restart_blocker(degraded, 2, targeted=(), **kwargs)  # type: ignore[arg-type]
    assert reason is not None and "orders-0 has exactly min.insync.replicas=2" in reason
    # An unregistered broker blocks everyone.
    missing = replace(HEALTHY, brokers={1: HEALTHY.brokers[1], 3: HEALTHY.brokers[3]})
    assert pre_restart_blocker(missing, 3, targeted=(), **kwargs) == (  # type: ignore[arg-type]
        "broker(s) [2] are not registered in ZooKeeper"
    )
    # A leader that holds a stale id refuses the ISR shrink a follower's restart causes.
    stale = StaleIdHolder({TopicPartition("orders", 0): frozenset({1})})
    reason = pre_restart_blocker(
        HEALTHY, 3, expected=[1, 2, 3], targeted=(), stale=stale, min_isr=MinIsrRule(1)
    )
    assert reason is not None and "its leader, broker 1, holds a topic id" in reason


FINGERPRINT = Fingerprint(
    cluster_id="cid",
    brokers=(1, 2, 3),
    controller_epoch=3,
    topics={"orders": 4},
    files={
        FileKey.metadata(1, "/data/1/kafka", "orders", 0): OLD,
        FileKey.metadata(2, "/data/2/kafka/", "orders", 1): OLD,
    },
)


def row(log_dir: str, topic: str | None, partition: int | None, file_id: str | None) -> ReplicaRow:
    name = f"{topic}-{partition}" if topic else "lost+found"
    return ReplicaRow(
        log_dir=log_dir,
        dir=name,
        dir_hex=name.encode().hex(),
        topic=topic,
        partition=partition,
        dir_kind="live" if topic else "other",
        name_problem=None if topic else "not a partition directory",
        metadata_state="ok" if file_id else "missing",
        file_topic_id=file_id,
        metadata_problem=None,
        epoch_latest=None,
    )


ROWS = {
    1: [row("/data/1/kafka", "orders", 0, OLD)],
    2: [row("/data/2/kafka", "orders", 1, OLD), row("/data/2/kafka", None, None, None)],
}


def test_no_drift_when_nothing_changed() -> None:
    files = observed_files(FINGERPRINT.files, ROWS)
    assert differences(FINGERPRINT, HEALTHY, files) == []
    assert FINGERPRINT.file_brokers() == [1, 2]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s, r: (replace(s, cluster_id="other"), r), "cluster id: plan cid, now other"),
        (
            lambda s, r: (replace(s, brokers={1: s.brokers[1], 2: s.brokers[2]}), r),
            "registered brokers: plan [1, 2, 3], now [1, 2]",
        ),
        (
            lambda s, r: (replace(s, controller_epoch=4), r),
            "controller epoch: plan 3, now 4 (the controller moved)",
        ),
        (
            lambda s, r: (
                replace(s, topics={"orders": replace(s.topics["orders"], znode_version=5)}),
                r,
            ),
            "topic orders znode: plan version 4, now version 5",
        ),
        (lambda s, r: (replace(s, topics={}), r), "topic orders znode: plan version 4, now gone"),
        (
            lambda s, r: (s, {**r, 1: [replace(r[1][0], file_topic_id=NEW)]}),
            f"1:/data/1/kafka/orders-0/partition.metadata: plan {OLD}, now {NEW}",
        ),
        (
            lambda s, r: (s, {**r, 1: []}),
            f"1:/data/1/kafka/orders-0/partition.metadata: plan {OLD}, now no readable file",
        ),
    ],
)
def test_every_kind_of_drift_is_named(change: object, expected: str) -> None:
    state, rows = change(HEALTHY, ROWS)  # type: ignore[operator]
    files = observed_files(FINGERPRINT.files, rows)
    assert differences(FINGERPRINT, state, files) == [expected]


def test_an_unreachable_broker_is_drift_too() -> None:
    files = observed_files(FINGERPRINT.files, {1: ROWS[1]})
    assert differences(FINGERPRINT, HEALTHY, files, unreachable={2: "ssh: refused"}) == [
        "broker 2: its files could not be read again (ssh: refused)"
    ]


def test_health_sample_counts() -> None:
    state = with_isr(with_isr(HEALTHY, ("orders", 0), [1]), ("orders", 1), [2, 3], leader=-1)
    sample = health_sample(state, MinIsrRule(1))
    assert (sample["under_replicated"], sample["offline"], sample["below_min_isr"]) == (2, 1, 1)


MIGRATIONS = [
    ("no migration", None, None, None),
    (
        "begun",
        MigrationState(3000, 1, -1, -1),
        None,
        "KRaft controller 3000 (epoch 1) leads a migration whose metadata is not yet copied",
    ),
    (
        "copied",
        MigrationState(3000, 2, 88, 2),
        2,
        "KRaft controller 3000 (epoch 2) copied ZooKeeper's metadata into KRaft",
    ),
    ("a KRaft controller active", None, 5, "the active controller is KRaft controller 1"),
    (
        "unreadable",
        MigrationState(problem="/migration: data: expected a JSON object"),
        None,
        "/migration exists but does not parse (/migration: data: expected a JSON object)",
    ),
]


@pytest.mark.parametrize(
    ("migration", "kraft_epoch", "expected"),
    [m[1:] for m in MIGRATIONS],
    ids=[m[0] for m in MIGRATIONS],
)
def test_a_migration_to_kraft_blocks_every_change_first(
    migration: MigrationState | None, kraft_epoch: int | None, expected: str | None
) -> None:
    state = replace(HEALTHY, migration=migration, kraft_controller_epoch=kraft_epoch)
    reason = migration_blocker(state)
    restart = pre_restart_blocker(
        state, 3, expected=[1, 2, 3], targeted=(), stale=StaleIdHolder({}), min_isr=MinIsrRule(1)
    )
    if expected is None:
        assert reason is None and restart is None
        return
    assert reason is not None and expected in reason
    assert reason.startswith("a ZooKeeper-to-KRaft migration has begun: ")
    assert reason.endswith("then check, fix and check again")
    # First of every reason, though nothing else blocks this restart.
    assert restart == reason
