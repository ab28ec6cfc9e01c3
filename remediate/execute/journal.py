"""The run journal: what a run did, durably, so `resume` never repeats a destructive step.

One directory per run under a journal root, `<root>/<run_id>/`, holding the approved plan
(`plan.json`, written once) and `journal.jsonl`, one JSON record per line. Every record is
fsync'd before `append` returns, so a record the executor has seen appended survives a crash
of the process or the host. A crash in the middle of a write leaves a torn last line; readers
ignore it and the next append cuts it off. `replay` turns the records back into the run's
progress without any I/O.

A journal may also have a mirror (remediate/execute/journal_mirror.py): the plan and every
record, once fsync'd here, are also kept in ZooKeeper, so that another host can resume the run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from remediate.errors import JournalError, RefusedError

JOURNAL_FILE = "journal.jsonl"
PLAN_FILE = "plan.json"

_NAME = re.compile(r"[A-Za-z0-9._-]+")
# Keys that name a secret; matched case-insensitively anywhere in a key, at any depth.
_SECRET_WORDS = ("password", "passphrase", "secret")
# Keys every record carries; a field may not overwrite them.
_RESERVED = frozenset({"seq", "time", "ts", "run_id", "event"})


class JournalCopy(Protocol):
    """Where a journal's plan and records are also kept (ZooKeeper's copy)."""

    def put_plan(self, plan_text: bytes) -> None: ...

    def put_record(self, seq: int, line: bytes) -> None: ...


class RunStatus(StrEnum):
    """Where a run stands, as its journal replays (and as `status` and the report say)."""

    RUNNING = "running"
    COMPLETED = "completed"
    HALTED = "halted"
    REFUSED = "refused"


class JournalEvent(StrEnum):
    """What a journal record says happened: its `event` field. A member is its string, so a
    record is written exactly as with the plain name; records read back carry plain strings,
    which compare equal to the members (and an unknown one, from newer code, to none)."""

    # The run.
    RUN_STARTED = "run-started"
    APPROVED = "approved"
    RUN_RESUMED = "run-resumed"
    RUN_COMPLETED = "run-completed"
    RUN_HALTED = "run-halted"
    RUN_REFUSED = "run-refused"
    # A stop asked for by a signal (SIGINT, SIGTERM), carried out at an action's boundary.
    STOP_REQUESTED = "stop-requested"
    # One action, under its step key: started, then finished or failed; or skipped, with why.
    STEP_STARTED = "step-started"
    STEP_FINISHED = "step-finished"
    STEP_FAILED = "step-failed"
    STEP_SKIPPED = "step-skipped"
    # A finished action whose effect the run took back (a stopped broker started again when
    # the run was told to stop): on resume it is carried out again.
    STEP_UNDONE = "step-undone"
    # What the run decided and lived through.
    GATE = "gate"
    NOTE = "note"
    RETRY = "retry"
    ZOOKEEPER = "zookeeper"
    SAMPLE = "sample"
    # A rollback of the run, broker by broker.
    ROLLBACK_STARTED = "rollback-started"
    ROLLBACK_RESTORED = "rollback-restored"
    ROLLBACK_FINISHED = "rollback-finished"
    # The scan after the run (`fix`).
    CHECKED = "checked"


# The records of one action's attempt.
STEP_EVENTS = frozenset(
    {JournalEvent.STEP_STARTED, JournalEvent.STEP_FINISHED, JournalEvent.STEP_FAILED}
)


def new_run_id(now: float, *, entropy: str | None = None) -> str:
    """A run id such as `20261122T031500Z-3fa2c1`: UTC start time, then 6 random hex chars.

    The time comes first so that run ids sort by start time; the suffix keeps two runs started
    in the same second apart. Pure when `entropy` is given.
    """
    stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{stamp}-{secrets.token_hex(3) if entropy is None else entropy}"
    validate_run_id(run_id)
    return run_id


def validate_run_id(run_id: str) -> str:
    """`run_id` if it is a safe directory name, else JournalError (it becomes a path)."""
    if not _NAME.fullmatch(run_id) or run_id in (".", ".."):
        raise JournalError(f"invalid run id {run_id!r}: expected [A-Za-z0-9._-]+")
    return run_id


def secret_keys(value: object, prefix: str = "") -> list[str]:
    """Dotted paths of every mapping key in `value` that names a secret."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{prefix}{key}"
            if any(word in str(key).lower() for word in _SECRET_WORDS):
                found.append(path)
            found.extend(secret_keys(item, path + "."))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found.extend(secret_keys(item, f"{prefix}{index}."))
    return found


def iso_time(now: float) -> str:
    """`now` as ISO 8601 UTC with milliseconds, e.g. `2026-11-22T03:15:00.123Z`."""
    text = datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def journal_record(
    event: JournalEvent, *, seq: int, now: float, run_id: str, fields: Mapping[str, Any]
) -> dict[str, Any]:
    """One record: its fields, and what every record carries."""
    return {
        **fields,
        "seq": seq,
        "time": iso_time(now),
        "ts": now,
        "run_id": run_id,
        "event": event,
    }


def journal_line(record: Mapping[str, Any]) -> str:
    """A record as its line of journal.jsonl: JSON, keys sorted, ending in a newline."""
    return json.dumps(record, sort_keys=True, allow_nan=False) + "\n"


class Journal:
    """One run's journal directory. Appends are durable; reads tolerate a torn last line.

    One writer per run (the cluster lock ensures it); the internal lock only serialises
    threads of that one writer.
    """

    def __init__(self, directory: Path, run_id: str) -> None:
        self.run_id = run_id
        self.directory = directory
        self.path = directory / JOURNAL_FILE
        self._mutex = threading.Lock()
        # Where the next record goes and how long the file is when it ends with a whole
        # record; None until the first append reads the file.
        self._next_seq: int | None = None
        self._length: int | None = None
        # Where every record also goes once it is on disk; None: this disk only.
        self.mirror: JournalCopy | None = None

    @classmethod
    def create(
        cls,
        root: Path,
        run_id: str,
        plan: Mapping[str, Any],
        *,
        now: float,
        mirror: JournalCopy | None = None,
    ) -> Journal:
        """Start a new run: its directory (mode 0700), `plan.json` and a `run-started` record,
        each also given to `mirror` when there is one.

        Refuses if the run's directory exists already: a run id is never reused.
        """
        validate_run_id(run_id)
        leaked = secret_keys(plan)
        if leaked:
            raise JournalError(f"plan for run {run_id} holds secrets: {', '.join(leaked)}")
        try:
            plan_text = json.dumps(plan, sort_keys=True, indent=2, allow_nan=False) + "\n"
        except (TypeError, ValueError) as error:
            raise JournalError(f"plan for run {run_id} is not JSON: {error}") from error
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = root / run_id
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            raise JournalError(f"run {run_id} exists already in {root}") from None
        except OSError as error:
            raise JournalError(f"cannot create run directory {directory}: {error}") from error
        # mkdir's mode is filtered through the umask; backups and plans are nobody else's.
        os.chmod(directory, 0o700)
        _write_atomically(directory / PLAN_FILE, plan_text.encode("utf-8"))
        journal = cls(directory, run_id)
        if mirror is not None:
            mirror.put_plan(plan_text.encode("utf-8"))
            journal.mirror = mirror
        digest = plan.get("digest")
        journal.append(
            JournalEvent.RUN_STARTED,
            now=now,
            digest=digest if isinstance(digest, str) else None,
            host=socket.gethostname(),
            pid=os.getpid(),
        )
        _fsync_directory(directory)
        return journal

    @classmethod
    def open(cls, root: Path, run_id: str) -> Journal:
        """An existing run's journal; JournalError if there is none."""
        validate_run_id(run_id)
        directory = root / run_id
        if not (directory / JOURNAL_FILE).is_file():
            raise JournalError(f"no journal for run {run_id} in {root}")
        return cls(directory, run_id)

    @classmethod
    def restore(
        cls, root: Path, run_id: str, plan_text: bytes | None, lines: Sequence[bytes]
    ) -> Journal:
        """The local copy of a run made from another copy (ZooKeeper's): `plan.json` unless
        there is one already, and `journal.jsonl` replaced whole by `lines`."""
        validate_run_id(run_id)
        directory = root / run_id
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(directory, 0o700)
        except OSError as error:
            raise JournalError(f"cannot create run directory {directory}: {error}") from error
        if not (directory / PLAN_FILE).is_file():
            if plan_text is None:
                raise JournalError(f"run {run_id}: no plan.json here, and no copy of it")
            _write_atomically(directory / PLAN_FILE, plan_text)
        data = b"".join(lines)
        records, length = _parse(directory / JOURNAL_FILE, data)
        if length != len(data) or not records:
            raise JournalError(f"run {run_id}: the copy to restore is not a whole journal")
        _write_atomically(directory / JOURNAL_FILE, data)
        return cls(directory, run_id)

    def plan_text(self) -> bytes:
        """plan.json as written when the run started."""
        path = self.directory / PLAN_FILE
        try:
            return path.read_bytes()
        except OSError as error:
            raise JournalError(f"cannot read {path}: {error}") from error

    def lines(self) -> list[bytes]:
        """Every whole record's line, newline included, as journal.jsonl holds it."""
        data = self._read()
        length = _parse(self.path, data)[1]
        return [line + b"\n" for line in data[:length].split(b"\n")[:-1]]

    def plan(self) -> dict[str, Any]:
        """The plan this run was started with."""
        path = self.directory / PLAN_FILE
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise JournalError(f"cannot read {path}: {error}") from error
        except ValueError as error:
            raise JournalError(f"{path}: not JSON: {error}") from error
        if not isinstance(plan, dict):
            raise JournalError(f"{path}: expected a JSON object")
        return plan

    def append(self, event: JournalEvent, *, now: float, **fields: Any) -> dict[str, Any]:
        """Write one record and fsync it; return the record as written."""
        clash = sorted(_RESERVED & fields.keys())
        if clash:
            raise JournalError(f"journal {self.path}: fields {clash} are set by the journal")
        leaked = secret_keys(fields)
        if leaked:
            raise JournalError(
                f"journal {self.path}: refusing to record secrets ({', '.join(leaked)})"
            )
        with self._mutex:
            self._sync_tail()
            assert self._next_seq is not None and self._length is not None
            record = journal_record(
                event, seq=self._next_seq, now=now, run_id=self.run_id, fields=fields
            )
            try:
                line = journal_line(record)
            except (TypeError, ValueError) as error:
                raise JournalError(
                    f"journal {self.path}: {event} record is not JSON: {error}"
                ) from error
            data = line.encode("utf-8")
            try:
                with open(self.path, "ab") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:
                # A partial write may be on disk; the next append re-reads and cuts it off.
                self._length = None
                raise JournalError(f"cannot append to {self.path}: {error}") from error
            self._next_seq += 1
            self._length += len(data)
            if self.mirror is not None:
                self.mirror.put_record(record["seq"], data)
            return record

    def records(self) -> list[dict[str, Any]]:
        """Every whole record, in order (a torn last line is left out)."""
        return _parse(self.path, self._read())[0]

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except OSError as error:
            raise JournalError(f"cannot read {self.path}: {error}") from error

    def _sync_tail(self) -> None:
        """Know the next seq, and cut off a torn tail so the next record starts a line."""
        if self._length is not None:
            try:
                if self.path.stat().st_size == self._length:
                    return
            except OSError as error:
                raise JournalError(f"cannot stat {self.path}: {error}") from error
        data = self._read() if self.path.exists() else b""
        records, length = _parse(self.path, data)
        if length < len(data):
            try:
                with open(self.path, "r+b") as handle:
                    handle.truncate(length)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:
                raise JournalError(f"cannot repair torn tail of {self.path}: {error}") from error
        self._next_seq = len(records) + 1
        self._length = length


def _parse(path: Path, data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The records in `data` and the length of the part that holds whole records.

    A record is whole when its line ends in a newline and parses: append writes the newline
    last, so anything else on the last line is a write a crash cut short, and append never
    returned for it. The same damage on an earlier line is corruption, not a crash.
    """
    lines = data.split(b"\n")
    # After the final newline split() leaves b"" when the file ends cleanly, else a torn tail.
    complete, tail = lines[:-1], lines[-1]
    records: list[dict[str, Any]] = []
    length = 0
    for number, raw in enumerate(complete, start=1):
        record = _decode(raw)
        if record is None:
            if number == len(complete) and not tail:
                break  # the last line, torn in a way that kept its newline (zeroed blocks)
            raise JournalError(f"{path}: line {number}: not a journal record")
        if record.get("seq") != number:
            # Two writers, or lines lost or duplicated: no crash does this.
            raise JournalError(f"{path}: line {number}: seq is {record.get('seq')!r}")
        records.append(record)
        length += len(raw) + 1
    return records, length


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _write_atomically(path: Path, data: bytes) -> None:
    """Write `path` so that it is either absent or whole, even across a crash."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        raise JournalError(f"cannot write {path}: {error}") from error
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the directory's entries (new files, renames) durable too."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_runs(root: Path) -> list[str]:
    """The run ids under `root` that have a journal, oldest first (run ids sort by time)."""
    if not root.is_dir():
        return []
    return sorted(
        entry.name
        for entry in root.iterdir()
        if _NAME.fullmatch(entry.name)
        and entry.name not in (".", "..")
        and (entry / JOURNAL_FILE).is_file()
    )


def read_records(root: Path, run_id: str) -> list[dict[str, Any]]:
    """Every whole record of run `run_id`'s journal under `root`, read only (a torn last line
    is left out and left alone); JournalError if it cannot be read."""
    path = root / run_id / JOURNAL_FILE
    try:
        data = path.read_bytes()
    except OSError as error:
        raise JournalError(f"cannot read {path}: {error}") from error
    return _parse(path, data)[0]


def latest_run(root: Path) -> str | None:
    """The most recently started run under `root`, if any."""
    runs = list_runs(root)
    return runs[-1] if runs else None


def run_or_latest(root: Path, run_id: str | None) -> str:
    """The run a command is about: `run_id` if given, else the latest under `root`.

    RefusedError if none is given and there is none.
    """
    chosen = run_id or latest_run(root)
    if chosen is None:
        raise RefusedError(f"no run in {root}")
    return chosen


@dataclass(frozen=True)
class StepProgress:
    """What the journal says about one step (its key is chosen by the executor)."""

    key: str
    started: bool
    finished: bool
    failed: bool
    result: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    attempts: int = 0  # step-started records: more than one means it was retried
    undone: int = 0  # step-undone records: its effect taken back, so many times


@dataclass(frozen=True)
class RunProgress:
    """A run's progress as replayed from its journal."""

    run_id: str
    status: RunStatus
    steps: Mapping[str, StepProgress]
    in_flight: str | None
    last_error: str | None


def _step_key(record: Mapping[str, Any]) -> str:
    key = record.get("step")
    if not isinstance(key, str):
        raise JournalError(f"record {record.get('seq')}: {record.get('event')} without a step key")
    return key


def _undo(steps: dict[str, StepProgress], record: Mapping[str, Any]) -> None:
    """A `step-undone` record: the step counts as never started again."""
    key = _step_key(record)
    previous = steps.get(key, StepProgress(key, False, False, False))
    steps[key] = StepProgress(
        key, False, False, False, attempts=previous.attempts, undone=previous.undone + 1
    )


def replay(records: Sequence[Mapping[str, Any]]) -> RunProgress:
    """The run's progress after `records`. Pure.

    A step is in flight when it was started and neither finished nor failed: the process
    died (or is still) inside it, so resume must find out what it did before going on.
    A step started again after it failed counts by its latest attempt; a step undone counts
    as never started (its `undone` says how often). `run-resumed` makes a
    halted or refused run running again; a completed run stays completed. `last_error` is
    the latest error recorded, even if the run was resumed since. Unknown events are skipped
    so that older code can read journals written by newer code.
    """
    if not records:
        raise JournalError("cannot replay an empty journal")
    run_id = str(records[0].get("run_id", ""))
    status = RunStatus.RUNNING
    steps: dict[str, StepProgress] = {}
    in_flight: str | None = None
    last_error: str | None = None
    for record in records:
        event = record.get("event")
        if event == JournalEvent.STEP_UNDONE:
            _undo(steps, record)
        elif event in STEP_EVENTS:
            key = _step_key(record)
            previous = steps.get(key, StepProgress(key, False, False, False))
            if event == JournalEvent.STEP_STARTED:
                steps[key] = StepProgress(
                    key,
                    True,
                    False,
                    False,
                    previous.result,
                    previous.attempts + 1,
                    previous.undone,
                )
                in_flight = key
            elif event == JournalEvent.STEP_FINISHED:
                result = record.get("result")
                frozen = MappingProxyType(dict(result) if isinstance(result, Mapping) else {})
                steps[key] = StepProgress(
                    key, True, True, False, frozen, previous.attempts, previous.undone
                )
            else:
                steps[key] = StepProgress(
                    key, True, False, True, previous.result, previous.attempts, previous.undone
                )
                last_error = str(record.get("error", ""))
            if event != JournalEvent.STEP_STARTED and in_flight == key:
                in_flight = None
        elif event == JournalEvent.RUN_COMPLETED:
            status = RunStatus.COMPLETED
        elif event in (JournalEvent.RUN_HALTED, JournalEvent.RUN_REFUSED):
            if status != RunStatus.COMPLETED:
                halted = event == JournalEvent.RUN_HALTED
                status = RunStatus.HALTED if halted else RunStatus.REFUSED
            last_error = str(record.get("error", ""))
        elif event == JournalEvent.RUN_RESUMED and status in (
            RunStatus.HALTED,
            RunStatus.REFUSED,
        ):
            status = RunStatus.RUNNING
    return RunProgress(run_id, status, MappingProxyType(steps), in_flight, last_error)
