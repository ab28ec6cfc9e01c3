"""The bulk reader of common inventories gives exactly the general path's rows, or leaves the
output to the general parser: on real command output from every tree of the inventory tests
(hostile names and contents among them), under every awk, and on hypothesis-mutated outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.collect.inventory import (
    LogDirRows,
    StateChangeTail,
    inventory_command,
    inventory_rows,
    parse_inventory,
    replica_rows,
)
from remediate.collect.inventory.bulk import read_rows
from remediate.collect.snapshot import ReplicaRow
from remediate.errors import FormatError
from tests.collect.test_inventory import (
    CASES,
    EPOCHS,
    GOOD,
    METADATA,
    PLAIN_GOOD,
    TOPIC_ID,
    Edit,
    hexs,
    make_partition,
    make_root_files,
    mutated,
    run,
)

Rows = tuple[LogDirRows, list[ReplicaRow], StateChangeTail | None]


def general(output: str) -> Rows:
    inventory = parse_inventory(output, source="broker-1")
    log_dirs, replicas = replica_rows(inventory)
    return log_dirs, replicas, inventory.state_change


def assert_same(output: str) -> Rows | None:
    """The bulk reader's rows equal the general path's whenever it reads the output at all,
    and it never reads one the general parser refuses."""
    fast = read_rows(output)
    try:
        expected = general(output)
    except FormatError:
        assert fast is None
        return None
    if fast is not None:
        assert fast == expected
    return fast


def test_every_tree_of_the_inventory_tests(tool_env: dict[str, str], tmp_path: Path) -> None:
    """Every hostile case of tests/collect/test_inventory.py in one log dir, with plain
    partitions around them, a missing log dir and a state-change log."""
    data = tmp_path / "data"
    data.mkdir()
    make_root_files(data)
    for case in CASES:
        make_partition(data, case.name, case.files)
    for n in range(20):
        make_partition(
            data,
            f"plain-{n}".encode(),
            {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS},
        )
    log = tmp_path / "state-change.log"
    log.write_bytes(
        b"[2026-11-24 01:02:03,456] ERROR [Broker id=1] Topic Id in memory: "
        + TOPIC_ID.encode()
        + b" does not match the topic Id for partition plain-0 provided in the request:"
        b" AAAAAAAAAAAAAAAAAAAAAQ. (state.change.logger)\n"
    )
    command = inventory_command(
        [str(data), str(tmp_path / "gone")], epoch_tail_lines=1, state_change_log=str(log)
    )
    output = run(command, env=tool_env)
    fast = assert_same(output)
    assert fast is not None, "a broker with a few odd directories is still read in bulk"
    log_dirs, replicas, tail = fast
    assert [d["state"] for d in log_dirs] == ["present", "missing"]
    assert len(replicas) == len(CASES) + 20
    assert tail is not None and len(tail.lines) == 1


def test_a_plain_broker_is_read_in_bulk(tmp_path: Path) -> None:
    for n in range(300):
        make_partition(
            tmp_path,
            f"t{n % 7}-{n}".encode(),
            {"partition.metadata": METADATA, "leader-epoch-checkpoint": EPOCHS},
        )
    output = run(inventory_command([str(tmp_path)], epoch_tail_lines=1))
    fast = assert_same(output)
    assert fast is not None
    assert {r.file_topic_id for r in fast[1]} == {TOPIC_ID}
    assert {r.epoch_latest for r in fast[1]} == {3}
    assert inventory_rows(output, source="broker-1") == fast


MIXED = "\n".join(
    [
        "remediate-inventory 2 awk-nul=1",
        f"L 0 {hexs(b'/data')} present",
        f"f 0 t-0 metadata present 2 2 0\tversion: 0\ttopic_id: {TOPIC_ID}",
        "d 0 t-0",
        "f 0 t-0 epoch present 3 4 1\t0\t2\t3 1500",
        "d 0 crlf-0",
        f"F 0 {hexs(b'crlf-0')} metadata present 2 2 0",
        "T " + hexs(b"version: 0\r"),
        "T " + hexs(f"topic_id: {TOPIC_ID}\r".encode()),
        "f 0 crlf-0 epoch present 0 0 0",
        f"D 0 {hexs(b'sp ace-1')}",
        f"F 0 {hexs(b'sp ace-1')} epoch unreadable symlink",
        "f 0 t-0.0123456789abcdef0123456789abcdef-delete metadata unreadable directory",
        "d 0 t-0.0123456789abcdef0123456789abcdef-delete",
        "d 0 bad-x",
        "f 0 bad-x metadata present 1 1 0\tversion: 7",
        "Z 0 0",
        f"L 1 {hexs(b'/gone')} missing",
        "R present 0 1 1",
        "J " + hexs(b"a line"),
        "end 2",
        "",
    ]
)


@pytest.mark.parametrize("document", [GOOD, PLAIN_GOOD, MIXED], ids=["hex", "plain", "mixed"])
def test_handcrafted_outputs(document: str) -> None:
    fast = assert_same(document)
    assert fast is not None


@settings(max_examples=400, deadline=None)
@given(
    document=st.sampled_from([GOOD, PLAIN_GOOD, MIXED]),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["drop", "duplicate", "swap", "poke", "split"]),
            st.integers(0, 100),
            st.integers(0, 100),
            st.sampled_from(list(" \t\n.-01fdFDTLZRJ" + "x")),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_outputs(document: str, edits: list[Edit]) -> None:
    assert_same(mutated(document, edits))
