"""`/migration`, as Kafka's MigrationZNode writes and reads it (kafka.zk.ZkData, 3.4 to 3.9;
core/src/main/scala/kafka/zk/ZkData.scala at 3.9.0-rc3, lines 1049 to 1083).

decode_migration never raises: the znode's existence means a migration to KRaft has begun,
whatever it holds, so a document that does not parse is kept as a problem, not an error.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.formats.znodes import MigrationState, decode_migration, encode_migration

# What a 3.9 KRaft controller writes when it first claims the migration (the offset and the
# epoch -1: nothing is copied yet), and once ZooKeeper's metadata is in KRaft's log.
FIRST = (
    b'{"version":0,"kraft_controller_id":3000,"kraft_controller_epoch":1,'
    b'"kraft_metadata_offset":-1,"kraft_metadata_epoch":-1}'
)
COPIED = (
    b'{"version":0,"kraft_controller_id":3000,"kraft_controller_epoch":1,'
    b'"kraft_metadata_offset":4294967296,"kraft_metadata_epoch":1}'
)

VECTORS: list[tuple[str, bytes, MigrationState | str]] = [
    ("claimed, nothing copied", FIRST, MigrationState(3000, 1, -1, -1)),
    ("copied, a 64-bit offset", COPIED, MigrationState(3000, 1, 2**32, 1)),
    (
        "unknown fields ignored, as Kafka's reader does",
        b'{"version":0,"kraft_controller_id":1,"kraft_controller_epoch":2,'
        b'"kraft_metadata_offset":3,"kraft_metadata_epoch":4,"extra":true}',
        MigrationState(1, 2, 3, 4),
    ),
    (
        "another version: Kafka throws 'Encountered unknown version'",
        FIRST.replace(b'"version":0', b'"version":1'),
        "/migration: version: expected 0, got 1",
    ),
    (
        "a field missing",
        b'{"version":0,"kraft_controller_id":3000,"kraft_controller_epoch":1,'
        b'"kraft_metadata_offset":-1}',
        "/migration: kraft_metadata_epoch: expected an integer",
    ),
    (
        "an offset as a string",
        FIRST.replace(b"-1,", b'"-1",', 1),
        "/migration: kraft_metadata_offset: expected an integer",
    ),
    (
        "an offset beyond a Java long",
        FIRST.replace(b"-1,", str(2**63).encode() + b",", 1),
        "/migration: kraft_metadata_offset: expected a 64-bit integer",
    ),
    ("empty", b"", "/migration: data: expected a JSON object"),
    ("not JSON", b"\xff\x00migration", "/migration: data: expected a JSON object"),
]


@pytest.mark.parametrize(
    ("data", "expected"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_migration_znode(data: bytes, expected: MigrationState | str) -> None:
    decoded = decode_migration(data)
    if isinstance(expected, MigrationState):
        assert decoded == expected
        assert decoded.problem is None
    else:
        assert decoded.problem is not None and decoded.problem.startswith(expected)
        assert decoded.kraft_controller_id is None


def test_the_offset_says_whether_the_metadata_was_copied() -> None:
    assert not decode_migration(FIRST).metadata_migrated
    assert decode_migration(COPIED).metadata_migrated
    assert not MigrationState(problem="x").metadata_migrated


def test_encode_writes_what_the_controller_writes() -> None:
    assert json.loads(encode_migration(MigrationState(3000, 1, -1, -1))) == json.loads(FIRST)
    assert decode_migration(encode_migration(decode_migration(COPIED))) == decode_migration(COPIED)


@given(st.binary(max_size=200))
def test_any_bytes_are_a_migration_with_fields_or_a_problem(data: bytes) -> None:
    decoded = decode_migration(data)
    assert (decoded.problem is None) == (decoded.kraft_controller_id is not None)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "version",
                "kraft_controller_id",
                "kraft_controller_epoch",
                "kraft_metadata_offset",
                "kraft_metadata_epoch",
            ]
        ),
        st.one_of(st.integers(), st.text(max_size=3), st.none(), st.booleans(), st.floats()),
    )
)
def test_any_document_is_a_migration_with_fields_or_a_problem(doc: dict[str, object]) -> None:
    decoded = decode_migration(json.dumps(doc).encode())
    if decoded.problem is None:
        assert doc["version"] == 0
        assert all(isinstance(doc[k], int) and not isinstance(doc[k], bool) for k in doc)
