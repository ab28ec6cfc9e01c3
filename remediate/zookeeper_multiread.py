"""ZooKeeper's multiRead (3.6+): many getData requests in one request and one response.

kazoo has no call for it, so this module holds its wire format (jute, as ZooKeeper's
MultiOperationRecord and MultiResponse write it) and sends it through kazoo's own request
queue, on kazoo's session, with kazoo's authentication, TLS and chroot. One request per
batch instead of one per znode: kazoo spends about 100 microseconds handing each request to
its connection thread, which makes tens of thousands of pipelined reads take seconds; a
batch costs that once.

A server older than 3.6 answers the unknown operation with UNIMPLEMENTED and closes the
connection (its UnimplementedRequestProcessor); the session survives and kazoo reconnects.
`supports_multi_read` finds that out once, right after connecting, before the session holds
anything that a dropped connection could disturb.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, NoNodeError, UnimplementedError
from kazoo.handlers.threading import AsyncResult

MULTI_READ = 22  # ZooDefs.OpCode.multiRead
GET_DATA = 4  # ZooDefs.OpCode.getData
ERROR = -1  # ZooDefs.OpCode.error: the op failed; an ErrorResponse (its code) follows
# Znodes per request. A partition state answers in under 200 bytes, a topic znode in a few
# kilobytes (tens for a topic of thousands of partitions): a batch answers in well under a
# megabyte as a rule, a few megabytes at worst, which the server sends and kazoo reads whole
# (only ZooKeeper's Java client caps what it reads, at jute.maxbuffer).
BATCH = 200

_HEADER = struct.Struct("!iBi")  # MultiHeader: type, done, err
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")  # czxid mzxid ctime mtime version cversion aversion
#                                        ephemeralOwner dataLength numChildren pzxid
_END = _HEADER.pack(-1, 1, -1)
_GET_DATA_HEADER = _HEADER.pack(GET_DATA, 0, -1)

# (data, stat fields as ZooKeeper's Stat orders them), or the error code of a failed read.
Result = tuple[bytes, tuple[int, ...]] | int


class MultiRead(NamedTuple):
    """A multiRead of getData requests, in the shape kazoo's connection sends and reads:
    `type`, `serialize()` and `deserialize(buffer, offset)`."""

    paths: tuple[str, ...]
    type: int = MULTI_READ

    def serialize(self) -> bytes:
        out = bytearray()
        for path in self.paths:
            encoded = path.encode("utf-8")
            out += _GET_DATA_HEADER
            out += _INT.pack(len(encoded))
            out += encoded
            out += b"\0"  # no watch
        out += _END
        return bytes(out)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[Result]:
        return parse_response(buffer, offset)


def parse_response(buffer: bytes, offset: int = 0) -> list[Result]:
    """The results of a multiRead response, in request order: (data, stat) for a read that
    succeeded, the error code for one that failed."""
    results: list[Result] = []
    header = _HEADER.unpack_from
    integer = _INT.unpack_from
    stat = _STAT.unpack_from
    while True:
        kind, done, err = header(buffer, offset)
        offset += _HEADER.size
        if done:
            return results
        if kind == ERROR:
            results.append(integer(buffer, offset)[0])
            offset += _INT.size
        elif kind == GET_DATA:
            length = integer(buffer, offset)[0]
            offset += _INT.size
            data = b""
            if length > 0:
                data = bytes(buffer[offset : offset + length])
                offset += length
            results.append((data, stat(buffer, offset)))
            offset += _STAT.size
        else:
            raise ValueError(f"multiRead response: unexpected result type {kind} (err {err})")


def _full_path(chroot: str, path: str) -> str:
    if not chroot:
        return path
    return chroot if path == "/" else chroot + path


def send(client: KazooClient, paths: Sequence[str]) -> AsyncResult[list[Result]]:
    """Queue one multiRead on kazoo's session; an async result of its `Result` list."""
    chroot = client.chroot or ""
    result: AsyncResult[list[Result]] = client.handler.async_result()
    client._call(MultiRead(tuple(_full_path(chroot, p) for p in paths)), result)
    return result


def read_many(
    client: KazooClient,
    paths: Sequence[str],
    *,
    batch: int = BATCH,
    timeout: float | None = None,
) -> dict[str, tuple[bytes, tuple[int, ...]] | None]:
    """Every znode of `paths`, `batch` per request, all requests in flight at once: data and
    stat, or None for a znode that does not exist. Any other failed read raises kazoo's
    exception for its code (NoAuthError, ...); a dropped connection raises ConnectionLoss, no
    answer within `timeout` the handler's timeout exception."""
    ordered = list(dict.fromkeys(paths))
    pending = [
        (ordered[i : i + batch], send(client, ordered[i : i + batch]))
        for i in range(0, len(ordered), batch)
    ]
    resolved: dict[str, tuple[bytes, tuple[int, ...]] | None] = {}
    for chunk, result in pending:
        answers = result.get(timeout=timeout)
        if len(answers) != len(chunk):
            raise ValueError(f"multiRead: {len(answers)} results for {len(chunk)} reads")
        for path, answer in zip(chunk, answers, strict=True):
            if isinstance(answer, int):
                if answer == NoNodeError.code:
                    resolved[path] = None
                    continue
                raise EXCEPTIONS[answer]()
            resolved[path] = answer
    return resolved


def supports_multi_read(client: KazooClient, *, timeout: float) -> bool:
    """Whether the server answers a multiRead (ZooKeeper 3.6+). A server that does not
    closes the connection after answering UNIMPLEMENTED; kazoo then reconnects the same
    session, which the caller waits for before relying on it."""
    try:
        send(client, ["/"]).get(timeout=timeout)
    except UnimplementedError:
        return False
    return True
