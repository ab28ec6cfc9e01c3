"""A sandbox broker's configuration, kept in a Kafka-style server.properties file.

Keys are Kafka's own; defaults are Kafka's except where the sandbox shortens a timer so that a
test sees an ISR shrink or a session expiry in seconds rather than half a minute.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from remediate.errors import ConfigError
from remediate.formats.javanum import parse_java_int
from remediate.formats.properties import dump_properties, load_properties

KAFKA_VERSIONS = ("2.8", "3.4")
_IBP = re.compile(r"([0-9]+)\.([0-9]+)")
_JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))

# Sandbox values for Kafka settings, with Kafka's own default in the comment.
SANDBOX_DEFAULTS: dict[str, str] = {
    "inter.broker.protocol.version": "2.8",
    "zookeeper.session.timeout.ms": "6000",  # Kafka: 18000
    "replica.lag.time.max.ms": "3000",  # Kafka: 30000
    "replica.fetch.wait.max.ms": "200",  # Kafka: 500
    "replica.fetch.backoff.ms": "200",  # Kafka: 1000
    "replica.high.watermark.checkpoint.interval.ms": "1000",  # Kafka: 5000
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "1000",  # Kafka: 5000
    "min.insync.replicas": "2",  # Kafka: 1; production clusters with RF 3 use 2
    "default.replication.factor": "3",  # Kafka: 1
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "false",  # Kafka: true; off so runs are repeatable
    "file.delete.delay.ms": "60000",  # Kafka's: a moved replica's old dir lives this long
    # Not Kafka's: how long the emulated broker takes to load its logs at start-up, before it
    # registers (Kafka's log recovery, tens of seconds on real brokers; 0 by default).
    "sandbox.log.recovery.ms": "0",
}


@dataclass(frozen=True)
class BrokerSettings:
    broker_id: int
    host: str
    port: int
    log_dirs: tuple[Path, ...]
    zookeeper_connect: str
    kafka_version: str = "2.8"
    properties: Mapping[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str:
        return self.properties.get(key, SANDBOX_DEFAULTS.get(key, ""))

    def get_int(self, key: str) -> int:
        value = parse_java_int(self.get(key))
        if value is None:
            raise ConfigError(f"{key}: expected an integer, got {self.get(key)!r}")
        return value

    def get_bool(self, key: str) -> bool:
        return self.get(key).strip().lower() == "true"

    @property
    def rack(self) -> str | None:
        """`broker.rack`, which the broker registers with: KafkaConfig.rack is
        `Option(getString(...))`, None when unset, the value as ConfigDef reads a string
        (String.trim: every character up to U+0020 off both ends) when set, even empty."""
        value = self.properties.get("broker.rack")
        return None if value is None else value.strip(_JAVA_TRIMMED)

    @property
    def uses_topic_ids(self) -> bool:
        """IBP >= 2.8-IV0: the controller assigns topic ids and sends them in LeaderAndIsr.

        Only major.minor matters, as in Kafka's ApiVersion: "0.10.2", "2.7.1" and "2.7-IV2"
        are all before 2.8. A value that does not start with major.minor counts as 2.8+.
        """
        match = _IBP.match(self.get("inter.broker.protocol.version").strip())
        if match is None:
            return True
        return (int(match[1]), int(match[2])) >= (2, 8)


def write_server_properties(path: Path, settings: BrokerSettings) -> None:
    """Write `settings`; its fields win over the same keys in `properties`.

    `read_server_properties` keeps every key in `properties` (broker.id and listeners too),
    so a setting read, changed with dataclasses.replace and written again keeps the change.
    """
    fields = {
        "broker.id": str(settings.broker_id),
        "listeners": f"PLAINTEXT://{settings.host}:{settings.port}",
        "log.dirs": ",".join(str(d) for d in settings.log_dirs),
        "zookeeper.connect": settings.zookeeper_connect,
        "sandbox.kafka.version": settings.kafka_version,
    }
    values = {**fields, **SANDBOX_DEFAULTS, **settings.properties, **fields}
    path.write_bytes(dump_properties(values))


def read_server_properties(path: Path) -> BrokerSettings:
    source = str(path)
    try:
        props = load_properties(path.read_bytes(), source=source)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror}") from exc
    broker_id = parse_java_int(props.get("broker.id", ""))
    if broker_id is None:
        raise ConfigError(f"{source}: broker.id: expected an integer")
    listener = props.get("listeners", "")
    _, _, address = listener.partition("://")
    host, _, port_text = address.rpartition(":")
    port = parse_java_int(port_text)
    if not host or port is None:
        raise ConfigError(f"{source}: listeners: expected PLAINTEXT://host:port, got {listener!r}")
    log_dirs = tuple(Path(d.strip()) for d in props.get("log.dirs", "").split(",") if d.strip())
    if not log_dirs:
        raise ConfigError(f"{source}: log.dirs: expected a comma-separated list of directories")
    version = props.get("sandbox.kafka.version", "2.8")
    if version not in KAFKA_VERSIONS:
        raise ConfigError(f"{source}: sandbox.kafka.version: expected one of {KAFKA_VERSIONS}")
    return BrokerSettings(
        broker_id=broker_id,
        host=host,
        port=port,
        log_dirs=log_dirs,
        zookeeper_connect=props.get("zookeeper.connect", ""),
        kafka_version=version,
        properties=props,
    )
