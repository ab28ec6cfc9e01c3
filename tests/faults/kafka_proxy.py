"""A TCP proxy in front of one real Kafka broker's listener that reads each request's API key
and can hold the requests of chosen keys: they never reach the broker and the connection stays
open, as when a broker's request handlers are stuck or a network path eats one direction.
What a client sees is a request that never gets its answer.

Framing (Kafka's protocol over TCP): every request is a 4-byte big-endian size and its body,
whose header starts with the API key (int16), its version (int16) and a correlation id. The
SASL exchange travels in the same frames (SaslHandshake, SaslAuthenticate), so every byte
the client sends is a framed request. Answers are relayed as they come.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections import Counter

from tests.collect.zkproxy import read_exactly, shut

_SIZE = struct.Struct("!i")
_KEY = struct.Struct("!h")

# Kafka's API keys (org.apache.kafka.common.protocol.ApiKeys).
DESCRIBE_LOG_DIRS = 35
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_CONFIGS = 32
API_VERSIONS = 18


class KafkaProxy:
    """Listens on `host` (a port of its own) and relays to `upstream`, the broker's listener."""

    def __init__(
        self, host: str, upstream: tuple[str, int] | None = None, *, frames: bool = True
    ) -> None:
        """`frames`: read Kafka's frames (to count and hold requests); False relays the bytes
        as they come, for a listener whose frames are inside TLS."""
        self.upstream = upstream
        self.frames = frames
        self.requests: Counter[int] = Counter()
        self.held: Counter[int] = Counter()
        self._holding: frozenset[int] = frozenset()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._stuck: set[socket.socket] = set()  # clients with a request held
        self._listener = socket.create_server((host, 0))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def hold(self, *keys: int) -> None:
        """From now on, requests of `keys` go nowhere (their connections stay open)."""
        with self._lock:
            self._holding = frozenset(keys)

    def release(self) -> None:
        """Relay everything again. Connections that had a request held are closed: the
        client's wait for those answers is over either way (a client gives up on its own
        after its request timeout and closes that connection)."""
        with self._lock:
            self._holding = frozenset()
            stuck = [pair for pair in self._pairs if pair[0] in self._stuck]
            self._stuck.clear()
        for client, server in stuck:
            shut(client, server)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            pairs = list(self._pairs)
        for client, server in pairs:
            shut(client, server)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.upstream is None:
                shut(client)
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                shut(client)
                continue
            with self._lock:
                self._pairs.append((client, server))
            relay = self._requests if self.frames else self._bytes
            threading.Thread(target=relay, args=(client, server), daemon=True).start()
            threading.Thread(target=self._answers, args=(server, client), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while (head := read_exactly(client, 4)) is not None:
                body = read_exactly(client, _SIZE.unpack(head)[0])
                if body is None:
                    break
                (key,) = _KEY.unpack_from(body)
                with self._lock:
                    self.requests[key] += 1
                    holding = key in self._holding
                    if holding:
                        self.held[key] += 1
                        self._stuck.add(client)
                if holding:
                    continue
                server.sendall(head + body)
        except OSError:
            pass
        finally:
            shut(client, server)

    def _bytes(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while chunk := client.recv(65536):
                server.sendall(chunk)
        except OSError:
            pass
        finally:
            shut(client, server)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        """The broker's bytes to the client; when the broker closes, the client reads all it
        sent before the end (a half close: a full one now could reset the connection and
        lose the broker's last answer, such as why it refused a login)."""
        try:
            while chunk := server.recv(65536):
                client.sendall(chunk)
            client.shutdown(socket.SHUT_WR)
        except OSError:
            shut(client, server)
