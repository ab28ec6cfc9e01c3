"""Hostile input: every parser returns a value or raises FormatError, never anything else.

Files on a broker's disk and znodes are written by other programs (and by people); a parser
that raised KeyError, UnicodeDecodeError or RecursionError would turn bad data into a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats import logdir, znodes
from remediate.formats.jsonutil import load_object
from remediate.formats.properties import load_properties
from remediate.formats.topic_id import parse_topic_id
from tests.formats import admin_znodes
from tests.formats.helpers import (
    PER_DECODER,
    QUICK,
    TOPIC_ID_TEXT,
    json_values,
    returns_or_format_error,
)

SOURCE = "hostile"

Parser = Callable[[bytes], object]

BYTE_PARSERS: dict[str, Parser] = {
    "partition.metadata": lambda data: logdir.parse_partition_metadata(data, source=SOURCE),
    "leader-epoch-checkpoint": lambda data: logdir.parse_leader_epoch_checkpoint(
        data, source=SOURCE
    ),
    "offset-checkpoint": lambda data: logdir.parse_offset_checkpoint(data, source=SOURCE),
    "meta.properties": lambda data: logdir.parse_meta_properties(data, source=SOURCE),
    "properties": lambda data: load_properties(data, source=SOURCE),
    "json-object": lambda data: load_object(data, source=SOURCE),
    "topic": lambda data: znodes.decode_topic(data, source=SOURCE),
    "partition-state": lambda data: znodes.decode_partition_state(data, source=SOURCE),
    "broker": lambda data: znodes.decode_broker(1, data, source=SOURCE),
    "controller": lambda data: znodes.decode_controller(data, source=SOURCE),
    "controller-epoch": lambda data: znodes.decode_controller_epoch(data, source=SOURCE),
    "topic-config": lambda data: znodes.decode_topic_config(data, source=SOURCE),
    "isr-change": lambda data: admin_znodes.decode_isr_change_notification(data, source=SOURCE),
    "preferred-election": lambda data: admin_znodes.decode_preferred_replica_election(
        data, source=SOURCE
    ),
    "reassign": lambda data: admin_znodes.decode_reassign_partitions(data, source=SOURCE),
    "cluster-id": lambda data: znodes.decode_cluster_id(data, source=SOURCE),
}
JSON_PARSERS = {
    name: parser
    for name, parser in BYTE_PARSERS.items()
    if name
    not in (
        "partition.metadata",
        "leader-epoch-checkpoint",
        "offset-checkpoint",
        "meta.properties",
        "properties",
    )
}

# Valid documents, one per decoder; the mutation test below breaks one field at a time.
VALID_DOCS: dict[str, dict[str, Any]] = {
    "topic": {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 1]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {"1": [1]},
        "topic_id": TOPIC_ID_TEXT,
    },
    "partition-state": {
        "controller_epoch": 1,
        "leader": 1,
        "version": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
        "leader_recovery_state": 1,
    },
    "broker": {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "EXT": "SSL"},
        "endpoints": ["PLAINTEXT://h:9092", "EXT://[::1]:9093"],
        "jmx_port": -1,
        "features": {},
        "host": "h",
        "timestamp": "1650000000000",
        "port": 9092,
        "version": 5,
        "rack": "r",
    },
    "controller": {"version": 2, "brokerid": 1, "timestamp": "1", "kraftControllerEpoch": -1},
    "topic-config": {"version": 1, "config": {"min.insync.replicas": "2"}},
    "isr-change": {"version": 1, "partitions": [{"topic": "t", "partition": 0}]},
    "preferred-election": {"version": 1, "partitions": [{"topic": "t", "partition": 0}]},
    "reassign": {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]},
    "cluster-id": {"version": "1", "id": "x"},
    "json-object": {"a": 1},
}

FRAGMENTS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b":",
    b",",
    b"0",
    b"-1",
    b"2147483648",
    b"true",
    b"null",
    b'"partitions"',
    b'"topic_id"',
    b'"leader"',
    b'"isr"',
    b'"endpoints"',
    b'"version"',
    b"version: 0\n",
    b"topic_id: ",
    TOPIC_ID_TEXT.encode(),
    b"\n",
    b"\r\n",
    b" ",
    b"\t",
    b"=",
    b"\\",
    b"\\u",
    b"#",
    b"\xff",
    b"\xc3",
    b"NaN",
]
hostile_bytes = (
    st.binary(max_size=80)
    | st.lists(st.sampled_from(FRAGMENTS), max_size=24).map(b"".join)
    | st.none()
)


def check(parser: Callable[[Any], object], data: Any) -> None:
    result = returns_or_format_error(lambda: parser(data), source=SOURCE)
    assert result is not None


@pytest.mark.fault(
    "Bad input",
    "Znode data and checkpoint files with arbitrary bytes (fuzzed)",
    "A typed format error naming the znode or file and the field; never another exception",
)
@pytest.mark.parametrize("name", sorted(BYTE_PARSERS))
@QUICK
@given(data=hostile_bytes)
def test_arbitrary_bytes(name: str, data: bytes | None) -> None:
    parser = BYTE_PARSERS[name]
    if data is None and name not in JSON_PARSERS:
        data = b""  # files always have bytes; only znodes can hold no data
    check(parser, data)


@pytest.mark.parametrize("name", sorted(JSON_PARSERS))
@PER_DECODER
@given(value=json_values)
def test_arbitrary_json(name: str, value: object) -> None:
    check(JSON_PARSERS[name], json.dumps(value).encode())


@pytest.mark.parametrize("name", sorted(VALID_DOCS))
def test_valid_documents_decode(name: str) -> None:
    """The baselines of the mutation test are themselves valid."""
    check(JSON_PARSERS[name], json.dumps(VALID_DOCS[name]).encode())
    result = JSON_PARSERS[name](json.dumps(VALID_DOCS[name]).encode())
    assert result is not None


def _members(value: object) -> list[str]:
    """The keys of an object, or of the first object in a list of objects."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return list(value[0])
    return list(value) if isinstance(value, dict) else []


def _mutations(name: str) -> st.SearchStrategy[dict[str, Any]]:
    doc = VALID_DOCS[name]

    def at_top(key: str, value: object) -> dict[str, Any]:
        return {**doc, key: value}

    def nested(key: str, inner: str, value: object) -> dict[str, Any]:
        container = doc[key]
        if isinstance(container, list):
            return {**doc, key: [{**container[0], inner: value}, *container[1:]]}
        return {**doc, key: {**container, inner: value}}

    keys = st.sampled_from([*doc, "unknown"])
    top = st.builds(at_top, keys, json_values)
    removed = st.sampled_from(list(doc)).map(lambda key: {k: v for k, v in doc.items() if k != key})
    inner_targets = [(key, inner) for key, value in doc.items() for inner in _members(value)]
    if not inner_targets:
        return top | removed
    deep = st.sampled_from(inner_targets).flatmap(
        lambda target: json_values.map(lambda value: nested(target[0], target[1], value))
    )
    return top | removed | deep


@pytest.mark.parametrize("name", sorted(VALID_DOCS))
@PER_DECODER
@given(data=st.data())
def test_mutated_documents(name: str, data: st.DataObject) -> None:
    doc = data.draw(_mutations(name))
    check(JSON_PARSERS[name], json.dumps(doc).encode())


TEXT_PARSERS: dict[str, Callable[[str], object]] = {
    "partition-dir": lambda text: logdir.parse_partition_dir(text, source=SOURCE),
    "validate-topic-name": lambda text: logdir.validate_topic_name(text, source=SOURCE),
    "topic-id": lambda text: parse_topic_id(text, source=SOURCE),
    "endpoint": lambda text: znodes.parse_endpoint(text, source=SOURCE),
    "properties-text": lambda text: load_properties(text, source=SOURCE),
}


@pytest.mark.parametrize("name", sorted(TEXT_PARSERS))
@QUICK
@given(text=st.text(max_size=40) | st.text(alphabet="-.0123456789abcdef:/[]=\\u \n", max_size=40))
def test_arbitrary_text(name: str, text: str) -> None:
    check(TEXT_PARSERS[name], text)
    assert isinstance(logdir.topic_name_problem(text), str | None)


@pytest.mark.parametrize("name", ["topic-id", "endpoint"])
@QUICK
@given(value=json_values)
def test_non_text_values(name: str, value: object) -> None:
    """Values straight out of a JSON document may be of any type."""
    check(TEXT_PARSERS[name], value)


@pytest.mark.parametrize("name", sorted(JSON_PARSERS))
def test_deeply_nested_json(name: str) -> None:
    """Nesting beyond Python's recursion limit is refused as bad data, not a RecursionError."""
    for data in (b"[" * 100_000, b'{"partitions":' * 100_000, b'{"a":[' * 50_000):
        result = returns_or_format_error(partial(JSON_PARSERS[name], data), source=SOURCE)
        assert result.field == "data"
