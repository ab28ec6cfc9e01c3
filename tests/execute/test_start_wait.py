"""The wait for a started broker, on the in-memory cluster: the start timeout is extended while
the broker's own server.log shows its logs loading, each extension journaled with what the
log said, and the run halts, saying why, when the log shows no progress, cannot be read, says
the start failed or shows the broker starting twice. The service commands run with the
plan's timeout, and one that runs out of time halts the run at once, naming the command."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from remediate.execute import steps
from remediate.playbook import Action
from tests.execute.fake_cluster import Topic, server_log
from tests.execute.test_executor import (
    GATES,
    PAYMENTS,
    World,
    plan_of,
    restart,
    world,
)

ROLL = (
    Action.GATE_RESTART_SAFETY,
    Action.STOP,
    Action.START,
    Action.WAIT_REGISTERED,
    Action.WAIT_IN_SYNC,
)
DATA_DIR = "/var/lib/kafka/data"
STARTING = "INFO starting (kafka.server.KafkaServer)"


def completed(done: int, total: int) -> str:
    """Kafka 2.8.2's line for one log loaded (log/LogManager.scala:361)."""
    return (
        f"INFO Completed load of Log(dir={DATA_DIR}/payments-{done}, topic=payments,"
        f" partition={done}, highWatermark=0, lastStableOffset=0, logStartOffset=0,"
        f" logEndOffset=50) with 1 segments in 1990ms ({done}/{total} loaded in {DATA_DIR})"
        " (kafka.log.LogManager)"
    )


def loading(logs: int, every_s: float, *, upto: int | None = None) -> list[tuple[float, str]]:
    """A start that recovers `logs` logs, one every `every_s` seconds (only the first `upto`,
    when given: the loading then stalls), then says they are loaded."""
    lines = [
        (0.1, STARTING),
        (0.2, f"INFO Loading logs from log dirs ArraySeq({DATA_DIR}) (kafka.log.LogManager)"),
        (
            0.3,
            f"INFO Attempting recovery for all logs in {DATA_DIR} since no clean shutdown file"
            " was found (kafka.log.LogManager)",
        ),
    ]
    for done in range(1, (logs if upto is None else upto) + 1):
        lines.append((0.3 + done * every_s, completed(done, logs)))
    if upto is None:
        lines.append(
            (0.4 + logs * every_s, f"INFO Loaded {logs} logs in 1234ms. (kafka.log.LogManager)")
        )
    return lines


# What broker 3's server.log held before: its previous start, its logs loaded and clean.
EARLIER = (
    STARTING,
    f"INFO Loading logs from log dirs ArraySeq({DATA_DIR}) (kafka.log.LogManager)",
    f"INFO Skipping recovery for all logs in {DATA_DIR} since clean shutdown file was found"
    " (kafka.log.LogManager)",
    completed(1, 1),
    "INFO Loaded 1 logs in 12ms. (kafka.log.LogManager)",
    "INFO [KafkaServer id=3] started (kafka.server.KafkaServer)",
)


@dataclass(frozen=True)
class Start:
    """What broker 3 does once its start command ran: the lines its server.log gets (at
    seconds after the command), and when it registers (None: never)."""

    log: tuple[tuple[float, str], ...]
    registers_at: float | None
    logged_before: tuple[str, ...] = EARLIER
    # Lines written while the start command runs, before the wait for registration begins.
    at_once: tuple[str, ...] = ()


def append(w: World, path: Path, text: str) -> None:
    seconds = f"{w.clock.elapsed:06.3f}".replace(".", ",")
    with path.open("a") as log:
        log.write(f"[2026-11-22 10:34:{seconds}] {text}\n")


def register(w: World, broker: int) -> None:
    w.kafka.on_start.pop(broker, None)
    w.kafka.start_silently_fails.discard(broker)
    w.kafka.start(broker)


def starting(w: World, start: Start) -> None:
    """Broker 3 starting as `start` says, from now on."""
    w.kafka.start_silently_fails.add(3)
    for text in start.at_once:
        append(w, server_log(w.root, 3), text)
    for at, text in start.log:
        w.clock.at(at, partial(append, w, server_log(w.root, 3), text))
    if start.registers_at is not None:
        w.clock.at(start.registers_at, partial(register, w, 3))


def restarting(tmp_path: Path, start: Start, *, with_server_log: bool = True) -> World:
    """Broker 3's rolling restart, with `start` happening when its start command runs."""
    w = replace(
        world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}),
        with_server_log=(3,) if with_server_log else (),
    )
    w.kafka.boot()
    log = server_log(tmp_path, 3)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"[2026-11-22 09:00:00,000] {line}\n" for line in start.logged_before))
    w.kafka.on_start[3] = partial(starting, w, start)
    return w


def notes(w: World) -> list[dict[str, Any]]:
    return [r for r in w.records("note") if "server_log" in r]


LONG = Start(tuple(loading(20, 2.0)), registers_at=41.0)


def test_a_start_that_outlasts_the_start_timeout_completes_while_the_log_shows_loading(
    tmp_path: Path,
) -> None:
    w = restarting(tmp_path, LONG)
    outcome = w.run(plan_of([restart(3, ROLL)], playbook="rolling-restart"))
    assert outcome.status == "completed", outcome.error
    # Looks at 5, 10, ... 40 s after the wait began: each saw new lines, so 8 extensions.
    found = notes(w)
    assert len(found) == 8
    first = found[0]
    assert first["step"] == "broker-3:wait registered"
    assert first["server_log"] == str(server_log(tmp_path, 3))
    assert first["decision"] == (
        "broker 3 has not registered within the 5s start timeout, but its server.log shows its"
        f" logs loading (2/20 logs loaded in {DATA_DIR} (recovering)): waiting another 5s"
    )
    # The loading lines logged since the wait began (the `starting` line is no loading line).
    assert [line.split("] ", 1)[1] for line in first["log"]] == [
        line for at, line in LONG.log if at <= 5.1 and line != STARTING
    ]
    assert "(19/20 loaded in" in found[-1]["log"][-1]
    (waited,) = [r for r in w.records("step-finished") if r["step"].endswith(":wait registered")]
    assert waited["result"] == {"registered": 3, "extended_while_loading": 8}


def test_without_a_server_log_the_same_start_halts_at_the_start_timeout(tmp_path: Path) -> None:
    w = restarting(tmp_path, LONG, with_server_log=False)
    outcome = w.run(plan_of([restart(3, ROLL)], playbook="rolling-restart"))
    assert outcome.status == "halted"
    assert outcome.error == (
        "timed out after 5s waiting for broker 3 to register; last seen: broker 3 is not registered"
    )
    assert notes(w) == []


LOG = "its server.log ({log})"
HALTS = [
    pytest.param(
        Start(tuple(loading(20, 2.0, upto=4)), registers_at=None),
        15,
        2,
        f"{LOG} shows no log loading since the last look (last: [2026-11-22 10:34:xx] "
        + completed(4, 20)
        + ")",
        id="stalls-mid-load",
    ),
    pytest.param(
        # A quick start: its first lines are written before the wait begins, then it stalls.
        # They count at the first look (taken from before the start command), so the halt
        # comes at the second, quoting the last of them.
        Start(
            (),
            registers_at=None,
            at_once=tuple(line for _, line in loading(20, 2.0, upto=1)),
        ),
        10,
        1,
        f"{LOG} shows no log loading since the last look (last: [2026-11-22 10:34:xx] "
        + completed(1, 20)
        + ")",
        id="quick-start-then-stalls",
    ),
    pytest.param(
        Start((), registers_at=None),
        5,
        0,
        f"{LOG} shows no log loading since the wait began, nor a new `starting` line",
        id="logs-nothing-new",
    ),
    pytest.param(
        Start((), registers_at=None, logged_before=()),
        5,
        0,
        f"{LOG} shows no log loading since the wait began, nor a new `starting` line",
        id="empty-log",
    ),
    pytest.param(
        Start(((0.1, STARTING),), registers_at=None),
        5,
        0,
        f"{LOG} shows no log loading since the broker started",
        id="started-loads-nothing",
    ),
    pytest.param(
        Start(
            (
                *loading(3, 0.5),
                (
                    3.0,
                    "ERROR Fatal error during KafkaServer startup. Prepare to shutdown"
                    " (kafka.server.KafkaServer)",
                ),
            ),
            registers_at=None,
        ),
        5,
        0,
        f"{LOG} says its startup failed: [2026-11-22 10:34:xx] ERROR Fatal error during"
        " KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)",
        id="startup-failed",
    ),
    pytest.param(
        Start(
            (*loading(2, 1.0), *((6.0 + at, line) for at, line in loading(2, 1.0))),
            registers_at=None,
        ),
        10,
        1,
        f"{LOG} shows it started again since the wait began (another `starting` line): it is"
        " restarting, not loading its logs",
        id="restarting",
    ),
    pytest.param(
        Start(tuple(loading(2, 1.0)), registers_at=None),
        10,
        1,
        f"{LOG} says its logs are loaded ([2026-11-22 10:34:xx] INFO Loaded 2 logs in 1234ms."
        " (kafka.log.LogManager)) and shows nothing since",
        id="loaded-but-never-registers",
    ),
]


@pytest.mark.parametrize(("start", "waited", "extensions", "why"), HALTS)
def test_a_start_the_log_does_not_explain_halts_saying_why(
    tmp_path: Path, start: Start, waited: int, extensions: int, why: str
) -> None:
    w = restarting(tmp_path, start)
    outcome = w.run(plan_of([restart(3, ROLL)], playbook="rolling-restart"))
    assert outcome.status == "halted"
    head = f"timed out after {waited}s waiting for broker 3 to register"
    if extensions:
        head += f" (the 5s timeout, extended {extensions} time(s))"
    expected = f"{head}; last seen: broker 3 is not registered; " + why.format(
        log=server_log(tmp_path, 3)
    )
    assert outcome.error is not None
    assert _unstamped(outcome.error) == expected
    assert len(notes(w)) == extensions


def _unstamped(text: str) -> str:
    """The message with this run's timestamps (which depend on the fake clock's polling)
    made `10:34:xx`."""
    return re.sub(r"2026-11-22 10:34:\d\d,\d\d\d", "2026-11-22 10:34:xx", text)


def test_an_unreadable_server_log_halts_at_the_start_timeout_naming_it(tmp_path: Path) -> None:
    w = restarting(tmp_path, Start((), registers_at=None))
    server_log(tmp_path, 3).unlink()
    outcome = w.run(plan_of([restart(3, ROLL)], playbook="rolling-restart"))
    assert outcome.status == "halted"
    assert outcome.error is not None
    log = server_log(tmp_path, 3)
    assert outcome.error.startswith(
        "timed out after 5s waiting for broker 3 to register; last seen: broker 3 is not"
        f" registered; its server.log ({log}) could not be read ("
    )
    assert f"cannot read {log}: tail: cannot open" in outcome.error


def test_a_rollback_waits_for_a_broker_loading_its_logs_too(tmp_path: Path) -> None:
    w = restarting(tmp_path, Start((), registers_at=0.1))
    held = w.kafka.metadata(3, "payments", 0)
    plan = plan_of(
        [restart(3, steps.RESTART_ACTIONS, partitions=(), files=(str(held),))],
        files={f"3:{held}": None},
    )
    w.kafka.on_start.pop(3)
    assert w.run(plan).status == "completed"
    w.kafka.on_start[3] = partial(starting, w, Start(tuple(loading(6, 2.0)), registers_at=13.0))
    w.rollback(plan)
    found = [r for r in notes(w) if r["step"].startswith("rollback0:")]
    assert len(found) == 2
    assert found[0]["step"] == "rollback0:broker-3:wait registered"
    (waited,) = [
        r for r in w.records("step-finished") if r["step"] == "rollback0:broker-3:wait registered"
    ]
    assert waited["result"] == {"registered": 3, "extended_while_loading": 2}


# -- service commands --------------------------------------------------------------------------


def test_service_commands_run_with_the_plans_timeout(tmp_path: Path) -> None:
    w = replace(
        world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}),
        gates=GATES.model_copy(update={"service_command_timeout_s": 42.0}),
    )
    w.kafka.boot()
    assert w.run(plan_of([restart(3, ROLL)], playbook="rolling-restart")).status == "completed"
    assert {command for command, _ in w.kafka.timeouts} >= {"svc stop 3", "svc start 3"}
    assert {timeout for _, timeout in w.kafka.timeouts} == {42.0}


def test_a_service_command_that_runs_out_of_time_halts_at_once_naming_it(tmp_path: Path) -> None:
    w = replace(
        world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}),
        gates=GATES.model_copy(update={"service_command_timeout_s": 7.0}),
    )
    w.kafka.boot()
    w.kafka.hangs.add("svc start 3")
    outcome = w.run(plan_of([restart(3, ROLL)], playbook="rolling-restart"))
    assert outcome.status == "halted"
    assert outcome.error == (
        "0:broker-3:start: broker 3 (fake): the start command did not finish within 7s"
        " (timed out; whether it took effect is unknown)"
    )
    # Not retried: the timeout is the operator's bound on the command.
    assert [c for c, _ in w.kafka.timeouts if c == "svc start 3"] == ["svc start 3"]
    assert not [r for r in w.records("retry") if "start command" in r["what"]]
