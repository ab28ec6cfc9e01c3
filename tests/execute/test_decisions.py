"""The executor's decisions on plain data: which restart goes next, whether a restore may
write, whether a topic's replicas agree, which replicas still hold a stale id, whether a
broker that has not registered in time is still loading its logs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pytest

from remediate.collect.snapshot import ReplicaRow
from remediate.execute.decisions import (
    NO_FILE,
    agreement_blocker,
    disagreement_blocker,
    files_disagreeing,
    loading_blocker,
    next_restart,
    stale_holders,
    unconfigured_hosts_blocker,
)
from remediate.execute.steps import StepKey
from remediate.formats.logloading import LogLoading, parse_log_loading, unreadable
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import PartitionState, TopicAssignment
from remediate.plan import FileKey, Fingerprint, Prediction, RestartStep, RestoreStep
from remediate.playbook import Action
from remediate.state import ClusterState, ReplicaRef, TopicPartition, TopicState

ZK_ID = TopicId(bytes(15) + b"\x02")
ZK = str(ZK_ID)
OTHER = str(TopicId(bytes(15) + b"\x01"))


def state(
    topics: Mapping[str, Mapping[int, Sequence[int]]],
    *,
    ids: Mapping[str, TopicId | None] | None = None,
    versions: Mapping[str, int] | None = None,
) -> ClusterState:
    return ClusterState(
        cluster_id="c",
        controller_id=1,
        controller_epoch=3,
        brokers={},
        topics={
            name: TopicState(
                name,
                TopicAssignment(
                    {p: tuple(r) for p, r in assignment.items()},
                    topic_id=(ids or {}).get(name, ZK_ID),
                ),
                (versions or {}).get(name, 4),
            )
            for name, assignment in topics.items()
        },
        partitions={
            TopicPartition(name, p): PartitionState(r[0], 1, tuple(r), 3)
            for name, assignment in topics.items()
            for p, r in assignment.items()
        },
    )


def restart(broker: int) -> RestartStep:
    return RestartStep(broker, "why", (), (), (Action.STOP,), (), is_controller=False)


def restore(topic: str = "orders", *, reelect: bool = False, version: int = 4) -> RestoreStep:
    return RestoreStep(topic, ZK, None, version, reelect, "why", (), (), (), "restore-zk-topic-id")


def row(
    topic: str | None,
    partition: int,
    file_id: str | None,
    *,
    dir_kind: str = "live",
    metadata_state: str | None = None,
) -> ReplicaRow:
    state = metadata_state or ("missing" if file_id is None else "ok")
    return ReplicaRow(
        log_dir="/data",
        dir=f"{topic}-{partition}",
        dir_hex="",
        topic=topic,
        partition=partition,
        dir_kind=dir_kind,
        name_problem=None,
        metadata_state=state,
        file_topic_id=file_id,
        metadata_problem=None,
        epoch_latest=None,
    )


STEPS = [(0, restart(1)), (1, restart(2)), (2, restart(3))]
GOES_LAST = "broker 1 is now the active controller: it goes last; broker 2 goes first"
REPAIRS = [
    (i, dataclasses.replace(s, files=(f"/data/orders-{i}/partition.metadata",))) for i, s in STEPS
]
# Only the last step predicts anything: the order still matters for the whole run.
PREDICTED = [
    *STEPS[:2],
    (2, dataclasses.replace(STEPS[2][1], predicted=Prediction(during=(TopicPartition("o", 0),)))),
]
KEEPS_PLACE_OF = (
    "broker {} is now the active controller but keeps its place in the plan's order: the"
    " remaining steps repair replicas in the order the plan's availability model chose"
)
KEEPS_PLACE = KEEPS_PLACE_OF.format(1)


@pytest.mark.parametrize(
    ("remaining", "started", "controller", "chosen", "decision"),
    [
        (STEPS, [], 3, 0, None),
        (STEPS, [], None, 0, None),
        (STEPS, [], 1, 1, GOES_LAST),
        # The controller is alone: it goes, nothing to reorder.
        (STEPS[:1], [], 1, 0, None),
        # Started in an earlier process: finished first, whoever the controller is.
        (STEPS, ["2:broker-3:stop"], 1, 2, None),
        (STEPS, ["0:broker-1:gate restart-safety"], 1, 0, None),
        # A key of another step index or a rollback does not count as started.
        (STEPS, ["7:broker-3:stop", "rollback2:broker-3:gate"], 1, 1, GOES_LAST),
        (STEPS, ["0:topic-orders:gate agreement"], 3, 0, None),
        # Steps that repair, in the order the availability model chose: the controller keeps
        # its place (after a restore's election, say).
        (REPAIRS, [], 1, 0, KEEPS_PLACE),
        (PREDICTED, [], 1, 0, KEEPS_PLACE),
        (REPAIRS[1:], [], 2, 0, KEEPS_PLACE_OF.format(2)),
    ],
)
def test_next_restart(
    remaining: list[tuple[int, RestartStep]],
    started: list[str],
    controller: int | None,
    chosen: int,
    decision: str | None,
) -> None:
    keys = [StepKey.parse(k) for k in started]
    assert next_restart(remaining, keys, controller) == (remaining[chosen], decision)


ORDERS = {"orders": {0: [1, 2], 1: [2, 3]}}


@pytest.mark.parametrize(
    ("cluster", "step", "expected"),
    [
        (state(ORDERS), restore(), None),
        (state({}), restore(), "topic orders is gone"),
        (
            state(ORDERS, versions={"orders": 5}),
            restore(),
            "/brokers/topics/orders is at version 5, the plan was made at 4",
        ),
        # A re-election needs every topic to have an id: the new controller would mint one.
        (
            state({**ORDERS, "bare": {0: [1]}}, ids={"bare": None}),
            restore(reelect=True),
            "topic(s) bare have no topic id in ZooKeeper; a new controller would mint one"
            " no replica holds",
        ),
        (state({**ORDERS, "bare": {0: [1]}}, ids={"bare": None}), restore(), None),
    ],
)
def test_agreement_blocker(cluster: ClusterState, step: RestoreStep, expected: str | None) -> None:
    assert agreement_blocker(step, cluster, restored={"orders"}) == expected


def test_unconfigured_hosts_blocker() -> None:
    assert unconfigured_hosts_blocker(state(ORDERS), "orders", [1, 2, 3]) is None
    assert unconfigured_hosts_blocker(state(ORDERS), "orders", [1, 2]) == (
        "broker(s) [3] host orders but are not in the configuration"
    )
    assert unconfigured_hosts_blocker(state({}), "orders", [1]) == "topic orders is gone"


AGREE: dict[int, Sequence[ReplicaRow] | str] = {
    1: [row("orders", 0, ZK)],
    2: [row("orders", 0, ZK), row("orders", 1, ZK)],
    3: [row("orders", 1, ZK), row("other", 1, OTHER)],
}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (AGREE, None),
        # Without the file: it takes ZooKeeper's id at its next LeaderAndIsr.
        ({**AGREE, 3: [row("orders", 1, None)]}, None),
        (
            {**AGREE, 2: "connection refused"},
            "broker 2 could not be inspected (connection refused)",
        ),
        (
            {**AGREE, 3: [row("orders", 1, OTHER)]},
            f"replicas do not all hold {ZK}: orders-1 on broker 3: {OTHER}",
        ),
        (
            {**AGREE, 3: []},
            f"replicas do not all hold {ZK}: orders-1 on broker 3: no directory or unreadable",
        ),
        (
            {
                1: [row("orders", 0, None)],
                2: [row("orders", 0, None), row("orders", 1, None)],
                3: [row("orders", 1, None)],
            },
            f"no replica holds {ZK}",
        ),
        # A directory that is not a live partition (a deleted one, say) is not a replica.
        ({**AGREE, 3: [row("orders", 1, ZK), row("orders", 1, OTHER, dir_kind="delete")]}, None),
    ],
)
def test_disagreement_blocker(
    rows: Mapping[int, Sequence[ReplicaRow] | str], expected: str | None
) -> None:
    assert disagreement_blocker(state(ORDERS), "orders", ZK, rows) == expected


def test_disagreement_on_a_topic_gone() -> None:
    assert disagreement_blocker(state({}), "orders", ZK, {}) == "topic orders is gone"


def test_files_disagreeing_looks_only_at_what_zookeeper_assigns_to_the_broker() -> None:
    rows = [
        row("orders", 0, ZK),
        row("orders", 1, OTHER),  # not assigned to broker 1
        row("other", 0, OTHER),  # not in ZooKeeper
        row(None, 0, OTHER),  # not a partition directory
        row("orders", 0, None, metadata_state="missing"),
    ]
    cluster = state({"orders": {0: [1, 2], 1: [2, 3]}})
    assert files_disagreeing(cluster, 1, rows) == ([], ["orders-0"])
    wrong = [row("orders", 0, OTHER), row("orders", 0, None, metadata_state="corrupt")]
    assert files_disagreeing(cluster, 1, wrong) == (
        [f"orders-0 holds {OTHER}", "orders-0 holds corrupt"],
        [],
    )


def test_stale_holders_leave_out_what_was_repaired() -> None:
    cluster = state({"orders": {0: [1, 2], 1: [2, 3]}})
    files = {
        "1:/data/1/orders-0/partition.metadata": OTHER,
        "2:/data/2/orders-0/partition.metadata": ZK,
        "3:/data/3/orders-1/partition.metadata": OTHER,
        "3:/data/3/orders-9.abc-delete/partition.metadata": OTHER,
        "2:/data/2/orders-1/partition.metadata": None,
        "1:/data/1/gone-0/partition.metadata": OTHER,
    }
    fingerprint = Fingerprint(
        None, (1, 2, 3), 1, {}, {FileKey.parse(k): v for k, v in files.items()}
    )
    held = stale_holders(fingerprint, cluster, repaired=())
    assert dict(held.by_partition) == {("orders", 0): {1}, ("orders", 1): {3}}
    held = stale_holders(
        fingerprint, cluster, repaired={ReplicaRef(3, TopicPartition("orders", 1))}
    )
    assert dict(held.by_partition) == {("orders", 0): {1}}
    assert stale_holders(Fingerprint(None, (), None), cluster, repaired=()).by_partition == {}
    assert NO_FILE == "no partition.metadata yet"


def test_a_restore_with_a_roll_allows_exactly_the_rolled_replicas_the_old_id() -> None:
    rows = {**AGREE, 3: [row("orders", 1, OTHER)]}
    rolled = {ReplicaRef(3, TopicPartition("orders", 1))}
    assert (
        disagreement_blocker(state(ORDERS), "orders", ZK, rows, rolled=rolled, rolled_id=OTHER)
        is None
    )
    # Another id than the one ZooKeeper held before the restore still blocks.
    assert (
        disagreement_blocker(
            state(ORDERS), "orders", ZK, rows, rolled=rolled, rolled_id="AAAAAAAAAAAAAAAAAAAABA"
        )
        == f"replicas do not all hold {ZK}: orders-1 on broker 3: {OTHER}"
    )
    # A replica not named in the roll still blocks.
    other = {**AGREE, 2: [row("orders", 0, OTHER), row("orders", 1, ZK)]}
    assert (
        disagreement_blocker(state(ORDERS), "orders", ZK, other, rolled=rolled, rolled_id=OTHER)
        == f"replicas do not all hold {ZK}: orders-0 on broker 2: {OTHER}"
    )


# -- a broker that has not registered in time: is it still loading its logs? --------------------


def at(second: int, message: str) -> str:
    """`message` as Kafka's default layout logs it, `second`s after 10:00."""
    return f"[2026-11-22 10:00:{second:02d},000] {message}"


def look(*lines: str) -> LogLoading:
    """A look at a server.log whose tail holds `lines`."""
    return parse_log_loading(line.encode() for line in lines)


def log_loaded(done: int) -> str:
    return (
        f"INFO Completed load of Log(dir=/d/t-{done}) with 1 segments in 5ms ({done}/2 loaded"
        " in /d) (kafka.log.LogManager)"
    )


START = "INFO starting (kafka.server.KafkaServer)"
LOADING = "INFO Loading logs from log dirs ArraySeq(/d) (kafka.log.LogManager)"
RECOVERING = (
    "INFO Attempting recovery for all logs in /d since no clean shutdown file was found"
    " (kafka.log.LogManager)"
)
FAILED = (
    "ERROR Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)"
)
STARTED = "INFO [KafkaServer id=3] started (kafka.server.KafkaServer)"
DONE = "INFO Loaded 2 logs in 9ms. (kafka.log.LogManager)"
# The previous start, then this one, then another.
OLD = tuple(at(n, m) for n, m in enumerate((START, LOADING, log_loaded(1), DONE, STARTED)))
S1, L1, R1, A1, A2, D1 = (
    at(10 + n, m)
    for n, m in enumerate((START, LOADING, RECOVERING, log_loaded(1), log_loaded(2), DONE))
)
S2, L2, R2 = (at(20 + n, m) for n, m in enumerate((START, LOADING, RECOVERING)))
F1 = at(13, FAILED)
LOG = "its server.log"
RESTARTING = (
    f"{LOG} shows it started again since the wait began (another `starting` line): it is"
    " restarting, not loading its logs"
)


@pytest.mark.parametrize(
    ("began", "before", "now", "expected"),
    [
        pytest.param(
            look(*OLD),
            look(*OLD),
            look(*OLD, S1, L1, R1),
            None,
            id="new-lines-since-the-wait-began",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD, S1, L1),
            look(*OLD, S1, L1, A1),
            None,
            id="a-log-loaded-since-the-last-look",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD, S1, L1, A1),
            look(*OLD, S1, L1, A1, A2, D1),
            None,
            id="loaded-since-the-last-look",
        ),
        pytest.param(look(), look(L1), look(A1, A2), None, id="a-tail-that-slid-past-the-start"),
        pytest.param(
            look(*OLD),
            look(*OLD, S1, L1),
            look(R1, A1),
            None,
            id="a-tail-that-slid-past-its-start-line",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD, S1, L1, A1),
            look(*OLD, S1, L1, A1),
            f"{LOG} shows no log loading since the last look (last: {A1})",
            id="stalled",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD),
            look(*OLD),
            f"{LOG} shows no log loading since the wait began, nor a new `starting` line",
            id="nothing-new-not-even-a-start",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD),
            look(*OLD, S1),
            f"{LOG} shows no log loading since the broker started",
            id="started-and-silent",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD, S1, L1, D1),
            look(*OLD, S1, L1, D1),
            f"{LOG} says its logs are loaded ({D1}) and shows nothing since",
            id="loaded-and-silent",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD, S1, L1),
            look(*OLD, S1, L1, R1, F1),
            f"{LOG} says its startup failed: {F1}",
            id="startup-failed",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD),
            look(*OLD, S1, L1, S2, L2, R2),
            RESTARTING,
            id="two-starts-in-one-wait",
        ),
        pytest.param(
            look(*OLD),
            look(S1, L1, A1),
            look(A1, S2, L2, R2),
            RESTARTING,
            id="another-start-since-the-last-look",
        ),
        pytest.param(
            look(*OLD),
            look(*OLD),
            unreadable("cannot read /d/server.log: No such file"),
            f"{LOG} could not be read (cannot read /d/server.log: No such file)",
            id="unreadable",
        ),
    ],
)
def test_a_broker_not_registered_in_time_is_waited_for_while_its_log_shows_loading(
    began: LogLoading, before: LogLoading, now: LogLoading, expected: str | None
) -> None:
    assert loading_blocker(began, before, now) == expected


def test_the_reason_names_the_log_as_asked() -> None:
    named = "its server.log (/var/log/kafka/server.log)"
    reason = loading_blocker(look(*OLD), look(*OLD), look(*OLD), log=named)
    assert reason == f"{named} shows no log loading since the wait began, nor a new `starting` line"
