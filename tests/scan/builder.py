"""Small hand-made snapshots for the classification tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remediate.collect.snapshot import FORMAT, TABLES

X = "AAAAAAAAAAAAAAAAAAAAAQ"  # the id the replicas were written with
Y = "AAAAAAAAAAAAAAAAAAAAAg"  # the id ZooKeeper holds now


@dataclass
class SnapshotBuilder:
    cluster: str = "c1"
    controller: int | None = None
    problems: list[str] = field(default_factory=list)
    # meta.json's `migration` (`/migration` as read) and `kraft_controller_epoch`.
    migration: dict[str, Any] | None = None
    kraft_controller_epoch: int | None = None
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t: [] for t in TABLES})

    def _row(self, table: str, **values: Any) -> SnapshotBuilder:
        self.tables[table].append({"cluster": self.cluster, **values})
        return self

    def broker(
        self,
        broker: int,
        *,
        reachable: bool = True,
        registered: bool = True,
        error: str | None = None,
        broker_epoch: int | None = None,
        state_change_log: str | None = None,
    ) -> SnapshotBuilder:
        return self._row(
            "brokers",
            broker=broker,
            host=f"kafka{broker}",
            configured=True,
            registered=registered,
            broker_epoch=(broker_epoch or 100 + broker) if registered else None,
            rack=None,
            is_controller=broker == self.controller,
            reachable=reachable,
            error=error
            if error is not None
            else (None if reachable else "ssh: connection refused"),
            state_change_log=state_change_log,
        )

    def topic(
        self,
        name: str,
        zk_topic_id: str | None,
        assignment: dict[int, list[int]],
        *,
        leaders: dict[int, int] | None = None,
        isr: dict[int, list[int]] | None = None,
        leader_epochs: dict[int, int] | None = None,
        topic_mzxid: int | None = None,
        state_mzxid: int | None = None,
    ) -> SnapshotBuilder:
        self._row(
            "topics",
            topic=name,
            zk_topic_id=zk_topic_id,
            znode_version=1,
            data_version=3 if zk_topic_id else 1,
            partition_count=len(assignment),
            min_isr=None,
            topic_mzxid=topic_mzxid,
        )
        for partition, replicas in assignment.items():
            for position, broker in enumerate(replicas):
                self._row(
                    "assignments",
                    topic=name,
                    partition=partition,
                    broker=broker,
                    position=position,
                    topic_mzxid=topic_mzxid,
                )
            self._row(
                "states",
                topic=name,
                partition=partition,
                leader=(leaders or {}).get(partition, replicas[0]),
                leader_epoch=(leader_epochs or {}).get(partition, 0),
                isr=(isr or {}).get(partition, replicas),
                zk_version=0,
                controller_epoch=1,
                mzxid=state_mzxid,
            )
        return self

    def replica(
        self,
        broker: int,
        topic: str | None,
        partition: int | None,
        *,
        file_id: str | None = None,
        state: str = "ok",
        log_dir: str = "/data/kafka-0",
        dir_name: str | None = None,
        kind: str = "live",
        name_problem: str | None = None,
        epoch_latest: int | None = None,
    ) -> SnapshotBuilder:
        name = dir_name if dir_name is not None else f"{topic}-{partition}"
        return self._row(
            "replicas",
            broker=broker,
            log_dir=log_dir,
            dir=name,
            dir_hex=name.encode().hex(),
            topic=topic,
            partition=partition,
            dir_kind=kind,
            name_problem=name_problem,
            metadata_state=state,
            file_topic_id=file_id if state == "ok" else None,
            metadata_problem="partition.metadata: version: expected version 0, got 7"
            if state == "corrupt"
            else None,
            epoch_latest=epoch_latest,
        )

    def rejection(
        self, broker: int, topic: str, partition: int, memory: str, request: str, at: str
    ) -> SnapshotBuilder:
        return self._row(
            "rejections",
            broker=broker,
            topic=topic,
            partition=partition,
            memory_topic_id=memory,
            request_topic_id=request,
            logged_at=at,
            wording="2.8",
        )

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name, rows in self.tables.items():
            (directory / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        meta = {
            "format": FORMAT,
            "cluster": self.cluster,
            "controller": self.controller,
            "problems": self.problems,
            "migration": self.migration,
            "kraft_controller_epoch": self.kraft_controller_epoch,
        }
        (directory / "meta.json").write_text(json.dumps(meta))
        return directory
