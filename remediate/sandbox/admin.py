"""Admin operations the way Kafka's own tools perform them through ZooKeeper.

- `create_topic`: a 2.8+ admin writes the topic znode with a fresh topic id (version 3);
  `legacy=True` writes what Kafka 1.0's AdminUtils wrote: `{"version":1,"partitions":...}`.
- `add_partitions`: `legacy=True` is the pre-2.8 `kafka-topics.sh --zookeeper --alter
  --partitions`: the znode is rewritten as version 1 and the topic id is dropped.
- `failover_controller`: delete `/controller`, as operators do to move the controller.
- `alter_replica_log_dirs`, `describe_log_dirs`, `alter_partition_reassignments`: Kafka's
  admin requests of the same names, to the emulated brokers over the sandbox's wire.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from remediate.errors import SandboxError
from remediate.formats.logdir import validate_topic_name
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    TopicAssignment,
    broker_config_path,
    broker_path,
    decode_broker,
    decode_controller,
    decode_controller_epoch,
    decode_topic,
    decode_topic_config,
    encode_topic,
    encode_topic_config,
    encode_topic_legacy,
    topic_config_path,
    topic_path,
)
from remediate.sandbox.emulated import wire


def _replica_index(first: int, shift: int, replica: int, count: int) -> int:
    return (first + 1 + (shift + replica) % (count - 1)) % count


def _check_factor(brokers: int, replication_factor: int) -> None:
    if replication_factor < 1:
        raise SandboxError("the replication factor must be at least 1")
    if replication_factor > brokers:
        raise SandboxError(
            f"replication factor {replication_factor} is larger than the"
            f" {brokers} available brokers"
        )


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    start_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Rack-unaware assignment as AdminUtils.assignReplicasToBrokers does it: the rack-aware
    one with every broker in one rack (the brokers in id order, no replica ever skipped)."""
    return assign_replicas_rack_aware(
        dict.fromkeys(brokers, ""),
        partitions,
        replication_factor,
        start_index=start_index,
        start_partition=start_partition,
    )


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: the first broker of each rack (racks in name
    order, brokers in id order), then the second of each, and so on."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def assign_replicas_rack_aware(
    racks: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    start_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Rack-aware assignment as AdminUtils.assignReplicasToBrokersRackAware does it: each
    partition's replicas on as many racks as there are, then on as many brokers."""
    _check_factor(len(racks), replication_factor)
    arranged = rack_alternated(racks)
    count, rack_count = len(arranged), len(set(racks.values()))
    assignment: dict[int, tuple[int, ...]] = {}
    shift = start_index
    for offset in range(partitions):
        partition = start_partition + offset
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start_index) % count
        replicas = [arranged[first]]
        k = 0
        while len(replicas) < replication_factor:
            broker = arranged[_replica_index(first, shift * rack_count, k, count)]
            used_racks = {racks[r] for r in replicas}
            if (racks[broker] not in used_racks or len(used_racks) == rack_count) and (
                broker not in replicas or len(replicas) == count
            ):
                replicas.append(broker)
            k += 1
        assignment[partition] = tuple(replicas)
    return assignment


def live_brokers(zk: KazooClient) -> list[int]:
    return sorted(int(c) for c in zk.get_children(BROKER_IDS))


def registered_racks(zk: KazooClient) -> dict[int, str | None]:
    """Each live broker's broker.rack (None: it has none)."""
    racks: dict[int, str | None] = {}
    for broker in live_brokers(zk):
        data, _ = zk.get(f"{BROKER_IDS}/{broker}")
        racks[broker] = decode_broker(broker, data, source=f"{BROKER_IDS}/{broker}").rack
    return racks


def _assign(
    zk: KazooClient,
    partitions: int,
    replication_factor: int,
    *,
    first_leader: int | None = None,
    start_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """As Kafka assigns new partitions: rack-aware when every live broker has a rack (else as
    if all were in one rack: rack-unaware); the start index where `first_leader` (partition
    0's first replica) stands."""
    found = registered_racks(zk)
    if None in found.values():  # not every broker has a rack: one rack for all of them
        racks = dict.fromkeys(found, "")
    else:
        racks = {b: str(r) for b, r in found.items()}
    order = rack_alternated(racks)
    return assign_replicas_rack_aware(
        racks,
        partitions,
        replication_factor,
        start_index=order.index(first_leader) if first_leader in order else 0,
        start_partition=start_partition,
    )


def create_topic(
    zk: KazooClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    *,
    config: Mapping[str, str] | None = None,
    legacy: bool = False,
) -> TopicAssignment:
    validate_topic_name(topic, source="--topic")
    if partitions < 1:
        raise SandboxError("a topic needs at least one partition")
    if zk.exists(topic_path(topic)):
        raise SandboxError(f"topic {topic!r} already exists")
    assignment = _assign(zk, partitions, replication_factor)
    zk.ensure_path("/config/topics")
    try:
        zk.create(topic_config_path(topic), encode_topic_config(config or {}))
    except NodeExistsError:
        zk.set(topic_config_path(topic), encode_topic_config(config or {}))
    if legacy:
        data = encode_topic_legacy(assignment)
        result = TopicAssignment(partitions=assignment, version=1)
    else:
        result = TopicAssignment(partitions=assignment, topic_id=TopicId.random(), version=3)
        data = encode_topic(result)
    zk.create(topic_path(topic), data, makepath=True)
    return result


def read_topic(zk: KazooClient, topic: str) -> tuple[TopicAssignment, int]:
    try:
        data, stat = zk.get(topic_path(topic))
    except NoNodeError:
        raise SandboxError(f"topic {topic!r} does not exist") from None
    return decode_topic(data, source=topic_path(topic)), stat.version


def add_partitions(
    zk: KazooClient, topic: str, total: int, *, legacy: bool = False
) -> TopicAssignment:
    """Grow `topic` to `total` partitions; `legacy` drops the topic id as pre-2.8 tools did."""
    current, version = read_topic(zk, topic)
    existing = len(current.partitions)
    if total <= existing:
        raise SandboxError(
            f"topic {topic!r} has {existing} partitions; --partitions must be larger"
        )
    first_replicas = current.partitions.get(0, ())
    added = _assign(
        zk,
        total - existing,
        len(first_replicas) or 1,
        first_leader=first_replicas[0] if first_replicas else None,
        start_partition=existing,
    )
    partitions = {**current.partitions, **added}
    if legacy:
        # Kafka 1.0's AdminUtils.addPartitions: an unconditional write of a version-1 znode.
        zk.set(topic_path(topic), encode_topic_legacy(partitions))
        return TopicAssignment(partitions=partitions, version=1)
    updated = TopicAssignment(
        partitions=partitions,
        topic_id=current.topic_id,
        adding_replicas=current.adding_replicas,
        removing_replicas=current.removing_replicas,
        version=3,
    )
    zk.set(topic_path(topic), encode_topic(updated), version=version)
    return updated


@dataclass(frozen=True)
class ControllerInfo:
    broker_id: int
    epoch: int


def current_controller(zk: KazooClient) -> ControllerInfo | None:
    try:
        data, _ = zk.get(CONTROLLER)
        epoch_data, _ = zk.get(CONTROLLER_EPOCH)
    except NoNodeError:
        return None
    return ControllerInfo(decode_controller(data).broker_id, decode_controller_epoch(epoch_data))


def failover_controller(
    zk: KazooClient, *, timeout: float = 30.0
) -> tuple[ControllerInfo, ControllerInfo]:
    """Delete /controller and wait for the next election; return (before, after)."""
    before = current_controller(zk)
    if before is None:
        raise SandboxError("there is no active controller to fail over")
    with contextlib.suppress(NoNodeError):
        zk.delete(CONTROLLER)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        after = current_controller(zk)
        if after is not None and after.epoch > before.epoch:
            return before, after
        time.sleep(0.05)
    raise SandboxError(
        f"no controller was elected within {timeout:.0f}s after deleting {CONTROLLER}"
    )


# -- moving replicas between log dirs, and reassignments (the sandbox's wire) ------------------


def broker_endpoint(zk: KazooClient, broker_id: int) -> tuple[str, int]:
    try:
        data, _ = zk.get(broker_path(broker_id))
    except NoNodeError:
        raise SandboxError(f"broker {broker_id} is not registered") from None
    endpoint = decode_broker(broker_id, data, source=broker_path(broker_id)).endpoint()
    if endpoint is None:
        raise SandboxError(f"broker {broker_id} has no endpoint")
    return endpoint.host, endpoint.port


# Kafka's notification that an entity's dynamic settings changed (ZooKeeper mode).
CONFIG_CHANGE = "/config/changes/config_change_"


def broker_settings(zk: KazooClient, broker_id: int) -> dict[str, str]:
    """The dynamic settings set for broker `broker_id` alone."""
    path = broker_config_path(broker_id)
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return {}
    return decode_topic_config(data, source=path)


def set_broker_setting(zk: KazooClient, broker_id: int, name: str, value: str | None) -> None:
    """Set (None: remove) one of the broker's own dynamic settings the way Kafka's
    AdminZkClient.changeBrokerConfig does in ZooKeeper mode: the entity znode rewritten, then a
    change notification."""
    settings = broker_settings(zk, broker_id)
    if value is None:
        settings.pop(name, None)
    else:
        settings[name] = value
    path = broker_config_path(broker_id)
    zk.ensure_path(path)
    zk.set(path, encode_topic_config(settings))
    zk.ensure_path("/config/changes")
    notice = {"version": 2, "entity_path": f"brokers/{broker_id}"}
    zk.create(CONFIG_CHANGE, json.dumps(notice).encode(), sequence=True)


def alter_replica_log_dirs(
    zk: KazooClient, moves: Mapping[tuple[str, int, int], str]
) -> dict[tuple[str, int, int], int]:
    """Move replicas (topic, partition, broker) to a log dir of their broker; each broker's
    answer per replica (a Kafka error code, 0 for none)."""
    by_broker: dict[int, dict[str, list[list[Any]]]] = {}
    for (topic, partition, broker), destination in moves.items():
        by_broker.setdefault(broker, {}).setdefault(destination, []).append([topic, partition])
    answers: dict[tuple[str, int, int], int] = {}
    for broker, dirs in sorted(by_broker.items()):
        host, port = broker_endpoint(zk, broker)
        response = wire.call_once(
            host,
            port,
            {
                "api": "AlterReplicaLogDirs",
                "dirs": [{"path": d, "partitions": tps} for d, tps in dirs.items()],
            },
        )
        for result in response.get("results", []):
            answers[(result["topic"], result["partition"], broker)] = int(result["error"])
    return answers


def describe_log_dirs(zk: KazooClient, broker_id: int) -> list[dict[str, Any]]:
    """The broker's online log dirs, each with its replicas (`future` for a move's copy)."""
    host, port = broker_endpoint(zk, broker_id)
    response = wire.call_once(host, port, {"api": "DescribeLogDirs"})
    return list(response["log_dirs"])


def alter_partition_reassignments(
    zk: KazooClient, reassignments: Mapping[tuple[str, int], Sequence[int]]
) -> dict[tuple[str, int], int]:
    """Reassign partitions, through the active controller; its answer per partition."""
    controller = current_controller(zk)
    if controller is None:
        raise SandboxError("there is no active controller")
    host, port = broker_endpoint(zk, controller.broker_id)
    response = wire.call_once(
        host,
        port,
        {
            "api": "AlterPartitionReassignments",
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in reassignments.items()
            ],
        },
        timeout=30.0,
    )
    return {(r["topic"], r["partition"]): int(r["error"]) for r in response.get("partitions", [])}
