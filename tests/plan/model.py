"""Plain-data clusters for the planner and gate tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import BrokerRegistration, Endpoint, PartitionState, TopicAssignment
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from remediate.state import ClusterState, TopicPartition, TopicState

OLD = "AAAAAAAAAAAAAAAAAAAAAQ"
NEW = "AAAAAAAAAAAAAAAAAAAAAg"


def broker(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=(Endpoint("PLAINTEXT", f"10.0.0.{broker_id}", 9092),),
        host=f"10.0.0.{broker_id}",
        port=9092,
        timestamp_ms=0,
        epoch=100 + broker_id,
        rack=rack,
    )


def cluster(
    *,
    brokers: Sequence[int],
    topics: Mapping[str, Mapping[int, Sequence[int]]],
    isr: Mapping[tuple[str, int], Sequence[int]] | None = None,
    leaders: Mapping[tuple[str, int], int] | None = None,
    controller: int | None = None,
    min_isr: Mapping[str, int] | None = None,
    registered: Sequence[int] | None = None,
    racks: Mapping[int, str] | None = None,
) -> ClusterState:
    topic_states = {}
    partitions: dict[TopicPartition, PartitionState] = {}
    for name, assignment in topics.items():
        topic_states[name] = TopicState(
            name,
            TopicAssignment(
                partitions={p: tuple(r) for p, r in assignment.items()},
                topic_id=TopicId(bytes(15) + b"\x02"),
                version=3,
            ),
            znode_version=4,
            config={"min.insync.replicas": str((min_isr or {}).get(name, 2))},
        )
        for number, replicas in assignment.items():
            tp = TopicPartition(name, number)
            partitions[tp] = PartitionState(
                leader=(leaders or {}).get(tp, replicas[0]),
                leader_epoch=1,
                isr=tuple((isr or {}).get(tp, replicas)),
                controller_epoch=3,
            )
    return ClusterState(
        cluster_id="cid",
        controller_id=controller,
        controller_epoch=3,
        brokers={
            b: broker(b, (racks or {}).get(b))
            for b in (registered if registered is not None else brokers)
        },
        topics=topic_states,
        partitions=partitions,
    )


def replica(
    kind: str, broker_id: int, topic: str, partition: int, *, in_isr: bool = True
) -> Finding:
    file_id = {"OK": NEW, "METADATA_MISSING": None, "METADATA_CORRUPT": None}.get(kind, OLD)
    return Finding(
        kind=FindingKind(kind),
        cluster="c",
        broker=broker_id,
        topic=topic,
        partition=partition,
        file_topic_id=file_id,
        zk_topic_id=NEW,
        in_isr=in_isr,
        log_dir=f"/data/{broker_id}/kafka",
        dir=f"{topic}-{partition}",
    )


def findings_for(
    state: ClusterState, kinds: Mapping[tuple[int, str, int], str] | None = None
) -> list[Finding]:
    """A finding per assigned replica: OK unless `kinds` says otherwise."""
    result = []
    for (topic, number), partition in sorted(state.partitions.items()):
        for replica_id in state.replicas(topic, number):
            kind = (kinds or {}).get((replica_id, topic, number), "OK")
            if kind == "TOPIC_ID_MISMATCH" and replica_id not in partition.isr:
                kind = "TOPIC_ID_MISMATCH_OUT_OF_ISR"
            result.append(
                replica(kind, replica_id, topic, number, in_isr=replica_id in partition.isr)
            )
    return result
