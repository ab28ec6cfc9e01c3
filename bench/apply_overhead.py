"""What the executor adds to the brokers' own restart and catch-up time.

    .venv/bin/python bench/apply_overhead.py [--brokers 3] [--partitions 12] [--rounds 3]
                                             [--log-recovery-ms 10000] [--keep DIR]

1. starts a sandbox (real ZooKeeper, emulated brokers) whose brokers take a realistic time to
   start (`--log-recovery-ms`, the sandbox's emulated log recovery: 10 s by default, where real
   brokers take tens of seconds), with a replicated topic under load;
2. the floor, measured in the same run: each broker restarted by hand with the configured
   service commands (stop, start through /bin/sh), timed from the stop command to the moment
   ZooKeeper shows it back in the ISR of every partition it hosts (ZooKeeper read every 20 ms);
3. the tool: `remediate apply` of an approved rolling-restart plan with a zero stability
   window (the same stop/start commands, plus the lock, drift check, journal, gates, waits and
   the run report), timed from the command's start to its exit. Meanwhile a watcher reads
   ZooKeeper every 20 ms and notes when each broker is back in every ISR; the run's journal
   says when the tool sent each stop. From both:
   - `dead_s`: per broker but the last, from its being back in sync to the tool's next stop
     (the next broker's gate and stop command: what the tool adds between two restarts);
   - `fixed_s`: the rest of the tool's time that is not a broker restarting (start-up, lock,
     drift check, the last wait, the report);
4. ratio = the tool's time / the sum of the by-hand restart-to-in-sync times, medians over
   --rounds rounds. Targets: ratio <= 1.1 with a 10 s restart; dead time <= 0.3 s per broker
   beyond the playbook's stability window (zero here).

Progress goes to stderr; stdout gets exactly one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from remediate.config import load_cluster_config
from remediate.execute.journal import Journal, JournalEvent
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated import client

TOPIC = "bench"


def say(message: str) -> None:
    print(f"[apply_overhead] {message}", file=sys.stderr, flush=True)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cluster.remediate_executable(), *args], capture_output=True, text=True, check=False
    )


def in_sync(zk: Any, broker: int) -> bool:
    if not zk.exists(f"/brokers/ids/{broker}"):
        return False
    topic, _ = admin.read_topic(zk, TOPIC)
    for number, replicas in topic.partitions.items():
        if broker not in replicas:
            continue
        data, _ = zk.get(f"/brokers/topics/{TOPIC}/partitions/{number}/state")
        state = json.loads(data)
        if state["leader"] < 0 or broker not in state["isr"]:
            return False
    return True


def restart_by_hand(config_path: Path, zk: Any, broker: int) -> float:
    config = load_cluster_config(config_path)
    entry = config.broker(broker)
    start = time.monotonic()
    for verb in ("stop", "start"):
        command = config.service_command(verb, entry)  # type: ignore[arg-type]
        subprocess.run(["/bin/sh", "-c", command], check=True, capture_output=True)
    while not in_sync(zk, broker):
        time.sleep(0.02)
    return time.monotonic() - start


class Watcher(threading.Thread):
    """Notes, for every broker, when it is back in every ISR after having been away (wall
    clock, to compare with the journal's timestamps)."""

    def __init__(self, zk: Any, brokers: list[int]) -> None:
        super().__init__(daemon=True)
        self.zk = zk
        self.brokers = brokers
        self.away: set[int] = set()
        self.back: dict[int, float] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.02):
            for broker in self.brokers:
                if broker in self.back:
                    continue
                if not in_sync(self.zk, broker):
                    self.away.add(broker)
                elif broker in self.away:
                    self.back[broker] = time.time()


def stop_times(journal_dir: Path, run_id: str) -> list[tuple[int, float]]:
    """(broker, when the tool started its stop step), in the run's order."""
    stops = []
    for record in Journal.open(journal_dir, run_id).records():
        if record["event"] != JournalEvent.STEP_STARTED:
            continue
        _n, target, action = str(record["step"]).split(":", 2)
        if action == "stop" and target.startswith("broker-"):
            stops.append((int(target.removeprefix("broker-")), float(record["ts"])))
    return stops


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    directory = work / "sandbox"
    state = cluster.up(
        directory,
        brokers=args.brokers,
        kafka_version="3.4",
        properties={"sandbox.log.recovery.ms": str(args.log_recovery_ms)},
    )
    zk = cluster.zk_client(state)
    try:
        admin.create_topic(zk, TOPIC, args.partitions, min(3, args.brokers))
        time.sleep(2)
        client.produce(zk, TOPIC, count=args.partitions * 20, key_prefix="load")
        config_path = directory / "cluster.yaml"

        playbook = yaml.safe_load(
            (
                Path(__file__).resolve().parents[1]
                / "remediate"
                / "playbooks"
                / "rolling-restart.yaml"
            ).read_text()
        )
        playbook["gates"]["stability_window_s"] = 0
        playbook_path = work / "rolling-restart.yaml"
        playbook_path.write_text(yaml.safe_dump(playbook))
        journal_dir = Path(load_cluster_config(config_path).journal_dir)
        floors: list[float] = []
        tools: list[float] = []
        deads: list[list[float]] = []
        fixeds: list[float] = []
        by_hand: dict[int, float] = {}
        for round_number in range(1, args.rounds + 1):
            say(f"round {round_number}: every broker restarted by hand, controller last")
            controller = admin.current_controller(zk)
            order = sorted(
                (b.broker_id for b in state.brokers),
                key=lambda b: (controller is not None and b == controller.broker_id, b),
            )
            for broker in order:
                by_hand[broker] = restart_by_hand(config_path, zk, broker)
                say(f"  broker {broker}: {by_hand[broker]:.2f} s stop -> back in every ISR")
            floors.append(sum(by_hand.values()))
            plan_path = work / f"plan-{round_number}.json"
            planned = cli(
                "plan",
                "-c",
                str(config_path),
                "--playbook",
                str(playbook_path),
                "-o",
                str(plan_path),
                "--json",
            )
            if planned.returncode not in (0, 6):  # 6: ready, once approved
                raise SystemExit(f"plan failed: {planned.stderr[-2000:]}")
            digest = json.loads(plan_path.read_text())["digest"]
            watcher = Watcher(zk, order)
            watcher.start()
            start = time.monotonic()
            applied = cli(
                "apply",
                "-c",
                str(config_path),
                "--plan",
                str(plan_path),
                "--approve",
                digest,
                "--json",
            )
            tools.append(time.monotonic() - start)
            watcher.stopped.set()
            watcher.join()
            if applied.returncode != 0:
                raise SystemExit(f"apply failed: {applied.stdout[-2000:]} {applied.stderr[-2000:]}")
            stops = stop_times(journal_dir, json.loads(applied.stdout)["run_id"])
            missing = [b for b, _ in stops if b not in watcher.back]
            if missing:
                raise SystemExit(f"the watcher never saw brokers {missing} back in sync")
            restarts = [watcher.back[b] - at for b, at in stops]
            dead = [nxt - watcher.back[b] for (b, _), (_, nxt) in itertools.pairwise(stops)]
            deads.append(dead)
            fixeds.append(tools[-1] - sum(restarts) - sum(dead))
            say(
                f"round {round_number}: tool {tools[-1]:.2f} s, by hand {floors[-1]:.2f} s;"
                f" dead time between brokers {[round(d, 3) for d in dead]} s,"
                f" fixed cost {fixeds[-1]:.2f} s"
            )
        total, floor = statistics.median(tools), statistics.median(floors)
        every_dead = [d for dead in deads for d in dead]
        return {
            "bench": "apply_overhead",
            "brokers": args.brokers,
            "partitions": args.partitions,
            "log_recovery_ms": args.log_recovery_ms,
            "tool_s": round(total, 3),
            "floor_s": round(floor, 3),
            "rounds": args.rounds,
            "tool_rounds_s": [round(t, 3) for t in tools],
            "floor_rounds_s": [round(f, 3) for f in floors],
            "dead_s": round(statistics.median(every_dead), 3) if every_dead else 0.0,
            "dead_max_s": round(max(every_dead), 3) if every_dead else 0.0,
            "dead_rounds_s": [[round(d, 3) for d in dead] for dead in deads],
            "fixed_s": round(statistics.median(fixeds), 3),
            "fixed_rounds_s": [round(f, 3) for f in fixeds],
            "stability_window_s": 0,
            "ratio": round(total / floor, 3),
            "target_ratio": 1.1,
            "target_dead_s": 0.3,
        }
    finally:
        zk.stop()
        zk.close()
        cluster.down(directory)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3, help="medians over this many rounds")
    parser.add_argument(
        "--log-recovery-ms", type=int, default=10_000, help="each broker's emulated start-up"
    )
    parser.add_argument("--keep", type=Path, help="keep the work directory here")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="remediate-apply-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        figures = run(args, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(figures, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
