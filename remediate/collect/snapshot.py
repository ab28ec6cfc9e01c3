"""The snapshot directory: what collect saw, one JSON object per line, readable by Spark.

    meta.json            cluster, cluster id, time, controller, tool version, problems
    brokers.jsonl        one row per broker (configured or registered): reachable, registered
    topics.jsonl         one row per topic: ZooKeeper's topic id, znode version, partitions
    assignments.jsonl    one row per assigned replica (topic, partition, broker, position)
    states.jsonl         one row per partition state znode (leader, leader_epoch, isr)
    topic_configs.jsonl  one row per topic config key
    log_dirs.jsonl       one row per configured log dir and what it was on disk
    replicas.jsonl       one row per directory found in a log dir, with its partition.metadata
    rejections.jsonl     one row per topic-id mismatch line in a broker's state-change log tail
                         (brokers.jsonl's state_change_log says whether that log was read)

ZooKeeper's transaction ids ride along: a topic's `topic_mzxid` (its znode's last write, e.g.
when a controller minted its id), a state's `mzxid` (its last leader or ISR change) and a
broker's `broker_epoch` (its registration's czxid).

A snapshot can be scanned later or elsewhere; several snapshots (a fleet) can be scanned
together: every row carries its cluster's name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from remediate import __version__
from remediate.errors import ScanError
from remediate.formats.znodes import MigrationState
from remediate.state import ClusterState

FORMAT = 1
TABLES = (
    "brokers",
    "topics",
    "assignments",
    "states",
    "topic_configs",
    "log_dirs",
    "replicas",
    "rejections",
)
META = "meta.json"
STATE_TABLES = ("topics", "assignments", "states", "topic_configs")  # ZooKeeper's alone
BROKER_TABLES = ("brokers", "log_dirs", "replicas", "rejections")  # with the inventories


def display_name(name: str) -> str:
    """A directory name made printable: escapes for anything not plain text."""
    if name.isascii() and name.isprintable():
        return name  # every Kafka partition directory
    raw = os.fsencode(name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "backslashreplace")
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One directory found in a broker's log dir and what its partition.metadata holds: a row
    of replicas.jsonl without the cluster and the broker, which the snapshot adds."""

    log_dir: str
    dir: str  # printable (display_name); dir_hex holds the name's bytes
    dir_hex: str
    topic: str | None  # None: not a partition directory (name_problem says why)
    partition: int | None
    dir_kind: str  # live, delete, future, stray, or other (not a partition directory)
    name_problem: str | None
    metadata_state: str  # ok, missing, corrupt or unreadable
    file_topic_id: str | None
    metadata_problem: str | None
    epoch_latest: int | None

    def to_json(self) -> dict[str, Any]:
        # The keys in this order: replicas.jsonl is a contract, byte for byte.
        return {
            "log_dir": self.log_dir,
            "dir": self.dir,
            "dir_hex": self.dir_hex,
            "topic": self.topic,
            "partition": self.partition,
            "dir_kind": self.dir_kind,
            "name_problem": self.name_problem,
            "metadata_state": self.metadata_state,
            "file_topic_id": self.file_topic_id,
            "metadata_problem": self.metadata_problem,
            "epoch_latest": self.epoch_latest,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> ReplicaRow:
        """A row of replicas.jsonl (its cluster and broker are ignored)."""
        return cls(
            log_dir=row["log_dir"],
            dir=row["dir"],
            dir_hex=row["dir_hex"],
            topic=row["topic"],
            partition=row["partition"],
            dir_kind=row["dir_kind"],
            name_problem=row["name_problem"],
            metadata_state=row["metadata_state"],
            file_topic_id=row["file_topic_id"],
            metadata_problem=row["metadata_problem"],
            epoch_latest=row["epoch_latest"],
        )


@dataclass(frozen=True)
class BrokerReport:
    """What collect learnt about one broker's host."""

    broker_id: int
    host: str
    configured: bool
    reachable: bool
    error: str | None
    log_dirs: tuple[Mapping[str, Any], ...] = ()
    replicas: tuple[ReplicaRow, ...] = ()
    # not_configured, missing, unreadable, partial or read; None: the broker was not inspected
    state_change_log: str | None = None
    rejections: tuple[Mapping[str, Any], ...] = ()


def broker_rows(
    cluster: str, state: ClusterState, brokers: Iterable[BrokerReport]
) -> dict[str, list[dict[str, Any]]]:
    """The tables that need the brokers' inventories: brokers, log_dirs, replicas, rejections."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in BROKER_TABLES}
    reports = {b.broker_id: b for b in brokers}
    for broker_id in sorted(set(reports) | set(state.brokers)):
        report = reports.get(broker_id)
        registration = state.brokers.get(broker_id)
        endpoint = registration.endpoint() if registration else None
        tables["brokers"].append(
            {
                "cluster": cluster,
                "broker": broker_id,
                "host": report.host if report else (endpoint.host if endpoint else None),
                "configured": bool(report and report.configured),
                "registered": registration is not None,
                "broker_epoch": registration.epoch if registration else None,
                "rack": registration.rack if registration else None,
                "is_controller": state.controller_id == broker_id,
                "reachable": bool(report and report.reachable),
                "error": report.error if report else "not in cluster.yaml: disk not inspected",
                "state_change_log": report.state_change_log if report else None,
            }
        )
        if report is not None:
            tables["log_dirs"] += [
                {"cluster": cluster, "broker": broker_id, **row} for row in report.log_dirs
            ]
            tables["replicas"] += [
                {"cluster": cluster, "broker": broker_id, **row.to_json()}
                for row in report.replicas
            ]
            tables["rejections"] += [
                {"cluster": cluster, "broker": broker_id, **row} for row in report.rejections
            ]
    return tables


def state_rows(cluster: str, state: ClusterState) -> dict[str, list[dict[str, Any]]]:
    """The tables read from ZooKeeper alone: topics, topic_configs, assignments, states."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in STATE_TABLES}
    for name, topic in sorted(state.topics.items()):
        tables["topics"].append(
            {
                "cluster": cluster,
                "topic": name,
                "zk_topic_id": topic.topic_id,
                "znode_version": topic.znode_version,
                "data_version": topic.assignment.version,
                "partition_count": len(topic.assignment.partitions),
                "min_isr": _int_or_none(topic.config.get("min.insync.replicas")),
                "topic_mzxid": topic.mzxid,
            }
        )
        for key, value in sorted(topic.config.items()):
            tables["topic_configs"].append(
                {"cluster": cluster, "topic": name, "key": key, "value": value}
            )
        for number, replicas in sorted(topic.assignment.partitions.items()):
            for position, replica in enumerate(replicas):
                tables["assignments"].append(
                    {
                        "cluster": cluster,
                        "topic": name,
                        "partition": number,
                        "broker": replica,
                        "position": position,
                        "topic_mzxid": topic.mzxid,
                    }
                )
    for (name, number), partition in sorted(state.partitions.items()):
        tables["states"].append(
            {
                "cluster": cluster,
                "topic": name,
                "partition": number,
                "leader": partition.leader,
                "leader_epoch": partition.leader_epoch,
                "isr": list(partition.isr),
                "zk_version": partition.zk_version,
                "controller_epoch": partition.controller_epoch,
                "mzxid": partition.mzxid,
            }
        )
    return tables


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _write_tables(directory: Path, tables: Mapping[str, list[dict[str, Any]]]) -> None:
    encode = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
    for name, rows in tables.items():
        with open(directory / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(encode(row) + "\n" for row in rows)


def write_state_tables(directory: Path, *, cluster: str, state: ClusterState) -> dict[str, int]:
    """Start a snapshot with the tables ZooKeeper alone gives (while the brokers are still being
    inventoried); their row counts. `write_snapshot` finishes it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / META).unlink(missing_ok=True)
    tables = state_rows(cluster, state)
    _write_tables(directory, tables)
    return {name: len(rows) for name, rows in tables.items()}


def write_snapshot(
    directory: Path,
    *,
    cluster: str,
    state: ClusterState,
    brokers: Iterable[BrokerReport],
    extra_problems: Iterable[str] = (),
    now: datetime | None = None,
    state_tables: Mapping[str, int] | None = None,
) -> Path:
    """Write a snapshot directory (tables first, meta.json last: a snapshot is complete
    exactly when meta.json exists). `state_tables`: the row counts `write_state_tables`
    returned when it already wrote ZooKeeper's tables into `directory`."""
    if state_tables is None:
        state_tables = write_state_tables(directory, cluster=cluster, state=state)
    reports = list(brokers)
    tables = broker_rows(cluster, state, reports)
    _write_tables(directory, tables)
    counts = {**state_tables, **{name: len(rows) for name, rows in tables.items()}}
    meta = {
        "format": FORMAT,
        "cluster": cluster,
        "cluster_id": state.cluster_id,
        "collected_at": (now or datetime.now(UTC)).isoformat(),
        "controller": state.controller_id,
        "controller_epoch": state.controller_epoch,
        # A ZooKeeper-to-KRaft migration: `/migration` as read (null when absent), and the
        # active controller's kraftControllerEpoch when it is a KRaft controller.
        "migration": migration_json(state.migration),
        "kraft_controller_epoch": state.kraft_controller_epoch,
        "tool_version": __version__,
        "brokers_configured": sorted(b.broker_id for b in reports if b.configured),
        "problems": [*state.problems, *extra_problems],
        "counts": {name: counts[name] for name in TABLES},
    }
    meta_path = directory / META
    tmp = meta_path.with_name(META + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, meta_path)
    return directory


def migration_json(migration: MigrationState | None) -> dict[str, Any] | None:
    return None if migration is None else asdict(migration)


def migration_from_json(value: object, *, source: str) -> MigrationState | None:
    """meta.json's `migration` back; ScanError naming the field when it is not one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScanError(f"{source}: migration: expected a JSON object or null, got {value!r}")
    known = {f.name for f in fields(MigrationState)}
    for name, field_value in value.items():
        if name not in known:
            raise ScanError(f"{source}: migration: unknown field {name!r}")
        if name == "problem" and not (field_value is None or isinstance(field_value, str)):
            raise ScanError(f"{source}: migration.problem: expected a string or null")
        if name != "problem" and not (
            field_value is None
            or (isinstance(field_value, int) and not isinstance(field_value, bool))
        ):
            raise ScanError(f"{source}: migration.{name}: expected an integer or null")
    return MigrationState(**value)


def read_meta(directory: Path) -> dict[str, Any]:
    path = directory / META
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise ScanError(
            f"{directory}: not a snapshot (no {META}; an interrupted collect?)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ScanError(f"{path}: cannot read: {exc}") from exc
    got = meta.get("format") if isinstance(meta, dict) else meta
    if not isinstance(meta, dict) or got != FORMAT:
        raise ScanError(f"{path}: format: expected {FORMAT}, got {got!r}")
    return meta


def read_rows(directory: Path, table: str) -> Iterator[dict[str, Any]]:
    """Rows of one table (for small snapshots and tests; Spark reads the files itself)."""
    path = directory / f"{table}.jsonl"
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ScanError(f"{path}:{number}: not a JSON object: {exc}") from exc
            if not isinstance(row, dict):
                raise ScanError(f"{path}:{number}: expected a JSON object")
            yield row
