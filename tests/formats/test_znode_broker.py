"""Broker and controller registrations: `/brokers/ids/<id>`, `/controller`, `/controller_epoch`,
`/cluster/id` (BrokerIdZNode, EndPoint.createEndPoint, ControllerZNode, ClusterIdZNode)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.znodes import (
    CLUSTER_ID,
    CONTROLLER,
    CONTROLLER_EPOCH,
    SECURITY_PROTOCOLS,
    BrokerRegistration,
    ControllerRegistration,
    Endpoint,
    broker_path,
    decode_broker,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    encode_broker,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    parse_endpoint,
)
from tests.formats.helpers import FAST, expect_format_error, int32s, returns_or_format_error

BROKER = broker_path(1)


def as_bytes(doc: object) -> bytes:
    return json.dumps(doc).encode()


# -- endpoints ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "formatted"),
    [
        pytest.param("PLAINTEXT://h:9092", Endpoint("PLAINTEXT", "h", 9092), None, id="plain"),
        pytest.param(
            "SASL_SSL://kafka-1.example.com:9094",
            Endpoint("SASL_SSL", "kafka-1.example.com", 9094),
            None,
            id="fqdn",
        ),
        pytest.param("PLAINTEXT://[::1]:9092", Endpoint("PLAINTEXT", "::1", 9092), None, id="ipv6"),
        pytest.param(
            "INTERNAL://[fe80::1%eth0]:19092",
            Endpoint("INTERNAL", "fe80::1%eth0", 19092),
            None,
            id="ipv6-zone",
        ),
        pytest.param(
            "PLAINTEXT://::1:9092",
            Endpoint("PLAINTEXT", "::1", 9092),
            "PLAINTEXT://[::1]:9092",
            id="ipv6-unbracketed",
        ),
        pytest.param(
            "PLAINTEXT://10.0.0.7:9092", Endpoint("PLAINTEXT", "10.0.0.7", 9092), None, id="ipv4"
        ),
        pytest.param("PLAINTEXT://:9092", Endpoint("PLAINTEXT", "", 9092), None, id="empty-host"),
        pytest.param(
            "plaintext://h:1", Endpoint("PLAINTEXT", "h", 1), "PLAINTEXT://h:1", id="listener-upper"
        ),
        pytest.param(
            "A://B://h:1", Endpoint("A://B", "h", 1), None, id="listener-is-greedy-like-kafka"
        ),
        pytest.param("PLAINTEXT://h:0", Endpoint("PLAINTEXT", "h", 0), None, id="port-0"),
        pytest.param("PLAINTEXT://k_1:1", Endpoint("PLAINTEXT", "k_1", 1), None, id="underscore"),
        pytest.param(
            "PLAINTEXT://h:09092",
            Endpoint("PLAINTEXT", "h", 9092),
            "PLAINTEXT://h:9092",
            id="port-0-pad",
        ),
    ],
)
def test_parse_endpoint(text: str, expected: Endpoint, formatted: str | None) -> None:
    endpoint = parse_endpoint(text, source=BROKER)
    assert endpoint == expected
    assert str(endpoint) == (formatted or text)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("h:9092", id="no-listener"),
        pytest.param("PLAINTEXT:/h:9092", id="one-slash"),
        pytest.param("PLAINTEXT://h", id="no-port"),
        pytest.param("PLAINTEXT://h:", id="empty-port"),
        pytest.param("PLAINTEXT://h:x", id="port-not-number"),
        pytest.param("PLAINTEXT://h:+1", id="port-plus"),
        pytest.param("PLAINTEXT://h h:9092", id="space-in-host"),
        pytest.param("PLAINTEXT://h*1:9092", id="star-in-host"),
        pytest.param("PLAINTEXT://hé:9092", id="non-ascii-host"),
        pytest.param("PLAINTEXT://h:9092/", id="trailing-slash"),
        pytest.param("PLAINTEXT://h:9092 ", id="trailing-space"),
        pytest.param("PLAIN\nTEXT://h:9092", id="newline-in-listener"),
        pytest.param("PLAINTEXT://h:99999999999", id="port-overflows-int"),
        pytest.param(9092, id="not-a-string"),
        pytest.param(None, id="null"),
    ],
)
def test_parse_endpoint_rejects(value: object) -> None:
    expect_format_error(
        lambda: parse_endpoint(value, source=BROKER), source=BROKER, field="endpoints"
    )


# -- broker registration -----------------------------------------------------------------------

V5 = {
    "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
    "endpoints": ["PLAINTEXT://h:9092"],
    "jmx_port": -1,
    "features": {},
    "host": "h",
    "timestamp": "1650000000000",
    "port": 9092,
    "version": 5,
}
V5_REGISTRATION = BrokerRegistration(
    broker_id=1,
    endpoints=(Endpoint("PLAINTEXT", "h", 9092),),
    host="h",
    port=9092,
    timestamp_ms=1650000000000,
    rack=None,
    jmx_port=-1,
    version=5,
    security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
    epoch=4294967296,
)


@pytest.mark.parametrize(
    ("doc", "changes"),
    [
        pytest.param(V5, {}, id="v5-reference"),
        pytest.param({**V5, "rack": "rack-a"}, {"rack": "rack-a"}, id="rack"),
        pytest.param({**V5, "rack": None}, {}, id="rack-null"),
        pytest.param({**V5, "jmx_port": 9999}, {"jmx_port": 9999}, id="jmx-port"),
        pytest.param(
            {**V5, "endpoints": ["PLAINTEXT://[::1]:9092"], "host": "::1"},
            {"endpoints": (Endpoint("PLAINTEXT", "::1", 9092),), "host": "::1"},
            id="ipv6-endpoint",
        ),
        pytest.param(
            {
                **V5,
                "listener_security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"},
                "endpoints": ["INTERNAL://a:9092", "EXTERNAL://b:9093"],
                "host": "a",
            },
            {
                "endpoints": (Endpoint("INTERNAL", "a", 9092), Endpoint("EXTERNAL", "b", 9093)),
                "host": "a",
                "security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"},
            },
            id="named-listeners",
        ),
        pytest.param(
            {**V5, "listener_security_protocol_map": {"PLAINTEXT": "plaintext"}},
            {"security_protocol_map": {"PLAINTEXT": "plaintext"}},
            id="protocol-names-any-case",
        ),
        pytest.param(
            {k: v for k, v in V5.items() if k != "listener_security_protocol_map"}
            | {"endpoints": ["SSL://h:9093", "plaintext://h:9092"]},
            {
                "endpoints": (Endpoint("SSL", "h", 9093), Endpoint("PLAINTEXT", "h", 9092)),
                "security_protocol_map": {},
            },
            id="default-protocol-map",
        ),
        pytest.param({**V5, "endpoints": []}, {"endpoints": ()}, id="no-endpoints"),
        pytest.param(
            {k: v for k, v in V5.items() if k not in ("timestamp", "host", "port", "features")},
            {"timestamp_ms": 0, "host": None, "port": -1},
            id="optional-fields-absent",
        ),
        pytest.param(
            {**V5, "host": None, "port": -1}, {"host": None, "port": -1}, id="no-plaintext"
        ),
        pytest.param({**V5, "version": 4}, {"version": 4}, id="v4"),
        pytest.param({**V5, "extra": [1]}, {}, id="unknown-field"),
        pytest.param(
            {"version": 1, "host": "old", "port": 9092, "jmx_port": -1},
            {
                "endpoints": (Endpoint("PLAINTEXT", "old", 9092),),
                "host": "old",
                "timestamp_ms": 0,
                "version": 1,
                "security_protocol_map": {},
            },
            id="v1-host-and-port",
        ),
    ],
)
def test_decode_broker(doc: dict[str, Any], changes: dict[str, Any]) -> None:
    registration = decode_broker(1, as_bytes(doc), source=BROKER, epoch=4294967296)
    assert registration == dataclasses.replace(V5_REGISTRATION, **changes)


# Fields Kafka's BrokerIdZNode.decode never reads (timestamp; host and port at version >= 2)
# and endpoint ports it accepts (EndPoint.scala: any int, negative ones included).
@pytest.mark.parametrize(
    ("doc", "host", "port", "endpoint_port"),
    [
        pytest.param({**V5, "timestamp": 1650000000000}, "h", 9092, 9092, id="timestamp-number"),
        pytest.param({**V5, "timestamp": "soon"}, "h", 9092, 9092, id="timestamp-text"),
        pytest.param({**V5, "timestamp": None}, "h", 9092, 9092, id="timestamp-null"),
        pytest.param({**V5, "host": 1}, None, 9092, 9092, id="host-number-v5"),
        pytest.param({**V5, "port": "9092"}, "h", -1, 9092, id="port-string-v5"),
        pytest.param(
            {**V5, "endpoints": ["PLAINTEXT://h:70000"]}, "h", 9092, 70000, id="port-above-65535"
        ),
        pytest.param({**V5, "endpoints": ["PLAINTEXT://h:-1"]}, "h", 9092, -1, id="port-negative"),
        pytest.param({**V5, "features": None}, "h", 9092, 9092, id="features-null"),
        pytest.param(
            {**V5, "features": {"f": {"min_version": 1, "max_version": 1}}},
            "h",
            9092,
            9092,
            id="features-one",
        ),
    ],
)
def test_decode_broker_accepts_what_kafka_accepts(
    doc: dict[str, Any], host: str | None, port: int, endpoint_port: int
) -> None:
    registration = decode_broker(1, as_bytes(doc), source=BROKER)
    assert (registration.host, registration.port) == (host, port)
    assert [e.port for e in registration.endpoints] == [endpoint_port]


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param({**V5, "endpoints": ["PLAINTEXT:/h:9092"]}, "endpoints", id="bad-endpoint"),
        pytest.param({**V5, "endpoints": ["h:9092"]}, "endpoints", id="endpoint-no-listener"),
        pytest.param({**V5, "endpoints": [9092]}, "endpoints", id="endpoint-not-string"),
        pytest.param({**V5, "endpoints": "PLAINTEXT://h:9092"}, "endpoints", id="endpoints-string"),
        pytest.param({**V5, "endpoints": None}, "endpoints", id="endpoints-null"),
        pytest.param(
            {k: v for k, v in V5.items() if k != "endpoints"}, "endpoints", id="endpoints-missing"
        ),
        pytest.param({**V5, "endpoints": ["SSL://h:9093"]}, "endpoints", id="listener-not-in-map"),
        pytest.param(
            {**V5, "listener_security_protocol_map": {"plaintext": "PLAINTEXT"}},
            "endpoints",
            id="map-keys-are-not-normalised",
        ),
        pytest.param(
            {k: v for k, v in V5.items() if k != "listener_security_protocol_map"}
            | {"endpoints": ["INTERNAL://h:1"]},
            "endpoints",
            id="default-map-has-only-protocols",
        ),
        pytest.param(
            {**V5, "listener_security_protocol_map": {"PLAINTEXT": "TLS"}},
            "listener_security_protocol_map",
            id="unknown-protocol",
        ),
        pytest.param(
            {**V5, "listener_security_protocol_map": {"PLAINTEXT": 1}},
            "listener_security_protocol_map",
            id="protocol-not-string",
        ),
        pytest.param(
            {**V5, "listener_security_protocol_map": None},
            "listener_security_protocol_map",
            id="map-null",
        ),
        pytest.param(
            {**V5, "listener_security_protocol_map": ["PLAINTEXT"]},
            "listener_security_protocol_map",
            id="map-list",
        ),
        pytest.param({k: v for k, v in V5.items() if k != "version"}, "version", id="no-version"),
        pytest.param({**V5, "version": "5"}, "version", id="version-string"),
        pytest.param({**V5, "version": 0}, "version", id="version-0"),
        pytest.param({**V5, "version": True}, "version", id="version-bool"),
        pytest.param(
            {k: v for k, v in V5.items() if k != "jmx_port"}, "jmx_port", id="no-jmx-port"
        ),
        pytest.param({**V5, "jmx_port": "-1"}, "jmx_port", id="jmx-port-string"),
        pytest.param({**V5, "rack": 1}, "rack", id="rack-number"),
        # Refused by Kafka: two endpoints with one listener name (upper-cased first), and a
        # features map that is not {name: {min_version, max_version}} with min <= max.
        pytest.param(
            {**V5, "endpoints": ["PLAINTEXT://a:1", "PLAINTEXT://b:2"]},
            "endpoints",
            id="duplicate-listener",
        ),
        pytest.param(
            {**V5, "endpoints": ["PLAINTEXT://a:1", "plaintext://b:2"]},
            "endpoints",
            id="duplicate-listener-case",
        ),
        pytest.param({**V5, "features": []}, "features", id="features-not-a-map"),
        pytest.param(
            {**V5, "features": {"f": {"min_version": 3, "max_version": 2}}},
            "features.f",
            id="features-min-above-max",
        ),
        pytest.param(
            {**V5, "features": {"f": {"min_version": 1}}}, "features.f", id="features-no-max"
        ),
        pytest.param(
            {**V5, "features": {"f": {"min_version": -1, "max_version": 2}}},
            "features.f",
            id="features-negative",
        ),
        pytest.param({**V5, "features": {"f": 3}}, "features.f", id="features-not-a-range"),
        pytest.param(
            {**V5, "features": {"f": {"min_version": 0, "max_version": 2}}},
            "features.f",
            id="features-zero",
        ),
        pytest.param({"version": 1, "port": 9092, "jmx_port": -1}, "host", id="v1-no-host"),
        pytest.param(
            {"version": 1, "host": "h", "port": "x", "jmx_port": -1}, "port", id="v1-port"
        ),
    ],
)
def test_decode_broker_rejects(doc: dict[str, Any], field: str) -> None:
    expect_format_error(
        lambda: decode_broker(1, as_bytes(doc), source=BROKER), source=BROKER, field=field
    )


@pytest.mark.parametrize("data", [None, b"", b"[]", b"{", b"\xfe\xff"], ids=repr)
def test_decode_broker_rejects_bad_data(data: bytes | None) -> None:
    expect_format_error(lambda: decode_broker(1, data, source=BROKER), source=BROKER, field="data")


def test_endpoint_lookup() -> None:
    internal = Endpoint("INTERNAL", "a", 1)
    plaintext = Endpoint("PLAINTEXT", "b", 2)
    registration = dataclasses.replace(V5_REGISTRATION, endpoints=(internal, plaintext))
    assert registration.endpoint() == plaintext
    assert registration.endpoint("INTERNAL") == internal
    assert registration.endpoint("MISSING") == internal  # falls back to the first listener
    assert dataclasses.replace(V5_REGISTRATION, endpoints=()).endpoint() is None


def test_encode_broker_v5() -> None:
    data = encode_broker(dataclasses.replace(V5_REGISTRATION, rack="r1"))
    assert json.loads(data) == {**V5, "rack": "r1"}
    assert "rack" not in json.loads(encode_broker(V5_REGISTRATION))


def test_encode_broker_host_is_the_first_plaintext_protocol_endpoint() -> None:
    """BrokerIdZNode.encode: host/port of the first endpoint whose *protocol* is PLAINTEXT."""
    registration = dataclasses.replace(
        V5_REGISTRATION,
        endpoints=(Endpoint("EXTERNAL", "ext", 9093), Endpoint("INTERNAL", "::1", 9092)),
        security_protocol_map={"EXTERNAL": "SSL", "INTERNAL": "PLAINTEXT"},
    )
    doc = json.loads(encode_broker(registration))
    assert (doc["host"], doc["port"]) == ("::1", 9092)
    assert doc["endpoints"] == ["EXTERNAL://ext:9093", "INTERNAL://[::1]:9092"]
    ssl_only = dataclasses.replace(
        V5_REGISTRATION, endpoints=(Endpoint("SSL", "s", 9093),), security_protocol_map={}
    )
    doc = json.loads(encode_broker(ssl_only))
    assert (doc["host"], doc["port"]) == (None, -1)
    assert doc["listener_security_protocol_map"] == {"SSL": "SSL"}


hosts = st.sampled_from(["h", "kafka-1.example.com", "10.0.0.1", "::1", "fe80::1%eth0", ""])
protocol_endpoints = st.lists(
    st.builds(Endpoint, st.sampled_from(SECURITY_PROTOCOLS), hosts, st.integers(0, 65535)),
    max_size=4,
    unique_by=lambda endpoint: endpoint.listener,
)


@FAST
@given(
    endpoints=protocol_endpoints,
    rack=st.none() | st.text(max_size=10),
    jmx_port=int32s,
    timestamp=st.integers(0, 2**63 - 1),
    epoch=st.integers(-1, 2**63 - 1),
)
def test_broker_round_trip(
    endpoints: list[Endpoint], rack: str | None, jmx_port: int, timestamp: int, epoch: int
) -> None:
    registration = BrokerRegistration(
        broker_id=3,
        endpoints=tuple(endpoints),
        host=None,
        port=-1,
        timestamp_ms=timestamp,
        rack=rack,
        jmx_port=jmx_port,
        epoch=epoch,
    )
    plaintext = [e for e in endpoints if e.listener == "PLAINTEXT"]
    expected = dataclasses.replace(
        registration,
        host=plaintext[0].host if plaintext else None,
        port=plaintext[0].port if plaintext else -1,
        security_protocol_map={e.listener: e.listener for e in endpoints},
    )
    decoded = decode_broker(3, encode_broker(registration), source=broker_path(3), epoch=epoch)
    assert decoded == expected


# -- /controller and /controller_epoch ---------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            {"version": 1, "brokerid": 1, "timestamp": "1650000000000"},
            ControllerRegistration(1, 1650000000000, 1, None),
            id="v1",
        ),
        pytest.param(
            {"version": 2, "brokerid": 2, "timestamp": "1", "kraftControllerEpoch": -1},
            ControllerRegistration(2, 1, 2, -1),
            id="v2-kraft-epoch",
        ),
        pytest.param({"brokerid": 3}, ControllerRegistration(3, 0, 1, None), id="minimal"),
        pytest.param(
            {"version": 1, "brokerid": 0, "timestamp": "+00"},
            ControllerRegistration(0, 0, 1, None),
            id="timestamp-java-long",
        ),
    ],
)
def test_decode_controller(doc: dict[str, Any], expected: ControllerRegistration) -> None:
    assert decode_controller(as_bytes(doc)) == expected


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param({"version": 1, "timestamp": "1"}, "brokerid", id="no-brokerid"),
        pytest.param({"brokerid": "1"}, "brokerid", id="brokerid-string"),
        pytest.param({"brokerid": True}, "brokerid", id="brokerid-bool"),
        pytest.param({"brokerid": 1.5}, "brokerid", id="brokerid-float"),
    ],
)
def test_decode_controller_rejects(doc: dict[str, Any], field: str) -> None:
    expect_format_error(lambda: decode_controller(as_bytes(doc)), source=CONTROLLER, field=field)


# ControllerZNode.decode reads only `brokerid`; the other fields are kept when well-formed.
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            b'{"version":"2","brokerid":3,"timestamp":5,"kraftControllerEpoch":"x"}',
            ControllerRegistration(3, 0, 1, None),
            id="every-other-field-malformed",
        ),
        pytest.param(
            b'{"brokerid":3,"kraftControllerEpoch":null,"timestamp":"now"}',
            ControllerRegistration(3, 0, 1, None),
            id="kraft-null",
        ),
        pytest.param(
            b'{"version":1,"brokerid":3,"timestamp":"7"} {"brokerid":4}',
            ControllerRegistration(3, 7, 1, None),
            id="trailing-second-object",
        ),
    ],
)
def test_decode_controller_accepts_what_kafka_accepts(
    data: bytes, expected: ControllerRegistration
) -> None:
    assert decode_controller(data) == expected


@pytest.mark.parametrize("data", [None, b"", b"1", b"{"], ids=repr)
def test_decode_controller_rejects_bad_data(data: bytes | None) -> None:
    expect_format_error(lambda: decode_controller(data), source=CONTROLLER, field="data")


def test_encode_controller() -> None:
    assert json.loads(encode_controller(ControllerRegistration(1, 1650000000000))) == {
        "version": 1,
        "brokerid": 1,
        "timestamp": "1650000000000",
    }
    assert json.loads(encode_controller(ControllerRegistration(2, 5, version=2))) == {
        "version": 2,
        "brokerid": 2,
        "timestamp": "5",
        "kraftControllerEpoch": -1,
    }


@FAST
@given(
    st.builds(
        ControllerRegistration,
        broker_id=int32s,
        timestamp_ms=st.integers(0, 2**63 - 1),
        version=st.just(1),
        kraft_controller_epoch=st.none(),
    )
    | st.builds(
        ControllerRegistration,
        broker_id=int32s,
        timestamp_ms=st.integers(0, 2**63 - 1),
        version=st.just(2),
        kraft_controller_epoch=int32s,
    )
)
def test_controller_round_trip(registration: ControllerRegistration) -> None:
    assert decode_controller(encode_controller(registration)) == registration


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"1", 1, id="one"),
        pytest.param(b"0", 0, id="zero"),
        pytest.param(b"+5", 5, id="plus"),
        pytest.param(b"2147483647", 2**31 - 1, id="int-max"),
        pytest.param("٣".encode(), 3, id="unicode-digit"),
    ],
)
def test_decode_controller_epoch(data: bytes, expected: int) -> None:
    assert decode_controller_epoch(data) == expected


@pytest.mark.parametrize(
    "data",
    [None, b"", b" 1", b"1\n", b"x", b"1.0", b'{"epoch":1}', b"\xff", b"2147483648"],
    ids=repr,
)
def test_decode_controller_epoch_rejects(data: bytes | None) -> None:
    expect_format_error(
        lambda: decode_controller_epoch(data), source=CONTROLLER_EPOCH, field="data"
    )


@FAST
@given(int32s)
def test_controller_epoch_round_trip(epoch: int) -> None:
    assert encode_controller_epoch(epoch) == str(epoch).encode("ascii")
    assert decode_controller_epoch(encode_controller_epoch(epoch)) == epoch


# -- /cluster/id -------------------------------------------------------------------------------


def test_cluster_id() -> None:
    data = b'{"version":"1","id":"Mk3OEYBSD34fcwNTJENDM2"}'
    assert decode_cluster_id(data) == "Mk3OEYBSD34fcwNTJENDM2"
    assert encode_cluster_id("Mk3OEYBSD34fcwNTJENDM2") == data
    assert decode_cluster_id(b'{"id":"x","extra":1}') == "x"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(b'{"version":"1"}', "id", id="no-id"),
        pytest.param(b'{"id":1}', "id", id="id-number"),
        pytest.param(b'{"id":null}', "id", id="id-null"),
        pytest.param(b"", "data", id="empty"),
        pytest.param(b'"x"', "data", id="not-an-object"),
    ],
)
def test_cluster_id_rejects(data: bytes, field: str) -> None:
    expect_format_error(lambda: decode_cluster_id(data), source=CLUSTER_ID, field=field)


@FAST
@given(st.text(max_size=40))
def test_cluster_id_round_trip(cluster_id: str) -> None:
    assert decode_cluster_id(encode_cluster_id(cluster_id)) == cluster_id


@FAST
@given(
    st.text(max_size=40)
    | st.sampled_from(["PLAINTEXT://", "[::1]", ":9092", "://", "["]).flatmap(
        lambda head: st.text(alphabet="PLAINTEX:/[]h.-%0129 ", max_size=16).map(
            lambda tail: head + tail
        )
    )
)
def test_hostile_endpoint_text(text: str) -> None:
    result = returns_or_format_error(lambda: parse_endpoint(text, source=BROKER), source=BROKER)
    if isinstance(result, Endpoint):
        assert -(2**31) <= result.port < 2**31  # any Java int, as EndPoint.scala takes it
        assert parse_endpoint(str(result), source=BROKER) == result
    else:
        assert result.field == "endpoints"
