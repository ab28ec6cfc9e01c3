"""The incident and Kafka's ZooKeeper-to-KRaft migration, on real brokers (`sandbox migrate`).

Three brokers, RF 3, min.insync.replicas 2, one log dir each, an acks=all producer throughout:

(a) the incident left unrepaired (armed: a failover minted a new id, every replica holds the
    old one, nothing restarted yet: the cluster looks healthy) and migrated: what real Kafka
    does to the data, asserted as observed;
(b) the preflight names the hazard, `fix --yes` repairs it, the preflight passes, and the
    migration completes with every acknowledged record read back in KRaft mode, no -stray
    directory, and every partition.metadata holding KRaft's id;
(c) a topic that lost its id with no failover since (beside (b)'s): the preflight names
    it, and after `fix --yes` the migration completes;
(d) while a migration is under way (hybrid), `fix --yes`, `apply` and `rollback` refuse and
    nothing changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from remediate.formats.logdir import PARTITION_METADATA, parse_partition_metadata
from remediate.formats.znodes import MIGRATION, decode_migration
from remediate.sandbox import admin, cluster
from remediate.sandbox.records import Acked
from remediate.sandbox.reproduce import Incident
from remediate.sandbox.traffic import RetryingProducer
from tests.execute.sandbox_tools import run_cli
from tests.sandbox.helpers import lost_records
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"
# (c): a second topic, grown by the pre-2.8 client after the failover: no id, and no
# failover since to mint one.
LOST = "payments"
PARTITIONS = 6  # after the pre-2.8 client's alter
STRAY = "-stray"
# The release of each line the sandbox migrates: the last ZooKeeper-mode release, and the
# first whose migration moves mismatched replicas aside (KAFKA-16180, 3.6.2 and 3.7.0).
LAST, EARLIER = "3.9.2", "3.6.2"


@dataclass
class Lab:
    directory: Path
    incident: Incident

    @property
    def config(self) -> str:
        return str(self.directory / "cluster.yaml")

    @property
    def state(self) -> cluster.SandboxState:
        return cluster.load_state(self.directory)

    @property
    def zk(self) -> KazooClient:
        return self.incident.zk

    def preflight(self) -> tuple[int, dict[str, Any]]:
        checked = run_cli("check", "-c", self.config, "--before", "kraft-migration", "--json")
        assert checked.returncode in (0, 2), checked.stdout[-2000:] + checked.stderr[-2000:]
        return checked.returncode, json.loads(checked.stdout)

    def migrate(self, *args: str) -> None:
        migrated = run_cli("sandbox", "migrate", "--dir", str(self.directory), *args, timeout=900)
        assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-5000:]

    def fix(self) -> dict[str, Any]:
        fixed = run_cli("fix", "-c", self.config, "--yes", "--accept-unavailable", "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-2000:]
        document: dict[str, Any] = json.loads(fixed.stdout)
        return document

    def topic_dirs(self, topic: str = TOPIC) -> dict[int, list[Path]]:
        """Each broker's directories of `topic`, live and set aside."""
        return {
            b.broker_id: sorted(
                p
                for log_dir in b.log_dirs
                for p in Path(log_dir).iterdir()
                if p.name.startswith(f"{topic}-")
            )
            for b in self.state.brokers
        }

    def file_ids(self, *, stray: bool, topic: str = TOPIC) -> dict[str, str]:
        ids = {}
        for dirs in self.topic_dirs(topic).values():
            for path in dirs:
                if path.name.endswith(STRAY) != stray:
                    continue
                data = (path / PARTITION_METADATA).read_bytes()
                ids[str(path)] = str(parse_partition_metadata(data, source=str(path)).topic_id)
        return ids

    def migrated_id(self, topic: str = TOPIC) -> str:
        """The topic's id as ZooKeeper holds it, which the migration copies (KRaft's id)."""
        assignment, _ = admin.read_topic(self.zk, topic)
        return str(assignment.topic_id)


@pytest.fixture
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lab]:
    """A real-Kafka sandbox of the release `request.param`, the topic created and written to."""
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka=f"real-{request.param}", log_dirs_per_broker=1)
    incident = Incident(directory, topic=TOPIC)
    try:
        incident.create_topic()
        incident.produce()
        yield Lab(directory, incident)
    finally:
        incident.close()
        cluster.down(directory)


def arm(lab: Lab) -> None:
    """The incident up to its failover: the id dropped by Kafka 1.0.2's alter, a new one
    minted; every replica holds the old id, and nothing has restarted."""
    lab.incident.add_partitions_legacy()
    lab.incident.produce_and_consume_all()
    lab.incident.failover()


def producing(lab: Lab) -> RetryingProducer:
    """acks=all on every partition, one thread each, each record sent until acknowledged."""
    return RetryingProducer(lab.state, TOPIC, list(range(PARTITIONS)), prefix="migration")


# How long a producer may take to see every partition writable again once the migration is
# done: to find the new leaders in KRaft's metadata and, where the partitions were recreated
# empty, to start its idempotent sequence again. An event waited for, not a pause: the wait
# ends at the last partition's first acknowledgement.
WRITABLE_AGAIN_S = 120.0


def writable_since(producer: RetryingProducer, moment: float) -> None:
    """Every partition took an acks=all write after `moment` (time.monotonic()), as the
    producer saw it; when one does not, the errors the producer got say why."""
    wait_until(
        lambda: all(
            any(at > moment for at in producer.acked_at.get(p, ())) for p in range(PARTITIONS)
        ),
        lambda: f"every partition of {TOPIC} to take a write; errors: {producer.error_summary()}",
        timeout=WRITABLE_AGAIN_S,
    )


def everything_acked(lab: Lab, producer: RetryingProducer) -> list[Acked]:
    """The records the incident's steps and the background producer had acknowledged."""
    return [*lab.incident.acked, *producer.acked]


@pytest.mark.parametrize("lab", [LAST, EARLIER], indirect=True, ids=lambda v: f"real-{v}")
def test_an_armed_cluster_migrated_without_the_fix_loses_every_record(lab: Lab) -> None:
    """(a): the harm the preflight prevents, as real Kafka does it."""
    arm(lab)
    code, found = lab.preflight()
    assert code == 2
    strays = [h for h in found["hazards"] if h["kind"] == "STRAY_REPLICAS"]
    assert len(strays) == PARTITIONS and not any(h["data_survives"] for h in strays)
    old_ids = set(lab.file_ids(stray=False).values())
    assert len(old_ids) == 1 and lab.migrated_id() not in old_ids
    with producing(lab) as producer:
        writable_since(producer, time.monotonic())
        before = [*lab.incident.acked, *producer.acked]
        # The brokers' roll into migration mode restarts each one: the incident's ISR
        # collapse follows, and an operator who does not wait for the ISR goes on.
        lab.migrate("--no-wait-isr")
        # Not a wait for writes: what a producer sees next differs by release (3.9.2's
        # recreated partitions take acks=all writes again; on 3.6.2 their leaders may append
        # while no acks=all write completes for minutes). The harm is on disk: every replica
        # set aside as -stray, which the brokers do as they start in KRaft mode.
        wait_until(
            lambda: (
                sum(p.name.endswith(STRAY) for d in lab.topic_dirs().values() for p in d)
                == 3 * PARTITIONS
            ),
            lambda: f"every replica of {TOPIC} set aside: {lab.topic_dirs()}",
            timeout=WRITABLE_AGAIN_S,
        )
    lost = lost_records(lab.state, lab.zk, TOPIC, everything_acked(lab, producer))
    # As observed: every replica of the topic was set aside as -stray by the KRaft
    # controller's full LeaderAndIsr while the brokers ran in migration mode, and recreated
    # empty with KRaft's id: no record acknowledged before the migration is served any more.
    stray_ids = lab.file_ids(stray=True)
    assert len(stray_ids) == 3 * PARTITIONS, lab.topic_dirs()
    assert set(stray_ids.values()) == old_ids
    assert set(lab.file_ids(stray=False).values()) == {lab.migrated_id()}
    assert {(a.partition, a.offset, a.key) for a in before} <= {
        (a.partition, a.offset, a.key) for a in lost
    }


@pytest.mark.parametrize("lab", [LAST, EARLIER], indirect=True, ids=lambda v: f"real-{v}")
def test_the_preflight_then_the_fix_then_a_migration_that_keeps_every_record(lab: Lab) -> None:
    """(b) and (c), and on the last release (d): a migration under way refuses every change."""
    arm(lab)
    lost_id = Incident(lab.directory, topic=LOST)
    try:
        lost_id.create_topic()
        lost_id.produce()
        lost_id.add_partitions_legacy()
    finally:
        lost_id.close()
    with producing(lab) as producer:
        writable_since(producer, time.monotonic())
        code, found = lab.preflight()
        assert code == 2
        kinds = {(h["kind"], h.get("topic")) for h in found["hazards"]}
        assert kinds == {("STRAY_REPLICAS", TOPIC), ("TOPIC_WITHOUT_ID", LOST)}, found
        plan_path = Path(lab.directory) / "plan.json"
        planned = run_cli("plan", "-c", lab.config, "--json", "-o", str(plan_path))
        assert planned.returncode in (0, 6), planned.stderr[-2000:]
        fixed = lab.fix()
        assert fixed["check"]["status"] == "OK"
        code, found = lab.preflight()
        assert (code, found["safe"], found["hazards"]) == (0, True, []), found
        kraft_ids = {topic: lab.migrated_id(topic) for topic in (TOPIC, LOST)}

        lab.migrate("--until", "hybrid")
        zk_data, _ = lab.zk.get(MIGRATION)
        assert decode_migration(zk_data).metadata_migrated
        if lab.state.kafka == f"real-{LAST}":
            under_way(lab, plan_path, fixed["run"]["run_id"])
        lab.migrate()
        writable_since(producer, time.monotonic())
    assert lost_records(lab.state, lab.zk, TOPIC, everything_acked(lab, producer)) == []
    assert lost_records(lab.state, lab.zk, LOST, lost_id.acked) == []
    for topic, kraft_id in kraft_ids.items():
        dirs = lab.topic_dirs(topic)
        assert all(not p.name.endswith(STRAY) for d in dirs.values() for p in d), dirs
        assert set(lab.file_ids(stray=False, topic=topic).values()) == {kraft_id}


def under_way(lab: Lab, plan_path: Path, run_id: str) -> None:
    """(d): with the brokers in migration mode, nothing that changes the cluster goes ahead."""
    checked = run_cli("check", "-c", lab.config, "--json")
    kinds = {f["kind"] for f in json.loads(checked.stdout)["findings"]}
    assert "KRAFT_MIGRATION" in kinds, checked.stdout[-2000:]
    files = lab.file_ids(stray=False)
    topic_znode = lab.zk.get(f"/brokers/topics/{TOPIC}")
    digest = json.loads(plan_path.read_text())["digest"]
    for args in (
        ("fix", "-c", lab.config, "--yes", "--accept-unavailable"),
        ("apply", "-c", lab.config, "--plan", str(plan_path), "--approve", digest),
        ("rollback", "-c", lab.config, "--run", run_id),
    ):
        refused = run_cli(*args)
        assert refused.returncode == 4, (args, refused.stdout[-2000:], refused.stderr[-2000:])
        assert "migration has begun" in refused.stdout + refused.stderr, args
    assert lab.file_ids(stray=False) == files
    after = lab.zk.get(f"/brokers/topics/{TOPIC}")
    assert (after[0], after[1].version) == (topic_znode[0], topic_znode[1].version)
