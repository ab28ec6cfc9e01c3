"""The run journal: durable appends, tolerant reads, secrets kept out, and pure replay."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediate.errors import ExecuteError, JournalError
from remediate.execute.journal import (
    Journal,
    JournalEvent,
    RunProgress,
    RunStatus,
    StepProgress,
    latest_run,
    list_runs,
    new_run_id,
    replay,
)

NOW = 1795317300.25  # 2026-11-22T03:15:00.250Z
PLAN = {"digest": "ab" * 32, "playbook": "topicid-mismatch", "steps": [{"broker": 2}]}


def started(tmp_path: Path, run_id: str = "20261122T031500Z-000001") -> Journal:
    return Journal.create(tmp_path, run_id, PLAN, now=NOW)


def test_run_id_is_utc_time_then_entropy() -> None:
    assert new_run_id(NOW, entropy="3fa2c1") == "20261122T031500Z-3fa2c1"
    generated = new_run_id(NOW)
    assert generated.startswith("20261122T031500Z-")
    suffix = generated.rsplit("-", 1)[1]
    assert len(suffix) == 6 and int(suffix, 16) >= 0
    # Later runs sort later, whatever their suffix.
    assert new_run_id(NOW + 1, entropy="000000") > new_run_id(NOW, entropy="ffffff")


@pytest.mark.parametrize("run_id", ["", ".", "..", "a/b", "../x", "run id", "ünï"])
def test_unsafe_run_ids_are_refused(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(JournalError, match="invalid run id"):
        Journal.create(tmp_path, run_id, PLAN, now=NOW)
    with pytest.raises(JournalError, match="invalid run id"):
        Journal.open(tmp_path, run_id)
    assert list(tmp_path.iterdir()) == []


def test_create_writes_plan_and_first_record(tmp_path: Path) -> None:
    journal = started(tmp_path / "journals")
    assert journal.run_id == "20261122T031500Z-000001"
    assert journal.path == tmp_path / "journals" / journal.run_id / "journal.jsonl"
    assert journal.plan() == PLAN
    assert json.loads((journal.directory / "plan.json").read_text()) == PLAN
    [record] = journal.records()
    assert record["event"] == "run-started"
    assert record["seq"] == 1
    assert record["time"] == "2026-11-22T03:15:00.250Z"
    assert record["ts"] == NOW
    assert record["run_id"] == journal.run_id
    assert record["digest"] == PLAN["digest"]
    assert record["pid"] == os.getpid()
    # No temporary file is left behind by the atomic write.
    assert sorted(p.name for p in journal.directory.iterdir()) == ["journal.jsonl", "plan.json"]


def test_run_directory_is_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        journal = started(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(journal.directory.stat().st_mode) == 0o700


def test_a_run_id_is_never_reused(tmp_path: Path) -> None:
    started(tmp_path)
    with pytest.raises(JournalError, match="exists already"):
        started(tmp_path)
    assert issubclass(JournalError, ExecuteError)


def test_open_missing_run_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="no journal for run nope"):
        Journal.open(tmp_path, "nope")


def test_appended_records_are_readable_by_a_fresh_open(tmp_path: Path) -> None:
    journal = started(tmp_path)
    returned = journal.append(
        JournalEvent.STEP_STARTED, now=NOW + 1, step="1:broker-2:stop", broker=2
    )
    assert returned == {
        "seq": 2,
        "time": "2026-11-22T03:15:01.250Z",
        "ts": NOW + 1,
        "run_id": journal.run_id,
        "event": "step-started",
        "step": "1:broker-2:stop",
        "broker": 2,
    }
    reopened = Journal.open(tmp_path, journal.run_id)
    assert reopened.records()[-1] == returned
    # One record per line, keys sorted, so the file diffs and greps well.
    last_line = reopened.path.read_text().splitlines()[-1]
    assert last_line == json.dumps(returned, sort_keys=True)
    # The reopened journal carries on the numbering.
    assert reopened.append(JournalEvent.SAMPLE, now=NOW + 2)["seq"] == 3
    assert [r["seq"] for r in journal.records()] == [1, 2, 3]
    assert journal.append(JournalEvent.SAMPLE, now=NOW + 3)["seq"] == 4


@pytest.mark.parametrize(
    "fields",
    [
        {"password": "x"},
        {"ssh_Password": "x"},
        {"key_passphrase": "x"},
        {"client_secret": "x"},
        {"result": {"auth": {"digest_secret": "x"}}},
        {"hosts": [{"sasl_password": "x"}]},
    ],
)
def test_secrets_are_refused(tmp_path: Path, fields: dict[str, Any]) -> None:
    journal = started(tmp_path)
    before = journal.path.read_bytes()
    with pytest.raises(JournalError, match="refusing to record secrets"):
        journal.append(JournalEvent.STEP_FINISHED, now=NOW, step="1", **fields)
    assert journal.path.read_bytes() == before


def test_a_plan_with_a_secret_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match=r"holds secrets: zookeeper\.password"):
        Journal.create(tmp_path, "r1", {"zookeeper": {"password": "x"}}, now=NOW)
    assert not (tmp_path / "r1").exists()


def test_reserved_and_unserialisable_fields_are_refused(tmp_path: Path) -> None:
    journal = started(tmp_path)
    with pytest.raises(JournalError, match="set by the journal"):
        journal.append(JournalEvent.SAMPLE, now=NOW, seq=99)
    with pytest.raises(JournalError, match="not JSON"):
        journal.append(JournalEvent.SAMPLE, now=NOW, value=object())
    with pytest.raises(JournalError, match="not JSON"):
        journal.append(JournalEvent.SAMPLE, now=NOW, value=float("nan"))
    assert len(journal.records()) == 1
    assert journal.append(JournalEvent.SAMPLE, now=NOW)["seq"] == 2


@pytest.mark.parametrize(
    "torn",
    [
        b'{"event": "step-fin',  # cut off mid-record
        b'{"event": "sample", "run_id": "x", "seq": 3, "time": "t", "ts": 1.0}',  # no newline
        b"\0\0\0\0\0\0\0\0",  # blocks allocated but never written
        b"\0\0\0\0\n",  # the same, ending in a newline
    ],
)
def test_torn_last_line_is_ignored_and_repaired_on_append(tmp_path: Path, torn: bytes) -> None:
    journal = started(tmp_path)
    journal.append(JournalEvent.STEP_STARTED, now=NOW, step="1:broker-2:stop")
    whole = journal.path.read_bytes()
    with open(journal.path, "ab") as handle:
        handle.write(torn)
    reopened = Journal.open(tmp_path, journal.run_id)
    assert [r["seq"] for r in reopened.records()] == [1, 2]
    record = reopened.append(
        JournalEvent.STEP_FAILED, now=NOW, step="1:broker-2:stop", error="boom"
    )
    assert record["seq"] == 3
    assert reopened.path.read_bytes() == whole + json.dumps(record, sort_keys=True).encode() + b"\n"
    assert [r["event"] for r in reopened.records()] == [
        "run-started",
        "step-started",
        "step-failed",
    ]


def test_the_same_journal_object_repairs_a_tail_torn_behind_its_back(tmp_path: Path) -> None:
    journal = started(tmp_path)
    with open(journal.path, "ab") as handle:
        handle.write(b'{"seq": 2, "eve')
    assert journal.append(JournalEvent.SAMPLE, now=NOW)["seq"] == 2
    assert [r["seq"] for r in journal.records()] == [1, 2]


def test_a_corrupt_line_in_the_middle_is_an_error_naming_it(tmp_path: Path) -> None:
    journal = started(tmp_path)
    journal.append(JournalEvent.SAMPLE, now=NOW)
    journal.append(JournalEvent.SAMPLE, now=NOW)
    lines = journal.path.read_bytes().split(b"\n")
    lines[1] = b'{"seq": 2, "ev'
    journal.path.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalError, match=rf"{journal.path}: line 2: not a journal record"):
        Journal.open(tmp_path, journal.run_id).records()
    with pytest.raises(JournalError, match="line 2"):
        Journal.open(tmp_path, journal.run_id).append(JournalEvent.SAMPLE, now=NOW)


def test_out_of_order_records_are_an_error(tmp_path: Path) -> None:
    journal = started(tmp_path)
    journal.append(JournalEvent.SAMPLE, now=NOW)
    lines = journal.path.read_text().splitlines(keepends=True)
    journal.path.write_text(lines[0] + lines[1] + lines[1])
    with pytest.raises(JournalError, match="line 3: seq is 2"):
        journal.records()


def test_plan_round_trip(tmp_path: Path) -> None:
    plan = {
        "digest": "cd" * 32,
        "fingerprint": {"files": {"1:/var/kafka/t-0/partition.metadata": "AAAAAAAAAAAAAAAAAAAAAA"}},
        "steps": [{"broker": 1, "partitions": ["t-0"], "reason": "TOPIC_ID_MISMATCH"}],
        "unicode": "Zürich ✓",
        "number": 1.5,
    }
    Journal.create(tmp_path, "r2", plan, now=NOW)
    assert Journal.open(tmp_path, "r2").plan() == plan


def test_runs_are_listed_in_time_order(tmp_path: Path) -> None:
    assert list_runs(tmp_path / "absent") == []
    assert latest_run(tmp_path) is None
    ids = [new_run_id(NOW + offset, entropy="abcdef") for offset in (3600, 0, 60)]
    for run_id in ids:
        Journal.create(tmp_path, run_id, PLAN, now=NOW)
    (tmp_path / "not-a-run").mkdir()  # no journal in it
    (tmp_path / "stray.txt").write_text("x")
    assert list_runs(tmp_path) == sorted(ids)
    assert latest_run(tmp_path) == ids[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=20),
            st.dictionaries(
                st.text(min_size=1, max_size=12).filter(
                    lambda k: (
                        k not in {"seq", "time", "ts", "run_id", "event", "now"}
                        and not any(w in k.lower() for w in ("password", "passphrase", "secret"))
                    )
                ),
                st.one_of(st.text(max_size=30), st.integers()),
                max_size=5,
            ),
        ),
        max_size=8,
    )
)
def test_records_come_back_in_order(entries: list[tuple[str, dict[str, str | int]]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        journal = Journal.create(Path(root), "r", {}, now=NOW)
        for index, (event, fields) in enumerate(entries):
            # Deliberately arbitrary event names: the journal records any string as given.
            journal.append(event, now=NOW + index, **fields)  # type: ignore[arg-type]
        records = Journal.open(Path(root), "r").records()
    assert [r["seq"] for r in records] == list(range(1, len(entries) + 2))
    for record, (event, fields) in zip(records[1:], entries, strict=True):
        assert record["event"] == event
        assert {k: record[k] for k in fields} == fields


def test_a_record_survives_the_process_being_killed_right_after_append(tmp_path: Path) -> None:
    journal = started(tmp_path)
    child = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from remediate.execute.journal import Journal
        journal = Journal.open(Path({str(tmp_path)!r}), {journal.run_id!r})
        journal.append("step-started", now=1.0, step="3:broker-2:delete")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    completed = subprocess.run([sys.executable, "-c", child], check=False, timeout=60)
    assert completed.returncode == -signal.SIGKILL
    last = journal.records()[-1]
    assert (last["seq"], last["event"], last["step"]) == (2, "step-started", "3:broker-2:delete")
    assert replay(journal.records()).in_flight == "3:broker-2:delete"


def rec(event: str, **fields: Any) -> dict[str, Any]:
    return {"run_id": "r", "event": event, **fields}


def step(
    key: str,
    *,
    started: bool = True,
    finished: bool = False,
    failed: bool = False,
    result: Mapping[str, Any] | None = None,
    attempts: int = 1,
) -> StepProgress:
    return StepProgress(key, started, finished, failed, result or {}, attempts)


MANIFEST = {"archive": "b2.tar", "sha256": "00" * 32}

REPLAY_CASES: list[tuple[str, Sequence[dict[str, Any]], RunProgress]] = [
    (
        "only started",
        [rec("run-started")],
        RunProgress("r", RunStatus.RUNNING, {}, None, None),
    ),
    (
        "completed",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:backup"),
            rec("sample", isr=[1, 2]),
            rec("step-finished", step="1:broker-2:backup", result=MANIFEST),
            rec("gate", step="2:broker-2:start", blocker=None),
            rec("step-started", step="2:broker-2:start"),
            rec("step-finished", step="2:broker-2:start"),
            rec("run-completed"),
        ],
        RunProgress(
            "r",
            RunStatus.COMPLETED,
            {
                "1:broker-2:backup": step("1:broker-2:backup", finished=True, result=MANIFEST),
                "2:broker-2:start": step("2:broker-2:start", finished=True),
            },
            None,
            None,
        ),
    ),
    (
        "halted by a gate",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:stop"),
            rec("step-finished", step="1:broker-2:stop"),
            rec("gate", step="2:broker-3:stop", blocker="t-0 would go below min.insync.replicas"),
            rec("run-halted", error="gate timed out: t-0 would go below min.insync.replicas"),
        ],
        RunProgress(
            "r",
            RunStatus.HALTED,
            {"1:broker-2:stop": step("1:broker-2:stop", finished=True)},
            None,
            "gate timed out: t-0 would go below min.insync.replicas",
        ),
    ),
    (
        "in flight (crashed inside a step)",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:stop"),
            rec("step-finished", step="1:broker-2:stop"),
            rec("step-started", step="2:broker-2:delete"),
        ],
        RunProgress(
            "r",
            RunStatus.RUNNING,
            {
                "1:broker-2:stop": step("1:broker-2:stop", finished=True),
                "2:broker-2:delete": step("2:broker-2:delete"),
            },
            "2:broker-2:delete",
            None,
        ),
    ),
    (
        "failed then retried after resume",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:start"),
            rec("step-failed", step="1:broker-2:start", error="exit 1"),
            rec("run-halted", error="step 1:broker-2:start failed: exit 1"),
            rec("run-resumed"),
            rec("step-started", step="1:broker-2:start"),
            rec("step-finished", step="1:broker-2:start", result={"pid": 7}),
        ],
        RunProgress(
            "r",
            RunStatus.RUNNING,
            {
                "1:broker-2:start": step(
                    "1:broker-2:start", finished=True, result={"pid": 7}, attempts=2
                )
            },
            None,
            "step 1:broker-2:start failed: exit 1",
        ),
    ),
    (
        "retried and in flight again",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:start"),
            rec("step-failed", step="1:broker-2:start", error="exit 1"),
            rec("run-halted", error="exit 1"),
            rec("run-resumed"),
            rec("step-started", step="1:broker-2:start"),
        ],
        RunProgress(
            "r",
            RunStatus.RUNNING,
            {"1:broker-2:start": step("1:broker-2:start", attempts=2)},
            "1:broker-2:start",
            "exit 1",
        ),
    ),
    (
        "resumed then finished",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:backup"),
            rec("step-finished", step="1:broker-2:backup", result=MANIFEST),
            rec("run-halted", error="lock lost"),
            rec("run-resumed"),
            rec("step-started", step="2:broker-2:delete"),
            rec("step-finished", step="2:broker-2:delete"),
            rec("run-completed"),
        ],
        RunProgress(
            "r",
            RunStatus.COMPLETED,
            {
                "1:broker-2:backup": step("1:broker-2:backup", finished=True, result=MANIFEST),
                "2:broker-2:delete": step("2:broker-2:delete", finished=True),
            },
            None,
            "lock lost",
        ),
    ),
    (
        "failed step left as failed",
        [
            rec("run-started"),
            rec("step-started", step="1:broker-2:verify"),
            rec("step-failed", step="1:broker-2:verify", error="id still wrong"),
        ],
        RunProgress(
            "r",
            RunStatus.RUNNING,
            {"1:broker-2:verify": step("1:broker-2:verify", failed=True)},
            None,
            "id still wrong",
        ),
    ),
    (
        "refused",
        [rec("run-started"), rec("run-refused", error="drift: controller epoch 7 -> 8")],
        RunProgress("r", RunStatus.REFUSED, {}, None, "drift: controller epoch 7 -> 8"),
    ),
    (
        "unknown events are skipped",
        [rec("run-started"), rec("from-the-future", step="x")],
        RunProgress("r", RunStatus.RUNNING, {}, None, None),
    ),
]


@pytest.mark.parametrize(
    ("records", "expected"),
    [pytest.param(records, expected, id=name) for name, records, expected in REPLAY_CASES],
)
def test_replay(records: Sequence[dict[str, Any]], expected: RunProgress) -> None:
    progress = replay(records)
    assert progress == expected
    # Steps come back in journal order.
    assert list(progress.steps) == list(expected.steps)


def test_replay_of_a_real_journal(tmp_path: Path) -> None:
    journal = started(tmp_path)
    journal.append(JournalEvent.STEP_STARTED, now=NOW, step="1:broker-2:backup")
    journal.append(JournalEvent.STEP_FINISHED, now=NOW, step="1:broker-2:backup", result=MANIFEST)
    journal.append(JournalEvent.RUN_HALTED, now=NOW, error="ISR did not recover within 60s")
    progress = replay(Journal.open(tmp_path, journal.run_id).records())
    assert progress.run_id == journal.run_id
    assert progress.status == "halted"
    assert progress.steps["1:broker-2:backup"].result == MANIFEST
    assert progress.last_error == "ISR did not recover within 60s"


def test_replay_rejects_malformed_input() -> None:
    with pytest.raises(JournalError, match="empty"):
        replay([])
    with pytest.raises(JournalError, match="without a step key"):
        replay([rec("run-started", seq=1), rec("step-started", seq=2)])
