"""Hand-written journal records, shaped as the executor writes them (remediate/execute)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from remediate.execute.journal import iso_time
from remediate.playbook import Action

T0 = 1795343640.0  # 2026-11-22T10:34:00Z
RUN = "20261122T103400Z-abc123"
DIGEST = "81" * 32
ARCHIVE = f"/var/backups/remediate/{RUN}/step1-broker3/step1-broker3.tar.gz"
FILES = (
    "/data/k/payments-0/partition.metadata",
    "/data/k/payments-0/leader-epoch-checkpoint",
)

Entry = tuple[float, str, dict[str, Any]]


def records(*entries: Entry, run_id: str = RUN) -> list[dict[str, Any]]:
    """(seconds after T0, event, fields) -> records with seq, time, ts and run_id set."""
    return [
        {
            **fields,
            "seq": seq,
            "time": iso_time(T0 + at),
            "ts": T0 + at,
            "run_id": run_id,
            "event": event,
        }
        for seq, (at, event, fields) in enumerate(entries, start=1)
    ]


def step(at: float, event: str, key: str, **fields: Any) -> Entry:
    extra: dict[str, Any] = {"resumed": False} if event == "step-started" else {}
    return (at, event, {"step": key, **extra, **fields})


def action(start: float, end: float, key: str, **result: Any) -> list[Entry]:
    """A started and a finished record for one action."""
    return [step(start, "step-started", key), step(end, "step-finished", key, result=result)]


def sample(at: float, under: int = 0, *, offline: int = 0, below: int = 0) -> Entry:
    return (
        at,
        "sample",
        {
            "under_replicated": under,
            "offline": offline,
            "below_min_isr": below,
            "controller": 1,
            "brokers": [1, 2, 3],
        },
    )


def run_start(digest: str = DIGEST, by: str = "alice@ops-1 (fix --yes)") -> list[Entry]:
    return [
        (0.0, "run-started", {"digest": digest, "host": "ops-1", "pid": 4242}),
        (0.01, "approved", {"digest": digest, "approved_by": by}),
    ]


BACKUP = {
    "archive": ARCHIVE,
    "manifest": ARCHIVE.removesuffix(".tar.gz") + ".sha256",
    "archive_sha256": "ac" * 32,
    "entries": [
        {"path": FILES[0], "sha256": "0a" * 32, "size": 43},
        {"path": FILES[1], "sha256": "0b" * 32, "size": 28},
    ],
    "missing": [],
}

# One broker repaired by restart, with samples while it waited: the common case.
RESTART: list[Entry] = [
    *run_start(),
    sample(0.02),
    step(0.03, "step-started", "0:broker-3:gate restart-safety"),
    (0.04, "gate", {"step": "broker-3:pre-gate", "blocker": None}),
    step(0.05, "step-finished", "0:broker-3:gate restart-safety", result={"blocker": None}),
    *action(0.05, 1.0, "0:broker-3:stop", stopped=3),
    *action(1.0, 1.5, "0:broker-3:backup", backup=BACKUP),
    *action(1.5, 2.0, "0:broker-3:delete", deleted=list(FILES)),
    *action(2.0, 3.0, "0:broker-3:start", started=3),
    *action(3.0, 4.0, "0:broker-3:wait registered", registered=3),
    step(4.0, "step-started", "0:broker-3:wait in-sync"),
    sample(4.1, 3),
    sample(5.1, 2),
    sample(6.1, 0),
    step(7.0, "step-finished", "0:broker-3:wait in-sync", result={"in_sync_after_s": 3.0}),
    *action(7.0, 7.5, "0:broker-3:verify topic-ids", verified=3, without_file_yet=[]),
    sample(7.6),
    (7.7, "run-completed", {}),
]

# The wait timed out (the run halted), then `resume` finished it.
HALTED_THEN_RESUMED: list[Entry] = [
    *run_start(),
    sample(0.02),
    step(0.03, "step-started", "0:broker-2:gate restart-safety"),
    (0.04, "gate", {"step": "broker-2:pre-gate", "blocker": None}),
    step(0.05, "step-finished", "0:broker-2:gate restart-safety", result={"blocker": None}),
    *action(0.05, 1.0, "0:broker-2:stop", stopped=2),
    *action(1.0, 2.0, "0:broker-2:start", started=2),
    *action(2.0, 2.5, "0:broker-2:wait registered", registered=2),
    step(2.5, "step-started", "0:broker-2:wait in-sync"),
    sample(2.6, 3),
    step(10.0, "step-failed", "0:broker-2:wait in-sync", error="timed out | after 7s"),
    (10.01, "run-halted", {"error": "timed out | after 7s"}),
    (20.0, "run-resumed", {"by": "bob@ops-2"}),
    sample(20.01),
    step(20.02, "step-started", "0:broker-2:wait in-sync"),
    step(21.0, "step-finished", "0:broker-2:wait in-sync", result={"in_sync_after_s": 1.0}),
    (21.1, "run-completed", {}),
]

# The gate refused to stop broker 1: nothing was stopped.
BLOCKED: list[Entry] = [
    *run_start(),
    sample(0.02, 1, below=1),
    step(0.03, "step-started", "0:broker-1:gate restart-safety"),
    (0.04, "gate", {"step": "broker-1:pre-gate", "blocker": "payments-0 would drop to isr 1"}),
    step(0.05, "step-failed", "0:broker-1:gate restart-safety", error="pre-gate: isr 1"),
    (0.06, "run-halted", {"error": "pre-gate for broker 1: payments-0 would drop to isr 1"}),
]

# The process died while broker 2 was down (no end record for the delete).
CRASHED_WHILE_DOWN: list[Entry] = [
    *run_start(),
    *action(0.05, 1.0, "0:broker-2:stop", stopped=2),
    step(1.0, "step-started", "0:broker-2:delete"),
    (1.2, "note", {"step": "0:broker-2:delete", "decision": "deleting 2 files"}),
]

# A restore (no restart), then a restart of the controller, which moved first.
RESTORE_AND_ORDER: list[Entry] = [
    *run_start(),
    sample(0.02),
    step(0.03, "step-started", "0:topic-orders:gate agreement"),
    (0.04, "gate", {"step": "topic-orders:agreement", "blocker": None}),
    step(0.05, "step-finished", "0:topic-orders:gate agreement", result={"blocker": None}),
    *action(0.05, 0.2, "0:topic-orders:zk-write topic-id", znode_version=2, topic_id="AAAA"),
    *action(0.2, 1.2, "0:topic-orders:zk-write controller-election", controller=2),
    (
        1.3,
        "gate",
        {
            "step": "1:broker-1:order",
            "blocker": None,
            "decision": "broker 1 is now the active controller: it goes last",
        },
    ),
    sample(1.4),
    (1.5, "run-completed", {}),
]

PLAN: dict[str, Any] = {
    "digest": DIGEST,
    "cluster": "prod-eu-1",
    "playbook": "topicid-mismatch",
    "playbook_version": 1,
    "created_at": "2026-11-22T10:30:00+00:00",
    "controller": 1,
    "fingerprint": {"brokers": [1, 2, 3], "files": {}, "topics": {"payments": 0}},
    "steps": [
        {
            "kind": "restart",
            "broker": 3,
            "reason": "1 replica(s) hold an old topic id and are out of the ISR (payments-0)",
            "partitions": ["payments-0"],
            "files": list(FILES),
            "actions": [
                Action.GATE_RESTART_SAFETY,
                Action.STOP,
                Action.BACKUP,
                Action.DELETE,
                Action.START,
            ],
            "impact": ["payments-0: isr 2 -> 2 (min 2)"],
            "is_controller": False,
        }
    ],
    "skipped": [{"broker": 1, "reason": "nothing to fix: 3 replica(s) agree with ZooKeeper"}],
    "refusals": [],
    "notes": ["a | note"],
}


def write_run(root: Path, entries: list[Entry], plan: dict[str, Any] = PLAN) -> Path:
    """A run directory as Journal.create leaves it, from hand-written records."""
    directory = root / RUN
    directory.mkdir(parents=True)
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records(*entries))
    (directory / "journal.jsonl").write_text(lines)
    (directory / "plan.json").write_text(json.dumps(plan))
    return directory
