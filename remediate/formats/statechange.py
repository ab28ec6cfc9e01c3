"""Kafka's topic-id mismatch line in a broker's state-change log, parsed.

A broker that holds another topic id in memory than a LeaderAndIsr request carries logs at
ERROR on state.change.logger and ignores that partition's state change (Kafka's source under
core/src/main/scala/kafka/: at 2.8.2 cluster/Partition.scala:454-458 logs it and
server/ReplicaManager.scala:1366-1400 skips the partition; at 3.4.1
server/ReplicaManager.scala:1380-1384 logs it). The message, after log4j's layout and the
logger's "[Broker id=N] " prefix:

    2.8.x  Topic Id in memory: <X> does not match the topic Id for partition <t>-<p> provided
           in the request: <Y>.
    3.x    Topic ID in memory: <X> does not match the topic ID for partition <t>-<p> received:
           <Y>.

The log is untrusted input (any bytes, any layout): a line that does not hold the message with
a legal partition and two well-formed ids yields nothing. The timestamp is the text of the
layout's leading `[...]` (Kafka's default `[%d]`: the broker's local time, no zone), when the
line starts with one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from remediate.formats.logdir import topic_name_problem

_ID = r"[A-Za-z0-9_-]{22}(?:==)?"
_TP = r"([A-Za-z0-9._-]{1,249})-(0|[1-9][0-9]{0,9})"
_MESSAGE = re.compile(
    rf"(?:\[Broker id=(0|[1-9][0-9]{{0,9}})\] )?Topic (?:"
    rf"Id in memory: ({_ID}) does not match the topic Id for partition {_TP}"
    rf" provided in the request: ({_ID})\."
    rf"|ID in memory: ({_ID}) does not match the topic ID for partition {_TP}"
    rf" received: ({_ID})\.)"
    r"(?![A-Za-z0-9_-])"
)
_STAMP = re.compile(r"\[([0-9][0-9 :,.TZ+-]{0,40})\]")
MAX_PARTITION = 2**31 - 1


@dataclass(frozen=True)
class Rejection:
    """One logged rejection: the broker held `memory_topic_id` for the partition and refused a
    request carrying `request_topic_id`. `wording` is "2.8" or "3.x" (which message it was)."""

    topic: str
    partition: int
    memory_topic_id: str
    request_topic_id: str
    logged_at: str | None
    logged_by: int | None
    wording: str


def parse_rejection(line: bytes) -> Rejection | None:
    """The rejection `line` records, or None when it records none (never raises)."""
    text = line.decode("utf-8", "replace")
    match = _MESSAGE.search(text)
    if match is None:
        return None
    if match.group(2) is not None:
        memory, topic, number, request = match.group(2, 3, 4, 5)
        wording = "2.8"
    else:
        memory, topic, number, request = match.group(6, 7, 8, 9)
        wording = "3.x"
    if topic_name_problem(topic) is not None or int(number) > MAX_PARTITION:
        return None
    if _unpadded(memory) == _unpadded(request):
        return None
    stamp = _STAMP.match(text)
    broker = match.group(1)
    return Rejection(
        topic=topic,
        partition=int(number),
        memory_topic_id=_unpadded(memory),
        request_topic_id=_unpadded(request),
        logged_at=stamp.group(1) if stamp else None,
        logged_by=int(broker) if broker is not None else None,
        wording=wording,
    )


def _unpadded(topic_id: str) -> str:
    return topic_id[:22]


def parse_rejections(lines: tuple[bytes, ...] | list[bytes]) -> list[Rejection]:
    """The rejections among `lines`, in their order; other lines are skipped."""
    found = []
    for line in lines:
        rejection = parse_rejection(line)
        if rejection is not None:
            found.append(rejection)
    return found
