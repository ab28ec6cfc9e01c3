"""min.insync.replicas as Kafka resolves it, and where each value came from (pure, no I/O).

A partition's leader enforces its topic's min.insync.replicas: the topic's override
(/config/topics/<t>), else the leader broker's own setting, which is, in Kafka's order, its
per-broker dynamic setting (/config/brokers/<id>), the cluster's dynamic default
(/config/brokers/<default>), its static server.properties, Kafka's default 1. Leadership moves
to any of a partition's replicas, so a partition is planned and gated with the strictest (the
largest) of its replicas' own settings (`MinIsrRule`): one broker set higher than the others
raises the partitions it hosts, not the whole cluster's.
cluster.yaml's `min_insync_replicas_default`, when the operator states it, stands in only for
a broker nothing is known of; without it such a broker is named (`unknown`) and the planner
refuses a plan with steps: a value guessed low would let a restart take partitions below
their real minimum.

The facts are read by remediate/collect/min_isr.py; the plan records the result
(`PlannedMinIsr`) with its source, and the gates and the availability model use its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

KEY = "min.insync.replicas"
# Kafka's own default, when no setting anywhere names it.
KAFKA_DEFAULT = 1


class MinIsrSource(StrEnum):
    """Where a min.insync.replicas came from."""

    TOPIC_OVERRIDE = "topic override"
    BROKER_DYNAMIC = "broker dynamic setting"
    CLUSTER_DYNAMIC_DEFAULT = "cluster dynamic default"
    SERVER_PROPERTIES = "server.properties"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    CLUSTER_YAML = "cluster.yaml fallback"


def parse_min_isr(value: str | None) -> int | None:
    """A setting's text as Kafka would take it; None for absent or not a positive integer."""
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        return None
    return int(text)


@dataclass(frozen=True)
class PlannedMinIsr:
    """One resolved min.insync.replicas: its value, where it came from, and in words which
    setting it is (a znode, a broker's file)."""

    value: int
    source: MinIsrSource
    detail: str = ""
    # Brokers whose setting is not known and for which cluster.yaml states no value: `value`
    # is then only the strictest of the others' (a plan with steps is refused).
    unknown: tuple[int, ...] = ()
    # Each broker's own value where it differs from `value` (the strictest): a partition
    # whose replicas are all among them gets the strictest of theirs (`rule`).
    by_broker: Mapping[int, int] = field(default_factory=dict)

    def __str__(self) -> str:
        said = f"{self.value} ({self.source}"
        said += f": {self.detail})" if self.detail else ")"
        if self.by_broker:
            lower = ", ".join(f"broker {b}: {v}" for b, v in sorted(self.by_broker.items()))
            said += f"; lower on {lower} (each partition: the strictest of its replicas')"
        return said

    def rule(self) -> MinIsrRule:
        """What each partition without a topic override gets (the gates and the model)."""
        return MinIsrRule(self.value, self.by_broker)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "value": self.value,
            "source": str(self.source),
            "detail": self.detail,
        }
        if self.unknown:
            document["unknown"] = list(self.unknown)
        if self.by_broker:
            document["by_broker"] = {str(b): v for b, v in sorted(self.by_broker.items())}
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> PlannedMinIsr:
        return cls(
            int(document["value"]),
            MinIsrSource(str(document["source"])),
            str(document.get("detail", "")),
            tuple(int(b) for b in document.get("unknown", ())),
            {int(b): int(v) for b, v in dict(document.get("by_broker", {})).items()},
        )


@dataclass(frozen=True)
class MinIsrRule:
    """min.insync.replicas of a partition whose topic has no override: the leader's own
    setting, and since leadership moves to any replica, the strictest among its replicas'.
    `brokers`: the brokers whose own value is lower than `strictest`; every other broker
    (and one nothing is known of) counts with `strictest`."""

    strictest: int
    brokers: Mapping[int, int] = field(default_factory=dict)

    def for_replicas(self, replicas: Iterable[int]) -> int:
        return max((self.brokers.get(b, self.strictest) for b in replicas), default=self.strictest)

    def of(self, config: Mapping[str, str], replicas: Iterable[int]) -> int:
        """A partition's value: its topic's override (`config`), else `for_replicas`."""
        override = parse_min_isr(config.get(KEY))
        return override if override is not None else self.for_replicas(replicas)


@dataclass(frozen=True)
class BrokerMinIsr:
    """What is known of one broker's own min.insync.replicas.

    `dynamic`: its per-broker dynamic setting (/config/brokers/<id>). `static`: its static
    setting, read from `static_source` (its server.properties, or DescribeConfigs); None when
    it could not be read (`problem` says why). `static_unset`: the file does not set it, so
    Kafka's default applies."""

    broker: int
    dynamic: int | None = None
    static: int | None = None
    static_source: MinIsrSource | None = None
    static_unset: bool = False
    problem: str | None = None


@dataclass(frozen=True)
class MinIsrFacts:
    """The cluster's dynamic default (/config/brokers/<default>) and each broker's own."""

    cluster_default: int | None = None
    brokers: Mapping[int, BrokerMinIsr] = field(default_factory=dict)


def broker_min_isr(facts: MinIsrFacts, broker: int) -> PlannedMinIsr | None:
    """The broker's effective setting in Kafka's order; None when nothing is known of it."""
    known = facts.brokers.get(broker, BrokerMinIsr(broker))
    if known.dynamic is not None:
        return PlannedMinIsr(
            known.dynamic, MinIsrSource.BROKER_DYNAMIC, f"/config/brokers/{broker}"
        )
    if facts.cluster_default is not None:
        return PlannedMinIsr(
            facts.cluster_default, MinIsrSource.CLUSTER_DYNAMIC_DEFAULT, "/config/brokers/<default>"
        )
    if known.static is not None and known.static_source is not None:
        unset = " does not set it: Kafka's default" if known.static_unset else ""
        return PlannedMinIsr(known.static, known.static_source, f"broker {broker}{unset}")
    return None


def brokers_min_isr(facts: MinIsrFacts, brokers: list[int], fallback: int | None) -> PlannedMinIsr:
    """What a topic without an override gets: the strictest of the brokers' own settings,
    with each broker's own where it is lower (`by_broker`). A broker nothing is known of
    counts with `fallback` (the value cluster.yaml states); with none stated, it is named in
    `unknown` instead, and counts with the strictest."""
    strictest = (
        _without_fallback(facts, brokers)
        if fallback is None
        else _strictest(facts, brokers, fallback)
    )
    own = {b: known.value for b in brokers if (known := broker_min_isr(facts, b)) is not None}
    if fallback is not None:
        own |= {b: fallback for b in brokers if b not in own}
    lower = {b: v for b, v in sorted(own.items()) if v < strictest.value}
    return replace(strictest, by_broker=lower) if lower else strictest


def _strictest(facts: MinIsrFacts, brokers: list[int], fallback: int) -> PlannedMinIsr:
    found: list[tuple[int, int, PlannedMinIsr]] = []
    unknown: list[int] = []
    for broker in sorted(brokers):
        resolved = broker_min_isr(facts, broker)
        if resolved is None:
            unknown.append(broker)
        else:
            found.append((resolved.value, -broker, resolved))
    unknown_text = ", ".join(str(b) for b in unknown)
    if not found:
        if facts.cluster_default is not None:
            return PlannedMinIsr(
                facts.cluster_default,
                MinIsrSource.CLUSTER_DYNAMIC_DEFAULT,
                "/config/brokers/<default>",
            )
        detail = f"nothing known of broker(s) {unknown_text}" if unknown else "no broker known"
        return PlannedMinIsr(fallback, MinIsrSource.CLUSTER_YAML, detail)
    value, _, best = max(found, key=lambda item: (item[0], item[1]))
    if unknown and fallback > value:
        return PlannedMinIsr(
            fallback, MinIsrSource.CLUSTER_YAML, f"nothing known of broker(s) {unknown_text}"
        )
    if best.source is MinIsrSource.CLUSTER_DYNAMIC_DEFAULT:
        return best
    # Several brokers with the same strictest value from the same kind of setting: named.
    agreeing = sorted(-b for v, b, p in found if v == value and p.source is best.source)
    detail = f"broker(s) {', '.join(str(b) for b in agreeing)}"
    if best.detail.endswith("Kafka's default"):
        detail += " (not set: Kafka's default)"
    if unknown:
        detail += f"; nothing known of broker(s) {unknown_text}"
    return PlannedMinIsr(value, best.source, detail)


def topic_min_isr(topic: str, config: Mapping[str, str], default: PlannedMinIsr) -> PlannedMinIsr:
    """The topic's min.insync.replicas: its override, else the brokers' `default`."""
    override = parse_min_isr(config.get(KEY))
    if override is not None:
        return PlannedMinIsr(override, MinIsrSource.TOPIC_OVERRIDE, f"/config/topics/{topic}")
    return default


def _without_fallback(facts: MinIsrFacts, brokers: list[int]) -> PlannedMinIsr:
    unknown = tuple(b for b in sorted(brokers) if broker_min_isr(facts, b) is None)
    known = [b for b in brokers if b not in unknown]
    if not known:
        if facts.cluster_default is not None:
            return _strictest(facts, brokers, facts.cluster_default)
        return PlannedMinIsr(
            KAFKA_DEFAULT,
            MinIsrSource.CLUSTER_YAML,
            "not stated, and nothing known of the brokers",
            unknown=unknown,
        )
    resolved = _strictest(facts, known, KAFKA_DEFAULT)
    if not unknown:
        return resolved
    listed = ", ".join(str(b) for b in unknown)
    return PlannedMinIsr(
        resolved.value,
        resolved.source,
        f"{resolved.detail}; nothing known of broker(s) {listed}",
        unknown=unknown,
    )


def unknown_refusal(resolved: PlannedMinIsr, problems: tuple[str, ...] = ()) -> str | None:
    """Why a plan with steps is refused when some broker's min.insync.replicas is not known
    and cluster.yaml states no value, or None."""
    if not resolved.unknown:
        return None
    listed = ", ".join(str(b) for b in resolved.unknown)
    why = f" ({'; '.join(problems)})" if problems else ""
    return (
        f"{KEY} is not known for broker(s) {listed}{why}: without it the gates cannot tell"
        " what a restart takes below its minimum. Let the tool read it (each broker's"
        " server_properties, or DescribeConfigs through the kafka section:"
        " docs/configuration.md), or state the value the brokers run with as"
        " `min_insync_replicas_default` in cluster.yaml"
    )
