"""The sandbox's request protocol: length-prefixed JSON frames over TCP on loopback.

Request and error names follow Kafka's (LeaderAndIsr, Fetch, Produce, AlterIsr,
ControlledShutdown, OffsetsForLeaderEpoch; NOT_LEADER_OR_FOLLOWER, INCONSISTENT_TOPIC_ID ...),
the bytes do not: no Kafka client can talk to the sandbox, and it need not.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
from collections.abc import Callable
from typing import Any

# Kafka error codes used by the sandbox (org.apache.kafka.common.protocol.Errors).
UNKNOWN_SERVER_ERROR = -1
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
BROKER_NOT_AVAILABLE = 8
STALE_CONTROLLER_EPOCH = 11
NOT_CONTROLLER = 41
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_UPDATE_VERSION = 95
KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57
REPLICA_NOT_AVAILABLE = 9
INVALID_REPLICA_ASSIGNMENT = 39
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
STALE_BROKER_EPOCH = 77
INCONSISTENT_TOPIC_ID = 103

ERROR_NAMES = {
    value: name
    for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, int) and name not in ("MAX_FRAME",)
}

MAX_FRAME = 64 * 1024 * 1024
_LENGTH = struct.Struct(">I")

Message = dict[str, Any]


class WireError(Exception):
    """The peer could not be reached or hung up."""


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise WireError("connection closed")
        chunks += chunk
    return bytes(chunks)


def read_frame(sock: socket.socket) -> Message:
    (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    if length > MAX_FRAME:
        raise WireError(f"frame of {length} bytes is larger than {MAX_FRAME}")
    value = json.loads(_recv_exact(sock, length).decode("utf-8"))
    if not isinstance(value, dict):
        raise WireError("frame is not a JSON object")
    return value


def _encode_frame(message: Message) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return _LENGTH.pack(len(data)) + data


def write_frame(sock: socket.socket, message: Message) -> None:
    sock.sendall(_encode_frame(message))


class Connection:
    """A client connection to one broker; reconnects on the next call after a failure."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def call(self, request: Message, timeout: float | None = None) -> Message:
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.create_connection(
                        (self.host, self.port), timeout=self.timeout
                    )
                self._sock.settimeout(timeout if timeout is not None else self.timeout)
                write_frame(self._sock, request)
                return read_frame(self._sock)
            except (OSError, ValueError, WireError) as exc:
                self._close()
                raise WireError(f"{self.host}:{self.port}: {exc}") from exc

    def _close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def close(self) -> None:
        with self._lock:
            self._close()


def call_once(host: str, port: int, request: Message, timeout: float = 5.0) -> Message:
    connection = Connection(host, port, timeout)
    try:
        return connection.call(request)
    finally:
        connection.close()


Handler = Callable[[Message], Message]


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False


def serve(host: str, port: int, handler: Handler) -> socketserver.ThreadingTCPServer:
    """Serve `handler` on host:port in a background thread; one thread per connection."""

    class _RequestHandler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            while True:
                try:
                    request = read_frame(sock)
                except (OSError, ValueError, WireError):
                    return
                try:
                    # A response that cannot be encoded is the handler's failure too.
                    frame = _encode_frame(handler(request))
                except Exception as exc:
                    frame = _encode_frame(
                        {"error": UNKNOWN_SERVER_ERROR, "message": f"{type(exc).__name__}: {exc}"}
                    )
                try:
                    sock.sendall(frame)
                except OSError:
                    return

    server = _Server((host, port), _RequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="request-server", daemon=True)
    thread.start()
    return server
