"""The journal's copy in ZooKeeper, beside the run's lock, so that a run outlives its host.

Layout, under the cluster's chroot (the session's own, so its auth and TLS apply):

    /remediate/journals/<cluster>/<run_id>/plan                 the plan.json text, a blob
    /remediate/journals/<cluster>/<run_id>/records/<seq>        one record, a blob
    /remediate/journals/<cluster>/<run_id>/chunks/<name>-<n>    a large blob's chunks

A blob (remediate/execute/journal_codec.py) is the exact bytes of plan.json or of the
record's line in journal.jsonl, compressed; `<seq>` is the record's own seq, ten digits, so
that a create retried after a lost answer finds its own record there and goes on, and two
writers cannot both write record N. The local journal is written first (fsync'd) and
ZooKeeper's copy right after: ZooKeeper's copy never holds a record the writer's disk does
not. When ZooKeeper cannot take a record the run goes on (it would halt on ZooKeeper anyway
at its next gate if ZooKeeper were gone), the record waits in memory and goes with the next
one; the run's end says how many never reached ZooKeeper.

Which copy a command reads: both are the same append-only sequence of records, written by
one run at a time (the lock), so one is always a prefix of the other, and the longer wins —
the local copy when the run's own host is reading it (ZooKeeper's lags it only by records
ZooKeeper could not take), ZooKeeper's when another host resumed the run since, or this host
has no journal at all. Copies that disagree on a record are refused (JournalError): that is
no crash, and neither copy can be trusted to say what was done. Records are compared
decoded: two hosts' zlib builds may compress one record to different bytes. ZooKeeper's copy
cannot get a gap (records that waited go before any later one, and a `check` after the run
sends them first); one found anyway is read up to it and named, and only a local journal
that holds every record up to ZooKeeper's last stands in for it.

Retention: when a run completes, ZooKeeper's copies of every run of the cluster started
before it are deleted; the completed run's stays for `status` until the next run completes.
A halted run's copy stays until then, so it can be resumed from anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from remediate.errors import JournalError, ZnodeExistsError, ZooKeeperError
from remediate.execute.journal_codec import Blob, blob_chunks, decode_blob, decode_record
from remediate.execute.journal_codec import encode_blob as encode
from remediate.execute.lock import lock_path
from remediate.ports import ZooKeeper, ZooKeeperStore

JOURNAL_ROOT = "/remediate/journals"
PLAN = "plan"
RECORDS = "records"
CHUNKS = "chunks"

log = structlog.get_logger(__name__)


def cluster_path(cluster: str) -> str:
    """Where `cluster`'s runs are kept (the name checked as the lock's is)."""
    lock_path(cluster)
    return f"{JOURNAL_ROOT}/{cluster}"


def record_name(seq: int) -> str:
    return f"{seq:010d}"


@dataclass(frozen=True)
class StoredRun:
    """One run as ZooKeeper holds it: plan.json's bytes and journal.jsonl's lines, up to the
    first record missing (`gap`, its seq) when records after it are there: a copy that
    cannot be trusted past that point, which only a complete local journal can stand in for."""

    run_id: str
    plan: bytes | None
    lines: tuple[bytes, ...]
    gap: int | None = None
    last: int = 0  # the highest record ZooKeeper holds (past the gap, when there is one)


class JournalMirror:
    """Writes one run's plan and records to ZooKeeper (the `Journal` calls it)."""

    def __init__(self, zk: ZooKeeperStore, cluster: str, run_id: str) -> None:
        self.zk = zk
        self.cluster = cluster
        self.run_id = run_id
        self.path = f"{cluster_path(cluster)}/{run_id}"
        self._pending: dict[int, bytes] = {}
        self._log = log.bind(cluster=cluster, run_id=run_id)

    @property
    def behind(self) -> int:
        """Records written locally that ZooKeeper has not taken yet."""
        return len(self._pending)

    def put_plan(self, plan_text: bytes) -> None:
        """The run's plan; JournalError if ZooKeeper cannot take it (the run does not start
        with a journal no other host could resume)."""
        try:
            self._put_blob(f"{self.path}/{PLAN}", PLAN, plan_text)
        except ZooKeeperError as error:
            raise JournalError(
                f"cannot keep the plan in ZooKeeper at {self.path}: {error}"
            ) from error

    def put_record(self, seq: int, line: bytes) -> None:
        """Record `seq` (its journal.jsonl line), after any still waiting."""
        self._pending[seq] = line
        self.flush()

    def flush(self) -> int:
        """Write the waiting records, in order; how many still wait. A ZooKeeper error leaves
        them waiting (logged); records that disagree with ZooKeeper's raise JournalError.
        While the connection is down nothing is tried: an append never waits on ZooKeeper
        (kazoo would queue the request until the connection is back)."""
        if self._pending and not self.zk.connected:
            return len(self._pending)
        for seq in sorted(self._pending):
            name = record_name(seq)
            try:
                self._put_blob(f"{self.path}/{RECORDS}/{name}", name, self._pending[seq])
            except ZooKeeperError as error:
                self._log.warning(
                    "journal record not kept in ZooKeeper yet",
                    seq=seq,
                    waiting=len(self._pending),
                    error=str(error),
                )
                break
            del self._pending[seq]
        return len(self._pending)

    def catch_up(self, plan_text: bytes, lines: Sequence[bytes]) -> None:
        """Make ZooKeeper's copy hold `plan_text` and every line of `lines` (a resumed run's
        local journal: its records ZooKeeper missed, or all of them for a run that started
        before journals were kept there)."""
        self.put_plan(plan_text)
        present = set(self.zk.children(f"{self.path}/{RECORDS}"))
        for seq, line in enumerate(lines, start=1):
            if record_name(seq) not in present:
                self._pending[seq] = line
        self.flush()

    def _put_blob(self, path: str, name: str, document: bytes) -> None:
        blob = encode(document)
        # The chunks first: a head that can be read has all its chunks.
        for number, chunk in enumerate(blob.chunks):
            chunk_path = f"{self.path}/{CHUNKS}/{name}-{number:04d}"
            if not self._created(chunk_path, chunk):
                if self._head_exists(path):
                    self._same_document(path, name, document)
                    return
                # Chunks without their head: an earlier attempt that died between the two,
                # maybe on a host whose zlib compresses differently. Nothing reads them.
                _, stat = self.zk.get(chunk_path)
                self.zk.set(chunk_path, chunk, version=stat.version)
        if not self._created(path, blob.head):
            self._same_document(path, name, document)

    def _created(self, path: str, data: bytes) -> bool:
        """Create `path`; False if it exists with other bytes (the same bytes: ours, written
        before an answer was lost)."""
        try:
            self.zk.create(path, data, makepath=True)
        except ZnodeExistsError:
            existing, _ = self.zk.get(path)
            return existing == data
        return True

    def _head_exists(self, path: str) -> bool:
        return self.zk.exists(path) is not None

    def _same_document(self, path: str, name: str, document: bytes) -> None:
        """The blob at `path` holds `document` once decoded (compressed bytes differ from one
        zlib to another: zlib-ng, say), or JournalError: two writers."""
        stored = _read_blob(self.zk, path, f"{self.path}/{CHUNKS}/{name}")
        if stored is None or _record(stored) != _record(document):
            raise JournalError(
                f"ZooKeeper's copy of run {self.run_id} holds another record at {path}:"
                " two writers, or a copy that is not this run's"
            )


def zk_runs(zk: ZooKeeper, cluster: str) -> list[str]:
    """The runs of `cluster` ZooKeeper keeps, oldest first (run ids sort by start time)."""
    return sorted(zk.children(cluster_path(cluster)))


def read_run(zk: ZooKeeper, cluster: str, run_id: str) -> StoredRun | None:
    """Run `run_id` as ZooKeeper keeps it; None if it keeps no records of it."""
    base = f"{cluster_path(cluster)}/{run_id}"
    names = zk.children(f"{base}/{RECORDS}")
    if not names:
        return None
    heads = zk.get_many([f"{base}/{RECORDS}/{name}" for name in names] + [f"{base}/{PLAN}"])
    documents: dict[str, Blob] = {}
    wanted: dict[str, list[str]] = {}
    for name in [*names, PLAN]:
        path = f"{base}/{RECORDS}/{name}" if name != PLAN else f"{base}/{PLAN}"
        read = heads.get(path)
        if read is None:
            continue
        head = read[0]
        count = blob_chunks(head, path)
        wanted[name] = [f"{base}/{CHUNKS}/{name}-{n:04d}" for n in range(count)]
        documents[name] = Blob(head)
    chunk_reads = zk.get_many([p for paths in wanted.values() for p in paths])
    decoded: dict[str, bytes] = {}
    for name, blob in documents.items():
        chunks = []
        for path in wanted[name]:
            read = chunk_reads.get(path)
            if read is None:
                raise JournalError(f"{path}: a chunk of run {run_id}'s journal is missing")
            chunks.append(read[0])
        decoded[name] = decode_blob(blob.head, chunks, f"{base}/{name}")
    lines: list[bytes] = []
    for seq, name in enumerate(names, start=1):
        if name != record_name(seq) or name not in decoded:
            last = max((int(n) for n in names if n.isdigit()), default=seq)
            return StoredRun(run_id, decoded.get(PLAN), tuple(lines), gap=seq, last=last)
        lines.append(decode_record(decoded[name], seq, f"{base}/{RECORDS}/{name}"))
    return StoredRun(run_id, decoded.get(PLAN), tuple(lines), last=len(lines))


def _read_blob(zk: ZooKeeper, path: str, chunk_prefix: str) -> bytes | None:
    """One blob's document, decoded; None if its head is not there."""
    heads = zk.get_many([path])
    read = heads.get(path)
    if read is None:
        return None
    count = blob_chunks(read[0], path)
    paths = [f"{chunk_prefix}-{n:04d}" for n in range(count)]
    chunk_reads = zk.get_many(paths)
    chunks = []
    for chunk_path in paths:
        chunk = chunk_reads.get(chunk_path)
        if chunk is None:
            raise JournalError(f"{chunk_path}: a chunk of {path} is missing")
        chunks.append(chunk[0])
    return decode_blob(read[0], chunks, path)


def prune_before(zk: ZooKeeperStore, cluster: str, run_id: str) -> list[str]:
    """Delete ZooKeeper's copies of `cluster`'s runs started before `run_id`; which ones."""
    older = [r for r in zk_runs(zk, cluster) if r < run_id]
    for old in older:
        zk.delete_tree(f"{cluster_path(cluster)}/{old}")
    return older


@dataclass(frozen=True)
class Choice:
    """Which copy of a run's journal to read, and why (said by `status` and `resume`)."""

    source: str  # "local" or "zookeeper"
    lines: tuple[bytes, ...]
    reason: str
    overruled: int | None = None  # the record the copies differ at, when the operator chose


TRUST_CHOICES = ("local", "zookeeper")


def choose_copy(
    local: Sequence[bytes] | None,
    stored: Sequence[bytes] | None,
    *,
    gap: int | None = None,
    last: int = 0,
    trust: str | None = None,
) -> Choice:
    """The copy to read of a run's journal: the longer, as long as one is a prefix of the
    other (see the module's docstring). ZooKeeper's copy with a gap (`gap`: the first record
    missing; `last`: the highest it holds) serves only up to it: a local journal that holds
    every record up to `last` is read instead; without one, nothing can say what the records
    in the gap did, and the copy is refused, naming the gap. Copies that disagree are refused
    unless the operator said which to trust (`trust`: "local" or "zookeeper", after looking
    at both). Pure."""
    if gap is not None:
        held = len(local) if local is not None else 0
        if held < last:
            raise JournalError(
                f"ZooKeeper's copy of this run is missing record {gap} of {last}, and this"
                f" host's journal has {held} record(s): read it on the host that ran it, whose"
                " local journal is complete"
            )
        choice = choose_copy(local, stored)
        return Choice(
            choice.source,
            choice.lines,
            f"ZooKeeper's copy is missing record {gap}; the local journal is complete",
        )
    if local is None and stored is None:
        raise JournalError("no journal for this run, neither local nor in ZooKeeper")
    if stored is None or not stored:
        assert local is not None
        return Choice("local", tuple(local), "ZooKeeper keeps no copy")
    if local is None or not local:
        return Choice("zookeeper", tuple(stored), "no local journal")
    for seq, (mine, theirs) in enumerate(zip(local, stored, strict=False), start=1):
        if _record(mine) != _record(theirs):
            chosen = "local" if trust == "local" else "zookeeper" if trust == "zookeeper" else None
            if chosen is None:
                raise JournalError(
                    f"the local journal and ZooKeeper's copy differ at record {seq}: refusing"
                    " to guess which says what was done (compare them, then say which to"
                    " trust: --trust-journal local|zookeeper)"
                )
            return Choice(
                chosen,
                tuple(local if chosen == "local" else stored),
                f"the copies differ at record {seq}: the {chosen} one, as the operator chose"
                f" (--trust-journal {chosen})",
                overruled=seq,
            )
    if len(stored) > len(local):
        return Choice(
            "zookeeper",
            tuple(stored),
            f"ZooKeeper's copy is ahead ({len(stored)} records, local {len(local)})",
        )
    return Choice("local", tuple(local), "the local journal is as recent or more")


def _record(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return line
