"""Long lists of a plan, summarised for people: a plan of fleet size names tens of thousands of
partitions and files, which nobody reviews line by line. Up to LIMIT items a list is shown
whole, as it always was; beyond, partitions are grouped by topic with their numbers as ranges
(`orders 0-49, 52`), files by log dir, impact lines by what they say, with counts and "and N
more". The full lists stay in the plan's JSON. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from remediate.state import TopicPartition

# Items a list shows whole; topics (or log dirs, or impact kinds) a summary names.
LIMIT = 20
TOPICS_SHOWN = 8


def ranges(numbers: Iterable[int]) -> str:
    """`0-3, 5, 7-9`: sorted, each run of consecutive numbers as one range."""
    ordered = sorted(set(numbers))
    runs: list[str] = []
    start = previous = None
    for n in ordered:
        if previous is not None and n == previous + 1:
            previous = n
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = n
    if start is not None:
        runs.append(str(start) if start == previous else f"{start}-{previous}")
    return ", ".join(runs)


def by_topic(partitions: Iterable[TopicPartition]) -> str:
    """`orders 0-49; audit 0-2` (topics in name order), the topics past TOPICS_SHOWN counted."""
    grouped: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        grouped[tp.topic].append(tp.partition)
    topics = sorted(grouped)
    shown = [f"{t} {ranges(grouped[t])}" for t in topics[:TOPICS_SHOWN]]
    rest = topics[TOPICS_SHOWN:]
    if rest:
        count = sum(len(grouped[t]) for t in rest)
        shown.append(f"and {len(rest)} more topic(s), {count} partition(s)")
    return "; ".join(shown)


def partitions_text(partitions: Sequence[TopicPartition], *, quote: str = "") -> str:
    """The partitions' names, comma-separated, or past LIMIT their count and `by_topic`."""
    if len(partitions) <= LIMIT:
        return ", ".join(f"{quote}{tp}{quote}" for tp in partitions)
    return f"{len(partitions)} partitions: {by_topic(partitions)}"


def partition_lines(partitions: Sequence[TopicPartition]) -> list[str]:
    """One name per line, or past LIMIT one summary line."""
    if len(partitions) <= LIMIT:
        return [str(tp) for tp in partitions]
    return [partitions_text(partitions)]


def _partition_of(path: str) -> tuple[str, TopicPartition] | None:
    """(log dir, partition) of `<log dir>/<topic>-<n>/partition.metadata`."""
    parts = PurePosixPath(path)
    name = parts.parent.name
    topic, dash, number = name.rpartition("-")
    if not dash or not number.isdigit():
        return None
    return str(parts.parent.parent), TopicPartition(topic, int(number))


def file_lines(paths: Sequence[str]) -> list[str]:
    """The files whole, or past LIMIT per log dir: how many, and of which partitions."""
    if len(paths) <= LIMIT:
        return list(paths)
    dirs: dict[str, list[TopicPartition]] = defaultdict(list)
    other: list[str] = []
    for path in paths:
        parsed = _partition_of(path)
        if parsed is None:
            other.append(path)
        else:
            dirs[parsed[0]].append(parsed[1])
    lines = [
        f"{log_dir}: {len(tps)} partition.metadata file(s) of {by_topic(tps)}"
        for log_dir, tps in sorted(dirs.items())
    ]
    return (
        lines + other[:LIMIT] + ([f"and {len(other) - LIMIT} more"] if len(other) > LIMIT else [])
    )


def impact_lines(lines: Sequence[str]) -> list[str]:
    """Lines `<partition>: <what happens>` whole, or past LIMIT grouped by what happens:
    `isr 3 -> 2 (min 2): 40 partitions: orders 0-39`."""
    if len(lines) <= LIMIT:
        return list(lines)
    said: dict[str, list[TopicPartition]] = defaultdict(list)
    other: list[str] = []
    for line in lines:
        name, sep, what = line.partition(": ")
        topic, dash, number = name.rpartition("-")
        if not sep or not dash or not number.isdigit():
            other.append(line)
            continue
        said[what].append(TopicPartition(topic, int(number)))
    grouped = [
        f"{what}: {partitions_text(tps)}"
        for what, tps in sorted(said.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    return grouped + other


def phase_groups(
    phases: Mapping[TopicPartition, Sequence[str]],
) -> list[tuple[str, tuple[str, ...]]]:
    """(partitions, phases) rows: one per partition up to LIMIT, else one per distinct list of
    phases, its partitions summarised."""
    ordered = sorted(phases.items(), key=lambda item: str(item[0]))
    if len(ordered) <= LIMIT:
        return [(str(tp), tuple(p)) for tp, p in ordered]
    grouped: dict[tuple[str, ...], list[TopicPartition]] = defaultdict(list)
    for tp, p in ordered:
        grouped[tuple(p)].append(tp)
    return [(partitions_text(sorted(tps)), p) for p, tps in grouped.items()]


def names_text(items: Sequence[str], *, shown: int = TOPICS_SHOWN) -> str:
    """Items comma-separated, past `shown` the rest counted."""
    head = ", ".join(items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")
