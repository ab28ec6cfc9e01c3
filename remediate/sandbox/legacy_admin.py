"""The pre-2.8 admin client's writes, the way the incident really starts.

On real brokers they are Kafka 1.0.2's own `kafka.admin.TopicCommand --zookeeper`, run from
its Maven Central jars: `--create` writes a version-1 topic znode without an id (the active
controller then assigns one), `--alter --partitions N` rewrites the znode as version 1 and
drops the id. On emulated brokers the byte-exact stand-in (admin.py, `legacy=True`) writes the
same bytes (on real Kafka, tests/sandbox/test_incident.py's step 4 holds the znode 1.0.2
wrote to the stand-in's encoder; tests/formats/test_scala_order.py does on recorded znodes).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from kazoo.client import KazooClient

from remediate.errors import SandboxError
from remediate.formats.logdir import validate_topic_name
from remediate.formats.znodes import TopicAssignment
from remediate.sandbox import admin
from remediate.sandbox.cluster import SandboxState, java_executable
from remediate.sandbox.real import kafka_jars, zk_auth

TOPIC_COMMAND = "kafka.admin.TopicCommand"
LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/legacy-client.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def topic_command(state: SandboxState, *args: str, timeout: float = 120.0) -> str:
    """Run Kafka 1.0.2's TopicCommand against the sandbox's ZooKeeper; its stdout. It logs to
    `<sandbox>/legacy-client/legacy-client.log`."""
    logs = Path(state.directory) / "legacy-client"
    logs.mkdir(parents=True, exist_ok=True)
    log4j = logs / "log4j.properties"
    log4j.write_text(LOG4J)
    argv = [
        java_executable(),
        "-Xmx256m",
        # A tool that runs for a second: the client compiler alone and the serial collector
        # start it in less CPU than the server VM's defaults (what it writes is the same).
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        # Where ZooKeeper takes logins: as Kafka, with Kafka's JAAS file, as an operator runs
        # Kafka's tools (what it creates then carries Kafka's ACLs).
        *(zk_auth.broker_jvm_flags(state.zk_auth_files) if state.zookeeper_acl else ()),
        f"-Dlog4j.configuration=file:{log4j}",
        f"-Dkafka.logs.dir={logs}",
        "-cp",
        kafka_jars.classpath(kafka_jars.LEGACY_CLIENT),
        TOPIC_COMMAND,
        "--zookeeper",
        state.zk_connect,
        *args,
    ]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise SandboxError(
            f"Kafka 1.0.2's TopicCommand {' '.join(args)}: no answer in {timeout:.0f}s"
        ) from exc
    # TopicCommand prints its errors and exits 1 (or, in 1.0, sometimes 0 with "Error while").
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or "Error while executing topic command" in output:
        raise SandboxError(
            f"Kafka 1.0.2's TopicCommand {' '.join(args)} failed (exit {result.returncode}):"
            f" {output[-2000:]}"
        )
    return result.stdout


def create_topic(
    state: SandboxState,
    zk: KazooClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    *,
    config: Mapping[str, str] | None = None,
) -> TopicAssignment:
    """A topic created by the pre-2.8 client: a version-1 znode without an id."""
    if state.real_kafka is None:
        return admin.create_topic(
            zk, topic, partitions, replication_factor, config=config, legacy=True
        )
    validate_topic_name(topic, source="--topic")
    args = [
        "--create",
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--replication-factor",
        str(replication_factor),
    ]
    for key, value in (config or {}).items():
        args += ["--config", f"{key}={value}"]
    topic_command(state, *args)
    return admin.read_topic(zk, topic)[0]


def add_partitions(state: SandboxState, zk: KazooClient, topic: str, total: int) -> TopicAssignment:
    """`kafka-topics.sh --zookeeper ... --alter --partitions total` of Kafka 1.0: the znode is
    rewritten as version 1 and its topic id is dropped."""
    if state.real_kafka is None:
        return admin.add_partitions(zk, topic, total, legacy=True)
    validate_topic_name(topic, source="--topic")
    current, _ = admin.read_topic(zk, topic)
    if total <= len(current.partitions):
        raise SandboxError(
            f"topic {topic!r} has {len(current.partitions)} partitions; --partitions must be larger"
        )
    topic_command(state, "--alter", "--topic", topic, "--partitions", str(total))
    return admin.read_topic(zk, topic)[0]
