"""Where a replica can move on its own broker, for the repairs without restarts. Pure.

On Kafka 2.8 a replica moved to another log dir of its broker holds no topic id afterwards
(the future log is built without one, LogManager.scala:781 at 2.8.2) and takes ZooKeeper's
at the next LeaderAndIsr; on 3.0 and later it keeps the id it had (KAFKA-12426), so these
repairs are never offered there. A move needs, on every broker concerned: Kafka 2.x (read
from the broker, never assumed), a second online log dir, and room there for the replica.

`BrokerDisks` are the facts the collector gathers at plan time (the brokers' Kafka version
and log dirs through Kafka's admin API, free space with `df` over the transport); `assign`
picks each replica's destination, or says which precondition failed, for which broker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from remediate.state import MoveFacts, TopicPartition

# Room kept free on a destination beyond the replica itself: the copy lands beside
# whatever the broker writes meanwhile.
HEADROOM = 0.10


@dataclass(frozen=True, order=True)
class ReplicaMove:
    """Move `partition`'s replica on `broker` from `from_dir` to `to_dir` (`size` bytes)."""

    broker: int
    partition: TopicPartition
    from_dir: str
    to_dir: str
    size: int


def assign(
    replicas: Iterable[tuple[TopicPartition, int]], facts: MoveFacts
) -> tuple[tuple[ReplicaMove, ...], str | None]:
    """A destination for every replica (partition, broker): the other online log dir of its
    broker with the most room left; or no moves and the first precondition that fails."""
    if facts.problem is not None:
        return (), facts.problem
    wanted = sorted(set(replicas), key=lambda r: (r[1], str(r[0])))
    left: dict[tuple[int, str], int] = {}
    moves: list[ReplicaMove] = []
    for tp, broker in wanted:
        disks = facts.brokers.get(broker)
        if disks is None:
            return (), f"broker {broker}: its log dirs could not be read"
        if disks.kafka_version is None:
            return (), f"broker {broker}: its Kafka version could not be read"
        if disks.kafka_version[0] != 2:
            version = ".".join(str(n) for n in disks.kafka_version)
            return (), (
                f"broker {broker} runs Kafka {version}: from 3.0 a moved replica keeps its id"
                " (KAFKA-12426)"
            )
        if disks.offline_dirs:
            return (), (
                f"broker {broker} has an offline log dir ({', '.join(disks.offline_dirs)}):"
                " Kafka refuses to move replicas then"
            )
        if len(disks.online_dirs) < 2:
            return (), f"broker {broker} has one log dir: a replica has nowhere to move"
        placed = disks.replicas.get(tp)
        if placed is None:
            return (), f"broker {broker} does not report a replica of {tp}"
        current, size = placed
        need = size + int(size * HEADROOM)
        room = {
            d: left.setdefault((broker, d), disks.free_bytes.get(d, 0))
            for d in disks.online_dirs
            if d != current
        }
        destination = max(sorted(room), key=lambda d: room[d])
        if room[destination] < need:
            return (), (
                f"broker {broker}: no log dir other than {current} has room for {tp}"
                f" ({size} bytes and {int(HEADROOM * 100)}% more; at most"
                f" {room[destination]} free, in {destination})"
            )
        left[(broker, destination)] -= size
        moves.append(ReplicaMove(broker, tp, current, destination, size))
    return tuple(moves), None


def bytes_per_broker(moves: Iterable[ReplicaMove]) -> dict[int, int]:
    total: dict[int, int] = {}
    for move in moves:
        total[move.broker] = total.get(move.broker, 0) + move.size
    return dict(sorted(total.items()))
