"""A TCP proxy in front of a real ZooKeeper that counts the client's requests by operation, can
answer multiRead as a ZooKeeper older than 3.6 does, and can lose the answer to a request
(the request reaches the server and takes effect; the connection drops before its answer
reaches the client: what a network fault does to a write).

ZooKeeper 3.5 does not know operation 22 (multiRead): ZooKeeperServer.submitRequest hands it
to UnimplementedRequestProcessor, which answers a reply header with error UNIMPLEMENTED (-6)
and closes the connection; the session lives on. `old_server=True` does exactly that, so the
tests can run the collector against "a 3.5 server" with the real 3.8 behind it.

Framing (jute over TCP): every packet is a 4-byte big-endian length and its body; the client's
first packet is the ConnectRequest (no header), every later one starts with xid and type.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable

MULTI = 14
MULTI_READ = 22
# Operations inside a multi (ZooDefs.OpCode).
DELETE, SET_DATA, CHECK = 2, 5, 13
UNIMPLEMENTED = -6
_INT = struct.Struct("!i")
_REPLY = struct.Struct("!iqi")  # ReplyHeader: xid, zxid, err


def shut(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class ZkProxy:
    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        old_server: bool = False,
        lose_answer_to: Callable[[int, bytes], bool] | None = None,
    ) -> None:
        """`lose_answer_to(operation, request body)`: whether the answer to this request is
        to be lost (the connection is dropped in its place)."""
        self.upstream = upstream
        self.old_server = old_server
        self.lose_answer_to = lose_answer_to
        self.answers_lost = 0
        # While set, requests reach nothing (pings included): a server that stopped answering
        # behind a connection that stays open.
        self.stalled = False
        self.operations: Counter[int] = Counter()
        self.connections = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self.connections += 1
            # Whole packets only go to the client, one at a time: a reply of the proxy's own
            # never lands inside one of the server's.
            sending = threading.Lock()
            doomed: set[int] = set()  # the xids whose answers are to be lost
            threading.Thread(
                target=self._requests, args=(client, server, sending, doomed), daemon=True
            ).start()
            threading.Thread(
                target=self._answers, args=(server, client, sending, doomed), daemon=True
            ).start()

    def _requests(
        self,
        client: socket.socket,
        server: socket.socket,
        sending: threading.Lock,
        doomed: set[int],
    ) -> None:
        first = True
        try:
            while True:
                head = read_exactly(client, 4)
                if head is None:
                    break
                body = read_exactly(client, _INT.unpack(head)[0])
                if body is None:
                    break
                if not first:
                    xid, operation = struct.unpack_from("!ii", body)
                    with self._lock:
                        self.operations[operation] += 1
                    if operation == MULTI_READ and self.old_server:
                        reply = _REPLY.pack(xid, -1, UNIMPLEMENTED)
                        with sending:
                            client.sendall(_INT.pack(len(reply)) + reply)
                        break
                    if self.stalled:
                        continue
                    if self.lose_answer_to is not None and self.lose_answer_to(operation, body):
                        doomed.add(xid)
                first = False
                server.sendall(head + body)
        except OSError:
            pass
        finally:
            shut(client, server)

    def _answers(
        self,
        server: socket.socket,
        client: socket.socket,
        sending: threading.Lock,
        doomed: set[int],
    ) -> None:
        try:
            while (head := read_exactly(server, 4)) is not None:
                body = read_exactly(server, _INT.unpack(head)[0])
                if body is None:
                    break
                if _INT.unpack_from(body)[0] in doomed:
                    with self._lock:
                        self.answers_lost += 1
                    break  # the answer is dropped with the connection
                with sending:
                    client.sendall(head + body)
        except OSError:
            pass
        finally:
            shut(client, server)


def multi_operations(body: bytes) -> list[int]:
    """The operations inside a multi request's body (after its xid and type), as far as they
    are checks, deletes and writes (the only ones this proxy reads)."""
    operations: list[int] = []
    offset = 8
    try:
        while True:
            operation, done, _err = struct.unpack_from("!i?i", body, offset)
            offset += 9
            if done:
                return operations
            operations.append(operation)
            path_length = _INT.unpack_from(body, offset)[0]
            offset += 4 + path_length
            if operation == SET_DATA:
                offset += 4 + _INT.unpack_from(body, offset)[0]
            elif operation not in (CHECK, DELETE):
                return operations
            offset += 4  # the version
    except struct.error:
        return operations
