"""min.insync.replicas as Kafka resolves it (remediate/minisr.py), from plain data."""

from __future__ import annotations

import pytest

from remediate.minisr import (
    BrokerMinIsr,
    MinIsrFacts,
    MinIsrSource,
    PlannedMinIsr,
    brokers_min_isr,
    topic_min_isr,
    unknown_refusal,
)

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
        PlannedMinIsr(3, PROPS, "broker(s) 2"),
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
        PlannedMinIsr(3, MinIsrSource.BROKER_DYNAMIC, "broker(s) 1"),
    ),
    (
        "broker-dynamic-below-the-others-files",
        None,
        [BrokerMinIsr(1, dynamic=1), static(2, 2), static(3, 2)],
        1,
        PlannedMinIsr(2, PROPS, "broker(s) 2, 3"),
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
        PlannedMinIsr(3, MinIsrSource.CLUSTER_YAML, "nothing known of broker(s) 2"),
    ),
    (
        "one-unknown-below-the-known",
        None,
        [static(1, 2), unknown(2)],
        1,
        PlannedMinIsr(2, PROPS, "broker(s) 1; nothing known of broker(s) 2"),
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
        PlannedMinIsr(2, PROPS, "broker(s) 1"),
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
