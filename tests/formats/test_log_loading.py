"""Kafka's log-loading lines, parsed (remediate/formats/logloading.py): line by line on lines
real brokers wrote and on every other message of the loading code at 2.8.2 and 3.4.1 (built
from its format string), whole recorded server.logs of real 2.8.2 and 3.4.1 brokers cut where
the executor could read them (tests/formats/data/log_loading/, recorded by
logloading_recordings.py), what counts as the latest start's loading, and hostile input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.formats.logloading import (
    MAX_LINE_CHARS,
    DirLoading,
    LoadingLine,
    parse_line,
    parse_log_loading,
)
from tests.formats.logloading_recordings import DATA, KINDS, line_json, loading_json

D0 = "/sandbox/broker-1/data-0"
TS = "[2026-11-26 10:34:07,676] "


def real(text: str) -> str:
    return TS + text


# Every line of tests/formats/data/log_loading_lines.json: lines real 2.8.2 and 3.4.1
# brokers wrote (the sandbox's directory written as /sandbox), every other message of the
# loading code built from its format string (each entry names its source), and lines that
# are no loading line; with the kind, counts and log dir each says.
LINES = json.loads((Path(__file__).parent / "data" / "log_loading_lines.json").read_text())


@pytest.mark.parametrize("entry", LINES, ids=[entry["id"] for entry in LINES])
def test_each_line_is_what_kafka_meant_by_it(entry: dict[str, Any]) -> None:
    line, kind = entry["line"], entry["kind"]
    done, total, directory = entry["done"], entry["total"], entry["directory"]
    parsed = parse_line(line.encode())
    if kind is None:
        assert parsed is None
        return
    assert parsed is not None
    assert (parsed.kind, parsed.done, parsed.total, parsed.directory) == (
        kind,
        done,
        total,
        directory,
    )
    assert parsed.text == line[:MAX_LINE_CHARS]
    assert parsed.logged_at == (TS[1:-2] if line.startswith(TS) else None)


# -- recorded server.logs ----------------------------------------------------------------------

RECORDINGS = {kind: json.loads((DATA / f"{kind}.json").read_text()) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_every_recorded_line_parses_as_recorded(kind: str) -> None:
    recording = RECORDINGS[kind]
    parsed = {
        str(i): found for i, line in enumerate(recording["lines"]) if (found := line_json(line))
    }
    assert parsed == recording["parsed"]


CUTS = [
    pytest.param(kind, n, id=f"{kind}-{cut['moment']}")
    for kind in KINDS
    for n, cut in enumerate(RECORDINGS[kind]["cuts"])
]


@pytest.mark.parametrize(("kind", "number"), CUTS)
def test_a_recorded_log_cut_anywhere_says_what_was_recorded(kind: str, number: int) -> None:
    recording = RECORDINGS[kind]
    cut = recording["cuts"][number]
    lines = recording["lines"][: cut["lines"]]
    assert loading_json(parse_log_loading(line.encode() for line in lines)) == cut["loading"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_recorded_recovery_is_counted_log_by_log(kind: str) -> None:
    """Facts of the recording read independently of the parser's recorded output: after the
    SIGKILL every log dir is recovered, and the two dirs' logs are counted to their total."""
    recording = RECORDINGS[kind]
    recovered = next(c for c in recording["cuts"] if c["moment"] == "every log loaded")
    loading = recovered["loading"]
    assert loading["startups"] == 2
    dirs = {d[0]: d[1:] for d in loading["dirs"]}
    assert set(dirs) == {"/sandbox/broker-1/data-0", "/sandbox/broker-1/data-1"}
    assert all(done == total and recovering for done, total, recovering in dirs.values())
    assert sum(done for done, _total, _recovering in dirs.values()) == 7  # 4 + 3 internal
    assert loading["loaded"].endswith("Loaded 7 logs in " + loading["loaded"].split("in ")[-1])
    clean = next(c for c in recording["cuts"] if c["moment"].startswith("after a clean stop"))
    assert not any(recovering for *_d, recovering in clean["loading"]["dirs"])


# -- what counts: the latest start's loading ---------------------------------------------------


def lines(*texts: str) -> list[bytes]:
    return [real(t).encode() for t in texts]


STARTING = "INFO starting (kafka.server.KafkaServer)"
LOADING = f"INFO Loading logs from log dirs ArraySeq({D0}) (kafka.log.LogManager)"
RECOVERING = f"INFO Attempting recovery for all logs in {D0} since no clean shutdown file was found (kafka.log.LogManager)"  # noqa: E501
PRODUCER = f"INFO [Log partition=t-0, dir={D0}] Loading producer state till offset 0 with message format version 2 (kafka.log.Log)"  # noqa: E501
STARTED = "INFO [KafkaServer id=1] started (kafka.server.KafkaServer)"
LOADED = "INFO Loaded 1 logs in 5ms. (kafka.log.LogManager)"


def loaded_line(done: int, total: int) -> str:
    return (
        f"INFO Completed load of Log(dir={D0}/t-{done}, topic=t, partition={done},"
        " highWatermark=0, lastStableOffset=0, logStartOffset=0, logEndOffset=0) with 1"
        f" segments in 5ms ({done}/{total} loaded in {D0}) (kafka.log.LogManager)"
    )


PHASES = [
    pytest.param(
        lines(STARTING, LOADING, RECOVERING, loaded_line(1, 2)),
        [LOADING, RECOVERING, loaded_line(1, 2)],
        (DirLoading(D0, 1, 2, True),),
        id="mid-load",
    ),
    pytest.param(
        lines(STARTING, LOADING, loaded_line(1, 1), LOADED, PRODUCER, STARTED, PRODUCER),
        [LOADING, loaded_line(1, 1), LOADED],
        (DirLoading(D0, 1, 1, False),),
        id="a-running-brokers-lines-are-not-its-start",
    ),
    pytest.param(
        lines(loaded_line(3, 9), PRODUCER, loaded_line(4, 9)),
        [loaded_line(3, 9), PRODUCER, loaded_line(4, 9)],
        (DirLoading(D0, 4, 9, False),),
        id="a-tail-that-begins-mid-load",
    ),
    pytest.param(
        lines(STARTING, LOADING, loaded_line(1, 9), STARTING),
        [],
        (),
        id="a-new-start-forgets-the-last",
    ),
    pytest.param(
        lines(STARTING, PRODUCER, LOADING, RECOVERING),
        [LOADING, RECOVERING],
        (DirLoading(D0, None, None, True),),
        id="before-loading-nothing-counts",
    ),
]


@pytest.mark.parametrize(("log", "counted", "dirs"), PHASES)
def test_only_the_latest_starts_loading_counts(
    log: list[bytes], counted: list[str], dirs: tuple[DirLoading, ...]
) -> None:
    loading = parse_log_loading(log)
    assert [line.text for line in loading.lines] == [real(t) for t in counted]
    assert loading.dirs() == dirs


def test_the_start_and_its_failure_are_kept() -> None:
    failed = "ERROR Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)"  # noqa: E501
    loading = parse_log_loading(lines(STARTING, LOADING, STARTING, LOADING, failed))
    assert [s.text for s in loading.startups] == [real(STARTING)] * 2
    assert loading.failed is not None and loading.failed.text == real(failed)
    again = parse_log_loading(lines(STARTING, LOADING, failed, STARTING, LOADING))
    assert again.failed is None  # the failure was the start before


def test_lines_since_an_earlier_look() -> None:
    earlier = parse_log_loading(lines(LOADING, loaded_line(1, 3)))
    now = parse_log_loading(lines(LOADING, loaded_line(1, 3), loaded_line(2, 3)))
    assert [line.text for line in now.since(earlier)] == [real(loaded_line(2, 3))]
    assert now.since(now) == ()
    assert now.since(parse_log_loading([])) == now.lines


@pytest.mark.parametrize(
    ("log", "summary"),
    [
        pytest.param([], "no log-loading line", id="nothing"),
        pytest.param(lines(LOADING), "loading logs", id="loading"),
        pytest.param(
            lines(LOADING, RECOVERING, loaded_line(2, 9)),
            f"2/9 logs loaded in {D0} (recovering)",
            id="counted",
        ),
        pytest.param(
            lines(LOADING, "INFO Loaded 9 logs in 5ms. (kafka.log.LogManager)"),
            "logs loaded (Loaded 9 logs in 5ms.)",
            id="done",
        ),
    ],
)
def test_the_summary_a_person_reads(log: list[bytes], summary: str) -> None:
    assert parse_log_loading(log).summary() == summary


# -- hostile input -----------------------------------------------------------------------------


KAFKA_LINES = st.sampled_from(
    [real(t).encode() for t in (STARTING, LOADING, RECOVERING, loaded_line(1, 2), LOADED)]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=600) | KAFKA_LINES, max_size=40))
def test_any_bytes_parse_without_raising(log: list[bytes]) -> None:
    loading = parse_log_loading(log)
    for line in (*loading.lines, *loading.startups):
        assert isinstance(line, LoadingLine)
        assert len(line.text) <= MAX_LINE_CHARS and line.text.isprintable()
    loading.summary()


def test_a_huge_line_is_cut_to_what_is_kept() -> None:
    line = real("INFO Completed load of " * 5000 + "x").encode()
    assert parse_line(line) is None
    long = real(loaded_line(1, 2)).encode() + b" " + b"y" * 100_000
    parsed = parse_line(long)
    assert parsed is not None and len(parsed.text) == MAX_LINE_CHARS


def test_a_recording_exists_for_each_real_kafka() -> None:
    assert sorted(p.stem for p in Path(DATA).glob("*.json")) == sorted(KINDS)
