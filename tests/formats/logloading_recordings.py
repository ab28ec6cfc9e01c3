"""Recorded server.logs of real brokers loading their logs, and how to record them again.

Each recording is one broker of a sandbox on real Apache Kafka (`sandbox up --kafka
real-2.8.2|real-3.4.1`, one broker, two log dirs): started, a topic of four partitions
created and written, the broker killed (SIGKILL: no clean shutdown file, so its next start
recovers every log), started again and waited for until its startup is over, stopped cleanly
(controlled shutdown, clean shutdown file) and started once more. Its server.log, from the
first `starting` to the last `started`, is kept in tests/formats/data/log_loading/<kafka>.json
with what the parser makes of every line and of the log cut at chosen lines (the tails the
executor would read at those moments). test_log_loading.py reads those files.

Left out, none of them a loading line: every line that does not start with the layout's
`[` (KafkaConfig's dump of the broker's settings, one tab-indented line each, and the lines
of stack traces) and ZooKeeper's client environment (the machine's paths and user). The
sandbox's directory is written as `/sandbox`.

Record them again after a change of the parser, and read the diff:

    .venv/bin/python -m tests.formats.logloading_recordings
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from remediate.formats.logloading import LineKind, LogLoading, parse_line, parse_log_loading
from remediate.sandbox import admin, cluster
from remediate.sandbox.real import kafka_client
from remediate.sandbox.reproduce import partition_states
from tests.wait import wait_until

DATA = Path(__file__).parent / "data" / "log_loading"
KINDS = ("real-2.8.2", "real-3.4.1")
TOPIC = "orders"
PARTITIONS = 4
RECORDS = 200
SANDBOX = "/sandbox"


def run(kind: str, directory: Path) -> list[str]:
    """The broker's server.log lines after the runs described in the module docstring."""
    state = cluster.up(directory, brokers=1, kafka=kind, log_dirs_per_broker=2)
    try:
        zk = cluster.zk_client(state)
        try:
            admin.create_topic(zk, TOPIC, PARTITIONS, 1)
            wait_until(lambda: led(zk), f"a leader for every partition of {TOPIC}")
        finally:
            zk.stop()
            zk.close()
        broker = state.broker(1)
        report = kafka_client.produce(
            f"{broker.host}:{broker.port}", TOPIC, count=RECORDS, retries=5, timeout_ms=10000
        )
        assert len(report.acked) == RECORDS, report
        assert cluster.kill_broker(directory, 1)
        cluster.start_broker(directory, 1, wait=True)
        assert cluster.stop_broker(directory, 1)
        cluster.start_broker(directory, 1, wait=True)
    finally:
        cluster.down(directory)
    text = (directory / "broker-1" / "logs" / "server.log").read_text(errors="replace")
    return kept_lines(text, str(directory))


def led(zk: KazooClient) -> bool:
    try:
        states = partition_states(zk, TOPIC, list(range(PARTITIONS)))
    except NoNodeError:  # the controller has not written every state yet
        return False
    return all(s.leader == 1 for s in states.values())


def kept_lines(text: str, directory: str) -> list[str]:
    lines = [
        line.replace(directory, SANDBOX)
        for line in text.splitlines()
        if line.startswith("[") and "environment:" not in line
    ]
    first = next(i for i, line in enumerate(lines) if parse_kind(line) == LineKind.STARTING)
    last = max(i for i, line in enumerate(lines) if parse_kind(line) == LineKind.STARTED)
    return lines[first : last + 1]


def parse_kind(line: str) -> LineKind | None:
    parsed = parse_line(line.encode())
    return None if parsed is None else parsed.kind


def line_json(line: str) -> dict[str, Any] | None:
    parsed = parse_line(line.encode())
    if parsed is None:
        return None
    return {
        "kind": parsed.kind,
        "logged_at": parsed.logged_at,
        "done": parsed.done,
        "total": parsed.total,
        "directory": parsed.directory,
    }


def loading_json(loading: LogLoading) -> dict[str, Any]:
    last = loading.last
    return {
        "lines": len(loading.lines),
        "first": loading.lines[0].text if loading.lines else None,
        "last": None if last is None else last.text,
        "startup": None if loading.startup is None else loading.startup.text,
        "startups": len(loading.startups),
        "failed": None if loading.failed is None else loading.failed.text,
        "loaded": None if loading.loaded is None else loading.loaded.text,
        "dirs": [[d.directory, d.done, d.total, d.recovering] for d in loading.dirs()],
        "summary": loading.summary(),
    }


def cuts(lines: list[str]) -> list[tuple[int, str]]:
    """(number of lines, what the tail then shows): moments of the two restarts."""
    kinds = [parse_kind(line) for line in lines]
    starts = [i for i, k in enumerate(kinds) if k == LineKind.STARTING]
    recovered, clean = starts[1], starts[2]

    def first(kind: LineKind, after: int) -> int:
        return next(i for i in range(after, len(kinds)) if kinds[i] == kind)

    loaded = first(LineKind.LOG_LOADED, recovered)
    done = first(LineKind.LOADED, recovered)
    return [
        (recovered, "the first run, the broker killed: its last lines"),
        (recovered + 1, "started again after SIGKILL: `starting`, nothing loaded yet"),
        (first(LineKind.DIR_RECOVERING, recovered) + 1, "recovering its first log dir"),
        (loaded, "recovering, before its first log is loaded"),
        (loaded + 1, "its first log loaded"),
        (done, "every log but the last loaded"),
        (done + 1, "every log loaded"),
        (first(LineKind.STARTED, recovered) + 1, "started"),
        (first(LineKind.DIR_CLEAN, clean) + 1, "after a clean stop: recovery skipped"),
        (len(lines), "the whole recording"),
    ]


def recording(kind: str, lines: list[str]) -> dict[str, Any]:
    return {
        "kafka": kind,
        "recorded_with": "tests/formats/logloading_recordings.py (see its docstring)",
        "lines": lines,
        "parsed": {str(i): found for i, line in enumerate(lines) if (found := line_json(line))},
        "cuts": [
            {
                "lines": count,
                "moment": moment,
                "loading": loading_json(parse_log_loading(line.encode() for line in lines[:count])),
            }
            for count, moment in cuts(lines)
        ],
    }


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for kind in sys.argv[1:] or KINDS:
        with tempfile.TemporaryDirectory(prefix="log-loading-recording-") as tmp:
            lines = run(kind, Path(tmp) / "sandbox")
        path = DATA / f"{kind}.json"
        path.write_text(json.dumps(recording(kind, lines), indent=1) + "\n")
        print(f"recorded {path} ({len(lines)} lines)", file=sys.stderr)


if __name__ == "__main__":
    main()
