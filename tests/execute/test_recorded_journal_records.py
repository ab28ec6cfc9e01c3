"""Journal lines as the executor wrote them before its journal vocabulary became typed, written
again byte for byte.

`tests/execute/data/journal_records.jsonl` holds one recorded journal line per entry, one of
each shape the suite's runs write (every event, every kind of step key and result; from the
in-memory cluster's runs and the sandbox's), and a few of the journal's own tests with events
of any name. Each line is made again from its record by
the journal's encoder, with its event as a `JournalEvent`, and must be the same bytes; the
typed parts inside it (step keys, predictions, partition names) read back and write the same.
The records of whole runs are held to their recordings in test_recorded_journals.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remediate.execute.journal import JournalEvent, journal_line, journal_record
from remediate.execute.steps import StepKey
from remediate.gates import Degraded
from remediate.plan import Prediction
from remediate.state import TopicPartition

CORPUS = Path(__file__).parent / "data" / "journal_records.jsonl"
ENTRIES: list[dict[str, Any]] = [
    json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()
]
# Every record carries these; the rest are its fields.
CARRIED = ("seq", "time", "ts", "run_id", "event")
# The journal's own tests write events of any name; everything else is the executor's.
ANY_EVENT = "tests/execute/test_journal.py"


def event_of(record: dict[str, Any]) -> JournalEvent | str:
    try:
        return JournalEvent(record["event"])
    except ValueError:
        return str(record["event"])


def entry_id(entry: dict[str, Any]) -> str:
    record = json.loads(entry["line"])
    return f"{record['seq']}-{event_of(record)!s}"[:40]


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_a_recorded_journal_line_is_written_again_byte_for_byte(entry: dict[str, Any]) -> None:
    line = entry["line"]
    record = json.loads(line)
    event = event_of(record)
    if not entry["source"].startswith(ANY_EVENT):
        assert isinstance(event, JournalEvent), f"{event!r} is not a journal event"
    again = journal_record(
        event,  # type: ignore[arg-type]  # the journal's own tests use any name
        seq=record["seq"],
        now=record["ts"],
        run_id=record["run_id"],
        fields={k: v for k, v in record.items() if k not in CARRIED},
    )
    assert journal_line(again) == line


def partition_lists(document: object) -> list[list[str]]:
    """Every list of partition names in a record, at any depth."""
    found: list[list[str]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key in (
                "excused",
                "unavailable_after",
                "offline_partitions",
                "below_min_isr_partitions",
                "during",
                "after",
                "out_of_isr_after",
                "last_in_isr",
            ):
                found.append(value)
            else:
                found += partition_lists(value)
    return found


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_the_typed_parts_of_a_recorded_record_read_back_as_written(
    entry: dict[str, Any],
) -> None:
    record = json.loads(entry["line"])
    if entry["source"].startswith(ANY_EVENT):
        return
    step = record.get("step")
    if step is not None:
        assert str(StepKey.parse(step)) == step
    for names in partition_lists(record):
        assert [str(TopicPartition.parse(name)) for name in names] == names
    result = record.get("result")
    if isinstance(result, dict) and "predicted" in result:
        assert Prediction.from_json(result["predicted"]).to_json() == result["predicted"]
    for document in (record, result):
        if isinstance(document, dict) and "offline_partitions" in document:
            degraded = Degraded.from_json(document).to_json()
            assert degraded == {k: document[k] for k in degraded}


def test_the_recording_holds_every_event_the_earlier_executor_wrote() -> None:
    events = {json.loads(e["line"])["event"] for e in ENTRIES}
    # step-skipped is new; run-refused is only read (replay, the report), never written.
    # stop-requested and step-undone came after the recording (a clean stop on a signal).
    newer = {JournalEvent.STOP_REQUESTED, JournalEvent.STEP_UNDONE}
    assert (
        set(JournalEvent) - {JournalEvent.STEP_SKIPPED, JournalEvent.RUN_REFUSED} - newer <= events
    )
