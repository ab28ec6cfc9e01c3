"""Real Apache Kafka brokers in the sandbox: `kafka.Kafka` run from Maven Central's jars.

A real broker takes the emulated one's place in the same layout (its `server.properties`, its
log dirs, `logs/server.log` and `logs/state-change.log`, its pid file), so the sandbox's
service commands and every `remediate` command work on either. Its settings are Kafka's
production defaults, except the few that cannot work on two cores (`TWO_CORE_SETTINGS`) and
what the layout fixes (id, listener, log dirs, ZooKeeper).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path

from remediate.formats.properties import dump_properties
from remediate.sandbox.real import kafka_jars, releases

MAIN_CLASS = "kafka.Kafka"


REAL_KAFKA: dict[str, releases.KafkaRelease] = {r.name: r for r in releases.RELEASES}
EMULATED = "emulated"
KAFKA_KINDS = (EMULATED, *REAL_KAFKA)


# Kafka's defaults that cannot work here, each with its default and why.
TWO_CORE_SETTINGS: dict[str, str] = {
    # 128 MiB by default, allocated on the heap when the cleaner starts (LogCleaner): more than
    # the heap below. Kafka's own integration tests use 2 MiB.
    "log.cleaner.dedupe.buffer.size": "2097152",
    # 50 partitions each by default: 150 replicas to create the first time a consumer group or a
    # transactional producer appears, on a cluster that hosts a handful.
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


class Tuning(StrEnum):
    """How a real broker runs: as Kafka ships it (its defaults, its scripts' JVM settings: the
    demo, `make matrix`, the benches and anyone trying the tool), or as the test suite runs it
    (`TEST_TIMERS`, `TEST_JVM_FLAGS`)."""

    KAFKA = "kafka"
    TEST = "test"


# Kafka's timers that the test suite waits for, shorter in its sandboxes, each with Kafka's
# default and which wait it shortens. What the tool plans and checks is the same either way:
# it reads the controlled-shutdown settings from each broker's server.properties, and the
# repairs are proven on Kafka's defaults in the matrix and the demo.
TEST_TIMERS: dict[str, str] = {
    # 5000 by default. A controlled shutdown that cannot move a leader (the last in-sync
    # replica of a partition, as in the 2.8 repair, and every broker when `sandbox down` stops
    # them together) tries 3 times this far apart before it shuts down anyway: 15 s each.
    # Kafka's own integration tests use 100 (TestUtils.createBrokerConfig).
    "controlled.shutdown.retry.backoff.ms": "500",
    # 18000 by default. A broker killed by SIGKILL stays registered until its session expires,
    # and a new process of it cannot start before (NODEEXISTS). Kafka's own integration tests
    # use 15000, long enough for a 10 s pause (QuorumTestHarness); 10000 here outlasts a 6 s
    # one, on a machine whose two cores run the suite's other sandboxes beside it.
    "zookeeper.session.timeout.ms": "10000",
}

# The JVM as Kafka's scripts start a broker: 1 GiB (kafka-server-start.sh) and G1 with a
# 20 ms pause goal (kafka-run-class.sh); a 512 MiB heap leaves room for several brokers, Spark
# and the tests on one machine.
JVM_FLAGS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# The JVM as the test suite starts one: the same heap, the serial collector (no GC threads
# beside the brokers of other sandboxes) and only the client compiler (Kafka's code is
# compiled once, quickly, and never again by C2). A sandbox's brokers start and restart in
# about two thirds of the CPU time; what Kafka does is the same bytecode either way.
TEST_JVM_FLAGS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)


def jvm_flags(tuning: Tuning) -> tuple[str, ...]:
    return TEST_JVM_FLAGS if tuning is Tuning.TEST else JVM_FLAGS


# Kafka's config/log4j.properties, reduced to the two files the tool reads: server.log and
# state-change.log (where the topic-id errors go: kafka.controller.StateChangeLogger).
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, server
log4j.appender.server=org.apache.log4j.FileAppender
log4j.appender.server.File=${kafka.logs.dir}/server.log
log4j.appender.server.layout=org.apache.log4j.PatternLayout
log4j.appender.server.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stateChange=org.apache.log4j.FileAppender
log4j.appender.stateChange.File=${kafka.logs.dir}/state-change.log
log4j.appender.stateChange.layout=org.apache.log4j.PatternLayout
log4j.appender.stateChange.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=INFO, stateChange
log4j.additivity.state.change.logger=false
log4j.logger.kafka.controller=INFO, server
log4j.additivity.kafka.controller=false
"""


def server_properties(
    *,
    broker_id: int,
    host: str,
    port: int,
    log_dirs: Sequence[Path],
    zookeeper_connect: str,
    brokers: int,
    tuning: Tuning = Tuning.KAFKA,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A real broker's server.properties: the layout's keys, the two-core settings, internal
    topics replicated as far as the cluster allows, the test suite's timers with `Tuning.TEST`,
    then `overrides` (the caller's own)."""
    internal_rf = str(min(3, brokers))
    values = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{host}:{port}",
        "log.dirs": ",".join(str(d) for d in log_dirs),
        "zookeeper.connect": zookeeper_connect,
        **TWO_CORE_SETTINGS,
        # 3 by default, which a cluster of fewer brokers cannot place.
        "offsets.topic.replication.factor": internal_rf,
        "transaction.state.log.replication.factor": internal_rf,
        "transaction.state.log.min.isr": str(min(2, brokers)),
        # Broker-wide, as production clusters with RF 3 set it (and as the emulator's brokers
        # run): topics without an override get it; the tool reads it from this file.
        "min.insync.replicas": str(min(2, brokers)),
        **(TEST_TIMERS if tuning is Tuning.TEST else {}),
    }
    values.update(overrides or {})
    return values


def write_server_properties(path: Path, values: Mapping[str, str]) -> None:
    header = (
        b"# Written by `remediate sandbox up` for a real Kafka broker: Kafka's defaults except\n"
        b"# the keys below (docs/sandbox.md, Real Kafka; `--tuning`).\n"
    )
    path.write_bytes(header + dump_properties(dict(values)))


def write_log4j(path: Path) -> Path:
    path.write_text(LOG4J_PROPERTIES)
    return path


def java_command(
    kafka: releases.KafkaRelease,
    main: str,
    *args: str,
    java: str,
    logs_dir: Path,
    log4j: Path,
    tuning: Tuning,
    archive: Path | None = None,
    dump_classes_to: Path | None = None,
    extra_flags: tuple[str, ...] = (),
) -> list[str]:
    """A JVM of the release's classpath running `main`: a broker (MAIN_CLASS and its
    server.properties, whose path in the command line is how the sandbox knows its pid), a
    KRaft controller, one of Kafka's tools. `archive`: the release's class-data archive to map
    (class_archive.py; a JVM that cannot map it runs without it); `dump_classes_to`: where to
    write one at exit; `extra_flags`: JVM flags of the sandbox's (a JAAS file)."""
    sharing: list[str] = []
    if archive is not None:
        sharing = [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-Xlog:cds=off"]
    if dump_classes_to is not None:
        sharing = [f"-XX:ArchiveClassesAtExit={dump_classes_to}", "-Xlog:cds=off"]
    return [
        java,
        *jvm_flags(tuning),
        *sharing,
        *extra_flags,
        f"-Dlog4j.configuration=file:{log4j}",
        f"-Dkafka.logs.dir={logs_dir}",
        "-cp",
        kafka_jars.classpath(kafka.classpath.name),
        main,
        *args,
    ]


def last_lines(logs_dir: Path, count: int = 20) -> str:
    """The last lines of the broker's server.log, then of its stdout (where the JVM reports
    what stops it before log4j is up)."""
    parts = []
    for name in ("server.log", "kafkaServer.out"):
        path = logs_dir / name
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        if lines:
            parts.append(f"--- {path} (last {min(count, len(lines))} lines)")
            parts.extend(lines[-count:])
    return "\n".join(parts) if parts else f"(nothing logged in {logs_dir})"


# KafkaServer's lifecycle lines (server/KafkaServer.scala at 2.8.2 and 3.4.1: "starting",
# "started", "shutting down", "shut down completed"). "starting" is logged before the broker
# id is known, so without the "[KafkaServer id=N] " prefix the others carry.
_LIFECYCLE = re.compile(
    rb"(?:\[KafkaServer id=\d+\] |INFO )(starting|started|shutting down|shut down completed)"
    rb" \(kafka\.server\.KafkaServer\)"
)


def started(logs_dir: Path) -> bool:
    """The broker's last lifecycle line says `started`: its startup is over. A real broker
    registers in ZooKeeper before that, and a SIGTERM in between does no controlled shutdown
    ("Kafka server is still starting up, cannot shut down!": it halts)."""
    try:
        with (logs_dir / "server.log").open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - 65536))
            tail = log.read()
    except OSError:
        return False
    found = _LIFECYCLE.findall(tail)
    return bool(found) and found[-1] == b"started"
