"""Kafka's log-loading lines in a broker's server.log, parsed.

A ZooKeeper-mode broker loads every log of its log dirs before it registers in ZooKeeper
(server/KafkaServer.scala: LogManager created and started at :247-251, registerBroker at :308
at 2.8.2; :264-274 and :356 at 3.4.1). After an unclean shutdown it first recovers each log's
unflushed segments, which on large logs takes minutes or hours. Its own log says how far it
has come: the tool reads those lines while it waits for a started broker, and waits on while
new ones appear (remediate/execute/startwait.py).

The lines, by the code that logs them (core/src/main/scala/kafka/ at 2.8.2 and 3.4.1; the
logger in Kafka's default layout `[%d] %p %m (%c)` in brackets):

- KafkaServer (kafka.server.KafkaServer): `starting` (2.8.2 server/KafkaServer.scala:178,
  3.4.1 :201, logged before the broker id is known, so without the `[KafkaServer id=N] `
  prefix), `started` (:409 / :564), `Fatal error during KafkaServer startup. Prepare to
  shutdown` (:414 / :569), `shutting down` (:657 / :821).
- LogManager (kafka.log.LogManager), log/LogManager.scala: `Log directory D not found,
  creating it.` (:149 / :157), `Loading logs from log dirs ...` (:302 / :337), `Skipping
  recovery for all logs in D since clean shutdown file was found` (:318 / :363), `Attempting
  recovery for all logs in D since no clean shutdown file was found` (:325 / :370), `Error
  occurred while reading recovery-point-offset-checkpoint|log-start-offset-checkpoint file of
  directory D, ...` (:333,342 / :378,387), `Completed load of <log> with N segments in Tms
  (k/n loaded in D)` (:361; 3.4.1 :415 says `completed in D`), `Error while loading logs in
  <dir> in Tms (k/n completed in D)` (3.4.1 :417), `Error while loading log dir D` (:366,376 /
  :350), `There was an error in one of the threads during logs loading: ...` (:390 / :442),
  `Loaded N logs in Tms.` (:396 / :449).
- Each log as it loads: at 2.8.2 log/Log.scala (`[Log partition=t-p, dir=D] `, kafka.log.Log),
  at 3.4.1 log/LogLoader.scala (`[LogLoader partition=t-p, dir=D] `, kafka.log.LogLoader) and
  UnifiedLog.rebuildProducerState (the same prefix, kafka.log.UnifiedLog$): `Recovering
  unflushed segment B` (2.8.2 Log.scala:899; 3.4.1 LogLoader.scala:423 adds `. k/n recovered
  for t-p.`), `Loading producer state till offset O with message format version V`
  (Log.scala:964 / UnifiedLog.scala:2037), `Reloading from producer snapshot and rebuilding
  producer state from offset O` and `Producer state recovery took ...` (UnifiedLog.scala:2061,
  2100), the repairs of interrupted swaps, orphaned or corrupt index files and corrupt
  segments (Log.scala:637,663,709,725,729,775,882,906,912 / LogLoader.scala:119,132,146,315,
  333,337,400,431,437), `Deleting segments as part of log recovery: ...` (Log.scala:2876 /
  LogLoader.scala:500), the split of an overflowed segment (Log.scala:2497,2521,2554 /
  LogLoader.scala:280 and UnifiedLog.splitOverflowedSegment), and the producer snapshots
  (log/ProducerStateManager.scala: `Loading producer state from snapshot file`,
  `Failed to load producer snapshot from`, 2.8.2 `Writing producer snapshot at offset`, 3.4.1
  `Wrote producer snapshot at offset`, `Deleted producer state snapshot`) and files
  (log/LogSegment.scala: `Found invalid messages in log segment`, `Deleted <file type> <path>.`).

Only lines of the latest start count, and only from its `Loading logs` to its `Loaded N
logs` (or, when the tail begins after it started, from the tail's start): some of the same
lines come again once the broker runs (a new log's `Loading producer state`), and those say
nothing of its start. The log is untrusted input (any bytes, any layout): a line that holds
none of these messages is no loading line; a message is recognised wherever it stands in a
line, so a layout other than Kafka's default still works, except for `starting`, which is
told apart from any other word only by its logger.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

MAX_LINE_CHARS = 400  # a line kept for a message or the journal; longer ones are cut
MAX_SCANNED_BYTES = 8192  # of a line, the part searched (Kafka's lines are a few hundred)


class LineKind(StrEnum):
    """What a line says of the broker's start."""

    # KafkaServer's lifecycle.
    STARTING = "starting"
    STARTED = "started"
    STARTUP_FAILED = "startup failed"
    SHUTTING_DOWN = "shutting down"
    # LogManager's loading, as a whole and per log dir.
    LOADING = "loading"
    DIR_CLEAN = "dir clean"
    DIR_RECOVERING = "dir recovering"
    LOG_LOADED = "log loaded"
    LOADED = "loaded"
    # One log's loading: an unflushed segment recovered, or any other step of it.
    SEGMENT = "segment"
    STEP = "step"


LIFECYCLE = frozenset(
    {LineKind.STARTING, LineKind.STARTED, LineKind.STARTUP_FAILED, LineKind.SHUTTING_DOWN}
)

_N = r"(\d{1,19})"
_REST = r"(.{1,4096}?)"
# (kind, message) in the order they are tried; the first that matches decides.
_MESSAGES: tuple[tuple[LineKind, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        (LineKind.STARTING, r"\bINFO starting \(kafka\.server\.KafkaServer\)$"),
        (
            LineKind.STARTED,
            r"\[KafkaServer id=\d{1,10}\] started(?: \(kafka\.server\.KafkaServer\))?$",
        ),
        (LineKind.STARTUP_FAILED, r"Fatal error during KafkaServer startup\. Prepare to shutdown"),
        (
            LineKind.SHUTTING_DOWN,
            r"\[KafkaServer id=\d{1,10}\] shutting down(?: \(kafka\.server\.KafkaServer\))?$",
        ),
        (LineKind.LOADING, r"Loading logs from log dirs "),
        (
            LineKind.DIR_CLEAN,
            rf"Skipping recovery for all logs in {_REST} since clean shutdown file was found",
        ),
        (
            LineKind.DIR_RECOVERING,
            rf"Attempting recovery for all logs in {_REST} since no clean shutdown file was found",
        ),
        (
            LineKind.LOG_LOADED,
            rf"Completed load of .{{1,4096}} with {_N} segments in {_N}ms"
            rf" \({_N}/{_N} (?:loaded|completed) in {_REST}\)",
        ),
        (
            LineKind.LOG_LOADED,
            rf"Error while loading logs in .{{1,4096}} in {_N}ms"
            rf" \({_N}/{_N} completed in {_REST}\)",
        ),
        (LineKind.LOADED, rf"Loaded {_N} logs in {_N}ms\."),
        (LineKind.SEGMENT, rf"Recovering unflushed segment {_N}\b"),
        (
            LineKind.STEP,
            "|".join(
                (
                    r"Log directory .{1,4096} not found, creating it\.",
                    r"Error occurred while reading (?:recovery-point-offset-checkpoint"
                    r"|log-start-offset-checkpoint) file of directory ",
                    r"Error while loading log dir ",
                    r"There was an error in one of the threads during logs loading: ",
                    r"Loading producer state till offset \d",
                    r"Reloading from producer snapshot and rebuilding producer state from offset",
                    r"Producer state recovery took \d",
                    r"Deleting index files with suffix ",
                    r"Found (?:log )?file .{1,4096} from interrupted swap operation",
                    r"Deleting segment files .{1,4096} that is compacted but has not been deleted",
                    r"Recovering file .{1,4096} by renaming from \.swap files",
                    r"Found an orphaned index file ",
                    r"Could not find offset index file corresponding to log file",
                    r"Found a corrupted index file corresponding to log file",
                    r"Deleting all segments because logEndOffset ",
                    r"Found invalid offset during recovery\. Deleting the",
                    r"Corruption found in segment \d",
                    r"Deleting segments as part of log recovery: ",
                    r"Caught segment overflow error: ",
                    r"Splitting overflowed segment ",
                    r"Replacing overflowed segment ",
                    r"Loading producer state from snapshot file ",
                    r"Failed to load producer snapshot from ",
                    r"Writing producer snapshot at offset \d",
                    r"Wrote producer snapshot at offset \d",
                    r"Deleted producer state snapshot ",
                    r"Found invalid messages in log segment ",
                    r"Deleted (?:log|offset index|time index|transaction index) /",
                )
            ),
        ),
    )
)
_STAMP = re.compile(r"\[([0-9][0-9 :,.TZ+-]{0,40})\]")
_LOGGER = re.compile(r" \([A-Za-z0-9_.$]{1,200}\)$")


@dataclass(frozen=True)
class LoadingLine:
    """One line of the broker's log that says something of its start: its kind, the line
    itself (printable, at most MAX_LINE_CHARS), the layout's leading `[...]` timestamp, and
    what it counts: a log dir's loaded logs (`done` of `total`, LOG_LOADED), all logs (`done`,
    LOADED), the log dir it is about (`directory`)."""

    kind: LineKind
    text: str
    logged_at: str | None = None
    done: int | None = None
    total: int | None = None
    directory: str | None = None


def parse_line(line: bytes) -> LoadingLine | None:
    """The loading line `line` is, or None (never raises)."""
    text = _printable(line[:MAX_SCANNED_BYTES].decode("utf-8", "replace").rstrip("\r\n"))
    for kind, pattern in _MESSAGES:
        match = pattern.search(text)
        if match is None:
            continue
        stamp = _STAMP.match(text)
        found = LoadingLine(
            kind=kind,
            text=text[:MAX_LINE_CHARS],
            logged_at=stamp.group(1) if stamp else None,
        )
        if kind in (LineKind.DIR_CLEAN, LineKind.DIR_RECOVERING):
            return replace(found, directory=match.group(1))
        if kind == LineKind.LOG_LOADED:
            numbers = [g for g in match.groups() if g is not None]
            done, total, directory = numbers[-3:]
            return replace(found, done=int(done), total=int(total), directory=directory)
        if kind == LineKind.LOADED:
            return replace(found, done=int(match.group(1)))
        return found
    return None


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


@dataclass(frozen=True)
class DirLoading:
    """How far the loading of one log dir has come: its last `Completed load` line's
    counts, and whether its logs are being recovered (no clean shutdown file)."""

    directory: str
    done: int | None
    total: int | None
    recovering: bool


@dataclass(frozen=True)
class LogLoading:
    """What the tail of a broker's server.log says of its latest start.

    `lines` are the loading lines of that start, in order (see the module docstring);
    `startups` the `starting` lines in the tail, the last one being the latest start's;
    `failed` the line saying that start failed, if it did. `problem` says why the log could
    not be read (then nothing else is known)."""

    lines: tuple[LoadingLine, ...] = ()
    startups: tuple[LoadingLine, ...] = ()
    failed: LoadingLine | None = None
    problem: str | None = None

    @property
    def startup(self) -> LoadingLine | None:
        return self.startups[-1] if self.startups else None

    @property
    def last(self) -> LoadingLine | None:
        return self.lines[-1] if self.lines else None

    @property
    def loaded(self) -> LoadingLine | None:
        """The `Loaded N logs` line: every log of the start is loaded."""
        return next((line for line in self.lines if line.kind == LineKind.LOADED), None)

    def since(self, earlier: LogLoading) -> tuple[LoadingLine, ...]:
        """The lines of this look that `earlier` did not have (all, when the two share none)."""
        if earlier.last is not None and earlier.last in self.lines:
            at = len(self.lines) - 1 - self.lines[::-1].index(earlier.last)
            return self.lines[at + 1 :]
        return self.lines

    def dirs(self) -> tuple[DirLoading, ...]:
        """Each log dir the lines name, in the order they first name it."""
        found: dict[str, DirLoading] = {}
        for line in self.lines:
            if line.directory is None:
                continue
            seen = found.get(line.directory)
            recovering = line.kind == LineKind.DIR_RECOVERING or (
                seen is not None and seen.recovering
            )
            done = line.done if line.kind == LineKind.LOG_LOADED else None
            total = line.total if line.kind == LineKind.LOG_LOADED else None
            if seen is not None and done is None:
                done, total = seen.done, seen.total
            found[line.directory] = DirLoading(line.directory, done, total, recovering)
        return tuple(found.values())

    def summary(self) -> str:
        """One line for a person: how far each log dir has come, or what the log says."""
        if self.problem is not None:
            return f"not read: {self.problem}"
        if self.loaded is not None:
            return f"logs loaded ({_message(self.loaded)})"
        parts = []
        for d in self.dirs():
            counted = f"{d.done}/{d.total} logs" if d.done is not None else "no log yet"
            parts.append(
                f"{counted} loaded in {d.directory}" + (" (recovering)" if d.recovering else "")
            )
        if parts:
            return "; ".join(parts)
        return "loading logs" if self.lines else "no log-loading line"


def _message(line: LoadingLine) -> str:
    """The line without the layout's timestamp and level: what Kafka said."""
    text = line.text
    stamp = _STAMP.match(text)
    if stamp is not None:
        text = text[stamp.end() :].lstrip()
        text = re.sub(r"^(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ", "", text)
    return _LOGGER.sub("", text)


def parse_log_loading(lines: Iterable[bytes]) -> LogLoading:
    """What `lines` (the tail of a server.log, oldest first) say of the broker's latest start."""
    kept: list[LoadingLine] = []
    startups: list[LoadingLine] = []
    failed: LoadingLine | None = None
    counting = True  # until a lifecycle line says otherwise: the tail may begin mid-load
    for raw in lines:
        line = parse_line(raw)
        if line is None:
            continue
        if line.kind == LineKind.STARTING:
            startups.append(line)
            kept, failed, counting = [], None, False
        elif line.kind == LineKind.STARTUP_FAILED:
            failed, counting = line, False
        elif line.kind in LIFECYCLE:
            counting = False
        elif line.kind == LineKind.LOADING:
            kept, counting = [line], True
        elif counting:
            kept.append(line)
            if line.kind == LineKind.LOADED:
                counting = False
    return LogLoading(lines=tuple(kept), startups=tuple(startups), failed=failed)


def unreadable(problem: str) -> LogLoading:
    """A look at a log that could not be read."""
    return LogLoading(problem=problem)
