"""Parsers and encoders for the ZooKeeper documents of a ZK-mode Kafka cluster.

Shapes and rules follow Kafka's own kafka.zk.ZkData at 2.8.2 and 3.4.1.
Readers are as lenient as Kafka's (unknown fields ignored, `version` ignored where Kafka ignores
it) and as strict (types checked). Encoders produce what Kafka itself writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from remediate.errors import FormatError
from remediate.formats.javanum import parse_java_int
from remediate.formats.jsonutil import (
    INT32_MAX,
    INT32_MIN,
    JsonObject,
    as_int,
    as_int_list,
    dump,
    get_int,
    get_int_list,
    get_object,
    get_str,
    load_object,
)
from remediate.formats.scala_order import legacy_partition_order, mutable_hash_map_order
from remediate.formats.topic_id import TopicId, parse_topic_id

# -- paths -------------------------------------------------------------------------------------

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
# Created by a KRaft controller of a ZooKeeper-to-KRaft migration (KIP-866), never deleted.
MIGRATION = "/migration"
CONFIG_TOPICS = "/config/topics"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(broker_id: int) -> str:
    """A broker's own dynamic settings (the same {"version": 1, "config": ...} as a topic's)."""
    return f"/config/brokers/{broker_id}"


# -- /brokers/topics/<t> -----------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: the replica assignment and, when known, the topic id."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: TopicId | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    version: int | None = None


def _partition_key(key: str, *, source: str, field_name: str) -> int:
    number = parse_java_int(key)
    if number is None:
        raise FormatError(source, field_name, "partition numbers as strings of integers", key)
    return number


def _replica_map(obj: JsonObject, *, source: str, field_name: str) -> dict[int, tuple[int, ...]]:
    result: dict[int, tuple[int, ...]] = {}
    for key, value in obj.items():
        partition = _partition_key(key, source=source, field_name=field_name)
        result[partition] = as_int_list(value, source=source, field=f"{field_name}.{key}")
    return result


def _replicas_of(
    obj: JsonObject, name: str, keys: Mapping[int, str], *, source: str
) -> dict[int, tuple[int, ...]]:
    """`adding_replicas` or `removing_replicas` as Kafka reads them (TopicZNode.decode's
    getReplicas): an object if present, and in it only the keys `partitions` uses, looked up
    as the same strings; anything under other keys is never read."""
    if name not in obj:
        return {}
    found = get_object(obj, name, source=source)
    return {
        partition: as_int_list(found[key], source=source, field=f"{name}.{key}")
        for partition, key in keys.items()
        if key in found
    }


def decode_topic(data: bytes | None, *, source: str) -> TopicAssignment:
    """Read a topic znode of any version (1, 2 or 3) as Kafka's TopicZNode.decode does: a
    missing `partitions` is an empty assignment."""
    obj = load_object(data, source=source)
    listed = get_object(obj, "partitions", source=source) if "partitions" in obj else {}
    partitions = _replica_map(listed, source=source, field_name="partitions")
    keys = {_partition_key(key, source=source, field_name="partitions"): key for key in listed}
    topic_id: TopicId | None = None
    # Kafka reads a present key with `.to[String]` / `.asJsonObject`: null is an error, not absent.
    if "topic_id" in obj:
        raw_id = obj["topic_id"]
        if not isinstance(raw_id, str):
            raise FormatError(source, "topic_id", "a string", raw_id)
        topic_id = parse_topic_id(raw_id, source=source, field="topic_id")
    adding = _replicas_of(obj, "adding_replicas", keys, source=source)
    removing = _replicas_of(obj, "removing_replicas", keys, source=source)
    version = obj.get("version")
    return TopicAssignment(
        partitions=partitions,
        topic_id=topic_id,
        adding_replicas=adding,
        removing_replicas=removing,
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
    )


def encode_topic(assignment: TopicAssignment) -> bytes:
    """What a 2.8+ controller or admin writes: version 3, `topic_id` only when known, every
    map's keys in the order Kafka's Scala 2.13 build writes them (ZkData.TopicZNode.encode:
    mutable hash maps, scala_order.py)."""
    doc: dict[str, Any] = {
        "version": 3,
        "partitions": _encode_scala_map(assignment.partitions),
        "adding_replicas": _encode_scala_map(assignment.adding_replicas),
        "removing_replicas": _encode_scala_map(assignment.removing_replicas),
    }
    if assignment.topic_id is not None:
        doc["topic_id"] = str(assignment.topic_id)
    return dump({key: doc[key] for key in mutable_hash_map_order(doc, initial_table=8)})


def _encode_scala_map(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    as_text = {str(p): list(r) for p, r in replicas.items()}
    return {key: as_text[key] for key in mutable_hash_map_order(as_text)}


def with_topic_id(data: bytes | None, topic_id: TopicId, *, source: str) -> bytes:
    """The topic znode `data` with `topic_id` written into it: upgraded to version 3 (empty
    `adding_replicas`/`removing_replicas` where absent, as a 2.8+ writer has them) and every
    other field kept as it was, including fields this reader does not know. The document must
    be one Kafka reads (`decode_topic`), so nothing unreadable is ever written back."""
    decode_topic(data, source=source)
    doc = dict(load_object(data, source=source))
    doc["version"] = 3
    doc.setdefault("adding_replicas", {})
    doc.setdefault("removing_replicas", {})
    doc["topic_id"] = str(topic_id)
    return dump(doc)


def encode_topic_legacy(partitions: Mapping[int, Sequence[int]]) -> bytes:
    """What a pre-2.4 client (Kafka 1.0 AdminUtils) writes: version 1, no id, nothing else,
    the partitions in the order its Scala map writes them (scala_order.legacy_partition_order;
    numeric order for a map that is not partitions 0 to N-1)."""
    numbers = sorted(partitions)
    if numbers == list(range(len(numbers))):
        numbers = legacy_partition_order(len(numbers))
    return dump({"version": 1, "partitions": {str(p): list(partitions[p]) for p in numbers}})


# -- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    """A partition's leader and ISR. `zk_version` is the state znode's stat version (the
    partition epoch used for conditional updates) and `mzxid` the transaction that last wrote
    it (its last leader or ISR change; None when not known); neither is part of the data."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0
    leader_recovery_state: int = 0
    mzxid: int | None = None

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0


NO_LEADER = -1
RECOVERED = 0
RECOVERING = 1


def decode_partition_state(
    data: bytes | None, *, source: str, zk_version: int = 0, mzxid: int | None = None
) -> PartitionState:
    obj = load_object(data, source=source)
    return PartitionState(
        leader=get_int(obj, "leader", source=source),
        leader_epoch=get_int(obj, "leader_epoch", source=source),
        isr=get_int_list(obj, "isr", source=source),
        controller_epoch=get_int(obj, "controller_epoch", source=source),
        zk_version=zk_version,
        leader_recovery_state=_leader_recovery_state(obj, source=source),
        mzxid=mzxid,
    )


def _leader_recovery_state(obj: JsonObject, *, source: str) -> int:
    """3.2+: `LeaderRecoveryState.of(value.toByte)`; absent means RECOVERED."""
    if "leader_recovery_state" not in obj:
        return RECOVERED
    value = as_int(obj["leader_recovery_state"], source=source, field="leader_recovery_state")
    as_byte = (value + 128) % 256 - 128  # Scala's Int.toByte keeps the low 8 bits, signed
    if as_byte not in (RECOVERED, RECOVERING):
        raise FormatError(source, "leader_recovery_state", "0 (recovered) or 1 (recovering)", value)
    return as_byte


def encode_partition_state(state: PartitionState) -> bytes:
    doc: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state:
        doc["leader_recovery_state"] = state.leader_recovery_state
    return dump(doc)


# -- /brokers/ids/<id> -------------------------------------------------------------------------

# EndPoint.uriParseExp, matched in full: `^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)`. Java's
# '.' stops at every line terminator; the optional brackets around an IPv6 host are not part of it.
_ENDPOINT = re.compile(
    "(?P<listener>[^\n\r\u0085\u2028\u2029]*)://"
    r"\[?(?P<host>[0-9a-zA-Z\-%._:]*)\]?:(?P<port>-?[0-9]+)"
)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Endpoint:
    """One broker listener. `host` is bare (`::1`, not `[::1]`); "" means all interfaces."""

    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        # EndPoint.connectionString: Utils.formatAddress brackets a host that contains ':'.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def parse_endpoint(text: object, *, source: str, field_name: str = "endpoints") -> Endpoint:
    """Parse `LISTENER://host:port` as EndPoint.createEndPoint does; the listener name is
    normalised to upper case (ListenerName.normalised)."""
    if not isinstance(text, str):
        raise FormatError(source, field_name, "LISTENER://host:port", text)
    match = _ENDPOINT.fullmatch(text)
    if not match:
        raise FormatError(source, field_name, "LISTENER://host:port", text)
    # EndPoint.scala: the port is Integer.parseInt's; any int, negative ones included.
    port = parse_java_int(match["port"])
    if port is None:
        raise FormatError(source, field_name, "a port that is a 32-bit integer", match["port"])
    return Endpoint(match["listener"].upper(), match["host"], port)


@dataclass(frozen=True)
class BrokerRegistration:
    """`/brokers/ids/<id>`, version 4 or 5. The broker epoch is the znode's czxid (not data)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    host: str | None
    port: int
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1
    version: int = 5
    security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    epoch: int = -1

    def endpoint(self, listener: str = "PLAINTEXT") -> Endpoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return self.endpoints[0] if self.endpoints else None


def decode_broker(
    broker_id: int, data: bytes | None, *, source: str, epoch: int = -1
) -> BrokerRegistration:
    """Read `/brokers/ids/<id>` as BrokerIdZNode.decode does: `version` (>= 1) and `jmx_port` are
    required; version 1 has only `host` and `port` (one PLAINTEXT endpoint); later versions list
    `endpoints`, each of whose listeners must be in `listener_security_protocol_map` (default:
    the security protocol names), whose values must be security protocols."""
    obj = load_object(data, source=source)
    version = get_int(obj, "version", source=source)
    if version < 1:
        raise FormatError(source, "version", "a broker registration version >= 1", version)
    jmx_port = get_int(obj, "jmx_port", source=source)
    protocol_map: dict[str, str] = {}
    if version == 1:
        host: str | None = get_str(obj, "host", source=source)
        port = get_int(obj, "port", source=source)
        endpoints: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", host or "", port),)
    else:
        # Kafka reads host and port only at version 1; here they are kept when well-formed.
        endpoints, protocol_map = _broker_endpoints(obj, source=source)
        host = obj.get("host") if isinstance(obj.get("host"), str) else None
        port = _lenient_int(obj.get("port"), -1)
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise FormatError(source, "rack", "a string or null", rack)
    _check_features(obj, source=source)
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=endpoints,
        host=host,
        port=port,
        timestamp_ms=_timestamp(obj),
        rack=rack,
        jmx_port=jmx_port,
        version=version,
        security_protocol_map=protocol_map,
        epoch=epoch,
    )


def _broker_endpoints(
    obj: JsonObject, *, source: str
) -> tuple[tuple[Endpoint, ...], dict[str, str]]:
    map_field = "listener_security_protocol_map"
    protocol_map = obj.get(map_field, {})
    if not isinstance(protocol_map, dict) or not all(
        isinstance(v, str) and v.upper() in SECURITY_PROTOCOLS for v in protocol_map.values()
    ):
        raise FormatError(
            source, map_field, f"an object of security protocols {SECURITY_PROTOCOLS}", protocol_map
        )
    raw_endpoints = obj.get("endpoints")
    if not isinstance(raw_endpoints, list):
        raise FormatError(source, "endpoints", "a list of LISTENER://host:port", raw_endpoints)
    endpoints = tuple(parse_endpoint(e, source=source) for e in raw_endpoints)
    names = [e.listener for e in endpoints]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        # Kafka refuses two endpoints with one listener name (names are upper-cased first).
        raise FormatError(source, "endpoints", "one endpoint per listener name", duplicated)
    listeners = protocol_map if map_field in obj else SECURITY_PROTOCOLS
    for endpoint in endpoints:
        if endpoint.listener not in listeners:
            raise FormatError(
                source, "endpoints", f"a listener named in {map_field}", str(endpoint)
            )
    return endpoints, dict(protocol_map)


def _lenient_int(value: object, default: int) -> int:
    """A field Kafka never reads: its value when it is a 32-bit int, else `default`."""
    if isinstance(value, int) and not isinstance(value, bool) and INT32_MIN <= value <= INT32_MAX:
        return value
    return default


def _timestamp(obj: JsonObject) -> int:
    """`timestamp`, which Kafka never reads: milliseconds when it is a string of them, else 0."""
    timestamp = obj.get("timestamp")
    parsed = parse_java_int(timestamp, (0, 2**63 - 1)) if isinstance(timestamp, str) else None
    return 0 if parsed is None else parsed


def _check_features(obj: JsonObject, *, source: str) -> None:
    """`features` as Kafka reads it (BrokerIdZNode.decode, SupportedVersionRange): absent or
    null, or an object of feature names to {min_version, max_version} ints with
    1 <= min_version <= max_version (BaseVersionRange, the same at 2.8.2 and 3.4.1; the bounds
    are Java shorts, so above 32767 is refused here where Kafka would truncate)."""
    features = obj.get("features")
    if features is None:
        return
    expected = "an object of features, each {min_version, max_version} with 1 <= min <= max"
    if not isinstance(features, dict):
        raise FormatError(source, "features", expected, features)
    for name, bounds in features.items():
        if not isinstance(bounds, dict):
            raise FormatError(source, f"features.{name}", expected, bounds)
        low, high = bounds.get("min_version"), bounds.get("max_version")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
            raise FormatError(source, f"features.{name}", expected, bounds)
        assert isinstance(low, int) and isinstance(high, int)
        if not 1 <= low <= high <= 32767:
            raise FormatError(source, f"features.{name}", expected, bounds)


def encode_broker(registration: BrokerRegistration) -> bytes:
    """Version 5, as BrokerIdZNode.encode writes it. Without a listener map, listener names are
    taken to be security protocols (Kafka's default). `host`/`port` are those of the first
    endpoint whose security protocol is PLAINTEXT, else null and -1."""
    protocols = dict(registration.security_protocol_map) or {
        e.listener: e.listener for e in registration.endpoints
    }
    plaintext = next(
        (e for e in registration.endpoints if protocols.get(e.listener, "").upper() == "PLAINTEXT"),
        None,
    )
    doc: dict[str, Any] = {
        "listener_security_protocol_map": protocols,
        "endpoints": [str(e) for e in registration.endpoints],
        "jmx_port": registration.jmx_port,
        "features": {},
        "host": plaintext.host if plaintext else None,
        "timestamp": str(registration.timestamp_ms),
        "port": plaintext.port if plaintext else -1,
        "version": 5,
    }
    if registration.rack is not None:
        doc["rack"] = registration.rack
    return dump(doc)


# -- /controller, /controller_epoch ------------------------------------------------------------


@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int
    version: int = 1
    kraft_controller_epoch: int | None = None


def decode_controller(data: bytes | None, *, source: str = CONTROLLER) -> ControllerRegistration:
    """Read `/controller` as ControllerZNode.decode does: only `brokerid` is read (and must be
    an int); `timestamp`, `version` and `kraftControllerEpoch` are kept when well-formed."""
    obj = load_object(data, source=source)
    kraft_epoch = obj.get("kraftControllerEpoch")
    return ControllerRegistration(
        broker_id=get_int(obj, "brokerid", source=source),
        timestamp_ms=_timestamp(obj),
        version=_lenient_int(obj.get("version"), 1),
        kraft_controller_epoch=(
            kraft_epoch
            if isinstance(kraft_epoch, int)
            and not isinstance(kraft_epoch, bool)
            and INT32_MIN <= kraft_epoch <= INT32_MAX
            else None
        ),
    )


def encode_controller(registration: ControllerRegistration) -> bytes:
    doc: dict[str, Any] = {
        "version": registration.version,
        "brokerid": registration.broker_id,
        "timestamp": str(registration.timestamp_ms),
    }
    if registration.version >= 2:
        doc["kraftControllerEpoch"] = (
            registration.kraft_controller_epoch
            if registration.kraft_controller_epoch is not None
            else -1
        )
    return dump(doc)


# -- /migration --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigrationState:
    """`/migration` as kafka.zk.MigrationZNode writes it (3.4 to 3.9): the KRaft controller
    that leads the migration and how far KRaft's log has been written back to ZooKeeper.
    `kraft_metadata_offset` is -1 until ZooKeeper's metadata has been copied into KRaft.

    The znode's existence is the fact that matters: a KRaft controller started in migration
    mode created it, and nothing deletes it. `problem` says why its fields could not be read
    (the migration is no less real for that).
    """

    kraft_controller_id: int | None = None
    kraft_controller_epoch: int | None = None
    kraft_metadata_offset: int | None = None
    kraft_metadata_epoch: int | None = None
    problem: str | None = None

    @property
    def metadata_migrated(self) -> bool:
        return self.kraft_metadata_offset is not None and self.kraft_metadata_offset >= 0


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def decode_migration(data: bytes | None, *, source: str = MIGRATION) -> MigrationState:
    """Read `/migration` as MigrationZNode.decode does (version 0; the four fields required).
    Never raises: a znode that does not parse is still a migration, and says why."""
    try:
        obj = load_object(data, source=source)
        version = get_int(obj, "version", source=source)
        if version != 0:
            raise FormatError(source, "version", "0", version)
        offset = obj.get("kraft_metadata_offset")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise FormatError(source, "kraft_metadata_offset", "an integer", offset)
        if not INT64_MIN <= offset <= INT64_MAX:
            raise FormatError(source, "kraft_metadata_offset", "a 64-bit integer", offset)
        return MigrationState(
            kraft_controller_id=get_int(obj, "kraft_controller_id", source=source),
            kraft_controller_epoch=get_int(obj, "kraft_controller_epoch", source=source),
            kraft_metadata_offset=offset,
            kraft_metadata_epoch=get_int(obj, "kraft_metadata_epoch", source=source),
        )
    except FormatError as exc:
        return MigrationState(problem=str(exc))


def encode_migration(state: MigrationState) -> bytes:
    """What a KRaft controller writes (tests and the sandbox's checks)."""
    return dump(
        {
            "version": 0,
            "kraft_controller_id": state.kraft_controller_id,
            "kraft_controller_epoch": state.kraft_controller_epoch,
            "kraft_metadata_offset": state.kraft_metadata_offset,
            "kraft_metadata_epoch": state.kraft_metadata_epoch,
        }
    )


def decode_controller_epoch(data: bytes | None, *, source: str = CONTROLLER_EPOCH) -> int:
    text = (data or b"").decode("utf-8", errors="replace")
    epoch = parse_java_int(text)
    if epoch is None:
        raise FormatError(source, "data", "a plain integer", data)
    return epoch


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


# -- /config/topics/<t> ----------------------------------------------------------------------------


def decode_topic_config(data: bytes | None, *, source: str) -> dict[str, str]:
    obj = load_object(data, source=source)
    config = obj.get("config", {})
    if not isinstance(config, dict):
        raise FormatError(source, "config", "an object of string values", config)
    result: dict[str, str] = {}
    for key, value in config.items():
        if not isinstance(value, str):
            raise FormatError(source, f"config.{key}", "a string value", value)
        result[key] = value
    return result


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return dump({"version": 1, "config": dict(config)})


# -- /cluster/id -------------------------------------------------------------------------------


def decode_cluster_id(data: bytes | None, *, source: str = CLUSTER_ID) -> str:
    obj = load_object(data, source=source)
    return get_str(obj, "id", source=source)


def encode_cluster_id(cluster_id: str) -> bytes:
    return dump({"version": "1", "id": cluster_id})
