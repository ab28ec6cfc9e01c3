"""java.util.Properties load/store, as Kafka reads meta.properties and server.properties.

Expected values were checked against Properties.load(InputStream) / store(OutputStream) of JDK 17.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.properties import dump_properties, load_properties
from tests.formats.helpers import FAST, expect_format_error, returns_or_format_error

SOURCE = "/etc/kafka/server.properties"
NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"", {}, id="empty"),
        pytest.param(b"# c\n! c2\n", {}, id="comments-hash-and-bang"),
        pytest.param(b"   # indented comment\n\t! another\n", {}, id="indented-comments"),
        pytest.param(b"key=value", {"key": "value"}, id="equals"),
        pytest.param(b"key:value", {"key": "value"}, id="colon"),
        pytest.param(b"key value", {"key": "value"}, id="space"),
        pytest.param(b"key\tvalue", {"key": "value"}, id="tab"),
        pytest.param(b"key\x0cvalue", {"key": "value"}, id="form-feed"),
        pytest.param(b"  key  =  value  ", {"key": "value  "}, id="blanks-around-separator"),
        pytest.param(b"key:=v", {"key": "=v"}, id="second-separator-is-value"),
        pytest.param(b"key = =v", {"key": "=v"}, id="separator-after-blank-then-value"),
        pytest.param(b"key  :v", {"key": "v"}, id="blanks-then-colon"),
        pytest.param(b"key", {"key": ""}, id="key-only"),
        pytest.param(b"key=", {"key": ""}, id="empty-value"),
        pytest.param(b"=value", {"": "value"}, id="empty-key"),
        pytest.param(b"a=1\nb=2\na=3\n", {"a": "3", "b": "2"}, id="last-duplicate-wins"),
        pytest.param(b"\n\n  \t\na=1\n\n", {"a": "1"}, id="blank-lines"),
        pytest.param(b"a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}, id="crlf-cr-lf"),
        pytest.param(b"a\\=b=c", {"a=b": "c"}, id="escaped-equals-in-key"),
        pytest.param(b"a\\:b:c", {"a:b": "c"}, id="escaped-colon-in-key"),
        pytest.param(b"a\\ b c", {"a b": "c"}, id="escaped-space-in-key"),
        pytest.param(b"a\\\\=b", {"a\\": "b"}, id="escaped-backslash-ends-key"),
        pytest.param(b"\\#not-comment=1", {"#not-comment": "1"}, id="escaped-hash-key"),
        pytest.param(b"\\ lead=1", {" lead": "1"}, id="escaped-leading-space"),
        pytest.param(
            b"key = one \\\n    two\\\n\tthree",
            {"key": "one twothree"},
            id="continuation-strips-leading-blanks",
        ),
        pytest.param(b"k=a\\\r\n  b\r\n", {"k": "ab"}, id="continuation-over-crlf"),
        pytest.param(b"k=a\\\n#b", {"k": "a#b"}, id="continued-line-is-not-a-comment"),
        pytest.param(b"#c \\\nnext=1", {"next": "1"}, id="comment-does-not-continue"),
        pytest.param(
            b"k=v\\\\\nn=2", {"k": "v\\", "n": "2"}, id="even-backslashes-no-continuation"
        ),
        pytest.param(b"k=v\\\\\\\nw", {"k": "v\\w"}, id="odd-backslashes-continue"),
        pytest.param(b"k\\\n\n  v=1\n", {"k": "", "v": "1"}, id="continued-into-blank-line"),
        pytest.param(b"k=a\\", {"k": "a"}, id="backslash-at-end-of-input"),
        pytest.param(b"\\", {"": ""}, id="lone-backslash-at-end-of-input"),
        pytest.param(b"\\\n", {"": ""}, id="lone-backslash-newline-then-end"),
        pytest.param(b"\\\r\n", {}, id="lone-backslash-crlf-then-end"),
        pytest.param(b"\\\n#c\n", {}, id="after-empty-continuation-hash-is-comment-jdk9"),
        pytest.param(b"u=\\u0041\\u00e9\\u00E9", {"u": "Aéé"}, id="unicode-escapes"),
        pytest.param(b"u=\\uD83D\\uDE00", {"u": "\U0001f600"}, id="surrogate-pair-escape"),
        pytest.param(b"\\u006b=v", {"k": "v"}, id="unicode-escape-in-key"),
        pytest.param(b"e=\\t\\n\\r\\f", {"e": "\t\n\r\f"}, id="control-escapes"),
        pytest.param(b"e=\\q\\=\\:\\\\", {"e": "q=:\\"}, id="other-escapes-stand-for-themselves"),
        pytest.param(b"k=caf\xe9", {"k": "café"}, id="bytes-are-iso-8859-1"),
        pytest.param(b"k=caf\xc3\xa9", {"k": "cafÃ©"}, id="utf8-bytes-read-as-kafka-reads-them"),
        pytest.param(b"k=\x0bv", {"k": "\x0bv"}, id="vertical-tab-is-not-blank"),
    ],
)
def test_load(data: bytes, expected: dict[str, str]) -> None:
    assert load_properties(data, source=SOURCE) == expected


def test_load_text_is_taken_as_is() -> None:
    """Properties.load(Reader): a str needs no decoding."""
    assert load_properties("k=café\u20ac", source=SOURCE) == {"k": "café€"}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"k=\\u00g1", id="non-hex-digit"),
        pytest.param(b"k=\\u12", id="too-short-at-end"),
        pytest.param(b"k=\\u12\nx=1", id="too-short-before-newline"),
        pytest.param(b"\\uZZZZ=v", id="bad-escape-in-key"),
        pytest.param(b"k=\\u", id="bare-u"),
        pytest.param(b"k=\\u+123", id="sign-is-not-hex"),
    ],
)
def test_bad_unicode_escape(data: bytes) -> None:
    error = expect_format_error(
        lambda: load_properties(data, source=SOURCE), source=SOURCE, field="escape"
    )
    assert SOURCE in str(error)


def test_dump_exact_bytes() -> None:
    values = {"version": "0", "broker.id": "1", "cluster.id": "x y"}
    assert dump_properties(values, now=NOW) == (
        b"#\n#Tue Jan 02 03:04:05 UTC 2024\nversion=0\nbroker.id=1\ncluster.id=x y\n"
    )


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        pytest.param("a", "b", "a=b", id="plain"),
        pytest.param("k=:#!", "v=:#!", "k\\=\\:\\#\\!=v\\=\\:\\#\\!", id="separators-and-comments"),
        pytest.param(" k k", " v v", "\\ k\\ k=\\ v v", id="spaces-key-all-value-leading"),
        pytest.param("t\t", "\n\r\f", "t\\t=\\n\\r\\f", id="controls"),
        pytest.param("\\", "\\", "\\\\=\\\\", id="backslash"),
        pytest.param("é", "€", "\\u00E9=\\u20AC", id="non-ascii-as-uppercase-u-escapes"),
        pytest.param("x", "\U0001f600", "x=\\uD83D\\uDE00", id="astral-as-surrogate-pair"),
        pytest.param("x", "\x01\x7f~", "x=\\u0001\\u007F~", id="non-printable-ascii"),
    ],
)
def test_dump_escapes_like_properties_store(key: str, value: str, line: str) -> None:
    data = dump_properties({key: value}, now=NOW)
    assert data.splitlines()[2].decode("ascii") == line
    assert load_properties(data, source=SOURCE) == {key: value}


def test_dump_uses_the_current_time_by_default() -> None:
    lines = dump_properties({}).decode("ascii").splitlines()
    assert lines[0] == "#"
    assert re.fullmatch(r"#[A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2} UTC \d{4}", lines[1])
    assert len(lines) == 2


tricky_text = st.text(
    alphabet=st.sampled_from("=:#! \t\f\r\n\\uU0aé€\x0b")
    | st.characters(exclude_categories=["Cs"]),
    max_size=12,
)


@FAST
@given(st.dictionaries(tricky_text, tricky_text, max_size=6))
def test_dump_then_load_is_identity(values: dict[str, str]) -> None:
    data = dump_properties(values, now=NOW)
    assert data.isascii()
    assert load_properties(data, source=SOURCE) == values
    assert load_properties(data.decode("ascii"), source=SOURCE) == values


@FAST
@given(
    st.binary(max_size=60)
    | st.lists(
        st.sampled_from(
            [
                b"k",
                b"=",
                b":",
                b" ",
                b"\\",
                b"\n",
                b"\r",
                b"#",
                b"!",
                b"\\u",
                b"00e9",
                b"g",
                b"\xe9",
            ]
        ),
        max_size=20,
    ).map(b"".join)
)
def test_hostile_bytes(data: bytes) -> None:
    result = returns_or_format_error(lambda: load_properties(data, source=SOURCE), source=SOURCE)
    assert isinstance(result, dict) or result.field == "escape"


@FAST
@given(st.text(max_size=60))
def test_hostile_text(text: str) -> None:
    result = returns_or_format_error(lambda: load_properties(text, source=SOURCE), source=SOURCE)
    assert isinstance(result, dict) or result.field == "escape"
