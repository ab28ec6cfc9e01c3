"""The wait for a started broker to register: bounded by the start timeout, and extended, one
start timeout at a time, while the broker's own server.log shows its logs loading.

Kafka registers a broker in ZooKeeper only once every log is loaded, and after an unclean
shutdown loading means recovering each log's unflushed segments: on large logs, longer than
any fixed timeout. So when the start timeout runs out with the broker not registered, its
server.log (cluster.yaml's `server_log`) is read: new log-loading lines since the last look
(the first look is the one taken right before this process ran the start command, or when
the wait begins if it did not: a resumed wait) grant another start timeout, journaled with
what the log said; no new line, a log that cannot be read, a start that failed or a broker
that started twice halt the run, as a timeout always did (remediate/execute/decisions.py,
`loading_blocker`). Without `server_log` the start timeout is the whole wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from remediate.execute.decisions import loading_blocker
from remediate.execute.journal import JournalEvent
from remediate.execute.probes import Blocker, Probes
from remediate.execute.recorder import Recorder
from remediate.formats.logloading import LogLoading

NOTE_LINES = 5  # the newest of the lines a look found, kept in each extension's note


@dataclass
class LoadingWatch:
    """The looks at one starting broker's server.log during one wait."""

    probes: Probes
    recorder: Recorder
    broker: int
    path: PurePosixPath
    timeout: float
    step: str
    began: LogLoading = field(init=False)
    before: LogLoading = field(init=False)
    extensions: int = 0

    def __post_init__(self) -> None:
        before_start = self.probes.before_start.pop(self.broker, None)
        self.began = self.before = before_start or self.probes.log_loading(self.broker)

    def extend(self) -> str | None:
        """At a timeout: None (and a note in the journal) to wait another timeout, or why
        not, naming the log."""
        now = self.probes.log_loading(self.broker)
        log = f"its server.log ({self.path})"
        blocker = loading_blocker(self.began, self.before, now, log=log)
        new = now.since(self.before)
        self.before = now
        if blocker is not None:
            return blocker
        self.extensions += 1
        broker, timeout = self.broker, self.timeout
        decision = (
            f"broker {broker} has not registered within the {timeout:g}s start timeout, but"
            f" its server.log shows its logs loading ({now.summary()}): waiting another"
            f" {timeout:g}s"
        )
        self.recorder.record(
            JournalEvent.NOTE,
            step=self.step,
            decision=decision,
            server_log=str(self.path),
            log=[line.text for line in new[-NOTE_LINES:]],
        )
        self.recorder.services.progress(
            f"broker {broker}: still loading its logs ({now.summary()}); waiting another"
            f" {timeout:g}s"
        )
        return None


def wait_started(
    probes: Probes,
    recorder: Recorder,
    broker: int,
    blocker: Blocker,
    *,
    timeout: float,
    step: str,
) -> dict[str, Any]:
    """Wait until `blocker` (the broker not registered) clears; what to add to the journaled
    result of the wait (how many times its log extended it, if it did)."""
    what = f"broker {broker} to register"
    path = probes.services.config.broker(broker).server_log
    if path is None:
        probes.wait(blocker, timeout=timeout, what=what)
        return {}
    watch = LoadingWatch(probes, recorder, broker, path, timeout, step)
    probes.wait(blocker, timeout=timeout, what=what, on_timeout=watch.extend)
    return {"extended_while_loading": watch.extensions} if watch.extensions else {}
