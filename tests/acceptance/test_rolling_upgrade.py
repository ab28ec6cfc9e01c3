"""The incident in the middle of a rolling upgrade, on real Apache Kafka: three 2.8.2 brokers
with two log dirs each, and the restart that surfaces the incident (its step 8) is the upgrade
of one broker to 3.4.1 (`sandbox broker upgrade`: controlled shutdown, the release swapped,
inter.broker.protocol.version kept at 2.8). The cluster then runs two releases, and each
broker's is read from that broker's own ApiVersions: the plan names both, offers no move (a
3.4 broker's moved replica keeps its id), and its digest is the same when `fix --yes
--approve` plans again. The fix heals it under an acks=all producer with retries, the
upgraded broker restarted on its new release, nothing acknowledged lost.

Slow: the incident on real Kafka (about 15 s), a plan, and a fix of three restarts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from remediate.errors import SandboxError
from remediate.formats.properties import load_properties
from remediate.kafka_admin import KafkaPythonAdmin
from remediate.sandbox import cluster
from remediate.sandbox.traffic import RetryingProducer
from remediate.state import TopicPartition
from tests.acceptance.repair_lab import (
    BYSTANDER,
    TOPIC,
    Reproduced,
    lost,
    metadata_files,
    named_by_plan,
    reproduce_and_plan,
    unconverged,
)
from tests.execute.sandbox_tools import HealthSampler, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka("3.4.1")]

OLD, NEW = "real-2.8.2", "real-3.4.1"


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reproduced]:
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp("rolling-upgrade") / "sandbox", kafka=OLD, upgrade_to=NEW
    )
    yield lab
    lab.close()


def server_log(lab: Reproduced, broker: int) -> str:
    return (cluster.broker_dir(lab.directory, broker) / "logs" / "server.log").read_text(
        errors="replace"
    )


def test_the_upgrade_of_one_broker_surfaces_the_incident(upgraded: Reproduced) -> None:
    lab, broker = upgraded, upgraded.result.restarted_broker
    state = cluster.load_state(lab.directory)
    runs = {
        b.broker_id: getattr(state.release_of(b.broker_id), "name", None) for b in state.brokers
    }
    assert runs == {b: NEW if b == broker else OLD for b in runs}
    # The protocol between brokers stays 2.8: pinned in its file before the new release ran,
    # and what the 3.4.1 broker logged of its configuration.
    properties = cluster.broker_dir(lab.directory, broker) / "server.properties"
    assert load_properties(properties.read_bytes(), source=str(properties))[cluster.IBP] == "2.8"
    assert "inter.broker.protocol.version = 2.8" in server_log(lab, broker)
    assert "Kafka version: 3.4.1" in server_log(lab, broker)
    (step8,) = [s for s in lab.result.steps if s.number == "8"]
    assert step8.facts["upgraded_to"] == NEW and step8.facts["mismatch_log_lines"] > 0
    assert lab.in_stale_isr.isdisjoint({broker})


def test_the_plan_names_each_brokers_release_and_offers_no_move(upgraded: Reproduced) -> None:
    lab, broker = upgraded, upgraded.result.restarted_broker
    others = sorted(b.broker_id for b in lab.state.brokers if b.broker_id != broker)
    assert lab.plan["kafka"]["brokers"] == {
        str(broker): "3.4",
        **{str(b): "2.8" for b in others},
    }
    assert lab.plan["kafka"]["unknown"] == {}
    assert (
        f"planned by the rules of Kafka 2.8 on broker(s) {', '.join(map(str, others))};"
        f" Kafka 3.4 on broker(s) {broker}"
    ) in lab.markdown
    # Moves would heal the 2.8 brokers' replicas only: not offered, and the note says why.
    names = {c["name"] for c in lab.plan["candidates"]}
    assert names == {"keep-zk-id", "restore-id"}
    assert any(
        "not offered" in note and f"broker(s) {broker} do not run 2.8" in note
        for note in lab.plan["notes"]
    ), lab.plan["notes"]
    restarted = {s["broker"] for s in lab.plan["steps"]}
    assert restarted == {b.broker_id for b in lab.state.brokers}


def test_each_broker_is_asked_for_its_log_dirs_in_its_own_version(upgraded: Reproduced) -> None:
    # The 3.4 broker first, and the client's only bootstrap: kafka-python gives one request
    # object to every broker it is asked to send to, and the first send fixes its version, so
    # a 2.8 broker used to receive the 3.4 broker's DescribeLogDirs version and close the
    # connection ("socket disconnected"), as the plan then said whenever the bootstrap
    # happened to be the upgraded broker.
    lab, broker = upgraded, upgraded.result.restarted_broker
    addresses = {b.broker_id: f"{b.host}:{b.port}" for b in lab.state.brokers}
    kafka = KafkaPythonAdmin([addresses[broker]], addresses=addresses)
    try:
        order = [broker, *sorted(b for b in addresses if b != broker)]
        partitions = [TopicPartition(TOPIC, p) for p in lab.result.old_partitions]
        answered = kafka.log_dirs(order, partitions)
    finally:
        kafka.close()
    assert sorted(answered) == sorted(addresses)
    for dirs in answered.values():
        assert len(dirs.online) == 2 and dirs.offline == ()
    # Every replica of those partitions where ZooKeeper's assignment puts it.
    data, _ = lab.zk.get(f"/brokers/topics/{TOPIC}")
    assignment: dict[str, list[int]] = json.loads(data)["partitions"]
    held = {(b, tp) for b, dirs in answered.items() for tp in dirs.replicas}
    assert held == {(b, tp) for tp in partitions for b in assignment[str(tp.partition)]}


@pytest.mark.timeout(900)
def test_fix_heals_the_mixed_cluster_under_acks_all(upgraded: Reproduced) -> None:
    lab = upgraded
    partitions = sorted(lab.result.old_partitions + lab.result.new_partitions)
    with (
        HealthSampler(lab.state) as sampler,
        RetryingProducer(lab.state, TOPIC, partitions) as producer,
    ):
        # The digest of the plan made before the producer started: the run plans again, and
        # goes ahead only if that plan is the same, each broker's release included.
        fixed = run_cli(
            "fix",
            "-c",
            str(lab.config),
            "--yes",
            "--json",
            "--approve",
            str(lab.plan["digest"]),
            timeout=900,
        )
    assert fixed.returncode == 0, fixed.stdout[-4000:] + fixed.stderr[-3000:]
    document: dict[str, Any] = json.loads(fixed.stdout)
    assert document["applied"] is True and document["check"]["status"] == "OK"
    assert document["plan"]["digest"] == lab.plan["digest"]
    assert unconverged(lab) == []
    # Every broker came back on the release it ran before the fix.
    state = cluster.load_state(lab.directory)
    for broker in state.brokers:
        release = state.release_of(broker.broker_id)
        assert release is not None
        assert last_version(lab, broker.broker_id) == release.version
    assert set(producer.acked_at) == set(partitions), producer.error_summary()
    after = lab.kafka.produce(TOPIC, count=3 * len(partitions), key_prefix="after", retries=20)
    assert len(after.acked) == 3 * len(partitions), after.to_json()
    assert lost(lab, TOPIC, lab.acked + producer.acked + after.acked) == []
    assert sampler.samples > 3
    named = named_by_plan(document["plan"])
    assert sampler.offline <= named and sampler.below_min_isr <= named
    assert metadata_files(lab.state, BYSTANDER) == lab.bystander_files


def last_version(lab: Reproduced, broker: int) -> str:
    """The release the broker said it runs when it last started (Kafka's AppInfoParser)."""
    said = [
        line.split("Kafka version: ", 1)[1].split()[0]
        for line in server_log(lab, broker).splitlines()
        if "INFO Kafka version: " in line
    ]
    return said[-1] if said else "(none logged)"


def test_upgrade_refuses_an_emulated_broker_and_the_same_release(tmp_path: Path) -> None:
    emulated = cluster.SandboxState(
        directory=str(tmp_path),
        zookeeper_host="127.0.0.1",
        zookeeper_port=1,
        kafka_version="2.8",
        brokers=[cluster.BrokerInfo(1, "127.0.0.11", 1, [str(tmp_path / "d")])],
    )
    cluster.save_state(emulated)
    with pytest.raises(SandboxError, match="broker 1 runs the emulator"):
        cluster.upgrade_broker(tmp_path, 1, NEW)
    said = run_cli(
        "sandbox", "broker", "upgrade", "--id", "1", "--kafka", NEW, "--dir", str(tmp_path)
    )
    assert said.returncode != 0 and "broker 1 runs the emulator" in said.stderr, said
    cluster.save_state(replace(emulated, kafka=NEW))
    with pytest.raises(SandboxError, match=r"already runs Apache Kafka 3\.4\.1"):
        cluster.upgrade_broker(tmp_path, 1, NEW)
    with pytest.raises(SandboxError, match="not a release the sandbox runs"):
        cluster.upgrade_broker(tmp_path, 1, "real-3.4.0")
