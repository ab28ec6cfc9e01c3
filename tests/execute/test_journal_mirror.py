"""The journal's copy in ZooKeeper against a real ZooKeeper: a run written, read back from
another host's empty journal_dir, a large plan chunked, older runs pruned."""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.errors import JournalError
from remediate.execute.journal import Journal, JournalEvent
from remediate.execute.journal_codec import decode_blob
from remediate.execute.journal_mirror import (
    JournalMirror,
    choose_copy,
    prune_before,
    read_run,
    record_name,
    zk_runs,
)
from remediate.execute.locked import open_run
from remediate.sandbox.plumbing import process
from remediate.zookeeper import KazooZooKeeper
from tests.execute.test_lock import client, start_zookeeper


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KazooZooKeeper]:
    hosts, _, pid = start_zookeeper(tmp_path_factory.mktemp("zk"))
    # Under a chroot, as a cluster's connect string may have one.
    with client(hosts) as root:
        root.ensure_path("/kafka")
    with client(hosts + "/kafka") as chrooted:
        yield KazooZooKeeper(chrooted)
    process.terminate(pid, "QuorumPeerMain", timeout=10)


def test_a_run_is_read_back_from_zookeeper_alone(zk: KazooZooKeeper, tmp_path: Path) -> None:
    # A plan far over ZooKeeper's 1 MB znode limit, even compressed.
    plan = {"digest": "d", "noise": random.Random(1).randbytes(1_500_000).hex()}
    run = "20261122T031500Z-aaaaaa"
    journal = Journal.create(
        tmp_path / "a", run, plan, now=1.0, mirror=JournalMirror(zk, "orders", run)
    )
    journal.append(JournalEvent.NOTE, now=2.0, decision="x" * 2_000_000)  # a huge record
    journal.append(JournalEvent.RUN_COMPLETED, now=3.0)
    assert zk.client.exists("/remediate/journals/orders/" + run)  # under the chroot
    assert zk.children(f"/remediate/journals/orders/{run}/chunks")  # the plan was chunked

    stored = read_run(zk, "orders", run)
    assert stored is not None
    assert list(stored.lines) == journal.lines()
    assert stored.plan == journal.plan_text()
    elsewhere = Journal.restore(tmp_path / "b", run, stored.plan, stored.lines)
    assert elsewhere.records() == journal.records()
    assert json.loads(elsewhere.plan_text()) == plan


def test_a_record_zookeeper_missed_goes_with_the_next(zk: KazooZooKeeper, tmp_path: Path) -> None:
    run = "20261122T031600Z-bbbbbb"
    mirror = JournalMirror(zk, "late", run)
    journal = Journal.create(tmp_path, run, {"digest": "d"}, now=1.0, mirror=mirror)
    journal.mirror = None  # this record reaches the disk only, as when ZooKeeper is away
    journal.append(JournalEvent.NOTE, now=2.0)
    stored = read_run(zk, "late", run)
    assert stored is not None and len(stored.lines) == 1
    mirror.catch_up(journal.plan_text(), journal.lines())
    journal.mirror = mirror
    journal.append(JournalEvent.NOTE, now=3.0)
    stored = read_run(zk, "late", run)
    assert stored is not None and list(stored.lines) == journal.lines()


def test_two_writers_of_one_record_are_refused(zk: KazooZooKeeper, tmp_path: Path) -> None:
    run = "20261122T031700Z-cccccc"
    Journal.create(tmp_path / "a", run, {"d": 1}, now=1.0, mirror=JournalMirror(zk, "two", run))
    with pytest.raises(JournalError, match="holds another record"):
        Journal.create(tmp_path / "b", run, {"d": 2}, now=1.0, mirror=JournalMirror(zk, "two", run))


def test_older_runs_are_pruned(zk: KazooZooKeeper, tmp_path: Path) -> None:
    runs = [f"20261122T03{m}00Z-dddddd" for m in (10, 20, 30)]
    for run in runs:
        Journal.create(tmp_path, run, {}, now=1.0, mirror=JournalMirror(zk, "prune", run))
    assert prune_before(zk, "prune", runs[1]) == runs[:1]
    assert zk_runs(zk, "prune") == runs[1:]
    assert read_run(zk, "prune", runs[0]) is None


def test_a_gap_is_named_and_the_complete_local_journal_still_serves(
    zk: KazooZooKeeper, tmp_path: Path
) -> None:
    """ZooKeeper's copy with a record missing in the middle (what a closing record written past
    records ZooKeeper never took used to leave) reads up to the gap and says so; `choose_copy`
    then takes the local journal, which has them all."""
    run = "20261122T031800Z-eeeeee"
    journal = Journal.create(
        tmp_path, run, {"digest": "d"}, now=1.0, mirror=JournalMirror(zk, "gap", run)
    )
    for second in (2.0, 3.0):
        journal.append(JournalEvent.NOTE, now=second)
    zk.client.delete(f"/remediate/journals/gap/{run}/records/{record_name(2)}")
    stored = read_run(zk, "gap", run)
    assert stored is not None
    assert (stored.gap, stored.last, len(stored.lines)) == (2, 3, 1)
    choice = choose_copy(journal.lines(), stored.lines, gap=stored.gap, last=stored.last)
    assert choice.source == "local" and list(choice.lines) == journal.lines()


def test_a_run_checked_after_records_zookeeper_missed_leaves_no_gap(
    zk: KazooZooKeeper, tmp_path: Path
) -> None:
    """`check` after a run adds its record through a new mirror (remediate/execute/locked.py,
    `record_check`): the records ZooKeeper missed go first."""
    run = "20261122T031900Z-ffffff"
    journal = Journal.create(
        tmp_path, run, {"digest": "d"}, now=1.0, mirror=JournalMirror(zk, "checked", run)
    )
    journal.mirror = None  # ZooKeeper was away for the run's last records
    journal.append(JournalEvent.NOTE, now=2.0)
    journal.append(JournalEvent.RUN_COMPLETED, now=3.0)
    mirror = JournalMirror(zk, "checked", run)
    mirror.catch_up(journal.plan_text(), journal.lines())
    journal.mirror = mirror
    journal.append(JournalEvent.CHECKED, now=4.0, status="healthy")
    stored = read_run(zk, "checked", run)
    assert stored is not None and stored.gap is None
    assert list(stored.lines) == journal.lines()


def test_a_record_compressed_differently_on_another_host_is_the_same_record(
    zk: KazooZooKeeper, tmp_path: Path
) -> None:
    """Two zlib builds (zlib and zlib-ng) compress the same record to other bytes: the copies
    are compared decoded, so a host that writes a record again after a lost answer, or
    catches up a copy another host wrote, is not taken for a second writer."""
    run = "20261122T032000Z-aaaaab"
    journal = Journal.create(
        tmp_path, run, {"digest": "d"}, now=1.0, mirror=JournalMirror(zk, "zlibs", run)
    )
    journal.append(JournalEvent.NOTE, now=2.0, decision="the same words " * 20)
    path = f"/remediate/journals/zlibs/{run}/records/{record_name(2)}"
    data, _ = zk.client.get(path)
    head, _, _packed = data.partition(b"\n")
    document = decode_blob(data, [], path)
    # The same record compressed by another deflate (Huffman codes only): other bytes.
    deflate = zlib.compressobj(6, zlib.DEFLATED, 15, 8, zlib.Z_HUFFMAN_ONLY)
    other = head + b"\n" + deflate.compress(document) + deflate.flush()
    assert other != data and decode_blob(other, [], path) == document
    zk.client.set(path, other)
    mirror = JournalMirror(zk, "zlibs", run)
    mirror.catch_up(journal.plan_text(), journal.lines())
    mirror.put_record(2, journal.lines()[1])  # written again, as after a lost answer
    assert mirror.behind == 0
    with pytest.raises(JournalError, match="holds another record"):
        mirror.put_record(2, journal.lines()[0])


@pytest.mark.parametrize("trust", ["local", "zookeeper"])
def test_the_copy_the_operator_trusts_is_taken_and_the_other_set_aside(
    zk: KazooZooKeeper, tmp_path: Path, trust: str
) -> None:
    run = f"20261122T0321{'00' if trust == 'local' else '01'}Z-abcdef"
    journal = Journal.create(
        tmp_path, run, {"digest": "d"}, now=1.0, mirror=JournalMirror(zk, "trust", run)
    )
    journal.append(JournalEvent.NOTE, now=2.0, decision="what this host did")
    mine = journal.lines()
    # ZooKeeper's copy says something else at record 2 (another writer, or a restored one).
    other = Journal.create(tmp_path / "other", run, {"digest": "d"}, now=1.0)
    other.append(JournalEvent.NOTE, now=2.0, decision="what another host did")
    zk.delete_tree(f"/remediate/journals/trust/{run}")
    JournalMirror(zk, "trust", run).catch_up(other.plan_text(), other.lines())
    told: list[str] = []
    with pytest.raises(JournalError, match="differ at record 2"):
        open_run(tmp_path, zk, "trust", run, told.append)

    opened, choice = open_run(tmp_path, zk, "trust", run, told.append, trust)
    assert choice.overruled == 2 and choice.source == trust
    assert told[0] == f"run {run}: {choice.reason}"
    if trust == "local":
        assert opened.lines() == mine
        assert read_run(zk, "trust", run) is None  # the distrusted copy is gone
    else:
        assert opened.lines() == other.lines()
        kept = opened.path.with_name(opened.path.name + ".distrusted")
        assert kept.read_bytes() == b"".join(mine)
