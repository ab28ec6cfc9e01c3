"""The sandbox request protocol over real sockets on loopback: framing, errors, the server."""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from remediate.sandbox.emulated import wire
from remediate.sandbox.emulated.wire import (
    MAX_FRAME,
    UNKNOWN_SERVER_ERROR,
    Connection,
    Message,
    WireError,
    call_once,
    read_frame,
    serve,
    write_frame,
)

TIMEOUT = 5.0


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    left.settimeout(TIMEOUT)
    right.settimeout(TIMEOUT)
    try:
        yield left, right
    finally:
        left.close()
        right.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


Server = Callable[[Callable[[Message], Message]], int]


@pytest.fixture
def server() -> Iterator[Server]:
    """Start `serve` with a handler; return its port. Every server is shut down afterwards."""
    started: list[socketserver.ThreadingTCPServer] = []

    def start(handler: Callable[[Message], Message]) -> int:
        port = _free_port()
        started.append(serve("127.0.0.1", port, handler))
        return port

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


# -- framing --------------------------------------------------------------------------------------


def test_a_frame_is_a_big_endian_length_and_compact_json(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    write_frame(left, {"api": "Fetch", "n": 1})
    body = b'{"api":"Fetch","n":1}'
    assert right.recv(100) == struct.pack(">I", len(body)) + body


def test_frames_round_trip(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    messages: list[Message] = [
        {},
        {"api": "LeaderAndIsr", "controller_epoch": 7, "broker_epoch": 2**40},
        {"records": [[0, 1, None, "välue ✓"], [1, 1, "k", ""]], "ok": True, "ratio": 0.5},
        {"nested": {"deeper": {"list": [1, [2, [3]]], "null": None}}, "": "empty key"},
    ]
    for message in messages:
        write_frame(left, message)
    # Several frames in flight at once are read back one by one, in order.
    assert [read_frame(right) for _ in messages] == messages
    write_frame(right, {"reply": "to the left"})
    assert read_frame(left) == {"reply": "to the left"}


def test_a_large_frame_arrives_whole(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    message: Message = {"blob": "x" * (3 * 1024 * 1024), "tail": list(range(1000))}
    # The frame is far larger than the socket buffers: write it from another thread.
    writer = threading.Thread(target=write_frame, args=(left, message))
    writer.start()
    try:
        assert read_frame(right) == message
    finally:
        writer.join(TIMEOUT)


def test_a_frame_split_across_sends_is_reassembled(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    body = json.dumps({"api": "Produce", "acks": -1}).encode()
    data = struct.pack(">I", len(body)) + body
    received: list[Message] = []
    reader = threading.Thread(target=lambda: received.append(read_frame(right)))
    reader.start()
    for i in range(len(data)):
        left.sendall(data[i : i + 1])
    reader.join(TIMEOUT)
    assert received == [{"api": "Produce", "acks": -1}]


def test_a_frame_larger_than_max_frame_is_refused(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    # Only the length is sent: the reader refuses before it tries to read the body.
    left.sendall(struct.pack(">I", MAX_FRAME + 1))
    with pytest.raises(WireError, match=f"{MAX_FRAME + 1} bytes is larger than {MAX_FRAME}"):
        read_frame(right)
    left.sendall(struct.pack(">I", 0xFFFFFFFF))
    with pytest.raises(WireError, match="larger than"):
        read_frame(right)


def test_max_frame_is_the_largest_frame_accepted(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = pair
    message: Message = {"v": "abc"}
    size = len(json.dumps(message, separators=(",", ":")))
    monkeypatch.setattr(wire, "MAX_FRAME", size)
    write_frame(left, message)
    assert read_frame(right) == message
    monkeypatch.setattr(wire, "MAX_FRAME", size - 1)
    write_frame(left, message)
    with pytest.raises(WireError, match="larger than"):
        read_frame(right)


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # nothing at all
        b"\x00\x00",  # half a length
        b"\x00\x00\x00\x10",  # a length and no body
        b'\x00\x00\x00\x10{"api":',  # a length and half a body
    ],
)
def test_a_closed_peer_raises_wire_error(
    pair: tuple[socket.socket, socket.socket], sent: bytes
) -> None:
    left, right = pair
    left.sendall(sent)
    left.close()
    with pytest.raises(WireError, match="connection closed"):
        read_frame(right)


@pytest.mark.parametrize("body", [b"[1,2]", b'"text"', b"3", b"null"])
def test_a_frame_that_is_not_a_json_object_is_refused(
    pair: tuple[socket.socket, socket.socket], body: bytes
) -> None:
    left, right = pair
    left.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(WireError, match="not a JSON object"):
        read_frame(right)


def test_error_names_cover_every_error_code() -> None:
    assert wire.ERROR_NAMES[wire.NONE] == "NONE"
    assert wire.ERROR_NAMES[UNKNOWN_SERVER_ERROR] == "UNKNOWN_SERVER_ERROR"
    assert wire.ERROR_NAMES[wire.NOT_LEADER_OR_FOLLOWER] == "NOT_LEADER_OR_FOLLOWER"
    assert wire.ERROR_NAMES[wire.INCONSISTENT_TOPIC_ID] == "INCONSISTENT_TOPIC_ID"
    assert wire.INCONSISTENT_TOPIC_ID == 103
    for code, name in wire.ERROR_NAMES.items():
        assert getattr(wire, name) == code
    assert MAX_FRAME not in wire.ERROR_NAMES


# -- serve and Connection -------------------------------------------------------------------------


def test_serve_answers_requests_through_connection_call(server: Server) -> None:
    seen: list[Message] = []

    def handler(request: Message) -> Message:
        seen.append(request)
        return {"error": wire.NONE, "echo": request, "count": len(seen)}

    port = server(handler)
    connection = Connection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        first = connection.call({"api": "Fetch", "offset": 3})
        second = connection.call({"api": "Produce", "records": [["k", "v"]]})
    finally:
        connection.close()
    assert first == {"error": 0, "echo": {"api": "Fetch", "offset": 3}, "count": 1}
    assert second == {"error": 0, "echo": {"api": "Produce", "records": [["k", "v"]]}, "count": 2}
    assert seen == [{"api": "Fetch", "offset": 3}, {"api": "Produce", "records": [["k", "v"]]}]
    assert call_once("127.0.0.1", port, {"api": "ApiVersions"})["count"] == 3


def test_a_handler_that_raises_gets_an_error_response(server: Server) -> None:
    def handler(request: Message) -> Message:
        if request.get("fail"):
            raise KeyError("no such partition")
        return {"error": wire.NONE}

    port = server(handler)
    connection = Connection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        failed = connection.call({"fail": True})
        assert failed == {
            "error": UNKNOWN_SERVER_ERROR,
            "message": "KeyError: 'no such partition'",
        }
        # Neither the server nor this connection went down with the handler.
        assert connection.call({"fail": False}) == {"error": wire.NONE}
    finally:
        connection.close()


def test_a_handler_response_that_is_not_json_gets_an_error_response(server: Server) -> None:
    def handler(request: Message) -> Message:
        if request.get("bad"):
            return {"error": wire.NONE, "value": object()}
        return {"error": wire.NONE}

    port = server(handler)
    connection = Connection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        failed = connection.call({"bad": True})
        assert failed["error"] == UNKNOWN_SERVER_ERROR
        assert failed["message"].startswith("TypeError: ")
        assert connection.call({"bad": False}) == {"error": wire.NONE}
    finally:
        connection.close()


def test_the_server_answers_connections_concurrently(server: Server) -> None:
    release = threading.Event()

    def handler(request: Message) -> Message:
        if request.get("block"):
            release.wait(TIMEOUT)
        return {"id": request["id"]}

    port = server(handler)
    blocked: list[Message] = []
    blocker = threading.Thread(
        target=lambda: blocked.append(call_once("127.0.0.1", port, {"id": 1, "block": True}))
    )
    blocker.start()
    try:
        # The first connection is parked in the handler; a second one is still answered.
        assert call_once("127.0.0.1", port, {"id": 2}) == {"id": 2}
        assert blocked == []
    finally:
        release.set()
        blocker.join(TIMEOUT)
    assert blocked == [{"id": 1}]


def test_connection_to_nothing_raises_wire_error_and_reconnects_later() -> None:
    port = _free_port()
    connection = Connection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        with pytest.raises(WireError, match=f"127.0.0.1:{port}"):
            connection.call({"api": "Fetch"})
        # The same Connection connects again on the next call once a server is there.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen()
            answered = threading.Thread(target=_answer_once, args=(listener, {"late": True}))
            answered.start()
            assert connection.call({"api": "Fetch"}) == {"late": True}
            answered.join(TIMEOUT)
    finally:
        connection.close()


def _answer_once(listener: socket.socket, response: Message) -> None:
    peer, _ = listener.accept()
    with peer:
        peer.settimeout(TIMEOUT)
        read_frame(peer)
        write_frame(peer, response)


def test_a_peer_that_hangs_up_raises_wire_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def hang_up() -> None:
            peer, _ = listener.accept()
            with peer:
                peer.settimeout(TIMEOUT)
                read_frame(peer)  # read the request, answer nothing

        thread = threading.Thread(target=hang_up)
        thread.start()
        connection = Connection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            with pytest.raises(WireError, match=f"127.0.0.1:{port}: connection closed"):
                connection.call({"api": "Fetch"})
        finally:
            connection.close()
            thread.join(TIMEOUT)


def test_a_call_that_gets_no_answer_times_out_with_wire_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        connection = Connection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            # The kernel accepts the connection; nobody ever reads or answers.
            with pytest.raises(WireError, match="timed out"):
                connection.call({"api": "Fetch"}, timeout=0.2)
        finally:
            connection.close()
