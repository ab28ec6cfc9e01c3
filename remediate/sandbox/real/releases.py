"""The Kafka releases the sandbox runs from Maven Central's jars, and the classpath of each.

ZooKeeper mode runs from 2.8.0 (the first release with topic ids) to 3.9.2 (the last line with
ZooKeeper; Kafka 4 is KRaft only). The sandbox takes the last release of every line, and
every release of the 2.8 line (whose rules changed between patches: KAFKA-12835 in 2.8.1,
KAFKA-13092's lazy flush in 2.8.1): Maven Central's newest patch of each line on 2026-11-26.

A broker's classpath is Kafka's `kafka_2.13` POM closure plus the log4j backend its tarball
ships, which Kafka's POM leaves out (`compileOnly` in its build): log4j 1.2.17 with
slf4j-log4j12 through 3.0, reload4j with slf4j-reload4j from 3.1 (KAFKA-13660), at the
versions of each tag's gradle/dependencies.gradle. Kafka 1.0.2's tools are the pre-2.8
client that drops the topic id (kafka.admin.TopicCommand). Classpaths never share a JVM:
their kafka-clients, ZooKeeper and Scala versions conflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from remediate.errors import SandboxError


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


@dataclass(frozen=True)
class Classpath:
    """One entry of the jar cache: its directory name and the artifacts whose runtime closure
    it holds."""

    name: str
    artifacts: tuple[Artifact, ...]
    about: str


_LOG4J = (
    Artifact("log4j", "log4j", "1.2.17"),
    Artifact("org.slf4j", "slf4j-log4j12", "1.7.30"),
)
_RELOAD4J_19 = (
    Artifact("ch.qos.reload4j", "reload4j", "1.2.19"),
    Artifact("org.slf4j", "slf4j-reload4j", "1.7.36"),
)
_RELOAD4J_25 = (
    Artifact("ch.qos.reload4j", "reload4j", "1.2.25"),
    Artifact("org.slf4j", "slf4j-reload4j", "1.7.36"),
)


@dataclass(frozen=True)
class KafkaRelease:
    """A real Kafka release the sandbox can run in ZooKeeper mode."""

    version: str
    logging: tuple[Artifact, ...]

    @property
    def name(self) -> str:
        """As `sandbox up --kafka` takes it."""
        return f"real-{self.version}"

    @property
    def line(self) -> str:
        """major.minor."""
        major, minor, _patch = self.version.split(".")
        return f"{major}.{minor}"

    @property
    def rules(self) -> str:
        """The emulator's line whose sandbox rules it follows (how `sandbox reproduce` drives
        the incident): 2.8 writes partition.metadata lazily, 3.x when the log is created."""
        return "2.8" if self.line == "2.8" else "3.4"

    @property
    def label(self) -> str:
        return f"Apache Kafka {self.version}"

    @property
    def classpath(self) -> Classpath:
        return Classpath(
            f"broker-{self.version}",
            (Artifact("org.apache.kafka", "kafka_2.13", self.version), *self.logging),
            f"the Kafka {self.version} broker (kafka.Kafka), Scala 2.13",
        )


RELEASES: tuple[KafkaRelease, ...] = (
    KafkaRelease("2.8.0", _LOG4J),
    KafkaRelease("2.8.1", _LOG4J),
    KafkaRelease("2.8.2", _LOG4J),
    KafkaRelease("3.0.2", _LOG4J),
    KafkaRelease("3.1.2", _RELOAD4J_19),
    KafkaRelease("3.2.3", _RELOAD4J_19),
    KafkaRelease("3.3.2", _RELOAD4J_19),
    KafkaRelease("3.4.1", _RELOAD4J_25),
    KafkaRelease("3.5.2", _RELOAD4J_25),
    KafkaRelease("3.6.2", _RELOAD4J_25),
    KafkaRelease("3.7.2", _RELOAD4J_25),
    KafkaRelease("3.8.1", _RELOAD4J_25),
    KafkaRelease("3.9.2", _RELOAD4J_25),
)
VERSIONS = tuple(r.version for r in RELEASES)
# The releases `make test` runs (and `make setup` fetches): the first line's last release,
# the release the tool was first proven on, the first release whose migration to KRaft sets
# mismatched replicas aside (the KRaft acceptance's earlier release), and the last
# ZooKeeper-mode release.
TESTED = ("2.8.2", "3.4.1", "3.6.2", "3.9.2")

LEGACY_CLIENT = Classpath(
    "legacy-client-1.0.2",
    (Artifact("org.apache.kafka", "kafka_2.12", "1.0.2"),),
    "Kafka 1.0.2's tools (kafka.admin.TopicCommand), the pre-2.8 client whose alter drops the"
    " topic id; its POM brings log4j, zkclient 0.10 and the ZooKeeper 3.4.10 client",
)


def release(version: str) -> KafkaRelease:
    """The release `version` (`3.9.2` or `real-3.9.2`), or SandboxError naming every release
    the sandbox runs."""
    wanted = version.removeprefix("real-")
    for candidate in RELEASES:
        if candidate.version == wanted:
            return candidate
    raise SandboxError(
        f"Kafka {version!r} is not a release the sandbox runs; it runs the ZooKeeper-mode"
        f" releases {', '.join(VERSIONS)}"
    )
