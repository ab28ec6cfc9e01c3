"""The JSON accessors behind every znode decoder: Kafka's strict kafka.utils.json types."""

from __future__ import annotations

import json
from functools import partial

import pytest
from hypothesis import given

from remediate.formats.jsonutil import (
    INT32_MAX,
    INT32_MIN,
    as_int,
    as_int_list,
    dump,
    get_int,
    get_int_list,
    get_object,
    get_str,
    load_object,
)
from tests.formats.helpers import FAST, expect_format_error, json_values, returns_or_format_error

SOURCE = "/brokers/topics/orders"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"{}", {}, id="empty-object"),
        pytest.param(b' {"a": 1, "b": [true, null]} ', {"a": 1, "b": [True, None]}, id="blanks"),
        pytest.param('{"é":"€"}'.encode(), {"é": "€"}, id="utf8"),
        pytest.param(b'{"a":1,"a":2}', {"a": 2}, id="duplicate-key-last-wins"),
    ],
)
def test_load_object(data: bytes, expected: dict[str, object]) -> None:
    assert load_object(data, source=SOURCE) == expected


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(None, id="no-data"),
        pytest.param(b"", id="empty"),
        pytest.param(b"[]", id="array"),
        pytest.param(b"1", id="number"),
        pytest.param(b"null", id="null"),
        pytest.param(b'"s"', id="string"),
        pytest.param(b"{", id="truncated"),
        pytest.param(b"{'a': 1}", id="single-quotes"),
        pytest.param(b'{"a": 1,}', id="trailing-comma"),
        pytest.param(b'{"a": NaN}', id="nan"),
        pytest.param(b'{"a": Infinity}', id="infinity"),
        pytest.param(b'{"a": -Infinity}', id="minus-infinity"),
        pytest.param(b'{"a": 01}', id="leading-zero"),
        pytest.param(b"\xff{}", id="not-utf8"),
        pytest.param(b'{"a": "\x01"}', id="raw-control-char"),
        pytest.param(b"[" * 100_000, id="deep-nesting-array"),
        pytest.param(b'{"a":' * 50_000, id="deep-nesting-object"),
    ],
)
def test_load_object_rejects(data: bytes | None) -> None:
    error = expect_format_error(
        lambda: load_object(data, source=SOURCE), source=SOURCE, field="data"
    )
    assert str(error).startswith(SOURCE)


def test_dump_is_compact_utf8() -> None:
    assert dump({"a": [1, 2], "é": "x", "n": None}) == '{"a":[1,2],"é":"x","n":null}'.encode()


@pytest.mark.parametrize("value", [0, -1, INT32_MIN, INT32_MAX, 1_000_000])
def test_as_int_accepts_java_ints(value: int) -> None:
    assert as_int(value, source=SOURCE, field="leader") == value


@pytest.mark.parametrize(
    "value",
    [True, False, 1.0, "1", None, [1], {"a": 1}, INT32_MAX + 1, INT32_MIN - 1, 2**63],
    ids=repr,
)
def test_as_int_rejects(value: object) -> None:
    expect_format_error(
        lambda: as_int(value, source=SOURCE, field="leader"), source=SOURCE, field="leader"
    )


def test_get_int() -> None:
    obj = {"leader": 3, "flag": True}
    assert get_int(obj, "leader", source=SOURCE) == 3
    assert get_int(obj, "missing", source=SOURCE, default=-1) == -1
    expect_format_error(
        lambda: get_int(obj, "missing", source=SOURCE), source=SOURCE, field="missing"
    )
    expect_format_error(lambda: get_int(obj, "flag", source=SOURCE), source=SOURCE, field="flag")


def test_int_lists() -> None:
    obj = {"isr": [1, 2, 3], "empty": [], "bools": [1, True], "text": "1,2", "floats": [1.0]}
    assert get_int_list(obj, "isr", source=SOURCE) == (1, 2, 3)
    assert get_int_list(obj, "empty", source=SOURCE) == ()
    assert as_int_list([INT32_MIN], source=SOURCE, field="x") == (INT32_MIN,)
    for key in ("bools", "text", "floats", "missing"):
        expect_format_error(
            partial(get_int_list, obj, key, source=SOURCE), source=SOURCE, field=key
        )


def test_strings_and_objects() -> None:
    obj = {"id": "abc", "n": 1, "o": {"k": "v"}, "null": None, "list": []}
    assert get_str(obj, "id", source=SOURCE) == "abc"
    assert get_object(obj, "o", source=SOURCE) == {"k": "v"}
    for key in ("n", "missing", "null"):
        expect_format_error(partial(get_str, obj, key, source=SOURCE), source=SOURCE, field=key)
    for key in ("id", "missing", "null", "list"):
        expect_format_error(partial(get_object, obj, key, source=SOURCE), source=SOURCE, field=key)


@FAST
@given(json_values)
def test_any_json_value_loads_or_raises(value: object) -> None:
    data = json.dumps(value).encode()
    result = returns_or_format_error(lambda: load_object(data, source=SOURCE), source=SOURCE)
    assert (result == value) if isinstance(value, dict) else (result.field == "data")
    assert json.loads(dump(value)) == value
