"""The 2.8 incident reproduced on the sandbox, planned, and what its repair must leave behind.

Shared by the acceptance tests (tests/acceptance/test_repair_28.py) and the fault suite's
kills in the middle of this repair (tests/faults/test_repair_28_faults.py). A second topic,
BYSTANDER, is created healthy before the incident: the repair must never touch it.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from remediate.execute.journal import Journal
from remediate.execute.steps import StepKey
from remediate.formats.logdir import PARTITION_METADATA
from remediate.sandbox import admin, clients, cluster
from remediate.sandbox.real.security import KafkaSecurity
from remediate.sandbox.records import Acked
from remediate.sandbox.reproduce import (
    Incident,
    Reproduction,
    partition_states,
    replica_file_ids,
)
from tests.execute.sandbox_tools import plan_exit_code, run_cli
from tests.wait import wait_until

TOPIC = "orders"
BYSTANDER = "audit"
BYSTANDER_PARTITIONS = 3


@dataclass
class Reproduced:
    """A sandbox after `sandbox reproduce`, and the plan made on that state."""

    directory: Path
    state: cluster.SandboxState
    zk: KazooClient
    result: Reproduction
    acked: list[Acked]
    plan_path: Path
    plan: dict[str, Any]
    markdown: str
    bystander_files: dict[Path, bytes]
    # As planned: the partition.metadata files holding the id ZooKeeper lost (X), and the
    # brokers in the ZooKeeper ISR of some old partition.
    stale_files: set[str]
    in_stale_isr: set[int]

    @property
    def config(self) -> Path:
        return self.directory / "cluster.yaml"

    @property
    def settings(self) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load(self.config.read_text())
        return loaded

    @property
    def journal_dir(self) -> Path:
        return Path(self.settings["journal_dir"])

    @property
    def backup_dir(self) -> Path:
        return Path(self.settings["backup_dir"])

    @property
    def kafka(self) -> clients.SandboxClient:
        """A producer and consumer for this sandbox's brokers, emulated or real."""
        return clients.for_sandbox(self.state, self.zk)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()
        cluster.down(self.directory)


def metadata_files(state: cluster.SandboxState, topic: str) -> dict[Path, bytes]:
    """Every replica's partition.metadata of `topic` and its bytes."""
    return {
        path: path.read_bytes()
        for broker in state.brokers
        for log_dir in broker.log_dirs
        for path in sorted(Path(log_dir).glob(f"{topic}-*/{PARTITION_METADATA}"))
    }


def reproduce_and_plan(
    directory: Path,
    *,
    brokers: int = 3,
    kafka: str = "emulated",
    session_timeout_s: float | None = None,
    candidate: str = "auto",
    move_throttle: int | None = None,
    replication_2_topic: str | None = None,
    log_dirs: int = 2,
    properties: dict[str, str] | None = None,
    upgrade_to: str | None = None,
    prepare: Callable[[Path, cluster.SandboxState], None] | None = None,
    kafka_security: KafkaSecurity = KafkaSecurity.PLAINTEXT,
    zookeeper_acl: bool = False,
) -> Reproduced:
    """`sandbox up` (2.8: the emulator, or real Kafka 2.8.2 with `kafka="real-2.8.2"`), a
    healthy BYSTANDER topic, the incident's eight steps on TOPIC, then
    `plan -o plan.json --format markdown` (one scan gives both). Whatever fails on the way,
    the sandbox is taken down before the failure goes on. `move_throttle`: cluster.yaml's
    copy throttle for the repairs that move replicas. `replication_2_topic`: a healthy topic
    of one partition with 2 replicas and no override, created before the plan (with the
    brokers' min.insync.replicas=2, a restart of either replica leaves it unwritable).
    `log_dirs`: each broker's (with one, no repair can move a replica). `properties`: every
    broker's settings beyond the sandbox's. `upgrade_to`: step 8's restart is a rolling
    upgrade's step to this real release. `prepare`: what to do to the sandbox once it is up,
    before cluster.yaml's changes and the incident (it may start it again and rewrite
    cluster.yaml). `zookeeper_acl`: brokers with zookeeper.set.acl=true logging in to a
    ZooKeeper that takes SASL logins, the tool with an identity of its own."""
    state = cluster.up(
        directory,
        brokers=brokers,
        kafka_version="2.8",
        kafka=kafka,
        log_dirs_per_broker=log_dirs,
        properties=properties,
        kafka_security=kafka_security,
        zookeeper_acl=zookeeper_acl,
    )
    try:
        if prepare is not None:
            prepare(directory, state)
        settings = yaml.safe_load((directory / "cluster.yaml").read_text())
        if session_timeout_s is not None:
            # A killed operator's lock is free again once its session expires.
            settings["zookeeper"]["session_timeout_s"] = session_timeout_s
        if move_throttle is not None:
            settings["kafka"]["move_throttle_bytes_per_s"] = move_throttle
        (directory / "cluster.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        return _reproduce_and_plan(directory, state, candidate, replication_2_topic, upgrade_to)
    except BaseException:
        cluster.down(directory)
        raise


def _reproduce_and_plan(
    directory: Path,
    state: cluster.SandboxState,
    candidate: str,
    replication_2_topic: str | None,
    upgrade_to: str | None,
) -> Reproduced:
    zk = cluster.zk_client(state)
    admin.create_topic(zk, BYSTANDER, BYSTANDER_PARTITIONS, 3, config={"min.insync.replicas": "2"})
    if replication_2_topic is not None:
        admin.create_topic(zk, replication_2_topic, 1, 2)
    incident = Incident(directory, topic=TOPIC, upgrade_to=upgrade_to)
    try:
        result = incident.run()
        state = cluster.load_state(directory)  # with the upgraded broker's release
        acked = list(incident.acked)
    finally:
        incident.close()
    # 2.8 writes partition.metadata at a LeaderAndIsr to an existing log: the incident's
    # controller moves give the bystander's replicas theirs.
    bystander_id = zk_topic_id(zk, BYSTANDER)
    wait_until(
        lambda: (
            len(replica_file_ids(state, BYSTANDER)) == 3 * BYSTANDER_PARTITIONS
            and set(replica_file_ids(state, BYSTANDER).values()) == {bystander_id}
        ),
        f"every replica of {BYSTANDER} to hold its id in partition.metadata",
        timeout=60,
    )
    if replication_2_topic is not None:
        wait_until(
            lambda: isr_size(zk, replication_2_topic, 0) == 2,
            f"both replicas of {replication_2_topic} in its ISR",
            timeout=60,
        )
    stale_files = {
        str(path)
        for path, data in metadata_files(state, TOPIC).items()
        if result.old_id.encode() in data
    }
    in_stale_isr = {
        b for s in partition_states(zk, TOPIC, result.old_partitions).values() for b in s.isr
    }
    plan_path = directory / "plan.json"
    planned = run_cli(
        "plan",
        "-c",
        str(directory / "cluster.yaml"),
        "-o",
        str(plan_path),
        "--format",
        "markdown",
        "--candidate",
        candidate,
    )
    plan = json.loads(plan_path.read_text())
    # 6: the plan makes partitions unavailable that work now (the tests accept it).
    assert planned.returncode == plan_exit_code(plan) and not plan["refused"], (
        planned.stdout[-3000:] + planned.stderr[-3000:]
    )
    return Reproduced(
        directory=directory,
        state=state,
        zk=zk,
        result=result,
        acked=acked,
        plan_path=plan_path,
        plan=plan,
        markdown=planned.stdout,
        bystander_files=metadata_files(state, BYSTANDER),
        stale_files=stale_files,
        in_stale_isr=in_stale_isr,
    )


def isr_size(zk: KazooClient, topic: str, partition: int) -> int:
    """How many replicas the partition's ISR holds; 0 before the controller wrote its state."""
    try:
        return len(partition_states(zk, topic, [partition])[partition].isr)
    except NoNodeError:
        return 0


def zk_topic_id(zk: KazooClient, topic: str) -> str:
    assignment, _ = admin.read_topic(zk, topic)
    return str(assignment.topic_id)


def topics(zk: KazooClient) -> list[str]:
    return sorted(zk.get_children("/brokers/topics"))


def unconverged(lab: Reproduced) -> list[str]:
    """Every partition of every topic without a leader, without its full ISR, or with a
    replica whose partition.metadata does not hold ZooKeeper's id; empty when converged."""
    problems = []
    for topic in topics(lab.zk):
        assignment, _ = admin.read_topic(lab.zk, topic)
        zk_id = str(assignment.topic_id)
        states = partition_states(lab.zk, topic, sorted(assignment.partitions))
        for number, replicas in sorted(assignment.partitions.items()):
            s = states[number]
            if s.leader < 0 or sorted(s.isr) != sorted(replicas):
                problems.append(f"{topic}-{number}: leader {s.leader} isr {list(s.isr)}")
        files = replica_file_ids(lab.state, topic)
        expected = {(b, p) for p, replicas in assignment.partitions.items() for b in replicas}
        if set(files) != expected:
            problems.append(f"{topic}: replica dirs {sorted(files)} != assigned {sorted(expected)}")
        problems += [
            f"{topic}-{p} on broker {b}: partition.metadata holds {held}, ZooKeeper {zk_id}"
            for (b, p), held in sorted(files.items())
            if held != zk_id
        ]
    return problems


def every_partition(zk: KazooClient) -> list[str]:
    return [
        f"{topic}-{number}"
        for topic in topics(zk)
        for number in sorted(admin.read_topic(zk, topic)[0].partitions)
    ]


def backed_up_paths(backup_dir: Path, run_id: str) -> set[str]:
    """'/path' of every member of the run's backup archives."""
    members: set[str] = set()
    for archive in sorted((backup_dir / run_id).rglob("*.tar.gz")):
        with tarfile.open(archive, "r:gz") as tar:
            members |= {"/" + m.name for m in tar.getmembers()}
    return members


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def journal_records(lab: Reproduced, run_id: str) -> list[dict[str, Any]]:
    return Journal.open(lab.journal_dir, run_id).records()


# -- what the plan predicts and what the run observed ---------------------------------------


def step_prediction(step: Mapping[str, Any]) -> set[str]:
    """Every partition a plan step names as possibly unavailable or out of the ISR."""
    predicted = step.get("predicted") or {}
    return {
        name
        for what in ("during", "after", "out_of_isr_after", "last_in_isr")
        for name in predicted.get(what, ())
    }


def named_by_plan(plan: Mapping[str, Any]) -> set[str]:
    """Every partition the plan names as unavailable anywhere: per step, newly, or now."""
    named = set(plan.get("newly_unavailable", {})) | set(plan.get("unavailable_now", ()))
    for step in plan["steps"]:
        named |= step_prediction(step)
    return named


def predicted_in_journal(records: Iterable[Mapping[str, Any]]) -> dict[int, Any]:
    """Plan step index -> the prediction its pre-gate journaled with its result (what the
    step's gates were held to)."""
    found: dict[int, Any] = {}
    for record in records:
        if record.get("event") != "step-finished":
            continue
        key = StepKey.parse(str(record["step"]))
        result = record.get("result") or {}
        if key.index is not None and "predicted" in result:
            found[key.index] = result["predicted"]
    return found


def observed_in_samples(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Partition -> how many of the run's health samples saw it offline or under min ISR."""
    seen: dict[str, int] = {}
    for record in records:
        if record.get("event") != "sample":
            continue
        names = set(record.get("offline_partitions") or ()) | set(
            record.get("below_min_isr_partitions") or ()
        )
        for name in names:
            seen[str(name)] = seen.get(str(name), 0) + 1
    return seen


def lost(lab: Reproduced, topic: str, acked: Iterable[Acked]) -> list[Acked]:
    """Acknowledged records a full read of the topic does not return."""
    records, errors = lab.kafka.consume(topic, timeout=30)
    assert not errors, f"consume errors: {errors}"
    consumed = {(r.partition, r.offset, r.key) for r in records}
    return [a for a in acked if (a.partition, a.offset, a.key) not in consumed]
