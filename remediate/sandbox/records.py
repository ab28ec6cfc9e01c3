"""What a sandbox client reports, whichever brokers it talks to: the records acknowledged and
consumed, and the errors per partition (the emulated client and the real one give the same
shapes, so the commands and the tests read either)."""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Acked:
    partition: int
    offset: int
    key: str


@dataclass
class ProduceReport:
    topic: str
    acked: list[Acked] = field(default_factory=list)
    errors: dict[int, Counter[str]] = field(default_factory=dict)

    def add_error(self, partition: int, error: str) -> None:
        self.errors.setdefault(partition, Counter())[error] += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "acked": len(self.acked),
            "acked_by_partition": dict(sorted(Counter(a.partition for a in self.acked).items())),
            "errors": {str(p): dict(c) for p, c in sorted(self.errors.items())},
        }


@dataclass
class ConsumedRecord:
    partition: int
    offset: int
    key: str | None
    value: str


def partition_for(key: str, partitions: int) -> int:
    return zlib.crc32(key.encode("utf-8")) % partitions
