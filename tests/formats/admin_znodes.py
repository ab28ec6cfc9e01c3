"""Codecs of the ZooKeeper notification and admin znodes Kafka reads but remediate never
writes or reads (IsrChangeNotificationSequenceZNode, PreferredReplicaElectionZNode,
ReassignPartitionsZNode, DeleteTopicsZNode, ConfigEntityChangeNotificationSequenceZNode in
kafka.zk.ZkData): the
format tests hold them to Kafka's shapes beside the codecs remediate uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from remediate.errors import FormatError
from remediate.formats.jsonutil import dump, get_int, get_int_list, get_str, load_object

CONFIG_CHANGES = "/config/changes"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
ADMIN_PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ADMIN_REASSIGN_PARTITIONS = "/admin/reassign_partitions"


def encode_config_change(entity_path: str) -> bytes:
    return dump({"version": 2, "entity_path": entity_path})


@dataclass(frozen=True)
class TopicPartitionRef:
    topic: str
    partition: int


def decode_partition_list(
    data: bytes | None, *, source: str, with_replicas: bool = False
) -> list[tuple[TopicPartitionRef, tuple[int, ...]]]:
    obj = load_object(data, source=source)
    raw = obj.get("partitions")
    if not isinstance(raw, list):
        raise FormatError(source, "partitions", "a list of {topic, partition}", raw)
    result = []
    for item in raw:
        if not isinstance(item, dict):
            raise FormatError(source, "partitions", "a list of {topic, partition}", item)
        ref = TopicPartitionRef(
            topic=get_str(item, "topic", source=source),
            partition=get_int(item, "partition", source=source),
        )
        replicas = get_int_list(item, "replicas", source=source) if with_replicas else ()
        result.append((ref, replicas))
    return result


def decode_isr_change_notification(data: bytes | None, *, source: str) -> list[TopicPartitionRef]:
    return [ref for ref, _ in decode_partition_list(data, source=source)]


def encode_isr_change_notification(partitions: Sequence[TopicPartitionRef]) -> bytes:
    return dump(
        {
            "version": 1,
            "partitions": [{"topic": p.topic, "partition": p.partition} for p in partitions],
        }
    )


def decode_preferred_replica_election(
    data: bytes | None, *, source: str = ADMIN_PREFERRED_REPLICA_ELECTION
) -> list[TopicPartitionRef]:
    return [ref for ref, _ in decode_partition_list(data, source=source)]


def encode_preferred_replica_election(partitions: Sequence[TopicPartitionRef]) -> bytes:
    return encode_isr_change_notification(partitions)


def decode_reassign_partitions(
    data: bytes | None, *, source: str = ADMIN_REASSIGN_PARTITIONS
) -> dict[TopicPartitionRef, tuple[int, ...]]:
    return dict(decode_partition_list(data, source=source, with_replicas=True))


def encode_reassign_partitions(assignment: Mapping[TopicPartitionRef, Sequence[int]]) -> bytes:
    return dump(
        {
            "version": 1,
            "partitions": [
                {"topic": p.topic, "partition": p.partition, "replicas": list(r)}
                for p, r in assignment.items()
            ],
        }
    )
