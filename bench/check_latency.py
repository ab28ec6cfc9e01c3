"""`check` and `scan` on the demo cluster, cold: what a monitoring probe and on-call wait for.

    .venv/bin/python bench/check_latency.py [--brokers 3] [--kafka-version 2.8] [--runs 3]
                                            [--keep DIR]

1. starts a sandbox (real ZooKeeper, emulated brokers) and reproduces the incident, so every
   finding kind of the demo is there to classify;
2. runs `remediate check -c cluster.yaml` (the embedded engine, its default) --runs times, each
   a new process, timed from exec to exit: cold (a new interpreter; no session kept);
3. runs `remediate scan -c cluster.yaml --json` (Spark, its default) the same way, and
   `remediate check --engine spark` once for comparison;
4. checks that every run exits 2 (CRITICAL) and printed nothing on stderr (no console noise).

Figures: medians. Targets: check <= 3 s, scan <= 8 s. Progress goes to stderr; stdout gets
exactly one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from remediate.sandbox import cluster
from remediate.sandbox.reproduce import Incident

CRITICAL = 2


def say(message: str) -> None:
    print(f"[check_latency] {message}", file=sys.stderr, flush=True)


def timed(*args: str) -> tuple[float, str]:
    """Seconds from exec to exit of `remediate *args`, and its stderr; exit 2 is required."""
    started = time.monotonic()
    done = subprocess.run(
        [cluster.remediate_executable(), *args], capture_output=True, text=True, check=False
    )
    elapsed = time.monotonic() - started
    if done.returncode != CRITICAL:
        raise SystemExit(
            f"remediate {' '.join(args)} exited {done.returncode}, expected {CRITICAL}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return elapsed, done.stderr


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    directory = work / "sandbox"
    cluster.up(directory, brokers=args.brokers, kafka_version=args.kafka_version)
    try:
        incident = Incident(directory, topic="orders")
        incident.run()
        incident.close()
        config = str(directory / "cluster.yaml")
        checks, scans, noise = [], [], []
        for n in range(args.runs):
            seconds, stderr = timed("check", "-c", config)
            checks.append(seconds)
            noise.append(stderr)
            seconds, stderr = timed("scan", "-c", config, "--json")
            scans.append(seconds)
            noise.append(stderr)
            say(f"run {n + 1}: check {checks[-1]:.2f} s, scan {scans[-1]:.2f} s")
        spark_check, stderr = timed("check", "-c", config, "--engine", "spark")
        noise.append(stderr)
        return {
            "bench": "check_latency",
            "brokers": args.brokers,
            "kafka_version": args.kafka_version,
            "runs": args.runs,
            "check_s": round(statistics.median(checks), 3),
            "check_runs_s": [round(s, 3) for s in checks],
            "scan_s": round(statistics.median(scans), 3),
            "scan_runs_s": [round(s, 3) for s in scans],
            "check_on_spark_s": round(spark_check, 3),
            "stderr_bytes": sum(len(text) for text in noise),
            "target_check_s": 3.0,
            "target_scan_s": 8.0,
        }
    finally:
        cluster.down(directory)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--kafka-version", default="2.8", choices=cluster.KAFKA_VERSIONS)
    parser.add_argument("--runs", type=int, default=3, help="medians over this many runs")
    parser.add_argument("--keep", type=Path, help="keep the work directory here")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="remediate-check-bench-"))
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
