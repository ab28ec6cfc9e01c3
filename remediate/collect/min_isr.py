"""Read what decides the brokers' min.insync.replicas (remediate/minisr.py resolves it): the
dynamic settings in ZooKeeper (/config/brokers/<default> and /config/brokers/<id>), and each
broker's static setting, from its server.properties through its transport or, for a broker
whose file cluster.yaml does not name, from DescribeConfigs through the `kafka` section.

Read-only. An unreadable /config/brokers (Kafka protects it with ACLs when
zookeeper.set.acl is on) is an error that says so, never a silent default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from remediate.collect.collector import TransportFactory, read_server_properties
from remediate.config import BrokerConfig, ClusterConfig
from remediate.errors import (
    ConfigError,
    FormatError,
    KafkaAdminError,
    TransportError,
    ZooKeeperError,
)
from remediate.formats.znodes import broker_config_path, decode_topic_config
from remediate.minisr import (
    KAFKA_DEFAULT,
    KEY,
    BrokerMinIsr,
    MinIsrFacts,
    MinIsrSource,
    PlannedMinIsr,
    brokers_min_isr,
    parse_min_isr,
)
from remediate.ports import KafkaAdmin, ZooKeeper

DEFAULT_ENTITY = "<default>"
AdminOpener = Callable[[], KafkaAdmin]


def _setting(path: str, read: tuple[bytes, object] | None) -> int | None:
    if read is None:
        return None
    try:
        config = decode_topic_config(read[0], source=path)
    except FormatError as exc:
        raise ZooKeeperError(f"{path}: {exc}") from exc
    value = config.get(KEY)
    if value is not None and parse_min_isr(value) is None:
        raise ZooKeeperError(f"{path}: {KEY}: expected a positive integer, got {value!r}")
    return parse_min_isr(value)


def read_dynamic_min_isr(
    zk: ZooKeeper, brokers: Iterable[int]
) -> tuple[int | None, dict[int, int]]:
    """(the cluster's dynamic default, each broker's own dynamic setting where set)."""
    ids = sorted(set(brokers))
    paths = {None: f"/config/brokers/{DEFAULT_ENTITY}"} | {b: broker_config_path(b) for b in ids}
    try:
        reads = zk.get_many(list(paths.values()))
    except ZooKeeperError as exc:
        raise ZooKeeperError(
            f"cannot read /config/brokers (the brokers' dynamic settings, where Kafka keeps"
            f" the cluster's default min.insync.replicas): {exc}. Give the tool's ZooKeeper"
            " identity read access to /config/brokers and its children (Kafka's own"
            " principal has it)"
        ) from exc
    found = {b: _setting(p, reads.get(p)) for b, p in paths.items()}
    default = found.pop(None)
    return default, {b: v for b, v in found.items() if b is not None and v is not None}


def read_static_min_isr(
    config: ClusterConfig,
    broker: BrokerConfig,
    transport_for: TransportFactory,
    admin: AdminOpener | None,
) -> BrokerMinIsr:
    """The broker's static min.insync.replicas: its server.properties where cluster.yaml names
    it; where that is not named or cannot be read, DescribeConfigs (the value the broker runs
    with); else nothing, with why each source failed."""
    failed: list[str] = []
    if broker.server_properties is not None:
        found = _from_file(config, broker, transport_for)
        if found.problem is None:
            return found
        failed.append(found.problem)
    else:
        failed.append(f"broker {broker.id}: cluster.yaml names no server_properties")
    if admin is None:
        failed.append("no kafka section (DescribeConfigs)")
        return BrokerMinIsr(broker.id, problem="; ".join(failed))
    found = _from_describe_configs(broker, admin)
    if found.problem is None:
        return found
    return BrokerMinIsr(broker.id, problem="; ".join([*failed, found.problem]))


def _from_file(
    config: ClusterConfig, broker: BrokerConfig, transport_for: TransportFactory
) -> BrokerMinIsr:
    transport = transport_for(broker.id)
    try:
        props = read_server_properties(config, broker, transport)
    except (TransportError, FormatError) as exc:
        return BrokerMinIsr(broker.id, problem=str(exc))
    finally:
        transport.close()
    text = props.get(KEY)
    value = parse_min_isr(text)
    if text is not None and value is None:
        return BrokerMinIsr(
            broker.id, problem=f"broker {broker.id}:{broker.server_properties}: {KEY}={text!r}"
        )
    return BrokerMinIsr(
        broker.id,
        static=KAFKA_DEFAULT if value is None else value,
        static_source=MinIsrSource.SERVER_PROPERTIES,
        static_unset=value is None,
    )


def _from_describe_configs(broker: BrokerConfig, admin: AdminOpener) -> BrokerMinIsr:
    try:
        client = admin()
    except (KafkaAdminError, ConfigError) as exc:  # no client: the broker is not known
        return BrokerMinIsr(broker.id, problem=f"Kafka's admin API cannot be reached: {exc}")
    try:
        described = client.effective_setting(broker.id, KEY)
    except KafkaAdminError as exc:  # a broker that does not answer: not known
        return BrokerMinIsr(broker.id, problem=str(exc))
    finally:
        client.close()
    value = parse_min_isr(described.value)
    if value is None:
        return BrokerMinIsr(broker.id, problem=described.error or f"{KEY}={described.value!r}")
    return BrokerMinIsr(
        broker.id,
        static=value,
        static_source=MinIsrSource.DESCRIBE_CONFIGS,
        static_unset=described.source == "DEFAULT_CONFIG",
    )


def read_min_isr_facts(
    config: ClusterConfig,
    zk: ZooKeeper,
    *,
    transport_for: TransportFactory,
    admin: AdminOpener | None,
) -> MinIsrFacts:
    """Every configured broker's min.insync.replicas facts (its static setting is read only
    where no dynamic setting decides it)."""
    ids = config.broker_ids
    default, dynamic = read_dynamic_min_isr(zk, ids)
    wanted = [] if default is not None else [b for b in config.brokers if b.id not in dynamic]
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(wanted)))) as pool:
        futures = {
            b.id: pool.submit(read_static_min_isr, config, b, transport_for, admin) for b in wanted
        }
        static: Mapping[int, BrokerMinIsr] = {b: f.result() for b, f in futures.items()}
    brokers = {
        b: BrokerMinIsr(b, dynamic=dynamic[b]) if b in dynamic else static.get(b, BrokerMinIsr(b))
        for b in ids
    }
    return MinIsrFacts(cluster_default=default, brokers=brokers)


def resolve_brokers_min_isr(
    config: ClusterConfig,
    zk: ZooKeeper,
    *,
    transport_for: TransportFactory,
    admin: AdminOpener | None,
) -> tuple[PlannedMinIsr, tuple[str, ...]]:
    """What a topic without an override gets on `config`'s cluster, and the problems met
    (brokers whose setting could not be read: counted with the value cluster.yaml states, or
    named as unknown where it states none)."""
    facts = read_min_isr_facts(config, zk, transport_for=transport_for, admin=admin)
    problems = tuple(
        f"min.insync.replicas: {b.problem}" for b in facts.brokers.values() if b.problem
    )
    resolved = brokers_min_isr(facts, list(config.broker_ids), config.min_insync_replicas_default)
    return resolved, problems
