"""What each ZooKeeper-mode Kafka release line does with an id that disagrees, and the rules a
cluster is planned by, from the line each broker runs as its ApiVersions tell it. Pure.

The lines differ where the model (remediate/plan/availability.py) and the plan's notes need
them to (Kafka's source at the last tag of each line):

- 2.8: a restarted broker's first LeaderAndIsr is not checked against its file
  (Partition.scala:445-446 @2.8.2): the replica takes it, loads the file's id, and rejects the
  next one. A replica moved to another log dir comes back with no id (LogManager.scala:781
  @2.8.2): a move heals it without a restart.
- 3.0: the first LeaderAndIsr is checked (KAFKA-12426), and a partition rejected for its id
  after a restart has no log, so its broker marks it Offline (ReplicaManager.scala:1419-1428
  @3.0.2) and answers every later LeaderAndIsr with KAFKA_STORAGE_ERROR: a restore does not
  heal that replica without one more restart of its broker. A moved replica keeps its id.
- 3.1 to 3.9: Fetch v13 fetches by topic id. Consumers on a client of 3.1 or later fetch with
  ZooKeeper's id and a leader holding the old one answers INCONSISTENT_TOPIC_ID (Fetcher.java
  @3.1.2, FetchCollector.java @3.9.0): they stop reading at the controller failover, before
  any restart, until the partition's leader holds ZooKeeper's id again.

A broker whose line cannot be read, or runs a release outside 2.8 to 3.9, is not planned for:
`KafkaLines.refusal` says why. Where the rules are needed for such a broker anyway (an
override), it is taken at its strictest: no 2.8 leniency, Offline marking, consumers down.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# A release line, (major, minor): (2, 8), (3, 4).
Line = tuple[int, int]

# The ZooKeeper-mode lines that have topic ids: 2.8 introduced them, 3.9 is the last.
LINES: tuple[Line, ...] = (
    (2, 8),
    (3, 0),
    (3, 1),
    (3, 2),
    (3, 3),
    (3, 4),
    (3, 5),
    (3, 6),
    (3, 7),
    (3, 8),
    (3, 9),
)
FETCH_BY_ID: Line = (3, 1)


def line_name(line: Line) -> str:
    return f"{line[0]}.{line[1]}"


def parse_line(text: str) -> Line:
    """ "3.9" -> (3, 9); anything else is a ValueError naming what was expected."""
    major, dot, minor = text.partition(".")
    if not dot or not major.isdigit() or not minor.isdigit():
        raise ValueError(f"{text!r} is not a Kafka release line (MAJOR.MINOR, such as 3.9)")
    return int(major), int(minor)


def unsupported(line: Line) -> str | None:
    """Why a broker on `line` is not planned for, or None when the line is one of LINES."""
    if line in LINES:
        return None
    if line < LINES[0]:
        return (
            f"runs Kafka {line_name(line)}, which has no topic ids: this incident cannot"
            " happen there, and the tool's rules start at 2.8"
        )
    return (
        f"runs Kafka {line_name(line)}, not a ZooKeeper-mode release the tool has rules for"
        f" ({line_name(LINES[0])} to {line_name(LINES[-1])})"
    )


@dataclass(frozen=True)
class KafkaLines:
    """The release line of each broker as read from the cluster, and the brokers whose line is
    not known or not supported, with why."""

    lines: Mapping[int, Line] = field(default_factory=dict)
    unknown: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def uniform(cls, line: Line, brokers: Iterable[int]) -> KafkaLines:
        """Every broker of `brokers` on `line`."""
        return cls.read({b: line for b in brokers})

    @classmethod
    def read(cls, answers: Mapping[int, Line | str]) -> KafkaLines:
        """From each broker's answer: its line, or why it gave none. A line outside LINES is
        kept as unknown, with why it is not supported."""
        lines: dict[int, Line] = {}
        unknown: dict[int, str] = {}
        for broker, answer in sorted(answers.items()):
            if isinstance(answer, str):
                unknown[broker] = answer
            elif (problem := unsupported(answer)) is not None:
                unknown[broker] = problem
            else:
                lines[broker] = answer
        return cls(lines, unknown)

    def line(self, broker: int) -> Line | None:
        return self.lines.get(broker)

    def lenient_first_leader_and_isr(self, broker: int) -> bool:
        """2.8: the first LeaderAndIsr after a restart is taken whatever the file says."""
        return self.lines.get(broker) == (2, 8)

    def marks_offline(self, broker: int) -> bool:
        """3.0 (and a broker whose line is not known): a partition rejected for its id after
        a restart is Offline on its broker until the next restart."""
        line = self.lines.get(broker)
        return line is None or line == (3, 0)

    def consumers_fail_at_failover(self, broker: int) -> bool:
        """3.1 and later (and not known): a leader holding the old id fails consumers on
        clients 3.1 or later from the controller failover on."""
        line = self.lines.get(broker)
        return line is None or line >= FETCH_BY_ID

    def moves_clear_ids(self, brokers: Collection[int]) -> bool:
        """A replica moved between log dirs comes back with no id on every one of
        `brokers`: all on 2.8."""
        return bool(brokers) and all(self.lines.get(b) == (2, 8) for b in brokers)

    def refusal(self, brokers: Collection[int]) -> str | None:
        """Why `brokers` (those the plan may act on or rely on) cannot be planned for: one
        whose line is not known or not supported. None when every line is known."""
        missing = [b for b in sorted(brokers) if b not in self.lines]
        if not missing:
            return None
        why = "; ".join(
            f"broker {b}: {self.unknown.get(b, 'its Kafka release was not read')}" for b in missing
        )
        return (
            f"the Kafka release of broker(s) {', '.join(map(str, missing))} is not known or"
            f" not supported, and the rules of a repair differ between releases ({why})"
        )

    def summary(self) -> str:
        """ "Kafka 3.9 on brokers 1, 2, 3" (or each line with its brokers, and the unknown)."""
        by_line: dict[Line, list[int]] = {}
        for broker, line in sorted(self.lines.items()):
            by_line.setdefault(line, []).append(broker)
        parts = [
            f"Kafka {line_name(line)} on broker(s) {', '.join(map(str, brokers))}"
            for line, brokers in sorted(by_line.items())
        ]
        if self.unknown:
            parts.append(f"not known on broker(s) {', '.join(map(str, sorted(self.unknown)))}")
        return "; ".join(parts) if parts else "no broker's Kafka release read"

    def to_json(self) -> dict[str, Any]:
        return {
            "brokers": {str(b): line_name(line) for b, line in sorted(self.lines.items())},
            "unknown": {str(b): why for b, why in sorted(self.unknown.items())},
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> KafkaLines:
        return cls(
            lines={int(b): parse_line(str(t)) for b, t in dict(document["brokers"]).items()},
            unknown={int(b): str(w) for b, w in dict(document.get("unknown", {})).items()},
        )
