"""`plan` at fleet scale: the planner, its renderings and its JSON on one cluster's incident.

    .venv/bin/python bench/plan_scale.py --brokers B --partitions P [--seed S] [--profile]
                                         [--incident-topics 20]

What it does (see bench/README.md):

1. builds, in this process and without any server, what collect gives `plan`: a ZK-mode
   cluster's state (`ClusterState`, as read_cluster_state returns it) and each broker's
   inventory rows (`BrokerReport`s with one `ReplicaRow` per partition directory), RF 3, one
   log dir per broker, P partitions in all: `__consumer_offsets` (50), the incident's topics
   and healthy topics of 10 partitions, placed by Kafka's rack-unaware assignment. The
   incident, as `sandbox reproduce` makes it on one topic: on each of 20 topics of 50
   partitions, the 40 old partitions' replicas hold the id X the topic was created with in
   partition.metadata, the pre-2.8 admin client dropped X from the znode while adding the 10
   others, and a controller failover minted Y, which ZooKeeper holds and the added
   partitions' replicas took. Then one broker (not the controller, a leader of an old
   partition) restarted: its controlled shutdown moved leaders and shrank ISRs with new
   leader epochs, which every replica holding X refused, so it is out of the ISR of every old
   partition it hosts and those partitions' leaders are fenced; it rejoined every other ISR.
   The snapshot is written with the collector's own writer (`write_snapshot`) into a temp dir.
   The build and the write are timed but not counted;
2. classifies the snapshot on the embedded DuckDB engine, as `plan --engine duckdb` does
   (`classify_on_duckdb`, OK replicas included): the findings come from the real rules
   (timed, not counted);
3. plans as remediate/workflows.py does (`build_plan` -> `_plan`): the three playbooks as
   cluster.yaml would have them (`cluster_playbook`), `make_plan` with the restore and move
   playbooks, every broker on Kafka 2.8 (`KafkaLines`, as ApiVersions would say), the brokers'
   disks as `read_disks` would report them (one log dir each: no move can be offered), and
   min.insync.replicas 2 from every broker's server.properties (`brokers_min_isr`);
4. renders the plan as `plan --format markdown` (`plan_markdown`) and as the table `plan`
   prints (`plan_table`, through a rich Console on an io.StringIO, 160 columns, no colour),
   and as `plan --json` writes it (`Plan.to_json` + `json.dumps`).

Each phase is timed on its own. `plan_s` = make_plan + markdown + table + JSON (what `plan`
spends after the scan); the target is 10 s up to 10,000 partitions, 30 s above. With
`--profile`, make_plan runs once more under cProfile and its top 25 functions by cumulative
time go to stderr. Progress goes to stderr; stdout gets exactly one JSON line. The exit code is
0 whenever the run completed, the target met or not.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml
from rich.console import Console

from remediate.collect.snapshot import BrokerReport, ReplicaRow, write_snapshot
from remediate.config import ClusterConfig, load_cluster_config
from remediate.formats.logdir import partition_dir_name
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import BrokerRegistration, Endpoint, PartitionState, TopicAssignment
from remediate.kafka_lines import KafkaLines
from remediate.minisr import BrokerMinIsr, MinIsrFacts, MinIsrSource, brokers_min_isr
from remediate.plan import Plan, PlanOptions, make_plan
from remediate.plan.render import plan_markdown, plan_table
from remediate.playbook import Playbook, cluster_playbook
from remediate.scan.findings import ScanReport
from remediate.scan.kinds import MISMATCH_KINDS
from remediate.scan.scanner import classify_on_duckdb
from remediate.state import BrokerDisks, ClusterState, MoveFacts, TopicPartition, TopicState
from remediate.workflows import MOVE_PLAYBOOK, REPAIR_PLAYBOOK, RESTORE_PLAYBOOK

CLUSTER = "fleet-scale"
REPLICATION_FACTOR = 3
LOG_DIR = "/var/lib/kafka/data"  # one per broker
INTERNAL_TOPIC = ("__consumer_offsets", 50)
HEALTHY_PARTITIONS = 10  # per healthy topic
INCIDENT_PARTITIONS = 50  # per incident topic
OLD_PARTITIONS = 40  # of those, the ones created before the id was dropped (they hold X)
KAFKA_LINE = (2, 8)
MIN_ISR = 2  # every broker's server.properties
CONTROLLER_EPOCH = 7
# ZooKeeper transaction ids, in the incident's order: topics created, the failover minting Y,
# the broker's restart.
CREATED_ZXID = 1_000
MINTED_ZXID = 50_000
RESTARTED_ZXID = 60_000
TABLE_WIDTH = 160
PROFILE_LINES = 25

T = TypeVar("T")

_STARTED = time.monotonic()


def say(message: str) -> None:
    print(
        f"[plan_scale {time.monotonic() - _STARTED:6.1f}s] {message}", file=sys.stderr, flush=True
    )


def timed(label: str, function: Callable[[], T]) -> tuple[T, float]:
    say(f"{label} ...")
    started = time.perf_counter()
    result = function()
    elapsed = time.perf_counter() - started
    say(f"{label}: {elapsed:.3f}s")
    return result, elapsed


# -- the cluster -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fleet:
    """The cluster as collect would give it, and the incident's facts."""

    state: ClusterState
    reports: tuple[BrokerReport, ...]
    controller: int
    restarted: int
    incident_topics: tuple[str, ...]


def assign_replicas(rng: random.Random, brokers: list[int], partitions: int) -> list[list[int]]:
    """Kafka's rack-unaware AdminUtils.assignReplicasToBrokers."""
    n = len(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    result = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        for j in range(REPLICATION_FACTOR - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        result.append(replicas)
    return result


def new_id(rng: random.Random) -> TopicId:
    while True:
        candidate = TopicId(rng.randbytes(16))
        if not candidate.is_zero and not str(candidate).startswith("-"):
            return candidate


def registration(broker: int, epoch: int) -> BrokerRegistration:
    host = f"kafka-{broker:02d}.fleet.internal"
    return BrokerRegistration(
        broker_id=broker,
        endpoints=(Endpoint("PLAINTEXT", host, 9092),),
        host=host,
        port=9092,
        timestamp_ms=1_764_000_000_000,
        epoch=epoch,
    )


def topic_layout(partitions: int, incident_topics: int) -> list[tuple[str, int, bool]]:
    """(name, partitions, in the incident) for every topic: P partitions in all."""
    internal, internal_count = INTERNAL_TOPIC
    layout = [(internal, internal_count, False)]
    layout += [(f"payments-{n:02d}", INCIDENT_PARTITIONS, True) for n in range(incident_topics)]
    left = partitions - internal_count - incident_topics * INCIDENT_PARTITIONS
    n = 0
    while left > 0:
        separator = "_" if n % 7 == 0 else "."
        count = min(HEALTHY_PARTITIONS, left)
        layout.append((f"svc{n % 41:02d}{separator}events-{n:05d}", count, False))
        left -= count
        n += 1
    return layout


def build_fleet(seed: int, broker_count: int, partitions: int, incident_topics: int) -> Fleet:
    rng = random.Random(seed)
    brokers = list(range(1, broker_count + 1))
    controller = rng.choice(brokers)
    topics: dict[str, TopicState] = {}
    states: dict[TopicPartition, PartitionState] = {}
    # Per replica: the id in its partition.metadata and its leader-epoch-checkpoint's latest.
    files: dict[tuple[int, TopicPartition], tuple[str, int]] = {}
    stale: set[TopicPartition] = set()  # the old partitions of the incident's topics
    for name, count, incident in topic_layout(partitions, incident_topics):
        zk_id = new_id(rng)
        created_with = new_id(rng) if incident else zk_id
        assignment = assign_replicas(rng, brokers, count)
        config = {"min.insync.replicas": "2"} if incident or len(topics) % 3 == 0 else {}
        if name == INTERNAL_TOPIC[0]:
            config = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
        topics[name] = TopicState(
            name,
            TopicAssignment(
                partitions={p: tuple(r) for p, r in enumerate(assignment)},
                topic_id=zk_id,
                version=3,
            ),
            # Created, then (the incident) rewritten without an id, then the id minted.
            znode_version=2 if incident else 0,
            config=config,
            mzxid=MINTED_ZXID + len(topics) if incident else CREATED_ZXID + len(topics),
        )
        for p, replicas in enumerate(assignment):
            tp = TopicPartition(name, p)
            old = incident and p < OLD_PARTITIONS
            if old:
                stale.add(tp)
            epoch = rng.randrange(30)
            states[tp] = PartitionState(
                leader=replicas[0],
                leader_epoch=epoch,
                isr=tuple(replicas),
                controller_epoch=CONTROLLER_EPOCH,
                zk_version=epoch,
                mzxid=CREATED_ZXID + len(states),
            )
            file_id = str(created_with if old else zk_id)
            for broker in replicas:
                files[(broker, tp)] = (file_id, epoch)

    # The restart (sandbox reproduce's step 8): a leader of an old partition, not the
    # controller. Its controlled shutdown gives every partition it hosts a new leader epoch
    # (a new leader where it led, an ISR without it): the replicas holding X refuse the
    # epoch (the old partitions' leaders are fenced) and it stays out of their ISR; everywhere
    # else every replica takes the epoch and it is back in the ISR.
    leaders = sorted({states[tp].leader for tp in stale} - {controller})
    restarted = leaders[0] if leaders else next(b for b in brokers if b != controller)
    for tp, before in list(states.items()):
        hosts = topics[tp.topic].assignment.partitions[tp.partition]
        if restarted not in hosts:
            continue
        others = [b for b in hosts if b != restarted]
        epoch = before.leader_epoch + 1
        states[tp] = PartitionState(
            leader=others[0] if before.leader == restarted else before.leader,
            leader_epoch=epoch,
            isr=tuple(others) if tp in stale else hosts,
            controller_epoch=CONTROLLER_EPOCH,
            zk_version=before.zk_version + 1,
            # Its controlled shutdown; where it rejoined the ISR, after it registered again.
            mzxid=RESTARTED_ZXID if tp in stale else RESTARTED_ZXID + 2,
        )
        if tp not in stale:
            for broker in hosts:
                files[(broker, tp)] = (files[(broker, tp)][0], epoch)

    state = ClusterState(
        cluster_id="fLeEtScAlEcLuStErId0Aw",
        controller_id=controller,
        controller_epoch=CONTROLLER_EPOCH,
        brokers={
            b: registration(b, RESTARTED_ZXID + 1 if b == restarted else 100 + b) for b in brokers
        },
        topics=topics,
        partitions=states,
    )
    rows: dict[int, list[ReplicaRow]] = {b: [] for b in brokers}
    for (broker, tp), (file_id, epoch) in sorted(files.items()):
        name = partition_dir_name(tp.topic, tp.partition)
        rows[broker].append(
            ReplicaRow(
                log_dir=LOG_DIR,
                dir=name,
                dir_hex=name.encode().hex(),
                topic=tp.topic,
                partition=tp.partition,
                dir_kind="live",
                name_problem=None,
                metadata_state="ok",
                file_topic_id=file_id,
                metadata_problem=None,
                epoch_latest=epoch,
            )
        )
    reports = tuple(
        BrokerReport(
            broker_id=b,
            host=f"kafka-{b:02d}.fleet.internal",
            configured=True,
            reachable=True,
            error=None,
            log_dirs=({"log_dir": LOG_DIR, "state": "present"},),
            replicas=tuple(rows[b]),
            state_change_log="not_configured",
        )
        for b in brokers
    )
    return Fleet(state, reports, controller, restarted, tuple(sorted({tp.topic for tp in stale})))


def write_cluster_yaml(directory: Path, brokers: list[int]) -> Path:
    """cluster.yaml for the fleet: nothing is run, the planner reads its brokers, playbook
    timeouts and kafka section."""
    document = {
        "cluster": CLUSTER,
        "zookeeper": {"connect": "zk-1.fleet.internal:2181"},
        "brokers": [
            {
                "id": b,
                "host": f"kafka-{b:02d}.fleet.internal",
                "transport": "local",
                "log_dirs": [LOG_DIR],
            }
            for b in brokers
        ],
        "service": {
            "stop": "echo no service to stop for broker {broker_id}",
            "start": "echo no service to start for broker {broker_id}",
            "status": "echo no service for broker {broker_id}",
        },
        "journal_dir": str(directory / "journal"),
        "kafka": {"listener": "PLAINTEXT"},
    }
    path = directory / "cluster.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def disks(fleet: Fleet, report: ScanReport, rng: random.Random) -> MoveFacts:
    """What `read_disks` reports for the brokers hosting the topics whose replicas disagree
    (workflows.move_facts): Kafka 2.8, one online log dir, each replica's size, the room."""
    state = fleet.state
    topics = {f.topic for f in report.findings if f.kind in MISMATCH_KINDS and f.topic}
    replicas: dict[int, dict[TopicPartition, tuple[str, int]]] = {}
    for topic in sorted(topics):
        for p, brokers in state.topics[topic].assignment.partitions.items():
            for b in brokers:
                size = rng.randrange(1 << 20, 1 << 31)
                replicas.setdefault(b, {})[TopicPartition(topic, p)] = (LOG_DIR, size)
    return MoveFacts(
        brokers={
            b: BrokerDisks(
                broker=b,
                kafka_version=KAFKA_LINE,
                online_dirs=(LOG_DIR,),
                free_bytes={LOG_DIR: 2 << 40},
                replicas=found,
            )
            for b, found in sorted(replicas.items())
        }
    )


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """make_plan's arguments, as workflows._plan gives them."""

    config: ClusterConfig
    state: ClusterState
    report: ScanReport
    playbooks: tuple[Playbook, Playbook, Playbook]  # the repair, the restore, the moves
    lines: KafkaLines
    options: PlanOptions
    disks: MoveFacts


def plan_inputs(
    config: ClusterConfig, fleet: Fleet, report: ScanReport, rng: random.Random
) -> Inputs:
    facts = MinIsrFacts(
        brokers={
            b: BrokerMinIsr(b, static=MIN_ISR, static_source=MinIsrSource.SERVER_PROPERTIES)
            for b in config.broker_ids
        }
    )
    resolved = brokers_min_isr(facts, list(config.broker_ids), config.min_insync_replicas_default)
    options = PlanOptions(
        min_isr_default=resolved.value,
        min_isr=resolved,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        move_throttle_bytes_per_s=config.kafka.move_throttle_bytes_per_s if config.kafka else None,
    )
    playbooks = (
        cluster_playbook(config, REPAIR_PLAYBOOK),
        cluster_playbook(config, RESTORE_PLAYBOOK),
        cluster_playbook(config, MOVE_PLAYBOOK),
    )
    lines = KafkaLines.uniform(KAFKA_LINE, sorted(fleet.state.brokers))
    return Inputs(config, fleet.state, report, playbooks, lines, options, disks(fleet, report, rng))


def plan_once(inputs: Inputs) -> Plan:
    repair, restore, moves = inputs.playbooks
    return make_plan(
        cluster=inputs.config.cluster,
        state=inputs.state,
        findings=inputs.report.findings,
        playbook=repair,
        options=inputs.options,
        known_brokers=inputs.config.broker_ids,
        lines=inputs.lines,
        restore=restore,
        moves=moves,
        disks=inputs.disks,
    )


def table_text(plan: Plan) -> str:
    sink = io.StringIO()
    Console(file=sink, width=TABLE_WIDTH, color_system=None).print(plan_table(plan))
    return sink.getvalue()


def json_text(plan: Plan) -> str:
    """As `plan --json` prints it."""
    document = {**plan.to_json(), "verdict": plan.verdict}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def profile(inputs: Inputs) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    plan_once(inputs)
    profiler.disable()
    say(f"make_plan under cProfile, top {PROFILE_LINES} by cumulative time:")
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(PROFILE_LINES)


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=10_000, help="in all, every topic")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--profile", action="store_true", help="cProfile make_plan (stderr)")
    parser.add_argument(
        "--incident-topics", type=int, default=20, help=f"of {INCIDENT_PARTITIONS} partitions"
    )
    args = parser.parse_args(argv)
    smallest = INTERNAL_TOPIC[1] + args.incident_topics * INCIDENT_PARTITIONS
    if args.brokers < REPLICATION_FACTOR:
        parser.error(f"--brokers: at least {REPLICATION_FACTOR} (RF {REPLICATION_FACTOR})")
    if args.incident_topics < 1 or args.partitions < smallest:
        parser.error(
            f"--partitions: at least {smallest} ({INTERNAL_TOPIC[0]} and the incident's"
            f" {args.incident_topics} topics); --incident-topics: at least 1"
        )
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed + 1)
    fleet, build_s = timed(
        f"building {args.brokers} brokers, {args.partitions} partitions",
        lambda: build_fleet(args.seed, args.brokers, args.partitions, args.incident_topics),
    )
    say(
        f"incident on {len(fleet.incident_topics)} topics; controller {fleet.controller},"
        f" broker {fleet.restarted} restarted"
    )
    phases: dict[str, float] = {"build_s": build_s}
    with tempfile.TemporaryDirectory(prefix="plan-scale-") as tmp:
        work = Path(tmp)
        config_path = write_cluster_yaml(work, sorted(fleet.state.brokers))
        config = load_cluster_config(config_path)
        snapshot = work / "snapshot"
        _, phases["snapshot_write_s"] = timed(
            "writing the snapshot (write_snapshot)",
            lambda: write_snapshot(
                snapshot, cluster=config.cluster, state=fleet.state, brokers=fleet.reports
            ),
        )
        (report, _), phases["classify_s"] = timed(
            "classifying on DuckDB",
            lambda: classify_on_duckdb([snapshot], include_ok=True),
        )
    counts = Counter(str(f.kind) for f in report.findings)
    say(f"findings: {dict(sorted(counts.items()))}")
    inputs = plan_inputs(config, fleet, report, rng)
    plan, phases["make_plan_s"] = timed("make_plan", lambda: plan_once(inputs))
    markdown, phases["markdown_s"] = timed(
        "plan_markdown",
        lambda: plan_markdown(plan, config_path=str(config_path), plan_path="plan.json"),
    )
    table, phases["table_s"] = timed("plan_table on a rich Console", lambda: table_text(plan))
    document, phases["json_s"] = timed("Plan.to_json + json.dumps", lambda: json_text(plan))
    plan_s = sum(phases[p] for p in ("make_plan_s", "markdown_s", "table_s", "json_s"))
    target = 10.0 if args.partitions <= 10_000 else 30.0
    chosen = [c.name for c in plan.candidates if c.chosen]
    say(
        f"plan: {len(plan.steps)} step(s), verdict {plan.verdict},"
        f" candidate {chosen[0] if chosen else '(one)'}, {len(plan.refusals)} refusal(s);"
        f" plan_s {plan_s:.2f} (target {target:g})"
    )
    if plan_s > target:
        say(f"TARGET MISSED: plan_s {plan_s:.2f} > {target:g}")
    if args.profile:
        profile(inputs)
    figures: dict[str, Any] = {
        "bench": "plan_scale",
        "brokers": args.brokers,
        "partitions": args.partitions,
        "replicas": sum(len(r.replicas) for r in fleet.reports),
        "findings": dict(sorted(counts.items())),
        "plan_s": round(plan_s, 3),
        "phases": {name: round(seconds, 3) for name, seconds in phases.items()},
        "markdown_chars": len(markdown),
        "table_chars": len(table),
        "json_chars": len(document),
        "steps": len(plan.steps),
        "candidates": [c.name for c in plan.candidates],
        "chosen": chosen[0] if chosen else None,
        "verdict": str(plan.verdict),
        "targets": {"plan_s_max": target},
        "met": plan_s <= target,
    }
    print(json.dumps(figures, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
