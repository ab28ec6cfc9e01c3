"""The journals of whole runs on the in-memory cluster, byte for byte as recorded.

Each scenario below runs the executor (one or more processes: a crash, a resume, a rollback)
from a plan given as JSON, and compares every journal line with the one recorded in
`tests/execute/data/journals/<scenario>.jsonl` by the executor before its plan and journal
vocabulary became typed. Only what a run cannot repeat is masked (the temporary directory,
the host and pid, the backup archive's checksum, which covers file times). Records of kinds
added since (`step-skipped`, and the step records of a rollback's actions) are left out of the
comparison, and so are fields added since (a stop's `clean_shutdown`), and the others
renumbered: every record the earlier executor wrote is written again, in the same order, with
the same bytes.

`RECORD_JOURNALS=DIR` writes the scenarios' journals into DIR instead of comparing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remediate.execute.executor import Executor
from remediate.execute.journal import Journal
from remediate.execute.lock import RunLock
from remediate.formats.logdir import encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import CONTROLLER, topic_path
from remediate.plan import plan_from_json
from tests.execute.fake_cluster import OLD_ID, ZK_ID, Topic, server_properties
from tests.execute.test_executor import PAYMENTS, RUN, World, world

DATA = Path(__file__).parent / "data" / "journals"
RESTART = [
    "gate restart-safety",
    "stop",
    "backup",
    "delete",
    "start",
    "wait registered",
    "wait in-sync",
    "verify topic-ids",
]
ROLL = ["gate restart-safety", "stop", "start", "wait registered", "wait in-sync"]
RESTORE = [
    "gate agreement",
    "zk-write topic-id",
    "zk-write controller-election",
    "wait in-sync",
    "verify topic-ids",
]
MINTED = TopicId(bytes(15) + b"\x07")


class Crash(BaseException):
    """The process dies here: nothing after it runs, nothing is journaled."""


def crash_at(point: str) -> Callable[[str], None]:
    def crash(at: str) -> None:
        if at == point:
            raise Crash(at)

    return crash


def predicted(**names: list[str]) -> dict[str, list[str]]:
    return {
        "during": names.get("during", []),
        "after": names.get("after", []),
        "out_of_isr_after": names.get("out_of_isr_after", []),
        "last_in_isr": names.get("last_in_isr", []),
    }


def restart_step(broker: int, actions: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "kind": "restart",
        "broker": broker,
        "reason": "test",
        "partitions": fields.get("partitions", []),
        "files": fields.get("files", []),
        "actions": actions,
        "impact": [],
        "is_controller": False,
        "order_reason": "",
        "predicted": fields.get("predicted", predicted()),
    }


def restore_step(topic: str, version: int, actions: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "kind": "restore",
        "broker": None,
        "topic": topic,
        "topic_id": fields.get("topic_id", str(ZK_ID)),
        "zk_topic_id": fields.get("zk_topic_id"),
        "znode_version": version,
        "reelect": fields.get("reelect", False),
        "reason": "test",
        "partitions": fields.get("partitions", []),
        "files": [],
        "actions": actions,
        "impact": [],
        "playbook": "restore-zk-topic-id",
        "rolled_later": fields.get("rolled_later", []),
        "predicted": predicted(),
        "mint": fields.get("mint", False),
    }


def plan_document(
    steps: list[dict[str, Any]],
    *,
    playbook: str = "topicid-mismatch",
    files: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    return {
        "format": 1,
        "cluster": "fake",
        "cluster_id": "Cl-us_ter-id-abcdefghij",
        "created_at": None,
        "playbook": playbook,
        "playbook_version": 1,
        "controller": 1,
        "fingerprint": {
            "cluster_id": None,
            "brokers": [1, 2, 3],
            "controller_epoch": None,
            "topics": {},
            "files": files or {},
        },
        "steps": steps,
        "skipped": [],
        "refusals": [],
        "allow_unsafe": False,
        "estimate_s": 0.0,
        "notes": [],
        "gates": {},
        "candidates": [],
        "newly_unavailable": {},
        "unavailable_now": [],
    }


def run(w: World, document: dict[str, Any], failpoint: Callable[[str], None] | None = None) -> None:
    """One process of the run; a crash ends it like a killed process."""
    plan = plan_from_json(document)
    try:
        if failpoint is None:
            w.run(plan)
        else:
            w.run(plan, failpoint=failpoint)
    except Crash:
        pass


def rollback(w: World, document: dict[str, Any]) -> None:
    journal = Journal.open(w.journals, RUN)
    lock = RunLock(w.zk, "fake", run_id=RUN)
    lock.acquire()
    try:
        Executor(
            plan_from_json(document), w.services(lambda _point: None), journal, lock
        ).rollback()
    finally:
        lock.release()


# -- the scenarios -----------------------------------------------------------------------------


def stale(tmp_path: Path) -> tuple[World, dict[str, Any]]:
    """Broker 3 holds an old id for payments-0 and is out of its ISR: the repair's case."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(3, "payments", 0)])
    held = w.kafka.metadata(3, "payments", 0)
    held.write_bytes(encode_partition_metadata(OLD_ID))
    step = restart_step(3, RESTART, partitions=["payments-0"], files=[str(held)])
    return w, plan_document([step], files={f"3:{held}": str(OLD_ID)})


def repair(tmp_path: Path) -> World:
    w, document = stale(tmp_path)
    run(w, document)
    return w


def repair_crash_and_resume(tmp_path: Path) -> World:
    w, document = stale(tmp_path)
    run(w, document, crash_at("stop:done"))
    run(w, document)
    return w


def repair_crash_after_delete_and_resume(tmp_path: Path) -> World:
    w, document = stale(tmp_path)
    run(w, document, crash_at("delete:finished"))
    run(w, document)
    return w


def repair_then_rollback(tmp_path: Path) -> World:
    w, document = stale(tmp_path)
    run(w, document)
    rollback(w, document)
    return w


def lock_lost(tmp_path: Path) -> World:
    w, document = stale(tmp_path)

    def lose(at: str) -> None:
        if at == "stop:started":
            w.zk.lose_session()

    run(w, document, lose)
    return w


def zookeeper_retries(tmp_path: Path) -> World:
    w, document = stale(tmp_path)

    def drop(at: str) -> None:
        if at == "gate restart-safety:started":
            w.zk.drops = 2

    run(w, document, drop)
    return w


def start_never_registers(tmp_path: Path) -> World:
    w, document = stale(tmp_path)
    w.kafka.start_silently_fails.add(3)
    run(w, document)
    return w


def convergence_waits(tmp_path: Path) -> World:
    w, document = stale(tmp_path)

    def drop(at: str) -> None:
        if at != "wait converged:started":
            return
        w.kafka.isr[("payments", 1)].remove(2)
        w.kafka.write_states()

        def rejoin() -> None:
            w.kafka.isr[("payments", 1)].append(2)
            w.kafka.write_states()

        w.clock.at(2, rejoin)

    run(w, document, drop)
    return w


def controller_moves(tmp_path: Path) -> World:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))}, controller=1)
    w.kafka.boot()
    document = plan_document([restart_step(b, ROLL) for b in (2, 3, 1)], playbook="rolling-restart")

    def move(at: str) -> None:
        if at == "wait in-sync:started" and w.kafka.controller == 1 and 2 in w.kafka.running:
            w.kafka.elect(3)

    run(w, document, move)
    return w


def predicted_roll(tmp_path: Path) -> World:
    """A roll whose prediction excuses an ISR and names a partition unavailable after it."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot()
    w.kafka.stays_out.add((3, "payments", 1))
    step = restart_step(
        3,
        ROLL,
        partitions=["payments-1"],
        predicted=predicted(out_of_isr_after=["payments-1"], after=["payments-1"]),
    )
    run(w, plan_document([step], playbook="rolling-restart"))
    return w


def pre_gate_halts(tmp_path: Path) -> World:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(2, "payments", 0)])
    step = restart_step(3, ROLL, predicted=predicted(during=["payments-1"]))
    run(w, plan_document([step], playbook="rolling-restart"))
    return w


def shutdown_allowance(tmp_path: Path) -> World:
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.with_properties = (3,)
    server_properties(tmp_path, 3).write_text(
        f"log.dirs={w.kafka.log_dir(3)}\n"
        "controlled.shutdown.max.retries=2\n"
        "controlled.shutdown.retry.backoff.ms=3000\n"
    )
    w.kafka.boot()
    w.kafka.stop_lingers.add(3)

    def linger(at: str) -> None:
        if at == "stop:started":
            w.clock.at(8, lambda: w.kafka.stop(3))

    step = restart_step(3, ROLL, predicted=predicted(last_in_isr=["payments-0"]))
    run(w, plan_document([step], playbook="rolling-restart"), linger)
    return w


def lost_id(tmp_path: Path) -> tuple[World, dict[str, Any]]:
    topic = Topic("orders", {0: (1, 2), 1: (2, 3)})
    w = world(tmp_path, {"orders": topic})
    w.kafka.boot()
    topic.topic_id = None
    w.kafka.write_topic(topic)
    version = w.zk.nodes[topic_path("orders")].version
    actions = [a for a in RESTORE if a != "zk-write controller-election"]
    step = restore_step("orders", version, actions, partitions=["orders-0", "orders-1"])
    return w, plan_document([step], playbook="restore-zk-topic-id")


def restore_crash_and_resume(tmp_path: Path) -> World:
    w, document = lost_id(tmp_path)
    run(w, document, crash_at("gate agreement:finished"))
    run(w, document)
    return w


def restore_after_the_write(tmp_path: Path) -> World:
    w, document = lost_id(tmp_path)
    run(w, document, crash_at("zk-write topic-id:finished"))
    run(w, document)
    return w


def restore_with_election_and_roll_later(tmp_path: Path) -> World:
    """orders-0's replicas hold OLD_ID, orders-1's ZooKeeper's: OLD_ID is written back, the
    controller re-elected, and orders-1's replicas are left for a later roll."""
    topic = Topic("orders", {0: (1, 2), 1: (2, 3)})
    w = world(tmp_path, {"orders": topic})
    w.kafka.boot()
    for broker in (1, 2):
        w.kafka.metadata(broker, "orders", 0).write_bytes(encode_partition_metadata(OLD_ID))
    version = w.zk.nodes[topic_path("orders")].version
    step = restore_step(
        "orders",
        version,
        RESTORE,
        topic_id=str(OLD_ID),
        zk_topic_id=str(ZK_ID),
        reelect=True,
        partitions=["orders-0", "orders-1"],
        rolled_later=["orders-1 on broker 2", "orders-1 on broker 3"],
    )
    run(w, plan_document([step], playbook="restore-zk-topic-id"))
    return w


def mint(tmp_path: Path) -> World:
    topic = Topic("orders", {0: (1, 2), 1: (2, 3)}, topic_id=None)
    w = world(tmp_path, {"orders": topic})
    w.kafka.boot()

    def elect_and_mint() -> None:
        w.kafka.elect(None)
        if topic.topic_id is None:
            topic.topic_id = MINTED
            w.kafka.write_topic(topic)
            for number, replicas in topic.assignment.items():
                for broker in replicas:
                    w.kafka.metadata(broker, "orders", number).write_bytes(
                        encode_partition_metadata(MINTED)
                    )

    w.zk.on_delete[CONTROLLER] = elect_and_mint
    version = w.zk.nodes[topic_path("orders")].version
    actions = [a for a in RESTORE if a != "zk-write topic-id"]
    step = restore_step(
        "orders",
        version,
        actions,
        topic_id="",
        reelect=True,
        mint=True,
        partitions=["orders-0", "orders-1"],
    )
    run(w, plan_document([step], playbook="restore-zk-topic-id"))
    return w


SCENARIOS: dict[str, Callable[[Path], World]] = {
    f.__name__: f
    for f in (
        repair,
        repair_crash_and_resume,
        repair_crash_after_delete_and_resume,
        repair_then_rollback,
        lock_lost,
        zookeeper_retries,
        start_never_registers,
        convergence_waits,
        controller_moves,
        predicted_roll,
        pre_gate_halts,
        shutdown_allowance,
        restore_crash_and_resume,
        restore_after_the_write,
        restore_with_election_and_roll_later,
        mint,
    )
}

# -- the comparison ----------------------------------------------------------------------------


def masked(line: str, tmp_path: Path, digest: str) -> str:
    """What a run cannot repeat, masked: the temporary directory (and so the digest of a plan
    naming files in it), the host and pid, and the backup archive's checksum (a tar archive
    holds its files' times)."""
    line = line.replace(str(tmp_path), "<tmp>").replace(digest, "<digest>")
    line = re.sub(r'"archive_sha256": "[0-9a-f]{64}"', '"archive_sha256": "<sha256>"', line)
    if '"event": "run-started"' in line:
        line = re.sub(r'"host": "[^"]*"', '"host": "<host>"', line)
        line = re.sub(r'"pid": \d+', '"pid": 0', line)
    return line


def journal_lines(w: World, tmp_path: Path) -> list[str]:
    text = (w.journals / RUN / "journal.jsonl").read_text(encoding="utf-8")
    digest = json.loads((w.journals / RUN / "plan.json").read_text(encoding="utf-8"))["digest"]
    return [masked(line, tmp_path, digest) for line in text.splitlines()]


def is_new(record: dict[str, Any]) -> bool:
    """A record of a kind the earlier executor did not write."""
    event = record["event"]
    step = str(record.get("step", ""))
    return event == "step-skipped" or (
        event in ("step-started", "step-finished", "step-failed") and step.startswith("rollback")
    )


def earlier_kinds(lines: list[str]) -> list[str]:
    """The lines of the record kinds the earlier executor wrote, renumbered."""
    kept: list[str] = []
    for line in lines:
        record = json.loads(line)
        # The journal's own encoding: parsing and writing back gives the line unchanged.
        assert json.dumps(record, sort_keys=True, allow_nan=False) == line
        if is_new(record):
            continue
        result = record.get("result")
        if record["event"] == "step-finished" and isinstance(result, dict):
            result.pop("clean_shutdown", None)
        record["seq"] = len(kept) + 1
        kept.append(json.dumps(record, sort_keys=True, allow_nan=False))
    return kept


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_journal_of_a_run_is_byte_identical_to_the_recorded_one(
    name: str, tmp_path: Path
) -> None:
    w = SCENARIOS[name](tmp_path)
    lines = journal_lines(w, tmp_path)
    record_into = os.environ.get("RECORD_JOURNALS")
    if record_into:
        Path(record_into).mkdir(parents=True, exist_ok=True)
        (Path(record_into) / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        return
    recorded = (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    assert earlier_kinds(lines) == recorded


def test_every_scenario_has_its_recorded_journal() -> None:
    assert sorted(p.stem for p in DATA.glob("*.jsonl")) == sorted(SCENARIOS)
