"""Past step 8: the outage the incident leads to, and the manual repair that heals it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remediate.formats.znodes import PartitionState
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import client
from remediate.sandbox.reproduce import Incident, replica_file_ids
from tests.sandbox.helpers import BackgroundProducer, delete_metadata_files, lost_records, states
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"
OLD = [0, 1, 2]
NEW = [3, 4, 5]
ALL = OLD + NEW


@pytest.fixture
def incident(sandbox_dir: Path) -> Iterator[Incident]:
    cluster.up(sandbox_dir)
    incident = Incident(sandbox_dir, topic=TOPIC)
    incident.run()
    yield incident
    incident.close()


def repair_order(incident: Incident) -> list[int]:
    """The restarted broker first, the controller last."""
    controller = admin.current_controller(incident.zk)
    assert controller is not None
    brokers = [b.broker_id for b in incident.state.brokers]
    return sorted(
        brokers, key=lambda b: (b == controller.broker_id, b != incident.result.restarted_broker, b)
    )


class LeaderSampler:
    """Samples the old partitions' state znodes every 100 ms on a thread of its own."""

    def __init__(self, incident: Incident) -> None:
        self.state = incident.state
        self.offline_seen: set[int] = set()
        self.latest: dict[int, PartitionState] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LeaderSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def sampled(self, condition: Callable[[dict[int, PartitionState]], bool]) -> bool:
        """Wait for a sample, taken after this call, that meets `condition`."""
        after = self.samples
        return wait_until(lambda: self.samples > after and condition(self.latest), timeout=60)

    def _run(self) -> None:
        zk = cluster.zk_client(self.state)
        try:
            while not self._stop.wait(0.1):
                sample = states(zk, TOPIC, OLD)
                for partition, state in sample.items():
                    if state.leader < 0:
                        self.offline_seen.add(partition)
                self.latest = sample
                self.samples += 1
        finally:
            zk.stop()
            zk.close()


def test_restarting_every_broker_leaves_the_old_partitions_without_a_working_leader(
    incident: Incident,
) -> None:
    with LeaderSampler(incident) as sampler:
        for broker in repair_order(incident):
            if broker == incident.result.restarted_broker:
                continue
            cluster.stop_broker(incident.directory, broker)

            # The controller has handled the stop and the sampler has seen the outcome: no
            # old partition is led by the stopped broker (another leads it, or none does).
            def not_led_by(latest: dict[int, PartitionState], b: int = broker) -> bool:
                return all(s.leader != b for s in latest.values())

            assert sampler.sampled(not_led_by)
            cluster.start_broker(incident.directory, broker, wait=True)

            # Back in the ISR of every new partition (it refuses the old ones) before the
            # next broker stops, so that the new partitions never lose their quorum.
            def in_every_new_isr(b: int = broker) -> bool:
                return all(b in s.isr for s in states(incident.zk, TOPIC, NEW).values())

            assert wait_until(in_every_new_isr, timeout=60)
    # While the last in-sync replica was down, the partitions had no leader at all ...
    assert sampler.offline_seen == set(OLD)
    # ... and now every broker refuses them: producers fail on every old partition only.
    producer = client.Producer(incident.zk, timeout_ms=1500)
    try:
        results = {p: producer.send(TOPIC, p, [(f"after-{p}", "v")]) for p in ALL}
    finally:
        producer.close()
    assert {p for p, (_, error) in results.items() if error is not None} == set(OLD)
    assert {results[p][1] for p in OLD} <= {
        "NOT_LEADER_OR_FOLLOWER",
        "NO_LEADER",
        "REQUEST_TIMED_OUT",
    }


def test_manual_repair_heals_the_cluster_without_losing_acknowledged_records(
    incident: Incident,
) -> None:
    with BackgroundProducer(incident.state, TOPIC, len(ALL), prefix="repair") as producer:
        for broker in repair_order(incident):
            cluster.stop_broker(incident.directory, broker)
            deleted = delete_metadata_files(incident.state, broker, TOPIC, OLD)
            assert {p.name for p in deleted} == {"partition.metadata", "leader-epoch-checkpoint"}
            cluster.start_broker(incident.directory, broker, wait=True)
            # Back in the ISR of every new partition (the old ones heal once every broker is
            # repaired) and the cluster takes writes again, before the next broker stops.
            acked_before = len(producer.acked)

            def back_and_writable(b: int = broker, acked_before: int = acked_before) -> bool:
                return (
                    all(b in s.isr for s in states(incident.zk, TOPIC, NEW).values())
                    and len(producer.acked) > acked_before
                )

            assert wait_until(back_and_writable, timeout=60)
        assert wait_until(
            lambda: all(len(s.isr) == 3 for s in states(incident.zk, TOPIC, ALL).values()),
            timeout=60,
        )
    new_id = incident.result.new_id
    ids = replica_file_ids(incident.state, TOPIC)
    assert set(ids.values()) <= {new_id, None}
    # Kafka 2.8 writes the file at the next LeaderAndIsr after the log was attached; a
    # controller move sends one to every replica.
    admin.failover_controller(incident.zk)
    assert wait_until(lambda: set(replica_file_ids(incident.state, TOPIC).values()) == {new_id})
    assert len(replica_file_ids(incident.state, TOPIC)) == 18
    assert producer.acked, "the producer never got an acknowledgement during the repair"
    after = client.produce(incident.zk, TOPIC, count=60, key_prefix="healed")
    assert len(after.acked) == 60
    assert {a.partition for a in after.acked} == set(ALL)
    acked = incident.acked + producer.acked + after.acked
    assert lost_records(incident.state, incident.zk, TOPIC, acked) == []
