"""A TCP proxy in front of a real ZooKeeper that counts the client's requests by operation and
can answer multiRead as a ZooKeeper older than 3.6 does.

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

MULTI_READ = 22
UNIMPLEMENTED = -6
_INT = struct.Struct("!i")
_REPLY = struct.Struct("!iqi")  # ReplyHeader: xid, zxid, err


def _shut(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class ZkProxy:
    def __init__(self, upstream: tuple[str, int], *, old_server: bool = False) -> None:
        self.upstream = upstream
        self.old_server = old_server
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
            threading.Thread(
                target=self._requests, args=(client, server, sending), daemon=True
            ).start()
            threading.Thread(
                target=self._answers, args=(server, client, sending), daemon=True
            ).start()

    def _requests(
        self, client: socket.socket, server: socket.socket, sending: threading.Lock
    ) -> None:
        first = True
        try:
            while True:
                head = _read_exactly(client, 4)
                if head is None:
                    break
                body = _read_exactly(client, _INT.unpack(head)[0])
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
                first = False
                server.sendall(head + body)
        except OSError:
            pass
        finally:
            _shut(client, server)

    def _answers(
        self, server: socket.socket, client: socket.socket, sending: threading.Lock
    ) -> None:
        try:
            while (head := _read_exactly(server, 4)) is not None:
                body = _read_exactly(server, _INT.unpack(head)[0])
                if body is None:
                    break
                with sending:
                    client.sendall(head + body)
        except OSError:
            pass
        finally:
            _shut(client, server)
