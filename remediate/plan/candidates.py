"""The repairs the planner weighs for topics whose replicas hold different ids. Pure.

- "keep-zk-id": back up and delete the files of the replicas that hold another id than
  ZooKeeper's, and restart their brokers.
- "restore-id": write the other id back (CAS) and re-elect the controller, which heals at once,
  with no restart, every partition whose replicas all hold that id in memory; then back up and
  delete the files of the replicas that hold the id ZooKeeper held, and roll their brokers.
- "move-keep-zk-id", "move-restore-id" (Kafka 2.8 brokers with two log dirs or more): the
  same two ends with no restart, the replicas to change moved to another log dir of their
  broker first, where 2.8 builds them with no id (plan/moves.py).

This module finds, per topic, what "restore-id" would restore and roll; planner.py builds the
steps of both and lets the availability model (availability.py) weigh them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from remediate.plan.restore import replica_ids
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from remediate.state import ClusterState, ReplicaRef, TopicPartition

KEEP = "keep-zk-id"
RESTORE = "restore-id"
# Kafka 2.8 JBOD brokers only: the replicas holding another id move to another log dir of
# their broker, then each partition is reassigned to its own replicas (plan/moves.py).
MOVE_KEEP = "move-keep-zk-id"
# The other way round: the replicas holding ZooKeeper's id move (the partitions created
# after the failover, usually small), then the other id is restored and the controller
# re-elected: the old partitions heal with none of their data copied.
MOVE_RESTORE = "move-restore-id"
NAMES = (KEEP, RESTORE, MOVE_KEEP, MOVE_RESTORE)


@dataclass(frozen=True)
class Split:
    """A topic whose replicas hold exactly two ids: ZooKeeper's and `other_id`."""

    topic: str
    other_id: str
    zk_id: str
    # The replicas holding ZooKeeper's id, by partition then broker: rolled after the restore.
    rolled: tuple[ReplicaRef, ...]
    holders: int


def split(topic: str, state: ClusterState, findings: Sequence[Finding]) -> Split | str:
    """What "restore-id" restores and rolls for `topic`, or why it cannot."""
    if topic not in state.topics:
        return f"topic {topic} is not in ZooKeeper"
    zk_id = state.topics[topic].topic_id
    if zk_id is None:
        return f"{topic} has no id in ZooKeeper"
    assigned = {
        (p, b) for p, brokers in state.topics[topic].assignment.partitions.items() for b in brokers
    }
    hosts = {b for _, b in assigned}
    unreachable = {
        f.broker
        for f in findings
        if f.kind == FindingKind.BROKER_UNREACHABLE and f.broker is not None and f.broker in hosts
    }
    if unreachable:
        return f"broker(s) {sorted(unreachable)} hosting {topic} could not be inspected"
    ids, no_file, problems = replica_ids(topic, assigned, findings)
    if problems:
        return f"{topic} has replicas whose partition.metadata cannot be read or is missing"
    unseen = assigned - set(ids) - no_file
    if unseen:
        return f"{len(unseen)} replica(s) of {topic} were not seen by the scan"
    held = {key: next(iter(found)) for key, found in ids.items() if len(found) == 1}
    if len(held) != len(ids):
        return f"a replica of {topic} has more than one partition.metadata"
    others = sorted(set(held.values()) - {zk_id})
    if len(others) != 1:
        return (
            f"{topic}: no other id to restore"
            if not others
            else f"{topic}: its replicas hold {len(others)} ids other than ZooKeeper's"
        )
    rolled = tuple(
        ReplicaRef(broker, TopicPartition(topic, partition))
        for partition, broker in sorted(key for key, topic_id in held.items() if topic_id == zk_id)
    )
    return Split(
        topic=topic,
        other_id=others[0],
        zk_id=zk_id,
        rolled=rolled,
        holders=sum(1 for topic_id in held.values() if topic_id == others[0]),
    )
