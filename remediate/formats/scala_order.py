"""The order in which Kafka's Scala code writes the keys of its JSON maps.

Kafka builds its znode documents from Scala hash maps, and Jackson writes their keys in the
maps' iteration order: not sorted, and not the order they were added. Nothing reads that
order, but the emulator writes the bytes real Kafka writes (tests/formats/test_scala_order.py
pins both functions to znodes written by real Kafka 2.8.2 and Kafka 1.0.2's TopicCommand).
"""

from __future__ import annotations

from collections.abc import Iterable

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode, as an unsigned 32-bit value (UTF-16 code units)."""
    h = 0
    encoded = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(encoded), 2):
        h = (31 * h + int.from_bytes(encoded[i : i + 2], "big")) & _MASK
    return h


def _signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def mutable_hash_map_order(keys: Iterable[str], *, initial_table: int = 16) -> list[str]:
    """Iteration order of a Scala 2.13 `mutable.HashMap[String, _]` the keys were put into
    one by one: buckets in index order (`improveHash(h) & (length - 1)`, improveHash being
    `h ^ (h >>> 16)`), within a bucket by improved hash ascending (signed); the table starts
    at `initial_table` and doubles before a put that would reach 3/4 of it.

    Kafka 2.8.2 and 3.4.1 (Scala 2.13 builds) write topic znodes this way (ZkData's
    TopicZNode.encode): the partition maps from empty maps (16), the outer document from a
    four-entry `mutable.Map(...)` (8)."""
    unique = list(dict.fromkeys(keys))
    table = initial_table
    for size in range(len(unique)):
        if size + 1 >= int(table * 0.75):
            table *= 2

    def slot(key: str) -> tuple[int, int]:
        h = java_string_hash(key)
        improved = _signed((h ^ (h >> 16)) & _MASK)
        return improved & (table - 1), improved

    return sorted(unique, key=slot)


def _improve_2_12(h: int) -> int:
    """scala.collection.immutable.HashMap.improve (Scala 2.11 and 2.12)."""
    h = (h + ~(h << 9)) & _MASK
    h ^= h >> 14
    h = (h + (h << 4)) & _MASK
    return h ^ (h >> 10)


def legacy_partition_order(count: int) -> list[int]:
    """The order of the partition keys Kafka 1.0's AdminUtils writes for a topic of `count`
    partitions (`--create`, and `--alter` with the new total): a Scala 2.11/2.12 map, a
    mutable hash table up to four entries, an immutable hash trie beyond, which iterates by
    the improved hash's 5-bit groups, lowest first."""
    if count < 1:
        return []
    small = {1: [0], 2: [1, 0], 3: [2, 1, 0], 4: [2, 1, 3, 0]}
    if count in small:
        return small[count]
    return sorted(
        range(count),
        key=lambda p: [
            (_improve_2_12(java_string_hash(str(p))) >> shift) & 31 for shift in range(0, 35, 5)
        ],
    )
