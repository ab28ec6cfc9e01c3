"""The journal's copy in ZooKeeper against a real ZooKeeper: a run written, read back from
another host's empty journal_dir, a large plan chunked, older runs pruned."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.errors import JournalError
from remediate.execute.journal import Journal, JournalEvent
from remediate.execute.journal_mirror import JournalMirror, prune_before, read_run, zk_runs
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
    with pytest.raises(JournalError, match="holds other data"):
        Journal.create(tmp_path / "b", run, {"d": 2}, now=1.0, mirror=JournalMirror(zk, "two", run))


def test_older_runs_are_pruned(zk: KazooZooKeeper, tmp_path: Path) -> None:
    runs = [f"20261122T03{m}00Z-dddddd" for m in (10, 20, 30)]
    for run in runs:
        Journal.create(tmp_path, run, {}, now=1.0, mirror=JournalMirror(zk, "prune", run))
    assert prune_before(zk, "prune", runs[1]) == runs[:1]
    assert zk_runs(zk, "prune") == runs[1:]
    assert read_run(zk, "prune", runs[0]) is None
