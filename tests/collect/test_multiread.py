"""ZooKeeper's multiRead: its wire format on plain bytes, then the collector against a real
ZooKeeper (3.8, which has it) and against the same server behind a proxy that answers as a
ZooKeeper 3.5 does (no multiRead: UNIMPLEMENTED, then the connection closed)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Protocol

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from remediate import zookeeper_multiread as multiread
from remediate.collect.cluster_state import read_cluster_state
from remediate.errors import ZooKeeperError
from remediate.zookeeper import ZkSettings, connect
from tests.collect.test_zookeeper import chrooted, populate
from tests.collect.zkproxy import MULTI_READ, ZkProxy

GET_DATA = 4
HEADER = struct.Struct("!iBi")
STAT = struct.Struct("!qqqqiiiqiiq")


def read_result(data: bytes, stat: tuple[int, ...]) -> bytes:
    return HEADER.pack(GET_DATA, 0, 0) + struct.pack("!i", len(data)) + data + STAT.pack(*stat)


def error_result(code: int) -> bytes:
    return HEADER.pack(-1, 0, code) + struct.pack("!i", code)


END = HEADER.pack(-1, 1, -1)
STAT_A = (10, 11, 1, 2, 3, 0, 0, 0, 5, 0, 10)


# -- the wire format -----------------------------------------------------------------------------


def test_a_request_is_getdata_ops_between_multi_headers() -> None:
    request = multiread.MultiRead(("/a", "/brokers/ids/1"))
    assert request.type == 22
    assert request.serialize() == (
        HEADER.pack(GET_DATA, 0, -1)
        + b"\x00\x00\x00\x02/a\x00"
        + HEADER.pack(GET_DATA, 0, -1)
        + b"\x00\x00\x00\x0e/brokers/ids/1\x00"
        + END
    )
    assert multiread.MultiRead(()).serialize() == END


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (END, []),
        (read_result(b"{}", STAT_A) + END, [(b"{}", STAT_A)]),
        # A znode without data reads as b"" (ZooKeeper writes length 0; -1 is also "none").
        (read_result(b"", STAT_A) + END, [(b"", STAT_A)]),
        (
            HEADER.pack(GET_DATA, 0, 0) + struct.pack("!i", -1) + STAT.pack(*STAT_A) + END,
            [(b"", STAT_A)],
        ),
        (error_result(-101) + read_result(b"x", STAT_A) + END, [-101, (b"x", STAT_A)]),
        (error_result(-102) + END, [-102]),
    ],
    ids=["empty", "one", "no-data", "null-data", "missing-then-read", "no-auth"],
)
def test_responses_parse_to_data_and_stat_or_an_error_code(
    response: bytes, expected: list[object]
) -> None:
    # An offset: kazoo hands over the whole packet, the reply header before the results.
    assert multiread.parse_response(b"\xff" * 16 + response, 16) == expected


def test_an_unknown_result_type_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="unexpected result type 8"):
        multiread.parse_response(HEADER.pack(8, 0, 0) + END)


LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)
# czxid mzxid ctime mtime version cversion aversion ephemeralOwner dataLength numChildren pzxid
STATS = st.tuples(LONG, LONG, LONG, LONG, INT, INT, INT, LONG, INT, INT, LONG)


@given(
    st.lists(
        st.one_of(
            st.tuples(st.binary(min_size=1, max_size=300), STATS), st.sampled_from([-101, -102, -4])
        ),
        max_size=20,
    )
)
def test_any_response_reads_back_result_for_result(results: list[object]) -> None:
    encoded = b"".join(
        error_result(r) if isinstance(r, int) else read_result(r[0], r[1])  # type: ignore[index]
        for r in results
    )
    assert multiread.parse_response(encoded + END) == results


# -- against ZooKeeper ---------------------------------------------------------------------------


class ProxyFactory(Protocol):
    """Makes a proxy in front of the test's ZooKeeper (the fixture closes it)."""

    def __call__(self, *, old_server: bool = False) -> ZkProxy: ...


@pytest.fixture
def proxy_factory(zookeeper: tuple[str, int]) -> Iterator[ProxyFactory]:
    proxies: list[ZkProxy] = []
    host, port = zookeeper[0].rsplit(":", 1)

    class Made(ZkProxy):
        def __init__(self, *, old_server: bool = False) -> None:
            super().__init__((host, int(port)), old_server=old_server)
            proxies.append(self)

    yield Made
    for proxy in proxies:
        proxy.close()


def populated(zookeeper: tuple[str, int], chroot: str) -> str:
    connect_string = zookeeper[0]
    admin = chrooted(connect_string, chroot)
    try:
        populate(admin)
        for n in range(1200):  # more znodes than one batch holds
            admin.create(f"/brokers/topics/modern/partitions/extra/{n}", b"%d" % n, makepath=True)
    finally:
        admin.stop()
        admin.close()
    return connect_string + chroot


def test_the_collector_reads_in_multiread_batches_where_the_server_has_them(
    zookeeper: tuple[str, int], proxy_factory: ProxyFactory
) -> None:
    populated(zookeeper, "/batched")
    proxy = proxy_factory()
    zk = connect(ZkSettings(proxy.connect_string + "/batched"))
    try:
        assert zk.multi_read is True
        before = proxy.operations.copy()
        state = read_cluster_state(zk)
        paths = [f"/brokers/topics/modern/partitions/extra/{n}" for n in range(1200)]
        many = zk.get_many([*paths, "/brokers/topics/absent"])
        reads = proxy.operations - before
        expected = {p: zk.get(p) for p in paths[:5]}
    finally:
        zk.close()
    assert reads[GET_DATA] == 0, "one getData per znode: the batches were not used"
    assert reads[MULTI_READ] >= 3
    assert sorted(state.topics) == ["legacy", "modern"]
    assert len(state.problems) == 1 and "/brokers/topics/broken" in state.problems[0]
    # Every answer in its place, across batches, a missing znode None.
    assert many["/brokers/topics/absent"] is None
    assert [many[p][0] for p in paths] == [b"%d" % n for n in range(1200)]  # type: ignore[index]
    assert all(many[p] == expected[p] for p in expected)


def test_a_server_without_multiread_is_read_one_znode_per_request_on_the_same_session(
    zookeeper: tuple[str, int], proxy_factory: ProxyFactory
) -> None:
    connect_string = populated(zookeeper, "/old-server")
    direct = connect(ZkSettings(connect_string))
    try:
        expected = read_cluster_state(direct)
    finally:
        direct.close()
    proxy = proxy_factory(old_server=True)
    zk = connect(ZkSettings(proxy.connect_string + "/old-server"))
    try:
        assert zk.multi_read is False
        # The probe cost one connection; the session went on (its ephemeral znode survives).
        assert proxy.connections == 2
        session = zk.session_id
        zk.client.create("/mine", b"", ephemeral=True)
        state = read_cluster_state(zk)
        assert zk.session_id == session
        assert zk.client.exists("/mine") is not None
    finally:
        zk.close()
    assert proxy.operations[MULTI_READ] == 1, "only the probe asks for a multiRead"
    assert proxy.operations[GET_DATA] > 0
    assert proxy.connections == 2
    assert state == expected


def test_a_batch_that_may_not_be_read_is_a_refusal_not_a_missing_znode(
    zookeeper: tuple[str, int],
) -> None:
    connect_string = zookeeper[0]
    admin = KazooClient(connect_string, auth_data=[("digest", "owner:owner-secret")])
    admin.start()
    try:
        admin.create("/guarded", b"", makepath=True)
        admin.create(
            "/guarded/secret", b"s", acl=[make_digest_acl("owner", "owner-secret", read=True)]
        )
        admin.create("/guarded/open", b"o")
    finally:
        admin.stop()
        admin.close()
    zk = connect(ZkSettings(connect_string))
    try:
        assert zk.multi_read is True
        with pytest.raises(ZooKeeperError, match="NoAuthError"):
            zk.get_many(["/guarded/open", "/guarded/secret"])
        with pytest.raises(NoAuthError):
            multiread.read_many(zk.client, ["/guarded/secret"])
        assert zk.get_many(["/guarded/open"])["/guarded/open"][0] == b"o"  # type: ignore[index]
    finally:
        zk.close()
