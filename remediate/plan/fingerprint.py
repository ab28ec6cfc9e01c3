"""The fingerprint: the state a plan was made from, which apply compares with a fresh read.

It records the cluster id, the registered brokers, the controller epoch, the znode versions
of the topics the plan touches and the id in every partition.metadata it relies on. In the
plan's JSON a file is keyed "broker:path" (brokers often use the same log dir paths); here
it is a `FileKey`, parsed and written only by `Fingerprint.from_json` and `to_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remediate.formats.logdir import PARTITION_METADATA


def replica_file(log_dir: str, topic: str, partition: int, name: str) -> str:
    """A file of a replica, built from the validated topic and partition, never from a name
    read on disk."""
    return f"{log_dir.rstrip('/')}/{topic}-{partition}/{name}"


@dataclass(frozen=True)
class FileKey:
    """One file on one broker."""

    broker: int
    path: str

    @classmethod
    def metadata(cls, broker: int, log_dir: str, topic: str, partition: int) -> FileKey:
        """The key of one replica's partition.metadata."""
        return cls(broker, replica_file(log_dir, topic, partition, PARTITION_METADATA))

    @classmethod
    def parse(cls, text: str) -> FileKey:
        broker, sep, path = text.partition(":")
        if not sep or not path:
            raise ValueError(f"file key {text!r}: expected broker:path")
        return cls(int(broker), path)

    def __str__(self) -> str:
        return f"{self.broker}:{self.path}"


def _by_text(keys: Mapping[FileKey, Any]) -> list[FileKey]:
    # The order of the "broker:path" strings, as the plan JSON and the drift report list them.
    return sorted(keys, key=str)


@dataclass(frozen=True)
class Fingerprint:
    cluster_id: str | None
    brokers: tuple[int, ...]
    controller_epoch: int | None
    topics: Mapping[str, int] = field(default_factory=dict)
    files: Mapping[FileKey, str | None] = field(default_factory=dict)

    def file_brokers(self) -> list[int]:
        """The brokers whose files the fingerprint records."""
        return sorted({key.broker for key in self.files})

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "brokers": list(self.brokers),
            "controller_epoch": self.controller_epoch,
            "topics": dict(self.topics),
            "files": {str(key): self.files[key] for key in _by_text(self.files)},
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Fingerprint:
        epoch = document["controller_epoch"]
        cluster_id = document["cluster_id"]
        return cls(
            cluster_id=None if cluster_id is None else str(cluster_id),
            brokers=tuple(int(b) for b in document["brokers"]),
            controller_epoch=None if epoch is None else int(epoch),
            topics={str(t): int(v) for t, v in document["topics"].items()},
            files={
                FileKey.parse(key): None if value is None else str(value)
                for key, value in document["files"].items()
            },
        )
