"""A run's journal records and plan -> the report model: what was done, decided and kept. Pure.

The journal is the only source: the report says what was recorded, nothing is re-read from
the cluster. Records of kinds this code does not know are left out, so an older report reader
still reads a newer journal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from remediate.execute.journal import JournalEvent, replay
from remediate.execute.steps import StepKey
from remediate.report.availability import PartitionAvailability, availability

# Run-level events shown in the report's event list (steps, gates and samples have their own).
RUN_EVENTS = frozenset(
    {
        JournalEvent.RUN_STARTED,
        JournalEvent.APPROVED,
        JournalEvent.RUN_HALTED,
        JournalEvent.RUN_REFUSED,
        JournalEvent.RUN_RESUMED,
        JournalEvent.RUN_COMPLETED,
        JournalEvent.ROLLBACK_STARTED,
        JournalEvent.ROLLBACK_RESTORED,
        JournalEvent.ROLLBACK_FINISHED,
        JournalEvent.CHECKED,
    }
)

FINISHED = "finished"
FAILED = "failed"
IN_FLIGHT = "in flight"


@dataclass(frozen=True)
class Approval:
    by: str
    time: str
    digest: str | None


@dataclass(frozen=True)
class PlannedStep:
    """One step of the plan as it was approved."""

    number: int  # 1-based, as people count; the journal's step keys count from 0
    kind: str  # restart | restore
    target: str  # "broker 3" or "topic orders"
    reason: str
    partitions: tuple[str, ...]
    files: tuple[str, ...]
    actions: tuple[str, ...]
    impact: tuple[str, ...]


@dataclass(frozen=True)
class Attempt:
    """One attempt at one action: a step-started record and what closed it, if anything."""

    key: str  # the executor's step key, e.g. "0:broker-3:stop"
    step: int  # the plan step's index, from the key (-1 when the key has none)
    target: str  # "broker-3", "topic-orders"
    name: str  # "stop", "wait in-sync", ...
    started_ts: float
    started: str
    ended_ts: float | None
    ended: str | None
    outcome: str  # finished | failed | in flight
    resumed: bool
    error: str | None
    result: Mapping[str, Any]

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_ts is None else max(0.0, self.ended_ts - self.started_ts)

    @property
    def rollback(self) -> bool:
        """An action of a rollback of the run."""
        try:
            return StepKey.parse(self.key).rollback
        except ValueError:
            return False


@dataclass(frozen=True)
class GateDecision:
    time: str
    ts: float
    step: str
    blocker: str | None
    decision: str | None

    @property
    def passed(self) -> bool:
        return not self.blocker

    @property
    def reason(self) -> str:
        """What the gate saw, in words: its blocker, else its decision, else that it passed."""
        return self.blocker or self.decision or "no blocker: every check passed"


@dataclass(frozen=True)
class Note:
    time: str
    step: str
    text: str


@dataclass(frozen=True)
class BackedUpFile:
    path: str
    sha256: str
    size: int | None


@dataclass(frozen=True)
class BackupRecord:
    step: str
    target: str
    archive: str
    archive_sha256: str
    manifest: str | None
    files: tuple[BackedUpFile, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True)
class HealthSample:
    ts: float
    time: str
    under_replicated: int
    offline: int
    below_min_isr: int
    controller: int | None
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class RunEvent:
    ts: float
    time: str
    event: str
    detail: str


@dataclass(frozen=True)
class Check:
    """The scan after the run (`fix` records it)."""

    time: str
    status: str
    summary: str
    counts: Mapping[str, int]


@dataclass(frozen=True)
class RunReport:
    run_id: str
    cluster: str
    status: str
    host: str | None
    started: str
    started_ts: float
    ended: str
    ended_ts: float
    digest: str | None  # the plan's, from plan.json
    journal_digest: str | None  # the one the run was started with
    playbook: str
    playbook_version: int | None
    plan_created: str | None
    controller: int | None  # when the plan was made
    approvals: tuple[Approval, ...]
    steps: tuple[PlannedStep, ...]
    skipped: tuple[tuple[int, str], ...]
    refusals: tuple[str, ...]
    plan_notes: tuple[str, ...]
    brokers: tuple[int, ...]
    actions: tuple[Attempt, ...]
    gates: tuple[GateDecision, ...]
    notes: tuple[Note, ...]
    backups: tuple[BackupRecord, ...]
    deleted: tuple[str, ...]
    samples: tuple[HealthSample, ...]
    events: tuple[RunEvent, ...]
    check: Check | None
    last_error: str | None
    # Per partition, the unavailable phases predicted and observed (none in older runs).
    availability: tuple[PartitionAvailability, ...] = ()
    # The plan's estimate of the run's duration (plan/estimate.py).
    estimate_s: float | None = None

    @property
    def duration_s(self) -> float:
        return max(0.0, self.ended_ts - self.started_ts)

    @property
    def digest_matches(self) -> bool:
        return self.digest is not None and self.digest == self.journal_digest

    @property
    def verified(self) -> tuple[Attempt, ...]:
        """The finished verify actions: the run's own after-check, target by target."""
        return tuple(
            a for a in self.actions if a.name.startswith("verify") and a.outcome == FINISHED
        )


def build_report(records: Sequence[Mapping[str, Any]], plan: Mapping[str, Any]) -> RunReport:
    """The report of one run from its journal records (in order) and its plan.json."""
    progress = replay(records)  # raises JournalError on an empty journal
    first, last = records[0], records[-1]
    started = next((r for r in records if r.get("event") == JournalEvent.RUN_STARTED), first)
    return RunReport(
        run_id=progress.run_id,
        cluster=str(plan.get("cluster", "")),
        status=progress.status,
        host=_str(started.get("host")),
        started=str(first.get("time", "")),
        started_ts=_ts(first),
        ended=str(last.get("time", "")),
        ended_ts=_ts(last),
        digest=_str(plan.get("digest")),
        journal_digest=_str(started.get("digest")),
        playbook=str(plan.get("playbook", "")),
        playbook_version=_int(plan.get("playbook_version")),
        plan_created=_str(plan.get("created_at")),
        controller=_int(plan.get("controller")),
        approvals=tuple(
            Approval(str(r.get("approved_by", "")), str(r.get("time", "")), _str(r.get("digest")))
            for r in records
            if r.get("event") == JournalEvent.APPROVED
        ),
        steps=planned_steps(plan),
        skipped=tuple(
            (int(s["broker"]), str(s.get("reason", "")))
            for s in _list(plan.get("skipped"))
            if isinstance(s, Mapping) and _int(s.get("broker")) is not None
        ),
        refusals=tuple(str(r) for r in _list(plan.get("refusals"))),
        plan_notes=tuple(str(n) for n in _list(plan.get("notes"))),
        brokers=_brokers(records, plan),
        actions=actions(records),
        gates=tuple(
            GateDecision(
                time=str(r.get("time", "")),
                ts=_ts(r),
                step=str(r.get("step", "")),
                blocker=_str(r.get("blocker")) or None,
                decision=_str(r.get("decision")),
            )
            for r in records
            if r.get("event") == JournalEvent.GATE
        ),
        notes=tuple(
            Note(str(r.get("time", "")), str(r.get("step", "")), _note_text(r))
            for r in records
            if r.get("event")
            in (
                JournalEvent.NOTE,
                JournalEvent.RETRY,
                JournalEvent.ZOOKEEPER,
                JournalEvent.STEP_SKIPPED,
            )
        ),
        backups=backups(records),
        deleted=tuple(
            str(path)
            for r in records
            if r.get("event") == JournalEvent.STEP_FINISHED and isinstance(r.get("result"), Mapping)
            for path in _list(r["result"].get("deleted")) + _list(r["result"].get("already_gone"))
        ),
        samples=samples(records),
        events=tuple(
            RunEvent(_ts(r), str(r.get("time", "")), str(r["event"]), _event_detail(r))
            for r in records
            if r.get("event") in RUN_EVENTS
        ),
        check=_check(records),
        last_error=progress.last_error,
        availability=availability(records, plan),
        estimate_s=_float(plan.get("estimate_s")),
    )


def planned_steps(plan: Mapping[str, Any]) -> tuple[PlannedStep, ...]:
    steps = []
    for number, step in enumerate(_list(plan.get("steps")), start=1):
        if not isinstance(step, Mapping):
            continue
        kind = str(step.get("kind", "restart"))
        target = (
            f"topic {step.get('topic')}" if kind == "restore" else f"broker {step.get('broker')}"
        )
        steps.append(
            PlannedStep(
                number=number,
                kind=kind,
                target=target,
                reason=str(step.get("reason", "")),
                partitions=tuple(str(p) for p in _list(step.get("partitions"))),
                files=tuple(str(f) for f in _list(step.get("files"))),
                actions=tuple(str(a) for a in _list(step.get("actions"))),
                impact=tuple(str(i) for i in _list(step.get("impact"))),
            )
        )
    return tuple(steps)


def split_key(key: str) -> tuple[int, str, str]:
    """ "3:broker-2:stop" -> (3, "broker-2", "stop"); a key without an index gets -1.

    Rollback keys ("rollback0:broker-3:restore") and gate keys ("broker-3:pre-gate") have
    other shapes; they keep their target and name.
    """
    try:
        parsed = StepKey.parse(key)
    except ValueError:
        return -1, "", key
    index = -1 if parsed.index is None or parsed.rollback else parsed.index
    return index, parsed.target, parsed.action


def actions(records: Sequence[Mapping[str, Any]]) -> tuple[Attempt, ...]:
    """Every attempt of every action, in the order they were started.

    A step-started opens an attempt; the next step-finished or step-failed of the same key
    closes it. An attempt never closed was in flight when the journal ends (a crash, or a run
    still going); a resumed run starts it again as a new attempt.
    """
    found: list[Attempt] = []
    open_at: dict[str, int] = {}
    for record in records:
        event = record.get("event")
        key = record.get("step")
        if not isinstance(key, str):
            continue
        if event == JournalEvent.STEP_STARTED:
            index, target, name = split_key(key)
            if key in open_at:  # started again without an end: the earlier attempt died
                found[open_at[key]] = _close(found[open_at[key]], None, IN_FLIGHT, None, None)
            open_at[key] = len(found)
            found.append(
                Attempt(
                    key=key,
                    step=index,
                    target=target,
                    name=name,
                    started_ts=_ts(record),
                    started=str(record.get("time", "")),
                    ended_ts=None,
                    ended=None,
                    outcome=IN_FLIGHT,
                    resumed=bool(record.get("resumed", False)),
                    error=None,
                    result=MappingProxyType({}),
                )
            )
        elif event in (JournalEvent.STEP_FINISHED, JournalEvent.STEP_FAILED) and key in open_at:
            position = open_at.pop(key)
            result = record.get("result")
            found[position] = _close(
                found[position],
                record,
                FINISHED if event == JournalEvent.STEP_FINISHED else FAILED,
                _str(record.get("error")),
                result if isinstance(result, Mapping) else None,
            )
    return tuple(found)


def _close(
    action: Attempt,
    record: Mapping[str, Any] | None,
    outcome: str,
    error: str | None,
    result: Mapping[str, Any] | None,
) -> Attempt:
    return Attempt(
        key=action.key,
        step=action.step,
        target=action.target,
        name=action.name,
        started_ts=action.started_ts,
        started=action.started,
        ended_ts=None if record is None else _ts(record),
        ended=None if record is None else str(record.get("time", "")),
        outcome=outcome,
        resumed=action.resumed,
        error=error,
        result=MappingProxyType(dict(result or {})),
    )


def backups(records: Sequence[Mapping[str, Any]]) -> tuple[BackupRecord, ...]:
    """The verified backups, from the backup actions' results (archive, sha256, manifest)."""
    found = []
    for record in records:
        result = record.get("result")
        if record.get("event") != JournalEvent.STEP_FINISHED or not isinstance(result, Mapping):
            continue
        backup = result.get("backup")
        if not isinstance(backup, Mapping):
            continue
        key = str(record.get("step", ""))
        files = tuple(
            BackedUpFile(str(e.get("path", "")), str(e.get("sha256", "")), _int(e.get("size")))
            for e in _list(backup.get("entries"))
            if isinstance(e, Mapping)
        )
        found.append(
            BackupRecord(
                step=key,
                target=split_key(key)[1],
                archive=str(backup.get("archive", "")),
                archive_sha256=str(backup.get("archive_sha256", "")),
                manifest=_str(backup.get("manifest")),
                files=files,
                missing=tuple(str(m) for m in _list(backup.get("missing"))),
            )
        )
    return tuple(found)


def samples(records: Sequence[Mapping[str, Any]]) -> tuple[HealthSample, ...]:
    return tuple(
        HealthSample(
            ts=_ts(r),
            time=str(r.get("time", "")),
            under_replicated=_int(r.get("under_replicated")) or 0,
            offline=_int(r.get("offline")) or 0,
            below_min_isr=_int(r.get("below_min_isr")) or 0,
            controller=_int(r.get("controller")),
            brokers=tuple(b for b in (_int(x) for x in _list(r.get("brokers"))) if b is not None),
        )
        for r in records
        if r.get("event") == JournalEvent.SAMPLE
    )


def _brokers(records: Sequence[Mapping[str, Any]], plan: Mapping[str, Any]) -> tuple[int, ...]:
    """Every broker the run knew of: the plan's fingerprint, its steps, and the samples."""
    found: set[int] = set()
    fingerprint = plan.get("fingerprint")
    if isinstance(fingerprint, Mapping):
        found |= {b for b in (_int(x) for x in _list(fingerprint.get("brokers"))) if b is not None}
    for step in _list(plan.get("steps")):
        if isinstance(step, Mapping) and _int(step.get("broker")) is not None:
            found.add(int(step["broker"]))
    for sample in samples(records):
        found |= set(sample.brokers)
    return tuple(sorted(found))


def _check(records: Sequence[Mapping[str, Any]]) -> Check | None:
    checks = [r for r in records if r.get("event") == JournalEvent.CHECKED]
    if not checks:
        return None
    last = checks[-1]
    counts = last.get("counts")
    return Check(
        time=str(last.get("time", "")),
        status=str(last.get("status", "")),
        summary=str(last.get("summary", "")),
        counts=MappingProxyType(
            {str(k): int(v) for k, v in counts.items()} if isinstance(counts, Mapping) else {}
        ),
    )


def _note_text(record: Mapping[str, Any]) -> str:
    if record.get("decision"):
        return str(record["decision"])
    if record.get("event") == JournalEvent.ZOOKEEPER:
        return f"the operator's ZooKeeper session: {record.get('session')}"
    if record.get("event") == JournalEvent.STEP_SKIPPED:
        return f"not carried out: {record.get('reason')}"
    if record.get("event") == JournalEvent.RETRY:
        return (
            f"retried {record.get('what')} (attempt {record.get('attempt')}): {record.get('error')}"
        )
    shown = {
        k: v for k, v in record.items() if k not in ("seq", "time", "ts", "run_id", "event", "step")
    }
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))


def _event_detail(record: Mapping[str, Any]) -> str:
    event = record.get("event")
    if event == JournalEvent.RUN_STARTED:
        return f"on {record.get('host')} (pid {record.get('pid')})"
    if event == JournalEvent.APPROVED:
        return f"by {record.get('approved_by')}"
    if event == JournalEvent.RUN_RESUMED:
        return f"by {record.get('by')}"
    if event in (JournalEvent.RUN_HALTED, JournalEvent.RUN_REFUSED):
        return str(record.get("error", ""))
    if event == JournalEvent.CHECKED:
        return f"{record.get('summary', record.get('status', ''))}"
    if event == JournalEvent.ROLLBACK_RESTORED:
        return f"{len(_list(record.get('restored')))} file(s) put back ({record.get('step')})"
    if event in (JournalEvent.ROLLBACK_STARTED, JournalEvent.ROLLBACK_FINISHED):
        return f"broker {record.get('broker')}"
    return ""


def _ts(record: Mapping[str, Any]) -> float:
    value = record.get("ts")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    # bool is an int in Python; a JSON true is not a broker id.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []
