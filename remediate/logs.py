"""structlog's setup: JSON lines to the sinks a command chooses, never to stdout (--json's)."""

from __future__ import annotations

import json
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

LOG_FILE = "log.jsonl"


def configure_logging(*sinks: TextIO) -> None:
    """structlog JSON lines to `sinks` (none: dropped), never to stdout, which --json owns."""

    def write(_: Any, __: str, event: MutableMapping[str, Any]) -> str:
        line = json.dumps(event, sort_keys=True, default=str)
        for sink in sinks:
            sink.write(line + "\n")
            sink.flush()
        raise structlog.DropEvent

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            write,
        ],
        cache_logger_on_first_use=False,
    )


def run_logger(journal_dir: Path, run_id: str, cluster: str, *, to_stderr: bool) -> Any:
    """A logger bound to the run: its lines go to the run's log.jsonl, and to stderr if asked."""
    handle = (journal_dir / run_id / LOG_FILE).open("a", encoding="utf-8")
    configure_logging(handle, *([sys.stderr] if to_stderr else []))
    return structlog.get_logger().bind(run_id=run_id, cluster=cluster)
