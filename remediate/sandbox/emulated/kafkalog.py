"""Broker log files in Kafka's default log4j layout: server.log and state-change.log.

`[2026-11-22 03:51:00,123] ERROR <message> (state.change.logger)` — the layout operators grep.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

STATE_CHANGE_LOGGER = "state.change.logger"
_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL"}


class KafkaFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        millis = int(record.msecs)
        level = _LEVELS.get(record.levelname, record.levelname)
        text = f"[{stamp},{millis:03d}] {level} {record.getMessage()} ({record.name})"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(logs_dir: Path) -> None:
    """server.log gets every logger but state.change.logger, which has its own file."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    formatter = KafkaFormatter()
    server = logging.FileHandler(logs_dir / "server.log")
    server.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [server]
    root.setLevel(logging.INFO)
    for noisy in ("kazoo", "kazoo.client", "kazoo.protocol.connection"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    state_change = logging.FileHandler(logs_dir / "state-change.log")
    state_change.setFormatter(formatter)
    logger = logging.getLogger(STATE_CHANGE_LOGGER)
    logger.handlers[:] = [state_change]
    logger.propagate = False
    logger.setLevel(logging.INFO)
