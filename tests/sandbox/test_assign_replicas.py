"""assign_replicas against Kafka's AdminUtils.assignReplicasToBrokers (rack-unaware).

Kafka's algorithm, with the broker ids sorted (AdminZkClient.getBrokerMetadatas sorts them):

    startIndex = nextReplicaShift = fixedStartIndex
    for each partition p from startPartitionId:
        if p > 0 and p % n == 0: nextReplicaShift += 1
        first = (p + startIndex) % n
        replica j (after the first) = (first + 1 + (nextReplicaShift + j) % (n - 1)) % n
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from remediate.errors import SandboxError
from remediate.sandbox.admin import assign_replicas, assign_replicas_rack_aware, rack_alternated


def _kafka_reference(
    broker_list: list[int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
) -> dict[int, tuple[int, ...]]:
    """AdminUtils.assignReplicasToBrokersRackUnaware, transcribed line by line."""
    broker_array = sorted(broker_list)
    n = len(broker_array)
    start_index = fixed_start_index
    current_partition_id = max(0, start_partition_id)
    next_replica_shift = fixed_start_index
    ret: dict[int, tuple[int, ...]] = {}
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % n
        replica_buffer = [broker_array[first_replica_index]]
        for j in range(replication_factor - 1):
            shift = 1 + (next_replica_shift + j) % (n - 1)
            replica_buffer.append(broker_array[(first_replica_index + shift) % n])
        ret[current_partition_id] = tuple(replica_buffer)
        current_partition_id += 1
    return ret


# Each row worked out by hand from the algorithm in the module docstring.
CASES = [
    pytest.param(
        [1, 2, 3],
        6,
        3,
        0,
        0,
        {
            0: (1, 2, 3),
            1: (2, 3, 1),
            2: (3, 1, 2),
            3: (1, 3, 2),  # partition 3 = n: the shift moves to 1
            4: (2, 1, 3),
            5: (3, 2, 1),
        },
        id="3-brokers-6-partitions-rf3",
    ),
    pytest.param(
        # Kafka's own AdminTest.testReplicaAssignment expectation.
        [0, 1, 2, 3, 4],
        10,
        3,
        0,
        0,
        {
            0: (0, 1, 2),
            1: (1, 2, 3),
            2: (2, 3, 4),
            3: (3, 4, 0),
            4: (4, 0, 1),
            5: (0, 2, 3),
            6: (1, 3, 4),
            7: (2, 4, 0),
            8: (3, 0, 1),
            9: (4, 1, 2),
        },
        id="kafka-admin-test-5-brokers",
    ),
    pytest.param(
        [1, 2, 3],
        3,
        2,
        2,
        0,
        {0: (3, 1), 1: (1, 2), 2: (2, 3)},
        id="start-index-2",
    ),
    pytest.param(
        [1, 2, 3, 4],
        4,
        4,
        1,
        0,
        {0: (2, 4, 1, 3), 1: (3, 1, 2, 4), 2: (4, 2, 3, 1), 3: (1, 3, 4, 2)},
        id="rf-equals-brokers-start-index-1",
    ),
    pytest.param(
        [30, 10, 20],
        3,
        2,
        0,
        0,
        {0: (10, 20), 1: (20, 30), 2: (30, 10)},
        id="unsorted-sparse-ids-are-sorted",
    ),
    pytest.param([5], 3, 1, 0, 0, {0: (5,), 1: (5,), 2: (5,)}, id="single-broker-rf1"),
    pytest.param(
        [1, 2, 3],
        3,
        3,
        0,
        3,
        {3: (1, 3, 2), 4: (2, 1, 3), 5: (3, 2, 1)},
        id="add-partitions-3-to-6",
    ),
    pytest.param(
        # Kafka starts the shift at the fixed start index again, so partitions added from 6 get
        # shift 1 (one wrap seen), not the shift 2 a single 9-partition creation would give.
        [1, 2, 3],
        3,
        3,
        0,
        6,
        {6: (1, 3, 2), 7: (2, 1, 3), 8: (3, 2, 1)},
        id="add-partitions-6-to-9",
    ),
    pytest.param([1, 2, 3], 0, 2, 0, 0, {}, id="no-partitions"),
]


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "start_index", "start_partition", "expected"), CASES
)
def test_assignment_matches_kafka(
    brokers: list[int],
    partitions: int,
    rf: int,
    start_index: int,
    start_partition: int,
    expected: dict[int, tuple[int, ...]],
) -> None:
    actual = assign_replicas(
        brokers, partitions, rf, start_index=start_index, start_partition=start_partition
    )
    assert actual == expected
    assert actual == _kafka_reference(brokers, partitions, rf, start_index, start_partition)


def test_a_single_creation_of_9_differs_from_adding_partitions_after_6() -> None:
    created = assign_replicas([1, 2, 3], 9, 3)
    assert created[6] == (1, 2, 3)  # shift 2 by partition 6
    added = assign_replicas([1, 2, 3], 3, 3, start_partition=6)
    assert added[6] == (1, 3, 2)


@pytest.mark.parametrize(
    ("brokers", "rf", "message"),
    [
        ([1, 2, 3], 4, "replication factor 4 is larger than the 3 available brokers"),
        ([1], 2, "replication factor 2 is larger than the 1 available brokers"),
        ([], 1, "replication factor 1 is larger than the 0 available brokers"),
        ([1, 2, 3], 0, "at least 1"),
        ([1, 2, 3], -1, "at least 1"),
    ],
)
def test_impossible_replication_factors_are_refused(
    brokers: list[int], rf: int, message: str
) -> None:
    with pytest.raises(SandboxError, match=message):
        assign_replicas(brokers, 3, rf)


# -- properties -----------------------------------------------------------------------------------


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    brokers = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=8, unique=True))
    rf = draw(st.integers(1, len(brokers)))
    partitions = draw(st.integers(0, 40))
    start_index = draw(st.integers(0, len(brokers) - 1))
    start_partition = draw(st.integers(0, 30))
    return brokers, partitions, rf, start_index, start_partition


@settings(max_examples=300, deadline=None)
@given(layout=_layouts())
def test_every_partition_gets_rf_distinct_brokers(
    layout: tuple[list[int], int, int, int, int],
) -> None:
    brokers, partitions, rf, start_index, start_partition = layout
    assignment = assign_replicas(
        brokers, partitions, rf, start_index=start_index, start_partition=start_partition
    )
    assert list(assignment) == list(range(start_partition, start_partition + partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    assert assignment == _kafka_reference(brokers, partitions, rf, start_index, start_partition)


@settings(max_examples=300, deadline=None)
@given(layout=_layouts())
def test_leaders_are_balanced(layout: tuple[list[int], int, int, int, int]) -> None:
    brokers, partitions, rf, start_index, start_partition = layout
    assignment = assign_replicas(
        brokers, partitions, rf, start_index=start_index, start_partition=start_partition
    )
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(broker, 0) for broker in brokers]
    assert max(counts) - min(counts) <= 1
    if partitions % len(brokers) == 0:
        assert counts == [partitions // len(brokers)] * len(brokers)


@settings(max_examples=300, deadline=None)
@given(
    brokers=st.lists(st.integers(0, 1000), min_size=1, max_size=8, unique=True),
    rounds=st.integers(1, 5),
    data=st.data(),
)
def test_replicas_are_spread_evenly_over_whole_rounds(
    brokers: list[int], rounds: int, data: st.DataObject
) -> None:
    n = len(brokers)
    rf = data.draw(st.integers(1, n), label="rf")
    start_index = data.draw(st.integers(0, n - 1), label="start_index")
    assignment = assign_replicas(brokers, rounds * n, rf, start_index=start_index)
    replicas = Counter(b for replica_list in assignment.values() for b in replica_list)
    assert [replicas[b] for b in brokers] == [rounds * rf] * n


@settings(max_examples=300, deadline=None)
@given(layout=_layouts())
def test_start_partition_continues_the_pattern(
    layout: tuple[list[int], int, int, int, int],
) -> None:
    brokers, partitions, rf, start_index, start_partition = layout
    added = assign_replicas(
        brokers, partitions, rf, start_index=start_index, start_partition=start_partition
    )
    whole = assign_replicas(brokers, start_partition + partitions, rf, start_index=start_index)
    # Leaders always continue the round-robin of a single creation.
    assert {p: r[0] for p, r in added.items()} == {
        p: r[0] for p, r in whole.items() if p >= start_partition
    }
    # Within the first wrap (start_partition <= n) the whole replica lists match too.
    if start_partition <= len(brokers):
        head = assign_replicas(brokers, start_partition, rf, start_index=start_index)
        assert {**head, **added} == whole


# -- rack-aware (AdminUtils.assignReplicasToBrokersRackAware) ---------------------------------

# AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers (Kafka 2.8.2).
RACK_MAP = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_the_rack_alternated_broker_list_is_kafkas() -> None:
    assert rack_alternated(RACK_MAP) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACK_MAP.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_the_rack_aware_assignment_is_kafkas() -> None:
    assert assign_replicas_rack_aware(RACK_MAP, 7, 3, start_index=0, start_partition=0) == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


@given(
    racks=st.integers(min_value=1, max_value=4),
    brokers=st.integers(min_value=1, max_value=9),
    partitions=st.integers(min_value=1, max_value=30),
    factor=st.integers(min_value=1, max_value=4),
    start=st.integers(min_value=0, max_value=8),
)
def test_each_partition_spreads_over_as_many_racks_as_it_can(
    racks: int, brokers: int, partitions: int, factor: int, start: int
) -> None:
    assume(factor <= brokers)
    rack_of = {b: f"rack-{b % racks}" for b in range(1, brokers + 1)}
    found = assign_replicas_rack_aware(rack_of, partitions, factor, start_index=start % brokers)
    distinct_racks = len(set(rack_of.values()))
    for replicas in found.values():
        assert len(set(replicas)) == factor
        assert len({rack_of[b] for b in replicas}) == min(factor, distinct_racks)
