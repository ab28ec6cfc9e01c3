"""PartitionLog and LeaderEpochCache on plain files: no ZooKeeper, no broker processes."""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.errors import FormatError
from remediate.formats.logdir import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    EpochEntry,
    parse_leader_epoch_checkpoint,
)
from remediate.formats.topic_id import TopicId
from remediate.sandbox.emulated.storage import (
    INDEX_FILES,
    LOG_FILE,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    LeaderEpochCache,
    PartitionLog,
    Record,
    write_atomically,
)

TOPIC_ID = TopicId(bytes(range(1, 17)))
OTHER_ID = TopicId(bytes(range(101, 117)))


def _entries(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(epoch, offset) for epoch, offset in pairs]


def _checkpoint_on_disk(directory: Path) -> list[EpochEntry]:
    path = directory / LEADER_EPOCH_CHECKPOINT
    return parse_leader_epoch_checkpoint(path.read_bytes(), source=str(path))


def _reload(log: PartitionLog) -> PartitionLog:
    return PartitionLog.load(log.dir, log.topic, log.partition)


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return PartitionLog.create(tmp_path / "orders-0", "orders", 0)


# -- write_atomically ---------------------------------------------------------------------------


def test_write_atomically_writes_the_bytes_and_leaves_no_tmp_file(tmp_path: Path) -> None:
    target = tmp_path / "leader-epoch-checkpoint"
    write_atomically(target, b"0\n0\n")
    assert target.read_bytes() == b"0\n0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader-epoch-checkpoint"]


def test_write_atomically_replaces_the_file_and_a_stale_tmp_file(tmp_path: Path) -> None:
    target = tmp_path / "partition.metadata"
    target.write_bytes(b"old contents that are longer than the new ones")
    # A .tmp file left behind by a crash between write and rename.
    (tmp_path / "partition.metadata.tmp").write_bytes(b"x" * 200)
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partition.metadata"]


# -- creation -------------------------------------------------------------------------------------


def test_create_lays_out_a_kafka_partition_directory(tmp_path: Path) -> None:
    directory = tmp_path / "data" / "orders-3"
    log = PartitionLog.create(directory, "orders", 3)
    names = sorted(p.name for p in directory.iterdir())
    assert names == sorted([LOG_FILE, *INDEX_FILES, LEADER_EPOCH_CHECKPOINT])
    assert (directory / LOG_FILE).read_bytes() == b""
    assert (directory / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"
    assert not (directory / PARTITION_METADATA).exists()
    assert (log.topic, log.partition, log.log_end_offset) == ("orders", 3, 0)
    assert log.records == []
    assert log.topic_id is None
    assert log.epochs.entries == []


def test_load_of_a_fresh_directory_is_empty(log: PartitionLog) -> None:
    loaded = _reload(log)
    assert loaded.records == []
    assert loaded.log_end_offset == 0
    assert loaded.epochs.entries == []
    assert loaded.topic_id is None


# -- appends --------------------------------------------------------------------------------------


def test_append_as_leader_assigns_offsets_and_the_epoch(log: PartitionLog) -> None:
    assert log.append([("k1", "a"), (None, "b")], leader_epoch=0) == 0
    assert log.append([("k2", "c")], leader_epoch=0) == 2
    assert log.append([("k3", "d"), ("k4", "e")], leader_epoch=4) == 3
    assert log.records == [
        Record(0, 0, "k1", "a"),
        Record(1, 0, None, "b"),
        Record(2, 0, "k2", "c"),
        Record(3, 4, "k3", "d"),
        Record(4, 4, "k4", "e"),
    ]
    assert log.log_end_offset == 5
    # A new epoch is recorded once, at the offset where it starts.
    assert log.epochs.entries == _entries((0, 0), (4, 3))
    assert _checkpoint_on_disk(log.dir) == _entries((0, 0), (4, 3))


def test_append_of_nothing_changes_nothing(log: PartitionLog) -> None:
    log.append([("k", "v")], leader_epoch=1)
    size = (log.dir / LOG_FILE).stat().st_size
    assert log.append([], leader_epoch=2) == 1
    assert log.log_end_offset == 1
    assert log.epochs.entries == _entries((1, 0))
    assert (log.dir / LOG_FILE).stat().st_size == size


def test_append_replicated_keeps_the_leaders_offsets_and_epochs(log: PartitionLog) -> None:
    fetched = [
        Record(0, 0, "a", "1"),
        Record(1, 0, None, "2"),
        Record(2, 2, "c", "3"),
        Record(3, 5, "d", "4"),
        Record(4, 5, "e", "5"),
    ]
    log.append_replicated(fetched[:2])
    log.append_replicated(fetched[2:])
    assert log.records == fetched
    assert log.epochs.entries == _entries((0, 0), (2, 2), (5, 3))
    reloaded = _reload(log)
    assert reloaded.records == fetched
    assert reloaded.epochs.entries == _entries((0, 0), (2, 2), (5, 3))


def test_append_replicated_refuses_records_that_do_not_follow_the_log_end(
    log: PartitionLog,
) -> None:
    log.append([("a", "1"), ("b", "2")], leader_epoch=1)
    before = (log.dir / LOG_FILE).read_bytes()
    with pytest.raises(ValueError, match="fetched offset 5 does not follow log end 2"):
        log.append_replicated([Record(5, 1, "x", "y")])
    with pytest.raises(ValueError, match="fetched offset 1"):
        log.append_replicated([Record(1, 1, "x", "y")])
    assert log.log_end_offset == 2
    assert log.epochs.entries == _entries((1, 0))
    assert (log.dir / LOG_FILE).read_bytes() == before


def test_append_replicated_with_a_gap_inside_the_batch_writes_nothing(log: PartitionLog) -> None:
    log.append([("a", "1")], leader_epoch=1)
    before = (log.dir / LOG_FILE).read_bytes()
    with pytest.raises(ValueError, match="fetched offset 3 does not follow offset 1"):
        log.append_replicated([Record(1, 1, "b", "2"), Record(3, 2, "c", "3")])
    assert log.records == [Record(0, 1, "a", "1")]
    assert log.epochs.entries == _entries((1, 0))
    assert _checkpoint_on_disk(log.dir) == _entries((1, 0))
    assert (log.dir / LOG_FILE).read_bytes() == before


# -- reads ----------------------------------------------------------------------------------------


def test_read_returns_at_most_max_records_from_the_offset(log: PartitionLog) -> None:
    log.append([(None, str(i)) for i in range(6)], leader_epoch=0)
    assert [r.offset for r in log.read(0, 2)] == [0, 1]
    assert [r.value for r in log.read(2, 3)] == ["2", "3", "4"]
    assert [r.offset for r in log.read(4, 100)] == [4, 5]
    assert log.read(6, 10) == []
    assert log.read(9, 10) == []


# -- truncation -----------------------------------------------------------------------------------


def test_truncate_to_drops_records_at_and_after_the_offset(log: PartitionLog) -> None:
    log.append([("a", "1"), ("b", "2")], leader_epoch=1)
    log.append([("c", "3"), ("d", "4")], leader_epoch=3)
    log.append([("e", "5")], leader_epoch=6)
    log.truncate_to(3)
    assert [r.offset for r in log.records] == [0, 1, 2]
    assert log.log_end_offset == 3
    # Epoch 6 started at 4, past the new end; epoch 3 still covers offset 2.
    assert log.epochs.entries == _entries((1, 0), (3, 2))
    assert _checkpoint_on_disk(log.dir) == _entries((1, 0), (3, 2))
    reloaded = _reload(log)
    assert reloaded.records == log.records
    assert reloaded.epochs.entries == _entries((1, 0), (3, 2))
    # The log grows again from the new end.
    assert log.append([("f", "6")], leader_epoch=7) == 3
    assert log.epochs.entries == _entries((1, 0), (3, 2), (7, 3))


def test_truncate_to_an_epoch_start_drops_that_epoch(log: PartitionLog) -> None:
    log.append([("a", "1"), ("b", "2")], leader_epoch=1)
    log.append([("c", "3")], leader_epoch=2)
    log.truncate_to(2)
    assert log.epochs.entries == _entries((1, 0))
    log.truncate_to(0)
    assert log.records == []
    assert log.epochs.entries == []
    assert (log.dir / LOG_FILE).read_bytes() == b""
    assert _checkpoint_on_disk(log.dir) == []


def test_truncate_to_at_or_past_the_end_is_a_no_op(log: PartitionLog) -> None:
    log.append([("a", "1"), ("b", "2")], leader_epoch=1)
    before = (log.dir / LOG_FILE).read_bytes()
    log.truncate_to(2)
    log.truncate_to(10)
    assert log.log_end_offset == 2
    assert log.epochs.entries == _entries((1, 0))
    assert (log.dir / LOG_FILE).read_bytes() == before
    assert not (log.dir / (LOG_FILE + ".tmp")).exists()


# -- reload ---------------------------------------------------------------------------------------


def test_reload_gives_the_same_records_epochs_and_topic_id(log: PartitionLog) -> None:
    log.append([("key", "välue ✓"), (None, "")], leader_epoch=2)
    log.append_replicated([Record(2, 5, "", "x"), Record(3, 5, None, "y")])
    log.assign_topic_id(TOPIC_ID)
    reloaded = _reload(log)
    assert reloaded.records == log.records
    assert reloaded.records[0] == Record(0, 2, "key", "välue ✓")
    assert reloaded.records[1] == Record(1, 2, None, "")
    assert reloaded.records[2] == Record(2, 5, "", "x")
    assert reloaded.epochs.entries == _entries((2, 0), (5, 2))
    assert reloaded.topic_id == TOPIC_ID
    assert reloaded.log_end_offset == 4


def test_load_recreates_a_missing_log_file(log: PartitionLog) -> None:
    (log.dir / LOG_FILE).unlink()
    reloaded = _reload(log)
    assert reloaded.records == []
    assert (log.dir / LOG_FILE).read_bytes() == b""


def test_load_refuses_a_malformed_partition_metadata(log: PartitionLog) -> None:
    (log.dir / PARTITION_METADATA).write_bytes(b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    with pytest.raises(FormatError) as caught:
        _reload(log)
    assert caught.value.source == str(log.dir / PARTITION_METADATA)
    assert caught.value.field == "version"


# -- torn and corrupt batches ---------------------------------------------------------------------


def _two_batch_log(log: PartitionLog) -> int:
    """Write two batches (epochs 1 and 2); return the byte size after the first."""
    log.append([("a", "1"), ("b", "2")], leader_epoch=1)
    first_size = (log.dir / LOG_FILE).stat().st_size
    log.append([("c", "3"), ("d", "4")], leader_epoch=2)
    return first_size


@pytest.mark.parametrize("cut", [1, 3, 9, 20])
def test_a_torn_last_batch_is_cut_off_on_load(log: PartitionLog, cut: int) -> None:
    first_size = _two_batch_log(log)
    path = log.dir / LOG_FILE
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    reloaded = _reload(log)
    assert [r.offset for r in reloaded.records] == [0, 1]
    assert reloaded.log_end_offset == 2
    assert path.stat().st_size == first_size
    assert path.read_bytes() == data[:first_size]
    # Epoch 2 started at offset 2, which is no longer in the log.
    assert reloaded.epochs.entries == _entries((1, 0))
    assert _checkpoint_on_disk(log.dir) == _entries((1, 0))


@pytest.mark.parametrize(
    "garbage",
    [b"\x00", b"\x00\x00\x00\x00\x00\x00\x00\x04\x00", b"\xff" * 40, b"not a batch at all" * 3],
)
def test_garbage_after_the_last_batch_is_cut_off_on_load(log: PartitionLog, garbage: bytes) -> None:
    _two_batch_log(log)
    path = log.dir / LOG_FILE
    intact = path.read_bytes()
    path.write_bytes(intact + garbage)
    reloaded = _reload(log)
    assert reloaded.records == log.records
    assert path.read_bytes() == intact
    assert reloaded.epochs.entries == _entries((1, 0), (2, 2))
    # The recovered log keeps working.
    assert reloaded.append([("e", "5")], leader_epoch=2) == 4
    assert [r.offset for r in _reload(reloaded).records] == [0, 1, 2, 3, 4]


def test_a_corrupt_batch_and_everything_after_it_are_dropped(log: PartitionLog) -> None:
    first_size = _two_batch_log(log)
    log.append([("e", "5")], leader_epoch=3)
    path = log.dir / LOG_FILE
    data = bytearray(path.read_bytes())
    data[first_size + 30] ^= 0xFF  # inside the second batch's records: the CRC no longer matches
    path.write_bytes(bytes(data))
    reloaded = _reload(log)
    assert [r.offset for r in reloaded.records] == [0, 1]
    assert path.stat().st_size == first_size
    assert reloaded.epochs.entries == _entries((1, 0))


# -- topic id -------------------------------------------------------------------------------------


def test_assign_topic_id_writes_kafkas_partition_metadata(log: PartitionLog) -> None:
    log.assign_topic_id(TOPIC_ID)
    path = log.dir / PARTITION_METADATA
    assert path.read_bytes() == f"version: 0\ntopic_id: {TOPIC_ID}".encode("ascii")
    assert path.read_bytes() == b"version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"
    assert log.topic_id == TOPIC_ID
    assert not (log.dir / (PARTITION_METADATA + ".tmp")).exists()
    assert _reload(log).topic_id == TOPIC_ID


def test_assign_topic_id_never_overwrites_an_existing_file(log: PartitionLog) -> None:
    log.assign_topic_id(TOPIC_ID)
    path = log.dir / PARTITION_METADATA
    before = path.read_bytes()
    log.assign_topic_id(OTHER_ID)
    assert path.read_bytes() == before
    assert _reload(log).topic_id == TOPIC_ID


def test_assign_topic_id_keeps_a_file_written_by_someone_else(log: PartitionLog) -> None:
    path = log.dir / PARTITION_METADATA
    foreign = f"version: 0\ntopic_id: {OTHER_ID}\n".encode("ascii")
    path.write_bytes(foreign)
    log.assign_topic_id(TOPIC_ID)
    assert path.read_bytes() == foreign
    assert _reload(log).topic_id == OTHER_ID


# -- LeaderEpochCache -----------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    return LeaderEpochCache.load(tmp_path)


def test_epoch_cache_checkpoint_is_rewritten_in_kafkas_format(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    assert not path.exists()
    cache.assign(0, 0)
    assert path.read_bytes() == b"0\n1\n0 0\n"
    cache.assign(3, 7)
    assert path.read_bytes() == b"0\n2\n0 0\n3 7\n"
    cache.assign(12, 1000)
    assert path.read_bytes() == b"0\n3\n0 0\n3 7\n12 1000\n"
    cache.truncate_from_end(7)
    assert path.read_bytes() == b"0\n1\n0 0\n"
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()
    assert LeaderEpochCache.load(tmp_path).entries == _entries((0, 0))


def test_epoch_cache_assign_of_the_latest_epoch_at_a_later_offset_changes_nothing(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    cache.assign(2, 0)
    cache.assign(5, 10)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.unlink()
    cache.assign(5, 12)  # the same epoch again, later: no update (Kafka's isUpdateNeeded)
    cache.assign(5, 10)
    assert cache.entries == _entries((2, 0), (5, 10))
    assert cache.latest_epoch == 5
    assert not path.exists()  # nothing changed, so nothing was written


def test_epoch_cache_assign_drops_the_entries_a_new_entry_contradicts(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    cache.assign(2, 0)
    cache.assign(5, 10)
    cache.assign(5, 3)  # the latest epoch starting earlier replaces it
    assert cache.entries == _entries((2, 0), (5, 3))
    cache.assign(4, 20)  # an older epoch at a later offset drops every entry not below it
    assert cache.entries == _entries((2, 0), (4, 20))
    assert LeaderEpochCache.load(tmp_path).entries == _entries((2, 0), (4, 20))


def test_epoch_cache_assign_drops_entries_a_new_epoch_starts_before(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    cache.assign(1, 0)
    cache.assign(2, 5)
    cache.assign(3, 10)
    cache.assign(4, 5)
    assert cache.entries == _entries((1, 0), (4, 5))
    assert LeaderEpochCache.load(tmp_path).entries == _entries((1, 0), (4, 5))


def test_epoch_cache_truncate_from_end(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.assign(1, 0)
    cache.assign(2, 5)
    cache.assign(3, 10)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.unlink()
    cache.truncate_from_end(11)  # every entry starts before 11: nothing to do
    assert cache.entries == _entries((1, 0), (2, 5), (3, 10))
    assert not path.exists()
    cache.truncate_from_end(10)
    assert cache.entries == _entries((1, 0), (2, 5))
    assert LeaderEpochCache.load(tmp_path).entries == _entries((1, 0), (2, 5))
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert cache.latest_epoch is None
    assert path.read_bytes() == b"0\n0\n"


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, (0, 0)),  # older than every entry: the first known start offset
        (1, (1, 0)),
        (2, (2, 10)),  # ends where epoch 4 starts
        (3, (2, 10)),  # never a leader epoch here: the largest one below it
        (4, (4, 15)),
        (6, (4, 15)),
        (7, (7, 20)),  # the latest epoch ends at the log end offset
        (9, (UNDEFINED_EPOCH, UNDEFINED_OFFSET)),  # newer than the latest: unknown
    ],
)
def test_epoch_cache_end_offset_for(
    cache: LeaderEpochCache, epoch: int, expected: tuple[int, int]
) -> None:
    cache.assign(2, 0)
    cache.assign(4, 10)
    cache.assign(7, 15)
    assert cache.end_offset_for(epoch, log_end_offset=20) == expected


def test_epoch_cache_end_offset_for_an_empty_cache_is_undefined(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(0, log_end_offset=0) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    assert cache.end_offset_for(5, log_end_offset=9) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_epoch_cache_load_reads_a_kafka_checkpoint(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n2\n0 0\n4 117\n")
    cache = LeaderEpochCache.load(tmp_path)
    assert cache.entries == _entries((0, 0), (4, 117))
    assert cache.end_offset_for(0, log_end_offset=200) == (0, 117)


# -- properties -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Append:
    epoch_step: int
    records: list[tuple[str | None, str]]


@dataclass(frozen=True)
class Truncate:
    offset: int


_record = st.tuples(st.none() | st.text(max_size=4), st.text(max_size=6))
_operation = st.one_of(
    st.builds(Append, st.integers(0, 2), st.lists(_record, min_size=1, max_size=4)),
    st.builds(Truncate, st.integers(0, 30)),
)


def _model_epochs(records: list[Record]) -> list[EpochEntry]:
    """With non-decreasing epochs, each epoch's entry starts at its first record."""
    entries: list[EpochEntry] = []
    for record in records:
        if not entries or entries[-1].epoch != record.leader_epoch:
            entries.append(EpochEntry(record.leader_epoch, record.offset))
    return entries


def _check_epoch_invariants(log: PartitionLog) -> None:
    entries = log.epochs.entries
    for earlier, later in itertools.pairwise(entries):
        assert earlier.epoch < later.epoch
        assert earlier.start_offset < later.start_offset
    for entry in entries:
        assert entry.start_offset < log.log_end_offset


@settings(max_examples=60, deadline=None)
@given(operations=st.lists(_operation, max_size=12))
def test_appends_and_truncations_survive_a_reload(operations: list[Append | Truncate]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.create(Path(tmp) / "t-0", "t", 0)
        model: list[Record] = []
        epoch = 0
        for operation in operations:
            if isinstance(operation, Append):
                epoch += operation.epoch_step
                base = log.append(operation.records, leader_epoch=epoch)
                assert base == len(model)
                model += [
                    Record(base + i, epoch, key, value)
                    for i, (key, value) in enumerate(operation.records)
                ]
            else:
                log.truncate_to(operation.offset)
                model = model[: operation.offset]
            assert log.records == model
            _check_epoch_invariants(log)
        reloaded = _reload(log)
        assert reloaded.records == model
        assert reloaded.log_end_offset == len(model)
        assert reloaded.epochs.entries == log.epochs.entries == _model_epochs(model)
        assert _checkpoint_on_disk(log.dir) == _model_epochs(model)
        _check_epoch_invariants(reloaded)
        assert not list(Path(log.dir).glob("*.tmp"))


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(_record, min_size=1, max_size=3), min_size=1, max_size=5),
    data=st.data(),
)
def test_a_log_cut_anywhere_recovers_to_the_last_whole_batch(
    batches: list[list[tuple[str | None, str]]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.create(Path(tmp) / "t-0", "t", 0)
        boundaries = [0]  # file size after each batch
        record_ends = [0]  # log end offset after each batch
        for epoch, batch in enumerate(batches):
            log.append(batch, leader_epoch=epoch)
            boundaries.append((log.dir / LOG_FILE).stat().st_size)
            record_ends.append(log.log_end_offset)
        path = log.dir / LOG_FILE
        full = path.read_bytes()
        cut = data.draw(st.integers(0, len(full)), label="cut")
        path.write_bytes(full[:cut])
        whole = max(i for i, size in enumerate(boundaries) if size <= cut)
        reloaded = _reload(log)
        assert reloaded.records == log.records[: record_ends[whole]]
        assert path.read_bytes() == full[: boundaries[whole]]
        assert reloaded.epochs.entries == log.epochs.entries[:whole]
        _check_epoch_invariants(reloaded)
