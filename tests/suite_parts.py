"""The suite's parts and what each costs: every test belongs to one part (real Kafka per
release, the emulated sandbox, the fault suite, Spark, pure logic), and the run ends with each
part's time and budget (docs/development.md keeps the table).

A test is in the part of the most expensive thing it starts: real Kafka
(`@pytest.mark.real_kafka("<release>")`, or a slow test with `real-<release>` in its id), then
the fault suite (tests/faults/), then Spark (a Spark session or cluster among its fixtures, or
`@pytest.mark.spark`), then the emulated sandbox (`@pytest.mark.slow`); everything else is pure
logic. Under xdist the part travels with each report (`user_properties`), so the controller
adds up what its workers ran.

Side by side (pytest-xdist, `-n N --dist loadgroup`, scheduled by `PartScheduling`): tests
that share a module's sandbox stay on one worker (one group per module, or per parameter of a
parametrized module fixture: each builds its own sandbox), as do the Spark tests (one session)
and the tests that change the machine (the `remediate` account and its sudoers rule); every
other test goes wherever a worker is free. Groups are handed out most expensive part first, so
that the long real-Kafka groups do not end the run alone, and only as many at once as two
cores bear (`may_take`). The workers collect, so they know each test's group; they write it down
(`GROUPS_ENV`, a directory the controller names) for the controller, which sees node ids only.
(xdist's own `xdist_group` marker does not group anything under pytest 9: the node id it
rewrites to carry the group is no longer the one it reports.)
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

PART = "suite-part"
REAL = re.compile(r"real-(?:kafka-)?(\d+\.\d+\.\d+)")
SPARK_FIXTURES = frozenset({"spark", "spark_standalone"})

EMULATED = "emulated sandbox"
FAULTS = "fault suite"
SPARK = "Spark"
PURE = "pure logic"

# Each part's budget in minutes of test time (the sum of its tests' setup, call and teardown,
# which under xdist run side by side): docs/development.md, "The suite's budget".
BUDGET_MIN: dict[str, float] = {
    "real Kafka 2.8.2": 16.0,
    "real Kafka 3.4.1": 5.0,
    "real Kafka 3.6.2": 6.0,
    "real Kafka 3.9.2": 7.0,
    EMULATED: 20.0,
    FAULTS: 13.0,
    SPARK: 4.0,
    PURE: 10.0,
}


def part_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("real_kafka")
    if marker is not None:
        return f"real Kafka {marker.args[0]}"
    found = REAL.search(item.nodeid)
    if found is not None and item.get_closest_marker("slow"):
        return f"real Kafka {found.group(1)}"
    if item.nodeid.startswith("tests/faults/"):
        return FAULTS
    if item.get_closest_marker("spark") or SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
        return SPARK
    if item.get_closest_marker("slow"):
        return EMULATED
    return PURE


@dataclass
class Part:
    seconds: float = 0.0
    nodeids: set[str] = field(default_factory=set)

    @property
    def tests(self) -> int:
        return len(self.nodeids)


class SuiteParts:
    """Adds up each part's test time from the reports, on the controller or without xdist."""

    def __init__(self) -> None:
        self.parts: dict[str, Part] = defaultdict(Part)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
        outcome = yield
        report = outcome.get_result()
        report.user_properties.append((PART, part_of(item)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = dict(report.user_properties).get(PART)
        if name is None:
            return
        part = self.parts[str(name)]
        part.seconds += report.duration
        part.nodeids.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.parts:
            return
        terminalreporter.section("the suite's parts (test time; budget: docs/development.md)")
        order = sorted(self.parts, key=lambda name: -self.parts[name].seconds)
        for name in order:
            part = self.parts[name]
            budget = BUDGET_MIN.get(name)
            over = budget is not None and part.seconds / 60 > budget
            terminalreporter.write_line(
                f"{name:<18} {part.tests:>5} tests {part.seconds / 60:6.1f} min"
                + (f"  (budget {budget:g} min{', over' if over else ''})" if budget else ""),
                red=over,
            )
        total = sum(p.seconds for p in self.parts.values())
        terminalreporter.write_line(
            f"{'all':<18} {sum(p.tests for p in self.parts.values()):>5} tests"
            f" {total / 60:6.1f} min of test time"
        )


# -- side by side ------------------------------------------------------------------------------

# Tests that change what every test on the machine shares: the sudo tests' accounts and rules.
MACHINE = "machine"
MACHINE_MODULES = (
    "tests/execute/test_sudo_sandbox.py",
    "tests/collect/test_sudo_transport.py",
    "tests/execute/test_least_privilege.py",
)
SHARED_SCOPES = frozenset({"module", "class", "package"})
# Which parts go out first (the most expensive groups), the cheapest last.
REAL_KAFKA = "real Kafka"
ORDER = (REAL_KAFKA, FAULTS, EMULATED, SPARK, PURE)
UNIT_NAME = str.maketrans("[]@", "()_")
# How many groups that keep a core busy (real Kafka, Spark) may run at once (PartScheduling).
MAX_BUSY = 2
# Where the workers write each test's group for the controller (a directory).
GROUPS_ENV = "REMEDIATE_SUITE_GROUPS"


def shared_unit(item: pytest.Item) -> str | None:
    """What `item` shares with other tests and must run beside them on one worker, or None."""
    module = item.nodeid.split("::", 1)[0]
    if module in MACHINE_MODULES:
        return MACHINE
    info = getattr(item, "_fixtureinfo", None)
    callspec = getattr(item, "callspec", None)
    shared: list[str] = []
    for name in getattr(item, "fixturenames", ()):
        definitions = info.name2fixturedefs.get(name) if info is not None else None
        if not definitions:
            continue
        scope = definitions[-1].scope
        if scope == "session" and name in SPARK_FIXTURES:
            return SPARK
        if scope in SHARED_SCOPES:
            index = callspec.indices.get(name) if callspec is not None else None
            shared.append(name if index is None else f"{name}={index}")
    return f"{module}:{','.join(sorted(shared))}" if shared else None


def rank(part: str) -> int:
    return next(i for i, prefix in enumerate(ORDER) if part.startswith(prefix))


def schedule(items: list[pytest.Item]) -> None:
    """Group the items (what they share, or each alone), name each group by the most
    expensive part among its tests, and order the groups most expensive part first. A group's
    tests stay together and in pytest's order (a shared sandbox is built once), as does
    everything of the same part (a stable sort). On an xdist worker, write each test's group
    down for the controller (its name: no ']' or '@', which xdist reads in node ids)."""
    units = {item.nodeid: (shared_unit(item) or item.nodeid).translate(UNIT_NAME) for item in items}
    position = {item.nodeid: i for i, item in enumerate(items)}
    first: dict[str, int] = {}
    best: dict[str, str] = {}
    for item in items:
        unit, part = units[item.nodeid], part_of(item)
        first.setdefault(unit, position[item.nodeid])
        if unit not in best or rank(part) < rank(best[unit]):
            best[unit] = part
    items.sort(
        key=lambda i: (
            rank(best[units[i.nodeid]]),
            first[units[i.nodeid]],
            position[i.nodeid],
        )
    )
    directory, worker = os.environ.get(GROUPS_ENV), os.environ.get("PYTEST_XDIST_WORKER")
    if directory and worker:
        groups = {nodeid: f"{best[unit]}|{unit}" for nodeid, unit in units.items()}
        written = Path(directory) / f"{worker}.json"
        partial = written.with_suffix(".tmp")
        partial.write_text(json.dumps(groups))
        partial.replace(written)


def busy(part: str) -> bool:
    """Keeps a core busy while it runs: real brokers start, restart and migrate, Spark's JVMs
    start and classify."""
    return part.startswith(REAL_KAFKA) or part == SPARK


def timed(part: str) -> bool:
    """Runs emulated brokers, whose timers are seconds: a starved follower drops out of an
    ISR, and the gates then (rightly) refuse."""
    return part in (EMULATED, FAULTS)


def may_take(part: str, *, on_worker: Sequence[str], everywhere: Sequence[str]) -> bool:
    """Whether a worker holding groups of the parts `on_worker` may take a group of `part`
    while groups of the parts `everywhere` (its own among them) are given out and not done
    (PartScheduling): at most `MAX_BUSY` busy groups at once, emulated brokers beside one at
    most, and one group of either kind per worker."""
    if not (busy(part) or timed(part)):
        return True
    if any(busy(p) or timed(p) for p in on_worker):
        return False
    running_busy = sum(1 for p in everywhere if busy(p))
    if timed(part):
        return running_busy <= 1
    emulated = any(timed(p) for p in everywhere)
    return running_busy + 1 <= (1 if emulated else MAX_BUSY)


class PartScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist has no types
    """xdist's `loadgroup` over the groups `schedule` wrote down, in their order, with what two
    cores bear side by side (`may_take`): real Kafka and Spark keep a core busy, at most
    `MAX_BUSY` of them at once; the emulated sandbox and the fault suite run beside one of them
    at most; pure logic anywhere. A worker holds one group of the first kinds at most, beyond
    the one test a worker keeps until it knows the next; a worker takes the next group it may
    as soon as any test ends; and when no worker runs anything, one takes the next group
    whatever the others hold (`_keep_going`)."""

    _groups: dict[str, str] | None = None

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        # The groups' order is the collection's (`schedule`), not their sizes.
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        """The test's group, as the workers wrote it down (`schedule`)."""
        if self._groups is None:
            written = sorted(Path(os.environ[GROUPS_ENV]).glob("*.json"))
            self._groups = json.loads(written[0].read_text()) if written else {}
        return self._groups.get(nodeid, nodeid)

    def _moving(self, node: WorkerController) -> bool:
        """Whether `node` runs a test: xdist's worker runs one only once it knows the next (or
        is told to stop), so a worker with one test left waits for more and runs nothing (its
        group's sandbox, if any, stands idle until the next test tears it down)."""
        pending = self._pending_of(self.assigned_work.get(node, {}))
        return bool(pending > 1 or (pending and node.shutting_down))

    def _parts(self, nodes: Sequence[WorkerController]) -> list[str]:
        """The parts of the groups given to `nodes` and not finished."""
        return [
            scope.split("|", 1)[0]
            for each in nodes
            for scope, tests in self.assigned_work.get(each, {}).items()
            if not all(tests.values())
        ]

    def _assign_work_unit(self, node: WorkerController, *, whatever: bool = False) -> None:
        """Give `node` the first group it may take (`may_take`), or with `whatever` the first.
        What a waiting worker holds (one test) runs before what it is given, not beside it."""
        on_worker = self._parts([node]) if self._moving(node) else []
        everywhere = self._parts([n for n in self.nodes if n is not node])
        scope = next(
            (
                s
                for s in self.workqueue
                if whatever
                or may_take(s.split("|", 1)[0], on_worker=on_worker, everywhere=everywhere)
            ),
            None,
        )
        if scope is None:
            return  # what is left waits for a worker with nothing else, or for fewer brokers
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some(
            [collection.index(nodeid) for nodeid, done in work_unit.items() if not done]
        )

    def _keep_going(self) -> None:
        """When no worker runs a test and groups are left, the first worker gets the first
        group whatever the others hold: waiting for fewer brokers would then wait forever."""
        if self.workqueue and not any(self._moving(n) for n in self.nodes):
            waiting = [n for n in self.nodes if not n.shutting_down]
            if waiting:
                self._assign_work_unit(waiting[0], whatever=True)

    def schedule(self) -> None:
        super().schedule()
        self._keep_going()

    def mark_test_complete(
        self, node: WorkerController, item_index: int, duration: float = 0
    ) -> None:
        super().mark_test_complete(node, item_index, duration)
        # A group that ended may let another worker take the next one (xdist asks only the
        # worker whose test ended).
        for other in self.nodes:
            if other is not node:
                self._reschedule(other)
        self._keep_going()
