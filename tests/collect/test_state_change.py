"""The state-change log section of the inventory: the command (under every awk the machine
has), its parser on hostile output, and the pure parser of Kafka's mismatch line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from remediate.collect.collector import rejection_rows
from remediate.collect.inventory import (
    FORMAT_VERSION,
    StateChangeTail,
    inventory_command,
    parse_inventory,
)
from remediate.errors import FormatError
from remediate.formats.statechange import Rejection, parse_rejection, parse_rejections
from tests.collect.test_inventory import run

X = "jKTRaM_TSNqocJeQI2aYOQ"
Y = "nI-JQtPwQwGiylMfm8k13w"
LINE_28 = (
    f"[2026-11-23 20:40:01,123] ERROR [Broker id=2] Topic Id in memory: {X} does not match"
    f" the topic Id for partition orders-3 provided in the request: {Y}. (state.change.logger)"
)
LINE_3X = (
    f"[2026-11-23 20:40:02,007] ERROR [Broker id=2] Topic ID in memory: {X} does not match"
    f" the topic ID for partition orders-4 received: {Y}. (state.change.logger)"
)


OTHER = "[2026-11-23 20:40:00,000] INFO [Broker id=2] Leader orders-0 starts at leader epoch 3"


def scan_log(
    path: Path | str, env: dict[str, str], tail_bytes: int = 1024 * 1024
) -> StateChangeTail:
    command = inventory_command([], state_change_log=str(path), state_change_tail_bytes=tail_bytes)
    tail = parse_inventory(run(command, env=env), source="t").state_change
    assert tail is not None
    return tail


# -- the command --------------------------------------------------------------------------------


def test_only_mismatch_lines_are_reported(tool_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "state-change.log"
    log.write_text("\n".join([OTHER, LINE_28, OTHER, LINE_3X, OTHER]) + "\n")
    tail = scan_log(log, tool_env)
    assert tail == StateChangeTail("present", (LINE_28.encode(), LINE_3X.encode()), 0, False)


def test_missing_and_unreadable_logs_are_not_errors(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    assert scan_log(tmp_path / "nope.log", tool_env) == StateChangeTail("missing")
    assert scan_log(tmp_path, tool_env) == StateChangeTail("unreadable")  # a directory
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert scan_log(tmp_path / "dangling", tool_env) == StateChangeTail("unreadable")


def test_only_the_tail_is_read(tool_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "state-change.log"
    early = LINE_28.replace("orders-3", "early-1")
    late = LINE_3X
    log.write_text(early + "\n" + OTHER * 50 + "\n" + late + "\n" + LINE_28 + "\n")
    # The bound falls inside LINE_3X's line: that fragment is dropped, the rest is whole.
    bound = len(LINE_28) + 1 + len(late) // 2
    tail = scan_log(log, tool_env, tail_bytes=bound)
    assert tail.cut
    assert tail.lines == (LINE_28.encode(),)
    whole = scan_log(log, tool_env)
    assert not whole.cut
    assert [parse_rejection(x).topic for x in whole.lines] == ["early", "orders", "orders"]  # type: ignore[union-attr]


def test_hostile_bytes_and_a_log_without_final_newline(
    tool_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "state change's log"
    hostile = b"\xff\x01'\"$(x)` " + LINE_28.encode()
    log.write_bytes(b"\x00\xfe junk\n" + hostile + b"\n" + LINE_3X.encode())
    tail = scan_log(log, tool_env)
    assert tail.state == "present"
    assert tail.lines[-1] == LINE_3X.encode()
    assert [r.partition for r in parse_rejections(tail.lines)] == [3, 4]


def test_an_empty_log(tool_env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "state-change.log"
    log.write_bytes(b"")
    assert scan_log(log, tool_env) == StateChangeTail("present", (), 0, False)


# -- the output parser ---------------------------------------------------------------------------

HEAD = f"remediate-inventory {FORMAT_VERSION} awk-nul=1"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (f"{HEAD}\nend 0\n", None),
        (f"{HEAD}\nR missing\nend 0\n", StateChangeTail("missing")),
        (f"{HEAD}\nR unreadable\nend 0\n", StateChangeTail("unreadable")),
        (f"{HEAD}\nR present 0 0 0\nend 0\n", StateChangeTail("present")),
        (
            f"{HEAD}\nR present 1 1 2\nJ 61\nJ 00ff\nend 0\n",
            StateChangeTail("present", (b"a", b"\x00\xff"), 1, True),
        ),
    ],
)
def test_parse_section(output: str, expected: StateChangeTail | None) -> None:
    assert parse_inventory(output, source="t").state_change == expected


@pytest.mark.parametrize(
    "output",
    [
        f"{HEAD}\nR present 0 0 1\nend 0\n",  # a line announced, none given
        f"{HEAD}\nR present 0 0 1\nJ 6\nend 0\n",  # odd hex
        f"{HEAD}\nR present 0 0 0\nR missing\nend 0\n",  # twice
        f"{HEAD}\nR present 0 0 0\nL 0 2f present\nZ 0 0\nend 1\n",  # a log dir after it
        f"{HEAD}\nL 0 2f present\nR missing\nZ 0 0\nend 1\n",  # inside a log dir
        f"{HEAD}\nR somewhere\nend 0\n",
        f"{HEAD}\nR present 0 2 0\nend 0\n",
        f"{HEAD}\nJ 61\nend 0\n",  # a line without its section
        f"{HEAD}\nR present 0 0 0\n",  # no trailer
    ],
)
def test_parse_section_malformed(output: str) -> None:
    with pytest.raises(FormatError):
        parse_inventory(output, source="t")


@given(lines=st.lists(st.binary(max_size=80), max_size=5), status=st.integers(0, 255))
def test_parse_section_round_trips(lines: list[bytes], status: int) -> None:
    body = "".join(f"J {x.hex()}\n" if x else "J \n" for x in lines)
    output = f"{HEAD}\nR present {status} 0 {len(lines)}\n{body}end 0\n"
    if any(not x for x in lines):
        with pytest.raises(FormatError):
            parse_inventory(output, source="t")
        return
    tail = parse_inventory(output, source="t").state_change
    assert tail == StateChangeTail("present", tuple(lines), status, False)


@given(text=st.text(alphabet="RJ 0123456789abcdefpresntmiu\n", max_size=80))
@example(text="R present 0 0 2\nJ 6162\nJ 63\n")
@example(text="R present 0 0 2\nJ 6162\n")
@example(text="J 6162\n")
def test_parse_section_on_any_text(text: str) -> None:
    """Whatever the section holds: refused naming the broker, or read with one line per
    J record (never a line lost or made up)."""
    refused: FormatError | None = None
    try:
        tail = parse_inventory(f"{HEAD}\n{text}end 0\n", source="broker-7").state_change
    except FormatError as error:
        refused = error
    if refused is not None:
        assert "broker-7" in str(refused)
        return
    records = [line for line in text.splitlines() if line.startswith("J")]
    assert len(tail.lines if tail is not None else ()) == len(records), (text, tail)


# -- Kafka's line ---------------------------------------------------------------------------------

REJECTIONS = [
    (LINE_28, Rejection("orders", 3, X, Y, "2026-11-23 20:40:01,123", 2, "2.8")),
    (LINE_3X, Rejection("orders", 4, X, Y, "2026-11-23 20:40:02,007", 2, "3.x")),
    # Another layout, no logger prefix, padded ids, a topic with dashes.
    (
        f"[2023-03-22T14:15:25,348]ERROR Topic Id in memory: {X}== does not match the topic Id"
        f" for partition my-topic-name-12 provided in the request: {Y}==.",
        Rejection("my-topic-name", 12, X, Y, "2023-03-22T14:15:25,348", None, "2.8"),
    ),
    # No timestamp at all.
    (
        f"Topic ID in memory: {X} does not match the topic ID for partition t-0 received: {Y}.",
        Rejection("t", 0, X, Y, None, None, "3.x"),
    ),
    (OTHER, None),
    ("", None),
    # A fragment (the tail started inside the line), wrong ids, an illegal topic.
    (LINE_28[60:], None),
    (LINE_28.replace(X, X[:21]), None),
    (LINE_28.replace(Y, X), None),  # the same id twice is no mismatch
    (LINE_28.replace("orders-3", "..-3"), None),
    (LINE_28.replace("orders-3", "orders-99999999999"), None),
    (LINE_28.replace(f"{Y}.", f"{Y}x."), None),
]


@pytest.mark.parametrize(("line", "expected"), REJECTIONS)
def test_parse_rejection(line: str, expected: Rejection | None) -> None:
    assert parse_rejection(line.encode()) == expected


@given(raw=st.binary(max_size=300))
def test_parse_rejection_never_raises(raw: bytes) -> None:
    found = parse_rejection(raw)
    if found is not None:
        assert found.memory_topic_id != found.request_topic_id


@given(prefix=st.binary(max_size=40), suffix=st.binary(max_size=40))
def test_parse_rejection_finds_the_message_among_garbage(prefix: bytes, suffix: bytes) -> None:
    found = parse_rejection(prefix + b" " + LINE_3X.split("] ", 1)[1].encode() + b" " + suffix)
    assert found is not None
    assert (found.memory_topic_id, found.request_topic_id) == (X, Y)


def test_rejection_rows_say_why_evidence_is_absent() -> None:
    assert rejection_rows(None) == ("not_configured", [])
    assert rejection_rows(StateChangeTail("missing")) == ("missing", [])
    assert rejection_rows(StateChangeTail("unreadable")) == ("unreadable", [])
    state, rows = rejection_rows(StateChangeTail("present", (LINE_28.encode(), b"x"), 1, True))
    assert state == "partial"
    assert rows == [
        {
            "topic": "orders",
            "partition": 3,
            "memory_topic_id": X,
            "request_topic_id": Y,
            "logged_at": "2026-11-23 20:40:01,123",
            "wording": "2.8",
        }
    ]
