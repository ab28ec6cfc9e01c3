"""min.insync.replicas as Kafka resolves it (remediate/minisr.py), from plain data."""

from __future__ import annotations

from dataclasses import replace

import pytest

from remediate.gates import degraded, restart_blocker
from remediate.kafka_lines import KafkaLines
from remediate.minisr import (
    BrokerMinIsr,
    MinIsrFacts,
    MinIsrRule,
    MinIsrSource,
    PlannedMinIsr,
    brokers_min_isr,
    topic_min_isr,
    unknown_refusal,
)
from remediate.plan.availability import build_model
from remediate.state import TopicPartition
from tests.plan.model import cluster

PROPS = MinIsrSource.SERVER_PROPERTIES
DESCRIBED = MinIsrSource.DESCRIBE_CONFIGS


def static(broker: int, value: int, source: MinIsrSource = PROPS) -> BrokerMinIsr:
    return BrokerMinIsr(broker, static=value, static_source=source)


def unset(broker: int) -> BrokerMinIsr:
    return BrokerMinIsr(broker, static=1, static_source=PROPS, static_unset=True)


def unknown(broker: int) -> BrokerMinIsr:
    return BrokerMinIsr(broker, problem="cannot read")


# (id, cluster default, brokers' facts, cluster.yaml fallback, expected)
CASES = [
    (
        "server-properties-everywhere",
        None,
        [static(1, 2), static(2, 2), static(3, 2)],
        1,
        PlannedMinIsr(2, PROPS, "broker(s) 1, 2, 3"),
    ),
    (
        "brokers-disagree-the-strictest",
        None,
        [static(1, 1), static(2, 3), static(3, 2)],
        1,
        PlannedMinIsr(3, PROPS, "broker(s) 2", by_broker={1: 1, 3: 2}),
    ),
    (
        "cluster-dynamic-default-wins-over-files",
        3,
        [static(1, 2), static(2, 2), static(3, 2)],
        1,
        PlannedMinIsr(3, MinIsrSource.CLUSTER_DYNAMIC_DEFAULT, "/config/brokers/<default>"),
    ),
    (
        "cluster-dynamic-default-below-files-still-wins",
        1,
        [static(1, 2), static(2, 2)],
        2,
        PlannedMinIsr(1, MinIsrSource.CLUSTER_DYNAMIC_DEFAULT, "/config/brokers/<default>"),
    ),
    (
        "broker-dynamic-over-cluster-default",
        2,
        [BrokerMinIsr(1, dynamic=3), static(2, 1), static(3, 1)],
        1,
        PlannedMinIsr(3, MinIsrSource.BROKER_DYNAMIC, "broker(s) 1", by_broker={2: 2, 3: 2}),
    ),
    (
        "broker-dynamic-below-the-others-files",
        None,
        [BrokerMinIsr(1, dynamic=1), static(2, 2), static(3, 2)],
        1,
        PlannedMinIsr(2, PROPS, "broker(s) 2, 3", by_broker={1: 1}),
    ),
    (
        "unset-in-the-file-is-kafkas-default-not-the-fallback",
        None,
        [unset(1), unset(2)],
        2,
        PlannedMinIsr(1, PROPS, "broker(s) 1, 2 (not set: Kafka's default)"),
    ),
    (
        "describe-configs",
        None,
        [static(1, 2, DESCRIBED), static(2, 2, DESCRIBED)],
        1,
        PlannedMinIsr(2, DESCRIBED, "broker(s) 1, 2"),
    ),
    (
        "nothing-known-cluster-yaml-last",
        None,
        [unknown(1), unknown(2)],
        2,
        PlannedMinIsr(2, MinIsrSource.CLUSTER_YAML, "nothing known of broker(s) 1, 2"),
    ),
    (
        "one-unknown-counts-with-a-stricter-fallback",
        None,
        [static(1, 2), unknown(2)],
        3,
        PlannedMinIsr(
            3, MinIsrSource.CLUSTER_YAML, "nothing known of broker(s) 2", by_broker={1: 2}
        ),
    ),
    (
        "one-unknown-below-the-known",
        None,
        [static(1, 2), unknown(2)],
        1,
        # The broker nothing is known of counts with cluster.yaml's value, lower.
        PlannedMinIsr(2, PROPS, "broker(s) 1; nothing known of broker(s) 2", by_broker={2: 1}),
    ),
    # cluster.yaml states no value: a broker nothing is known of is named, never counted as 1.
    (
        "not-stated-one-unknown-is-named",
        None,
        [static(1, 2), static(2, 2), unknown(3)],
        None,
        PlannedMinIsr(2, PROPS, "broker(s) 1, 2; nothing known of broker(s) 3", unknown=(3,)),
    ),
    (
        "not-stated-nothing-known",
        None,
        [unknown(1), unknown(2)],
        None,
        PlannedMinIsr(
            1,
            MinIsrSource.CLUSTER_YAML,
            "not stated, and nothing known of the brokers",
            unknown=(1, 2),
        ),
    ),
    (
        "not-stated-the-cluster-default-decides-for-all",
        2,
        [unknown(1), unknown(2)],
        None,
        PlannedMinIsr(2, MinIsrSource.CLUSTER_DYNAMIC_DEFAULT, "/config/brokers/<default>"),
    ),
    (
        "not-stated-everything-known",
        None,
        [static(1, 2), unset(2)],
        None,
        PlannedMinIsr(2, PROPS, "broker(s) 1", by_broker={2: 1}),
    ),
]


@pytest.mark.parametrize(
    ("default", "brokers", "fallback", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_the_brokers_min_isr(
    default: int | None,
    brokers: list[BrokerMinIsr],
    fallback: int | None,
    expected: PlannedMinIsr,
) -> None:
    facts = MinIsrFacts(cluster_default=default, brokers={b.broker: b for b in brokers})
    assert brokers_min_isr(facts, [b.broker for b in brokers], fallback) == expected


BROKERS = PlannedMinIsr(2, PROPS, "broker(s) 1, 2, 3")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param({}, BROKERS, id="no-override"),
        pytest.param(
            {"min.insync.replicas": "3"},
            PlannedMinIsr(3, MinIsrSource.TOPIC_OVERRIDE, "/config/topics/orders"),
            id="override",
        ),
        pytest.param(
            {"min.insync.replicas": "1"},
            PlannedMinIsr(1, MinIsrSource.TOPIC_OVERRIDE, "/config/topics/orders"),
            id="override-below-the-brokers",
        ),
        pytest.param({"min.insync.replicas": "x"}, BROKERS, id="not-a-number"),
        pytest.param({"retention.ms": "1"}, BROKERS, id="other-keys"),
    ],
)
def test_a_topic_override_wins(config: dict[str, str], expected: PlannedMinIsr) -> None:
    assert topic_min_isr("orders", config, BROKERS) == expected


def test_the_json_round_trip_and_the_words() -> None:
    resolved = PlannedMinIsr(2, MinIsrSource.CLUSTER_DYNAMIC_DEFAULT, "/config/brokers/<default>")
    assert PlannedMinIsr.from_json(resolved.to_json()) == resolved
    assert str(resolved) == "2 (cluster dynamic default: /config/brokers/<default>)"


def test_a_plan_with_an_unknown_broker_is_refused_saying_what_to_do() -> None:
    facts = MinIsrFacts(brokers={1: static(1, 2), 2: unknown(2)})
    resolved = brokers_min_isr(facts, [1, 2], None)
    assert PlannedMinIsr.from_json(resolved.to_json()) == resolved
    refusal = unknown_refusal(resolved, ("min.insync.replicas: broker 2: permission denied",))
    assert refusal == (
        "min.insync.replicas is not known for broker(s) 2 (min.insync.replicas: broker 2:"
        " permission denied): without it the gates cannot tell what a restart takes below its"
        " minimum. Let the tool read it (each broker's server_properties, or DescribeConfigs"
        " through the kafka section: docs/configuration.md), or state the value the brokers"
        " run with as `min_insync_replicas_default` in cluster.yaml"
    )
    # Stated in cluster.yaml: counted with it, and nothing refused.
    stated = brokers_min_isr(facts, [1, 2], 3)
    assert stated.unknown == () and unknown_refusal(stated) is None
    assert "unknown" not in stated.to_json()  # the plans made before keep their digest


# -- per partition: the strictest of the replicas' own settings ---------------------------------


def test_a_broker_set_higher_raises_its_partitions_only_and_says_so() -> None:
    facts = MinIsrFacts(brokers={1: static(1, 3), 2: static(2, 2), 3: static(3, 2), 4: unset(4)})
    resolved = brokers_min_isr(facts, [1, 2, 3, 4], None)
    assert resolved.rule() == MinIsrRule(3, {2: 2, 3: 2, 4: 1})
    assert PlannedMinIsr.from_json(resolved.to_json()) == resolved
    assert str(resolved) == (
        "3 (server.properties: broker(s) 1); lower on broker 2: 2, broker 3: 2, broker 4: 1"
        " (each partition: the strictest of its replicas')"
    )


@pytest.mark.parametrize(
    ("replicas", "config", "expected"),
    [
        pytest.param((1, 2, 3), {}, 3, id="a-replica-on-the-strict-broker"),
        pytest.param((2, 3, 4), {}, 2, id="none-on-it-the-strictest-of-theirs"),
        pytest.param((4,), {}, 1, id="one-replica-its-own-broker"),
        pytest.param((5, 4), {}, 3, id="a-broker-nothing-is-known-of-counts-as-the-strictest"),
        pytest.param((), {}, 3, id="no-replica"),
        pytest.param((2, 3, 4), {"min.insync.replicas": "3"}, 3, id="the-override-wins-up"),
        pytest.param((1, 2, 3), {"min.insync.replicas": "1"}, 1, id="the-override-wins-down"),
        pytest.param((1, 2, 3), {"min.insync.replicas": "0"}, 3, id="an-override-kafka-rejects"),
    ],
)
def test_a_partitions_value(
    replicas: tuple[int, ...], config: dict[str, str], expected: int
) -> None:
    assert MinIsrRule(3, {2: 2, 3: 2, 4: 1}).of(config, replicas) == expected


def test_the_gate_and_the_model_use_the_same_per_partition_value() -> None:
    """Broker 1 set to 3, the others 2: a partition hosted on 1 needs 3 in sync (and with
    replication 3 no restart keeps it writable under acks=all), one not on 1 needs 2."""
    state = cluster(
        brokers=[1, 2, 3, 4],
        topics={"t": {0: [1, 2, 3], 1: [2, 3, 4]}},
        isr={("t", 1): [2, 3]},
    )
    state = replace(state, topics={"t": replace(state.topics["t"], config={})})  # no topic override
    rule = MinIsrRule(3, {2: 2, 3: 2, 4: 2})
    model = build_model(state, [], min_isr=rule, lines=KafkaLines.uniform((3, 9), [1, 2, 3, 4]))
    assert {tp.partition: p.min_isr for tp, p in model.partitions.items()} == {0: 3, 1: 2}
    assert state.min_insync_replicas(TopicPartition("t", 0), rule) == 3
    assert state.min_insync_replicas(TopicPartition("t", 1), rule) == 2
    # t-1 has exactly 2 of its 2 in sync: restarting 2 or 3 takes it below; 4 is out already.
    assert restart_blocker(state, 3, min_isr=rule) == (
        "t-1 has exactly min.insync.replicas=2 in sync (isr [2, 3]); restarting broker 3 would"
        " take it below"
    )
    assert restart_blocker(state, 4, min_isr=rule) is None
    assert degraded(state, rule).below_min_isr == frozenset()
    # The cluster-wide strictest (the rule before) took t-1 for a partition that needs all 3
    # of its replicas, which no gate can protect, and let broker 3's restart take it below the
    # 2 its leader enforces.
    assert restart_blocker(state, 3, min_isr=MinIsrRule(3)) is None
