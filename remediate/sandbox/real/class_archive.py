"""A real Kafka release's class-data archive (Java's CDS): a broker's classes mapped from one
file instead of loaded from its jars, so that a sandbox's brokers start in half the time and
CPU (most of a real broker's start is class loading).

`build(release)` makes one with a training broker: a ZooKeeper and one broker of the release,
started with -XX:ArchiveClassesAtExit, a few records produced and consumed, then a controlled
shutdown, at which the JVM writes the classes it loaded. `remediate sandbox fetch-kafka` builds
it for each release it fetches (`make setup` runs it). A broker starts with the archive when
there is one for its Java and its jars (`usable`), and as before without. An archive is valid
for one Java and one classpath: its file name carries a digest of both, so a new Java or a
fetched-again release simply has none until `fetch-kafka` runs again.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from remediate.errors import SandboxError
from remediate.sandbox.plumbing import process, zkserver
from remediate.sandbox.real import jvm_broker, kafka_client, kafka_jars, releases
from remediate.scan.archive import cache_dir, file_identity, java_home

FORMAT = 1
WARM_UP_TOPIC = "class-archive-warm-up"
START_TIMEOUT_S = 120.0


def path_for(release: releases.KafkaRelease) -> Path | None:
    """Where the archive of `release` for the current Java lives (None if Java or the jars
    cannot be found)."""
    home = java_home()
    jars = kafka_jars.read_manifest(kafka_jars.jars_dir() / release.classpath.name)
    if home is None or not jars:
        return None
    lines = [
        f"remediate-kafka-cds {FORMAT}",
        file_identity(home / "bin" / "java"),
        file_identity(home / "lib" / "server" / "libjvm.so"),
        *(f"{jar.name} {jar.size} {jar.sha256}" for jar in jars),
    ]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]
    return cache_dir() / "kafka-cds" / f"{release.classpath.name}-{digest}.jsa"


def usable(release: releases.KafkaRelease) -> Path | None:
    """The archive a broker of `release` can map, if it was built."""
    archive = path_for(release)
    return archive if archive is not None and archive.is_file() else None


def build(release: releases.KafkaRelease, *, java: str) -> Path:
    """Build the archive of `release` (a no-op when it is there); its path."""
    archive = path_for(release)
    if archive is None:
        raise SandboxError(f"cannot build {release.label}'s class archive: no Java or no jars")
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="remediate-kafka-cds-") as tmp:
        work = Path(tmp)
        dumped = work / "classes.jsa"
        _train(release, java=java, work=work, dump_to=dumped)
        if not dumped.is_file() or dumped.stat().st_size == 0:
            raise SandboxError(
                f"{release.label}'s training broker wrote no class archive:\n"
                + jvm_broker.last_lines(work / "logs")
            )
        partial = archive.with_suffix(f".{time.time_ns()}.tmp")
        shutil.copyfile(dumped, partial)
        partial.replace(archive)
    return archive


def _train(release: releases.KafkaRelease, *, java: str, work: Path, dump_to: Path) -> None:
    """One broker, its ZooKeeper, a few records through it, and a controlled shutdown."""
    host = "127.0.0.1"
    zk_port = zkserver.free_port(host)
    zkserver.write_config(work / "zookeeper", host, zk_port)
    zk_pid = zkserver.start(work / "zookeeper", host, zk_port)
    try:
        port = zkserver.free_port(host)
        properties = work / "server.properties"
        jvm_broker.write_server_properties(
            properties,
            jvm_broker.server_properties(
                broker_id=1,
                host=host,
                port=port,
                log_dirs=[work / "data"],
                zookeeper_connect=f"{host}:{zk_port}",
                brokers=1,
                tuning=jvm_broker.Tuning.TEST,
            ),
        )
        log4j = jvm_broker.write_log4j(work / "log4j.properties")
        argv = jvm_broker.java_command(
            release,
            jvm_broker.MAIN_CLASS,
            str(properties),
            java=java,
            logs_dir=work / "logs",
            log4j=log4j,
            tuning=jvm_broker.Tuning.TEST,
            dump_classes_to=dump_to,
        )
        pid = process.spawn_detached(argv, log_path=work / "logs" / "kafkaServer.out")
        try:
            _wait_started(work / "logs", pid)
            bootstrap = f"{host}:{port}"
            kafka_client.create_topic(bootstrap, WARM_UP_TOPIC, partitions=1, replication=1)
            kafka_client.produce(bootstrap, WARM_UP_TOPIC, count=10, retries=10)
            kafka_client.consume(bootstrap, WARM_UP_TOPIC, timeout=30)
        finally:
            # SIGTERM: the controlled shutdown at whose end the JVM writes the archive.
            process.terminate(pid, str(properties), timeout=120)
    finally:
        process.terminate(zk_pid, str(work / "zookeeper" / "zoo.cfg"), timeout=10)


def _wait_started(logs: Path, pid: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not jvm_broker.started(logs):
        if not process.is_alive(pid) or time.monotonic() > deadline:
            raise SandboxError(
                "the class archive's training broker did not start:\n" + jvm_broker.last_lines(logs)
            )
        time.sleep(0.2)
