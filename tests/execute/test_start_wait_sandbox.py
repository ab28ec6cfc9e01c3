"""A start that outlasts cluster.yaml's start timeout, on the emulated sandbox, end to end.

cluster.yaml's `timeouts.start_s` is recorded in the plan (`plan --playbook rolling-restart`)
and `apply` waits by it. One broker loads its logs for much longer than that (the emulator's
`sandbox.log.recovery.ms`, spread over its logs, with Kafka's `Completed load of ...` line
after each): while its server.log shows new lines at each timeout, the run waits on and
completes; when the loading stalls (a log that takes far longer than two timeouts), the run
halts (exit 5), saying what the log showed last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from remediate.execute.journal import Journal
from remediate.exit_codes import EXIT_HALTED
from remediate.formats.logloading import LineKind, parse_line
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated.config import write_server_properties
from remediate.sandbox.reproduce import partition_states
from tests.execute.sandbox_tools import run_cli
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "ledger"
PARTITIONS = 12  # every broker holds a replica of each: 12 logs to load
# Long enough for an emulated broker, started on a machine busy with the suite's other
# workers, to write its first lines within it (the first look needs them).
START_S = 10
STALL_S = 20
SLOW = 2
LOADING_KINDS = {
    LineKind.STARTING,
    LineKind.LOADING,
    LineKind.DIR_CLEAN,
    LineKind.DIR_RECOVERING,
    LineKind.LOG_LOADED,
    LineKind.LOADED,
}


@pytest.fixture
def lab(sandbox_dir: Path) -> Iterator[tuple[Path, KazooClient]]:
    """Three emulated brokers, a topic in sync on all of them, and cluster.yaml with a start
    timeout of START_S seconds."""
    state = cluster.up(sandbox_dir)
    zk = cluster.zk_client(state)
    try:
        admin.create_topic(zk, TOPIC, PARTITIONS, 3)
        wait_until(lambda: in_sync(zk), f"every replica of {TOPIC} in sync")
        config = sandbox_dir / "cluster.yaml"
        document = yaml.safe_load(config.read_text())
        config.write_text(yaml.safe_dump({**document, "timeouts": {"start_s": START_S}}))
        yield sandbox_dir, zk
    finally:
        zk.stop()
        zk.close()


def in_sync(zk: KazooClient) -> bool:
    try:
        states = partition_states(zk, TOPIC, list(range(PARTITIONS)))
    except NoNodeError:
        return False
    return all(sorted(s.isr) == [1, 2, 3] for s in states.values())


def loads_for(directory: Path, broker: int, recovery_ms: int) -> None:
    """The broker's next start takes `recovery_ms` to load its logs."""
    settings = cluster.broker_settings(directory, broker)
    properties = {**settings.properties, "sandbox.log.recovery.ms": str(recovery_ms)}
    path = cluster.broker_dir(directory, broker) / "server.properties"
    write_server_properties(path, replace(settings, properties=properties))


def roll(directory: Path, tmp_path: Path) -> tuple[dict[str, Any], Any, list[dict[str, Any]]]:
    """Plan a rolling restart and apply it: (the plan, apply's run, the run's journal)."""
    config = str(directory / "cluster.yaml")
    plan_path = tmp_path / "plan.json"
    planned = run_cli("plan", "-c", config, "--playbook", "rolling-restart", "-o", str(plan_path))
    assert planned.returncode == 0, planned.stderr[-3000:]
    plan = json.loads(plan_path.read_text())
    applied = run_cli(
        "apply", "-c", config, "--plan", str(plan_path), "--approve", plan["digest"], "--json"
    )
    run = json.loads(applied.stdout)
    records = Journal.open(directory / "journal", run["run_id"]).records()
    return plan, (applied.returncode, run, applied.stderr), records


def loading_notes(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == "note" and "server_log" in r]


@pytest.mark.fault(
    "Faults during apply",
    "A broker whose logs take far longer to load than the start timeout (log recovery after an"
    " unclean shutdown; here almost five start timeouts, two or three of its lines in each)",
    "The wait for its registration goes on while its server.log shows new log-loading lines at"
    " each timeout, each extension journaled with the lines read; the run completes (exit 0)",
)
def test_a_start_that_outlasts_the_start_timeout_by_far_completes(
    lab: tuple[Path, KazooClient], tmp_path: Path
) -> None:
    directory, zk = lab
    # 12 logs, one every 4 s: 48 s of loading, almost five start timeouts.
    loads_for(directory, SLOW, 48_000)
    plan, (code, run, stderr), records = roll(directory, tmp_path)
    assert plan["gates"]["rolling-restart"]["start_timeout_s"] == START_S
    assert code == 0, f"{run.get('error')}\n{stderr[-3000:]}"
    assert run["status"] == "completed"
    notes = loading_notes(records)
    assert len(notes) >= 4, notes
    log = str(cluster.broker_dir(directory, SLOW) / "logs" / "server.log")
    assert {n["server_log"] for n in notes} == {log}
    assert {n["step"] for n in notes} == {f"broker-{SLOW}:wait registered"}
    # Each extension quotes what its look found: lines of the start's log loading (the first
    # look, on a loaded machine, may come before the first log is done), and the loading shows.
    kinds = [parse_line(n["log"][-1].encode()) for n in notes]
    assert all(k is not None and k.kind in LOADING_KINDS for k in kinds), notes
    assert sum(k.kind is LineKind.LOG_LOADED for k in kinds if k is not None) >= 3, notes
    (waited,) = [
        r["result"]
        for r in records
        if r["event"] == "step-finished" and r["step"].endswith(f"broker-{SLOW}:wait registered")
    ]
    assert waited == {"registered": SLOW, "extended_while_loading": len(notes)}
    assert in_sync(zk)


@pytest.mark.fault(
    "Faults during apply",
    "A broker whose log loading stalls: no new log-loading line for a whole start timeout",
    "The run halts (exit 5) at that timeout, saying what it waited for, how long and how many"
    " times the log extended the wait, and quoting the log's last loading line",
)
def test_a_start_whose_log_stalls_halts_saying_what_it_showed_last(
    lab: tuple[Path, KazooClient], tmp_path: Path
) -> None:
    directory, _zk = lab
    # A timeout that outlasts by far an emulated broker's start on a machine as busy as the
    # suite's (its first look must see the start's first lines: the stall comes after them).
    config = directory / "cluster.yaml"
    config.write_text(
        yaml.safe_dump({**yaml.safe_load(config.read_text()), "timeouts": {"start_s": STALL_S}})
    )
    # 100 s per log: the first look sees the start's first lines, the second nothing new.
    loads_for(directory, SLOW, 1_200_000)
    _plan, (code, run, stderr), records = roll(directory, tmp_path)
    assert code == EXIT_HALTED, stderr[-3000:]
    assert run["status"] == "halted"
    log = cluster.broker_dir(directory, SLOW) / "logs" / "server.log"
    error = run["error"]
    # Two timeouts and a little: how little depends on the machine's load.
    halted = re.match(
        rf"timed out after (\d+)s waiting for broker {SLOW} to register \(the {STALL_S}s"
        r" timeout, extended 1 time\(s\)\); last seen: ",
        error,
    )
    assert halted is not None, error
    assert 2 * STALL_S <= int(halted.group(1)) < 4 * STALL_S, error
    assert f"; its server.log ({log}) shows no log loading since the last look (last: " in error
    assert "Attempting recovery for all logs in" in error or "Skipping recovery" in error
    assert len(loading_notes(records)) == 1
