"""The suite's parts and what runs side by side (tests/suite_parts.py), on plain data."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdist.remote import Producer

from tests import suite_parts
from tests.suite_parts import EMULATED, FAULTS, PURE, SPARK, may_take, part_of, rank

REAL_28 = "real Kafka 2.8.2"
REAL_39 = "real Kafka 3.9.2"


@dataclass
class Item:
    """What `part_of` reads of a pytest item: its id, its markers, its fixtures."""

    nodeid: str
    markers: dict[str, tuple[object, ...]] = field(default_factory=dict)
    fixturenames: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        args = self.markers.get(name)
        return None if args is None else getattr(pytest.mark, name)(*args).mark


SLOW: dict[str, tuple[object, ...]] = {"slow": ()}


@pytest.mark.parametrize(
    ("item", "part"),
    [
        (Item("tests/acceptance/test_x.py::test_a[real-2.8.2]", SLOW), REAL_28),
        (Item("tests/execute/test_x.py::test_a[real-kafka-3.9.2-fix]", SLOW), REAL_39),
        (Item("tests/execute/test_x.py::test_a", {**SLOW, "real_kafka": ("3.9.2",)}), REAL_39),
        # A recorded real log parsed on plain data is not real Kafka.
        (Item("tests/formats/test_x.py::test_a[real-2.8.2-started]"), PURE),
        (Item("tests/faults/test_x.py::test_a", SLOW), FAULTS),
        (Item("tests/scan/test_x.py::test_a", fixturenames=("spark", "tmp_path")), SPARK),
        (Item("tests/scan/test_x.py::test_a", {**SLOW, "spark": ()}), SPARK),
        (Item("tests/sandbox/test_x.py::test_a[emulated]", SLOW), EMULATED),
        (Item("tests/plan/test_x.py::test_a"), PURE),
    ],
    ids=lambda v: v.nodeid if isinstance(v, Item) else str(v),
)
def test_each_test_is_in_the_part_of_the_most_expensive_thing_it_starts(
    item: Item, part: str
) -> None:
    assert part_of(item) == part  # type: ignore[arg-type]  # duck-typed pytest item


def test_the_parts_go_out_most_expensive_first() -> None:
    parts = [PURE, SPARK, EMULATED, FAULTS, REAL_39, REAL_28]
    assert sorted(parts, key=rank) == [REAL_39, REAL_28, FAULTS, EMULATED, SPARK, PURE]


@pytest.mark.parametrize(
    ("part", "on_worker", "everywhere", "allowed"),
    [
        # Real Kafka and Spark keep a core busy: at most two at a time, one per worker.
        (REAL_28, [], [], True),
        (REAL_28, [], [REAL_39], True),
        (SPARK, [], [REAL_39], True),
        (REAL_28, [], [REAL_39, REAL_28], False),
        (SPARK, [], [REAL_39, REAL_28], False),
        (REAL_28, [], [SPARK, REAL_39], False),
        (REAL_28, [REAL_39], [REAL_39], False),
        # Behind a worker's pure tests (xdist's worker holds its last test until it knows the
        # next one).
        (REAL_28, [PURE], [PURE, PURE], True),
        # The emulated brokers and the fault suite: beside one busy group at most, and a
        # second busy group not beside them.
        (EMULATED, [], [REAL_39], True),
        (FAULTS, [], [SPARK, EMULATED], True),
        (EMULATED, [], [REAL_39, SPARK], False),
        (REAL_28, [], [REAL_39, EMULATED], False),
        (REAL_28, [], [FAULTS, EMULATED], True),
        (FAULTS, [EMULATED], [EMULATED], False),
        # Pure logic: anywhere, at any time.
        (PURE, [EMULATED], [REAL_28, REAL_39, EMULATED], True),
    ],
)
def test_what_runs_side_by_side(
    part: str, on_worker: list[str], everywhere: list[str], allowed: bool
) -> None:
    assert may_take(part, on_worker=on_worker, everywhere=everywhere) is allowed
    assert suite_parts.MAX_BUSY == 2


# -- PartScheduling against xdist's worker protocol ---------------------------------------------


class Worker:
    """What `PartScheduling` sees of an xdist worker, and what the worker does with it: it runs
    a test only once it knows the next one, or is told to stop."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.queue.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def running(self) -> bool:
        return len(self.queue) > 1 or bool(self.queue and self.shutting_down)


GROUPS = st.lists(
    st.tuples(
        st.sampled_from([REAL_28, REAL_39, FAULTS, EMULATED, SPARK, PURE]), st.integers(1, 5)
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(groups=GROUPS, workers=st.integers(1, 4), data=st.data())
def test_side_by_side_every_test_runs_and_two_cores_bear_what_runs_at_once(
    groups: list[tuple[str, int]],
    workers: int,
    data: st.DataObject,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Whatever the groups and whichever test ends first, every test runs (no worker waits
    forever on the others), and no more runs at once than `may_take` allows: at most two busy
    groups, and one beside the emulated brokers."""
    written = {
        f"tests/g{g}.py::t{t}": f"{part}|g{g}"
        for g, (part, size) in enumerate(groups)
        for t in range(size)
    }
    collection = sorted(written, key=lambda nodeid: rank(written[nodeid].split("|")[0]))
    directory = tmp_path_factory.mktemp("groups")
    (directory / "gw0.json").write_text(json.dumps(written))
    config = SimpleNamespace(
        option=SimpleNamespace(loadscopereorder=True), getvalue={"tx": [f"{workers}*popen"]}.get
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(suite_parts.GROUPS_ENV, str(directory))
        scheduler = suite_parts.PartScheduling(config, Producer("test", enabled=False))  # type: ignore[arg-type]
        nodes = [Worker(f"gw{i}") for i in range(workers)]
        for node in nodes:
            scheduler.add_node(node)
        for node in nodes:
            scheduler.add_node_collection(node, collection)
        scheduler.schedule()
        ran: list[str] = []
        while running := [node for node in nodes if node.running()]:
            parts = [written[collection[node.queue[0]]].split("|")[0] for node in running]
            busy = sum(map(suite_parts.busy, parts))
            assert busy <= suite_parts.MAX_BUSY, parts
            assert busy <= 1 or not any(map(suite_parts.timed, parts)), parts
            node = data.draw(st.sampled_from(running), label="the test that ends first")
            index = node.queue.pop(0)
            ran.append(collection[index])
            scheduler.mark_test_complete(node, index)
    assert sorted(ran) == sorted(collection), "a test never ran"
