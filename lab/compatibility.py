"""The compatibility matrix: the incident and the repair on every ZooKeeper-mode Kafka release,
observed rather than assumed, written into docs/compatibility.md.

    .venv/bin/python lab/compatibility.py [--releases 3.0.2 3.9.2] [--log-dirs 1 2]
                                            [--out docs/compatibility.md] [--results FILE]

For each release (remediate/sandbox/real/releases.py) and each log-dir count, on a real-Kafka
sandbox of its own (3 brokers, RF 3, Kafka's defaults):

1. the incident, by `sandbox reproduce`'s steps 1 to 6 (topic created and grown by Kafka
   1.0.2's own TopicCommand, then a controller failover), with an acks=all producer running
   on every partition from before the failover to the end (it retries a record until it is
   acknowledged, as a producer with retries does);
2. after the failover, and again after step 8 (one broker restarted): what the producer saw,
   what a consumer on a current client (confluent-kafka) reads, what a consumer on a pre-3.1
   client (Kafka 1.0.2's ConsoleConsumer, which fetches by name) reads, and whether the
   followers keep up with their leaders (DescribeLogDirs' sizes);
3. `remediate check`, `remediate plan`, then `remediate fix --yes --accept-unavailable` while
   the harm bench's prober (bench/repair_harm.py) writes to every partition: harm is the
   partition-seconds in which acks=all writes fail, from the run's start until every
   partition takes writes again; then `remediate check`;
4. every acknowledged record read back with the current client: lost records (must be 0).

Each case's facts go to `--results` as one JSON line (appended as it ends, so a long run that
stops keeps what it saw); the table in `--out` is written from them. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from remediate.errors import RemediationError
from remediate.kafka_admin import KafkaPythonAdmin
from remediate.sandbox import cluster
from remediate.sandbox.real import kafka_jars, releases
from remediate.sandbox.records import Acked
from remediate.sandbox.reproduce import Incident
from remediate.sandbox.traffic import Prober, RetryingProducer

TOPIC = "orders"
CONSOLE_CONSUMER = "kafka.tools.ConsoleConsumer"
FOLLOWER_WAIT_S = 5.0
# How long after the repair every partition may take to be writable again (as the harm bench).
CONVERGE_LIMIT_S = 120.0


def say(message: str) -> None:
    print(f"[compatibility] {message}", file=sys.stderr, flush=True)


def cli(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cluster.remediate_executable(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def legacy_consume(state: cluster.SandboxState, timeout_s: float = 10.0) -> dict[str, Any]:
    """Kafka 1.0.2's ConsoleConsumer (Fetch by name, no topic id) from the beginning: the keys
    it read, or its error."""
    logs = Path(state.directory) / "legacy-client"
    logs.mkdir(parents=True, exist_ok=True)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in state.brokers)
    argv = [
        cluster.java_executable(),
        "-Xmx256m",
        f"-Dkafka.logs.dir={logs}",
        "-cp",
        kafka_jars.classpath(kafka_jars.LEGACY_CLIENT),
        CONSOLE_CONSUMER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        TOPIC,
        "--from-beginning",
        "--timeout-ms",
        str(int(timeout_s * 1000)),
        "--property",
        "print.key=true",
    ]
    # A producer keeps writing, so the consumer never idles out (--timeout-ms): it reads for
    # the JVM's start and `timeout_s` more, then is stopped, and what it printed is its read.
    try:
        done = subprocess.run(argv, capture_output=True, check=False, timeout=timeout_s + 20)
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as stopped:
        out, err = stopped.stdout or b"", stopped.stderr or b""
    text = out.decode("utf-8", "replace")
    keys = [line.split("\t", 1)[0] for line in text.splitlines() if "\t" in line]
    tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
    return {"keys": keys, "stderr_tail": tail}


def replica_sizes(
    state: cluster.SandboxState, partitions: Sequence[int]
) -> dict[int, dict[int, int]]:
    """Per partition, each live replica's log size (DescribeLogDirs)."""
    admin = KafkaPythonAdmin([f"{b.host}:{b.port}" for b in state.brokers])
    try:
        described = admin.log_dirs(
            [b.broker_id for b in state.brokers], [(TOPIC, p) for p in partitions]
        )
    finally:
        admin.close()
    sizes: dict[int, dict[int, int]] = {}
    for broker, dirs in described.items():
        for (topic, partition), (_, size) in dirs.replicas.items():
            if topic == TOPIC:
                sizes.setdefault(partition, {})[broker] = size
    return sizes


def followers(
    state: cluster.SandboxState, zk: Any, partitions: Sequence[int]
) -> dict[str, list[int]]:
    """The partitions where a follower stands still while its leader's log grows (the
    producer writes all along): its log size (DescribeLogDirs) is sampled twice,
    FOLLOWER_WAIT_S apart. A follower that fetches grows with its leader; one that stopped
    (a stale-id replica left behind) does not."""
    from remediate.sandbox.reproduce import partition_states  # noqa: PLC0415

    first = replica_sizes(state, partitions)
    time.sleep(FOLLOWER_WAIT_S)
    second = replica_sizes(state, partitions)
    leaders = {p: s.leader for p, s in partition_states(zk, TOPIC, list(partitions)).items()}
    behind = []
    for p in partitions:
        leader = leaders[p]
        grew = {b: second.get(p, {}).get(b, 0) > size for b, size in first.get(p, {}).items()}
        if leader < 0 or not grew.get(leader, False):
            continue  # no leader, or nothing written: nothing to follow
        if not all(grew.values()):
            behind.append(p)
    led = [p for p in partitions if leaders[p] >= 0]
    return {
        "caught_up": [p for p in led if p not in behind],
        "behind": behind,
        "leaderless": [p for p in partitions if leaders[p] < 0],
    }


def observe(
    incident: Incident,
    producer: RetryingProducer,
    since: float,
    partitions: Sequence[int],
) -> dict[str, Any]:
    """What each client and the followers saw since `since` (monotonic)."""
    state = incident.state
    records, consume_errors = incident.kafka.consume(TOPIC, timeout=10)
    read = {r.partition for r in records}
    legacy = legacy_consume(state)
    acked_keys = {a.key: a.partition for a in [*incident.acked, *producer.acked]}
    legacy_partitions = {acked_keys[k] for k in legacy["keys"] if k in acked_keys}
    follow = followers(state, incident.zk, partitions)
    # The producer's window: from `since` to the end of these observations (half a minute).
    errors = {
        p: sorted({e for at, e in producer.errors.get(p, []) if at >= since}) for p in partitions
    }
    acked = {p: sum(1 for at in producer.acked_at.get(p, []) if at >= since) for p in partitions}
    return {
        "producer": {
            "acked": {str(p): n for p, n in acked.items()},
            "errors": {str(p): e for p, e in errors.items() if e},
        },
        "consumer_current": {
            "errors": {str(p): e for p, e in sorted(consume_errors.items())},
            "read": sorted(read),
        },
        "consumer_pre_3_1": {
            "read": sorted(legacy_partitions),
            "records": len(legacy["keys"]),
            "stderr_tail": legacy["stderr_tail"],
        },
        "followers": follow,
    }


def not_in_sync(zk: Any, partitions: Sequence[int], wait_s: float = 60.0) -> list[int]:
    """The partitions still without a leader and all three replicas in the ISR after
    `wait_s` (a check that finds every id right can still leave a replica out: Kafka 3.0's
    Offline replicas)."""
    from remediate.sandbox.reproduce import partition_states  # noqa: PLC0415

    deadline = time.monotonic() + wait_s
    while True:
        states = partition_states(zk, TOPIC, list(partitions))
        missing = [p for p, s in states.items() if s.leader < 0 or len(s.isr) < 3]
        if not missing or time.monotonic() > deadline:
            return sorted(missing)
        time.sleep(1.0)


def run_json(*args: str) -> tuple[int, Any, str]:
    done = cli(*args, "--json")
    try:
        document = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        document = None
    return done.returncode, document, done.stderr[-2000:]


def findings_summary(document: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for finding in (document or {}).get("findings", []):
        kind = str(finding.get("kind"))
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def run_case(
    release: releases.KafkaRelease, log_dirs: int, work: Path, *, observed: bool
) -> dict[str, Any]:
    directory = work / f"{release.version}-{log_dirs}" / "sandbox"
    facts: dict[str, Any] = {
        "release": release.version,
        "log_dirs": log_dirs,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    began = time.monotonic()
    try:
        state = cluster.up(
            directory,
            brokers=3,
            kafka_version=release.rules,
            kafka=release.name,
            log_dirs_per_broker=log_dirs,
        )
        incident = Incident(directory, topic=TOPIC)
        try:
            facts.update(_incident_and_repair(state, incident, directory, observed=observed))
        finally:
            incident.close()
    except (RemediationError, OSError, subprocess.SubprocessError) as exc:
        facts["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if (directory / "sandbox.json").exists():
            cluster.down(directory)
        shutil.rmtree(directory.parent, ignore_errors=True)
    facts["seconds"] = round(time.monotonic() - began, 1)
    return facts


def _incident_and_repair(
    state: cluster.SandboxState, incident: Incident, directory: Path, *, observed: bool
) -> dict[str, Any]:
    """The incident, observed after the failover and after the restart when `observed` (the
    first log-dir count of a release: what breaks does not depend on the log dirs), then
    check, plan, fix and check."""
    facts: dict[str, Any] = {}
    for step in (
        incident.create_topic,
        incident.produce,
        incident.consume,
        incident.add_partitions_legacy,
        incident.produce_and_consume_all,
    ):
        step()
    partitions = incident.result.old_partitions + incident.result.new_partitions
    with RetryingProducer(state, TOPIC, partitions, prefix="matrix") as producer:
        since = time.monotonic()
        incident.failover()
        if observed:
            facts["after_failover"] = observe(incident, producer, since, partitions)
        since = time.monotonic()
        try:
            incident.restart_one_broker()
            facts["restart"] = {"broker": incident.result.restarted_broker}
        except RemediationError as exc:
            facts["restart"] = {
                "broker": incident.result.restarted_broker,
                "differs": str(exc),
            }
        if observed:
            facts["after_restart"] = observe(incident, producer, since, partitions)
        config = str(directory / "cluster.yaml")
        code, check, _ = run_json("check", "-c", config)
        facts["check_before"] = {"exit": code, "findings": findings_summary(check)}
        plan_path = directory / "matrix-plan.json"
        code, plan, err = run_json("plan", "-c", config, "-o", str(plan_path))
        facts["plan"] = _plan_facts(code, plan, err)
        with Prober(state, incident.zk, TOPIC, partitions) as prober:
            start = time.time()
            code, fixed, err = run_json("fix", "-c", config, "--yes", "--accept-unavailable")
            end = time.time()
            writable = prober.wait_all_writable(end, limit_s=CONVERGE_LIMIT_S)
            harm = prober.unavailable(start, writable)
        facts["fix"] = {
            "exit": code,
            "outcome": (fixed or {}).get("outcome"),
            "seconds": round(end - start, 1),
            "harm_ps": round(sum(harm.values()), 1),
            "message": (fixed or {}).get("message"),
            "run": {
                k: v
                for k, v in ((fixed or {}).get("run") or {}).items()
                if k in ("status", "error", "steps_done", "halted_at")
            },
            "stderr_tail": err.strip().splitlines()[-3:] if code else [],
        }
        code, check, _ = run_json("check", "-c", config)
        facts["check_after"] = {
            "exit": code,
            "findings": findings_summary(check),
            "not_in_sync": not_in_sync(incident.zk, partitions),
        }
    facts["lost"] = len(_lost(incident, [*incident.acked, *producer.acked]))
    facts["acked"] = len(incident.acked) + len(producer.acked)
    return facts


def _plan_facts(code: int, plan: Any, err: str) -> dict[str, Any]:
    if not isinstance(plan, Mapping):
        return {"exit": code, "error": err.strip().splitlines()[-3:]}
    document = plan.get("plan", plan)
    chosen = [c["name"] for c in document.get("candidates", []) if c.get("chosen")]
    steps = [s["kind"] for s in document.get("steps", [])]
    return {
        "exit": code,
        "kafka": document.get("kafka"),
        "candidate": chosen[0] if chosen else None,
        "steps": steps,
        "restarts": steps.count("restart"),
        "notes": document.get("notes", []),
        "refusals": document.get("refusals", []),
    }


def _lost(incident: Incident, acked: Iterable[Acked]) -> list[Acked]:
    records, errors = incident.kafka.consume(TOPIC, timeout=30)
    consumed = {(r.partition, r.offset, r.key) for r in records}
    missing = [a for a in acked if (a.partition, a.offset, a.key) not in consumed]
    if errors:
        say(f"consume errors reading back: {errors}")
    return missing


def _missing(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """A line naming the cases this table does not have (yet), if any."""
    have = {(r["release"], r["log_dirs"]) for r in results if "error" not in r}
    absent = [
        f"{v} ({n} log dir{'s' if n > 1 else ''})"
        for v in releases.VERSIONS
        for n in (1, 2)
        if (v, n) not in have
    ]
    return ["", f"Not in this table: {', '.join(absent)}."] if absent else []


def render(results: Sequence[Mapping[str, Any]], made: str) -> str:
    """docs/compatibility.md from the cases' facts."""
    lines = [
        "# Compatibility: the incident and the repair on every ZooKeeper-mode release",
        "",
        f"Made by `make matrix` (lab/compatibility.py) on {made}, on real Apache Kafka from",
        "Maven Central's jars, 3 brokers, RF 3, Kafka's defaults, the incident started by Kafka",
        "1.0.2's own TopicCommand. Every cell is what the run saw, not what the source predicts.",
        "The incident: the topic grown by the 1.0.2 tool (its znode loses `topic_id`), a",
        "controller failover (a new id is minted), then one broker restarted. An acks=all",
        "producer writes to every partition from before the failover to the end; the current",
        "consumer is confluent-kafka's (Fetch with topic ids from 3.1), the pre-3.1 one Kafka",
        "1.0.2's ConsoleConsumer (by name). Followers: whether each follower's log grows with",
        "its leader's. Then `check`, `plan`, `fix --yes --accept-unavailable` (harm: the",
        "partition-seconds in which acks=all writes failed, bench/repair_harm.py's prober), and",
        "healed means `check` exits 0 and every partition has a leader and all three replicas",
        "in its ISR. Acknowledged records are read back with the current client.",
        *_missing(results),
        "",
        "| release | log dirs | after the failover: producer / current consumer / pre-3.1"
        " consumer / followers | after one restart | findings | repair chosen | restarts |"
        " harm (partition-s) | healed | acked lost |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(
                f"| {r['release']} | {r['log_dirs']} | run failed: {r['error'][:160]} |"
                " | | | | | | |"
            )
            continue
        plan = r["plan"]
        lines.append(
            f"| {r['release']} | {r['log_dirs']} | {_seen(r.get('after_failover'))} |"
            f" {_seen(r.get('after_restart'))} | {_kinds(r['check_before']['findings'])} |"
            f" {plan.get('candidate') or ', '.join(plan.get('steps', [])) or 'none'}:"
            f" fix {r['fix'].get('outcome') or 'exit ' + str(r['fix']['exit'])} |"
            f" {plan.get('restarts', 0)} | {r['fix']['harm_ps']} |"
            f" {_healed(r['check_after'])} |"
            f" {r['lost']} of {r['acked']} |"
        )
    lines += ["", "## What each run said", ""]
    for r in results:
        if "error" in r:
            continue
        said = [f"- **{r['release']}, {r['log_dirs']} log dir(s)** ({r['seconds']} s):"]
        restart = r.get("restart", {})
        if restart.get("differs"):
            said.append(
                f"  the incident's restart went otherwise than the sandbox expects:"
                f" {restart['differs'][:300]};"
            )
        said.append(f"  fix: {r['fix'].get('message') or r['fix'].get('stderr_tail')};")
        for note in r["plan"].get("notes", []):
            said.append(f"  plan note: {note}")
        lines.append("\n".join(said))
    return "\n".join(lines) + "\n"


def _healed(after: Mapping[str, Any]) -> str:
    if after["exit"] != 0:
        return f"no (check exits {after['exit']})"
    if after.get("not_in_sync"):
        return f"no ({len(after['not_in_sync'])} partition(s) not in sync)"
    return "yes"


def _seen(observed: Mapping[str, Any] | None) -> str:
    if observed is None:
        return "as with one log dir"
    producer = (
        "ok"
        if not observed["producer"]["errors"]
        else "errors on " + ", ".join(sorted(observed["producer"]["errors"]))
    )
    current = observed["consumer_current"]["errors"]
    consumer = "reads" if not current else ", ".join(sorted(set(current.values())))
    legacy = f"reads {len(observed['consumer_pre_3_1']['read'])} partitions"
    behind = observed["followers"]["behind"]
    follower = "in step" if not behind else f"behind on {len(behind)}"
    return f"{producer} / {consumer} / {legacy} / {follower}"


def _kinds(findings: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(findings.items()) if k != "OK") or "none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", nargs="*", default=list(releases.VERSIONS))
    parser.add_argument("--log-dirs", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--out", type=Path, default=Path("docs/compatibility.md"))
    parser.add_argument("--results", type=Path, default=Path(".sandbox/matrix.jsonl"))
    args = parser.parse_args()
    # The matrix is about Kafka, not the engine: the commands classify on the embedded one.
    os.environ.setdefault("REMEDIATE_ENGINE", "duckdb")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="matrix-"))
    results = []
    for version in args.releases:
        release = releases.release(version)
        for log_dirs in args.log_dirs:
            say(f"{release.version}, {log_dirs} log dir(s)")
            facts = run_case(release, log_dirs, work, observed=log_dirs == args.log_dirs[0])
            say(json.dumps(facts)[:400])
            with args.results.open("a", encoding="utf-8") as out:
                out.write(json.dumps(facts, sort_keys=True) + "\n")
            results.append(facts)
    # The table holds every case of the results file (the last run of each), so that a run of
    # a few releases adds to what an earlier one saw.
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for line in args.results.read_text(encoding="utf-8").splitlines():
        facts = json.loads(line)
        seen[(facts["release"], facts["log_dirs"])] = facts
    order = {v: i for i, v in enumerate(releases.VERSIONS)}
    table = [seen[k] for k in sorted(seen, key=lambda k: (order.get(k[0], 99), k[1]))]
    args.out.write_text(render(table, datetime.now(UTC).date().isoformat()))
    failed = [
        r for r in results if "error" in r or r.get("lost") or _healed(r["check_after"]) != "yes"
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
