"""Harm, measured: the partition-seconds during which acks=all writes fail while the 2.8
incident is repaired, by the plan the tool chooses, by each other repair it weighs, and by
the seed's manual procedure; and what the plan itself predicted.

    .venv/bin/python bench/repair_harm.py [--kafka emulated real-2.8.2] [--brokers 3]
                                          [--log-dirs 2] [--racks N] [--partitions 3]
                                          [--procedures chosen manual keep-zk-id ...]

For each kind of broker and each procedure, on a sandbox of its own (3 brokers, two log dirs
each unless `--log-dirs` says otherwise, spread over `--racks` racks when given: `sandbox up
--racks`; the incident reproduced by `sandbox reproduce`'s steps on a topic created with
`--partitions` partitions, 3 more added by the legacy client, RF 3, min.insync.replicas 2;
then a bystander topic, healthy, of as many partitions, RF 3, min.insync.replicas 2 in its
topic config, its ISR whole before the procedure starts):

1. a prober writes one record at a time with acks=all to every partition of the topic, one
   thread per partition (a 1 s delivery timeout, 50 ms between attempts). A partition counts
   as unavailable from the start of a failed attempt to the start of its next successful one;
2. the procedure:
   - `chosen`: `remediate plan` (auto), then `remediate apply` of exactly that plan;
   - a candidate's name (`keep-zk-id`, `restore-id`, `move-keep-zk-id`, `move-restore-id`):
     the same with `--candidate` (where the plan can offer it);
   - `manual`: the seed's procedure, as a person runs it from the incident's runbook: for each
     broker, the active controller last, stop it (cluster.yaml's service command), back up and
     delete every partition.metadata of the topic on it, start it, wait until ZooKeeper lists
     it again (a real broker: until its startup is over) and then the playbook's stability
     window (10 s), as the tool's restart does;
3. the window: from the procedure's first change (the run's start in the journal; the first
   stop) until every partition of the topic takes writes again, or 120 s after the procedure
   ends. `harm_ps` sums each partition's unavailable seconds in it;
4. for a plan, `predicted_ps`: each partition's unavailable phases as the plan predicts them
   (report/availability.py: before the run, during step N, after step N), each phase timed by
   the run's own journal, a step acting until its last action that changes the cluster ends
   (a restore's election, a trigger, a restart's last action) and "after" from there;
5. the bystander: beside the prober, its partitions' ISR read from ZooKeeper at the prober's
   pace (traffic.IsrSampler); `bystander_min_isr` is the smallest ISR any of them had in the
   window, `bystander_below_min_isr` whether that is below its min.insync.replicas (acks=all
   writes to it refused: harm the repair did to a topic it does not repair).

Targets (issue 24): the chosen plan's harm at most half the manual procedure's, and within 10%
of its own prediction. Progress goes to stderr; stdout gets exactly one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from remediate.config import load_cluster_config
from remediate.execute.journal import Journal
from remediate.execute.steps import StepKey
from remediate.formats.logdir import PARTITION_METADATA
from remediate.formats.znodes import partition_state_path
from remediate.playbook import Action
from remediate.report.availability import BEFORE, predicted_phases
from remediate.sandbox import admin, cluster
from remediate.sandbox.reproduce import Incident, partition_states, wait_for
from remediate.sandbox.traffic import IsrSampler, Prober

TOPIC = "orders"
# A healthy topic beside the incident's: what the repair costs the partitions it leaves alone.
BYSTANDER = "bystander"
BYSTANDER_RF = 3
BYSTANDER_MIN_ISR = 2
CANDIDATES = ("keep-zk-id", "restore-id", "move-keep-zk-id", "move-restore-id")
PROCEDURES = ("chosen", "manual", *CANDIDATES)
# A person's pause after a broker is back, the restart playbook's stability window.
MANUAL_SETTLE_S = 10.0
CONVERGE_LIMIT_S = 120.0
# The actions after which a step's change to the cluster is done (the rest of it waits).
ACTING = (
    Action.ZK_WRITE_CONTROLLER_ELECTION,
    Action.ZK_WRITE_TOPIC_ID,
    Action.TRIGGER_REASSIGNMENT,
)


def say(message: str) -> None:
    print(f"[repair_harm] {message}", file=sys.stderr, flush=True)


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cluster.remediate_executable(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


@dataclass(frozen=True)
class Setup:
    """One sandbox's shape: its brokers, their log dirs and racks (None: none), and the
    partitions the incident's topic is created with (and the bystander has)."""

    kafka: str
    brokers: int = 3
    log_dirs: int = 2
    racks: int | None = None
    partitions: int = 3


@contextmanager
def incident(setup: Setup) -> Iterator[tuple[Path, cluster.SandboxState, Any]]:
    directory = Path(tempfile.mkdtemp(prefix="repair-harm-")) / "sandbox"
    try:
        state = cluster.up(
            directory,
            brokers=setup.brokers,
            kafka_version="2.8",
            kafka=setup.kafka,
            log_dirs_per_broker=setup.log_dirs,
            racks=setup.racks,
        )
        zk = cluster.zk_client(state)
        try:
            reproduction = Incident(directory, topic=TOPIC, partitions=setup.partitions)
            try:
                reproduction.run()
            finally:
                reproduction.close()
            create_bystander(zk, setup.partitions)
            yield directory, state, zk
        finally:
            zk.stop()
            zk.close()
    finally:
        cluster.down(directory)
        shutil.rmtree(directory.parent, ignore_errors=True)


def create_bystander(zk: Any, partitions: int) -> None:
    """The healthy topic, created as Kafka's tools do (with its id), and waited for until
    every partition has its whole ISR."""
    admin.create_topic(
        zk,
        BYSTANDER,
        partitions,
        BYSTANDER_RF,
        config={"min.insync.replicas": str(BYSTANDER_MIN_ISR)},
    )
    numbers = list(range(partitions))

    def whole() -> bool:
        if not all(zk.exists(partition_state_path(BYSTANDER, p)) for p in numbers):
            return False
        states = partition_states(zk, BYSTANDER, numbers).values()
        return all(len(s.isr) == BYSTANDER_RF for s in states)

    wait_for(whole, f"every partition of {BYSTANDER} to have its whole ISR", timeout=120)


def bystander_figures(sampler: IsrSampler, start: float, end: float) -> dict[str, Any]:
    """The bystander's smallest ISR within [start, end], and whether it went below its
    min.insync.replicas; an error when no read of it fell in the window."""
    smallest = sampler.smallest_isr(start, end)
    if not smallest:
        return {"error": f"no read of {BYSTANDER}'s ISR ({sampler.failed_reads} failed)"}
    least = min(smallest.values())
    return {"bystander_min_isr": least, "bystander_below_min_isr": least < BYSTANDER_MIN_ISR}


def bystander_sampler(zk: Any) -> IsrSampler:
    return IsrSampler(zk, BYSTANDER, sorted(admin.read_topic(zk, BYSTANDER)[0].partitions))


def times(records: Sequence[Mapping[str, Any]]) -> list[float]:
    return [
        datetime.fromisoformat(str(r["time"]).replace("Z", "+00:00")).timestamp() for r in records
    ]


def predicted_seconds(
    plan: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
) -> dict[str, float]:
    """Per partition, the plan's predicted unavailable phases, each timed by the run's
    journal."""
    at = times(records)
    run_start, run_end = at[0], at[-1]
    spans: dict[int, list[float]] = {}
    acting_end: dict[int, float] = {}
    for when, record in zip(at, records, strict=True):
        try:
            key = StepKey.parse(str(record.get("step", "")))
        except ValueError:
            continue
        if key.index is None or key.index >= len(plan["steps"]) or key.rollback:
            continue
        span = spans.setdefault(key.index, [when, when])
        span[1] = when
        if record["event"] == "step-finished" and key.action in ACTING:
            acting_end[key.index] = when
    phases: dict[str, tuple[float, float]] = {}
    ordered = sorted(spans)
    phases[BEFORE] = (run_start, spans[ordered[0]][0] if ordered else run_end)
    for position, index in enumerate(ordered):
        start, end = spans[index]
        acted = acting_end.get(index, end)
        following = spans[ordered[position + 1]][0] if position + 1 < len(ordered) else run_end
        phases[f"step {index + 1}"] = (start, acted)
        phases[f"after step {index + 1}"] = (acted, following)
    return {
        partition: sum(phases[p][1] - phases[p][0] for p in set(names) if p in phases)
        for partition, names in predicted_phases(plan).items()
    }


def by_name(harm: Mapping[int, float]) -> dict[str, float]:
    return {f"{TOPIC}-{p}": round(s, 2) for p, s in sorted(harm.items()) if s}


def by_the_tool(
    directory: Path, state: cluster.SandboxState, zk: Any, candidate: str
) -> dict[str, Any]:
    config = directory / "cluster.yaml"
    plan_path = directory / "plan.json"
    planned = cli(
        "plan", "-c", str(config), "-o", str(plan_path), "--json", "--candidate", candidate
    )
    # 6: the plan makes working partitions unavailable; `apply --approve` accepts that.
    if planned.returncode not in (0, 6):
        return {"error": f"plan exited {planned.returncode}: {planned.stderr.strip()[-300:]}"}
    plan = json.loads(plan_path.read_text())
    (chosen,) = [c["name"] for c in plan["candidates"] if c["chosen"]] or [candidate]
    partitions = sorted(admin.read_topic(zk, TOPIC)[0].partitions)
    with Prober(state, zk, TOPIC, partitions) as prober, bystander_sampler(zk) as sampler:
        applied = cli(
            "apply",
            "-c",
            str(config),
            "--plan",
            str(plan_path),
            "--approve",
            plan["digest"],
            "--json",
        )
        if applied.returncode != 0:
            return {"candidate": chosen, "error": f"apply exited {applied.returncode}"}
        run_id = json.loads(applied.stdout)["run_id"]
        settings = yaml.safe_load(config.read_text())
        records = Journal.open(Path(settings["journal_dir"]), run_id).records()
        at = times(records)
        start, ended = at[0], at[-1]
        end = max(ended, prober.wait_all_writable(ended, limit_s=CONVERGE_LIMIT_S))
        harm = prober.unavailable(start, end)
        bystander = bystander_figures(sampler, start, end)
    predicted = predicted_seconds(plan, records)
    return {
        "candidate": chosen,
        "harm_ps": round(sum(harm.values()), 2),
        "predicted_ps": round(sum(predicted.values()), 2),
        "harm_by_partition": by_name(harm),
        "predicted_by_partition": {p: round(s, 2) for p, s in sorted(predicted.items()) if s},
        "run_s": round(ended - start, 2),
        "restarts": sum(1 for s in plan["steps"] if s["kind"] == "restart"),
        **bystander,
    }


def run_service(command: str, directory: Path) -> None:
    """A service command of cluster.yaml, as the tool runs it (through /bin/sh)."""
    subprocess.run(["/bin/sh", "-c", command], check=True, cwd=directory, stdout=sys.stderr)


def by_hand(directory: Path, state: cluster.SandboxState, zk: Any) -> dict[str, Any]:
    config = load_cluster_config(directory / "cluster.yaml")
    controller = admin.current_controller(zk)
    order = sorted(b.broker_id for b in state.brokers)
    if controller is not None:
        order = [b for b in order if b != controller.broker_id] + [controller.broker_id]
    partitions = sorted(admin.read_topic(zk, TOPIC)[0].partitions)
    backup = directory / "manual-backup"
    backup.mkdir()
    with Prober(state, zk, TOPIC, partitions) as prober, bystander_sampler(zk) as sampler:
        start = time.time()
        for broker in order:
            entry = config.broker(broker)
            run_service(config.service_command("stop", entry), directory)
            files = [
                path
                for log_dir in state.broker(broker).log_dirs
                for path in Path(log_dir).glob(f"{TOPIC}-*/{PARTITION_METADATA}")
            ]
            with tarfile.open(backup / f"broker-{broker}.tar.gz", "w:gz") as archive:
                for path in files:
                    archive.add(path)
            for path in files:
                path.unlink()
            run_service(config.service_command("start", entry), directory)
            cluster.wait_registered(state, [broker], timeout=cluster.REAL_START_TIMEOUT_S)
            time.sleep(MANUAL_SETTLE_S)
        ended = time.time()
        end = max(ended, prober.wait_all_writable(ended, limit_s=CONVERGE_LIMIT_S))
        harm = prober.unavailable(start, end)
        bystander = bystander_figures(sampler, start, end)
    return {
        "harm_ps": round(sum(harm.values()), 2),
        "harm_by_partition": by_name(harm),
        "run_s": round(ended - start, 2),
        "restarts": len(order),
        **bystander,
    }


def at_least_one(text: str) -> int:
    """An argparse type: an integer of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer of 1 or more, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer of 1 or more, got {value}")
    return value


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kafka", nargs="+", default=["emulated", "real-2.8.2"])
    parser.add_argument(
        "--brokers", type=int, default=3, help=f"{BYSTANDER_RF} or more (the bystander's RF)"
    )
    parser.add_argument(
        "--log-dirs", type=int, default=2, help="per broker; 1: no repair without restarts"
    )
    parser.add_argument(
        "--racks",
        type=at_least_one,
        default=None,
        metavar="N",
        help="spread the brokers over N racks (`sandbox up --racks`); default: no racks",
    )
    parser.add_argument(
        "--partitions",
        type=at_least_one,
        default=3,
        metavar="P",
        help="the incident topic's partitions before the legacy client adds 3, and the"
        " bystander's (default: %(default)s)",
    )
    parser.add_argument("--procedures", nargs="+", choices=PROCEDURES, default=list(PROCEDURES))
    args = parser.parse_args()
    if args.brokers < BYSTANDER_RF:
        parser.error(
            f"--brokers: expected {BYSTANDER_RF} or more (the bystander topic has replication"
            f" factor {BYSTANDER_RF}), got {args.brokers}"
        )
    return args


def main() -> int:
    args = parse_arguments()
    figures: dict[str, dict[str, Any]] = {}
    versus_manual: dict[str, float] = {}
    versus_predicted: dict[str, float] = {}
    below: dict[str, dict[str, bool]] = {}
    for kafka in args.kafka:
        figures[kafka] = {}
        setup = Setup(
            kafka=kafka,
            brokers=args.brokers,
            log_dirs=args.log_dirs,
            racks=args.racks,
            partitions=args.partitions,
        )
        for procedure in args.procedures:
            say(f"{kafka}: {procedure}")
            with incident(setup) as (directory, state, zk):
                if procedure == "manual":
                    found = by_hand(directory, state, zk)
                else:
                    found = by_the_tool(
                        directory, state, zk, "auto" if procedure == "chosen" else procedure
                    )
            say(f"{kafka}: {procedure}: {found}")
            figures[kafka][procedure] = found
        below[kafka] = {
            procedure: found["bystander_below_min_isr"]
            for procedure, found in figures[kafka].items()
            if "bystander_below_min_isr" in found
        }
        chosen, manual = figures[kafka].get("chosen", {}), figures[kafka].get("manual", {})
        if "harm_ps" in chosen and manual.get("harm_ps"):
            versus_manual[kafka] = round(chosen["harm_ps"] / manual["harm_ps"], 3)
        if "harm_ps" in chosen and chosen.get("predicted_ps"):
            versus_predicted[kafka] = round(chosen["harm_ps"] / chosen["predicted_ps"], 3)
    print(
        json.dumps(
            {
                "bench": "repair_harm",
                "figures": figures,
                "chosen_vs_manual": versus_manual,
                "chosen_vs_predicted": versus_predicted,
                "racks": args.racks,
                "partitions": args.partitions,
                "bystander": {
                    "topic": BYSTANDER,
                    "partitions": args.partitions,
                    "replication_factor": BYSTANDER_RF,
                    "min_insync_replicas": BYSTANDER_MIN_ISR,
                },
                "bystander_below_min_isr": below,
            },
            sort_keys=True,
        )
    )
    failed = [f"{k}: {p}" for k, found in figures.items() for p, f in found.items() if "error" in f]
    if failed:
        say(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
