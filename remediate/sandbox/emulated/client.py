"""A producer and a consumer for the sandbox, so tests can prove no acknowledged record is lost.

Leaders and broker addresses come from ZooKeeper (the partition state znodes and
`/brokers/ids`), as old Kafka clients did. The producer uses acks=all by default and reports
every error per partition with Kafka's error names; the consumer reads every partition from
offset 0 up to the high watermark its leader reports, by topic id as consumers since
Kafka 3.1 and librdkafka 2 do (Fetch v13+).
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Sequence
from typing import TextIO

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from remediate.formats.znodes import (
    BROKER_IDS,
    broker_path,
    decode_broker,
    decode_partition_state,
    decode_topic,
    partition_state_path,
    topic_path,
)
from remediate.sandbox.emulated import wire
from remediate.sandbox.records import Acked, ConsumedRecord, ProduceReport, partition_for

NO_LEADER = "NO_LEADER"
CONNECTION_ERROR = "CONNECTION_ERROR"


class ClusterView:
    """Partition leaders and broker endpoints, read from ZooKeeper on demand."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self._connections: dict[tuple[str, int], wire.Connection] = {}

    def partitions(self, topic: str) -> list[int]:
        data, _ = self.zk.get(topic_path(topic))
        return sorted(decode_topic(data, source=topic_path(topic)).partitions)

    def topic_id(self, topic: str) -> str | None:
        """The topic's id as a client's metadata gives it (ZooKeeper's)."""
        data, _ = self.zk.get(topic_path(topic))
        topic_id = decode_topic(data, source=topic_path(topic)).topic_id
        return None if topic_id is None else str(topic_id)

    def leader(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        try:
            data, _ = self.zk.get(partition_state_path(topic, partition))
            state = decode_partition_state(data, source=partition_state_path(topic, partition))
            if state.leader < 0:
                return None
            data, _ = self.zk.get(broker_path(state.leader))
        except NoNodeError:
            return None
        endpoint = decode_broker(state.leader, data, source=broker_path(state.leader)).endpoint()
        return (state.leader, endpoint.host, endpoint.port) if endpoint else None

    def brokers(self) -> list[tuple[int, str, int]]:
        result = []
        for child in sorted(self.zk.get_children(BROKER_IDS)):
            try:
                data, _ = self.zk.get(f"{BROKER_IDS}/{child}")
            except NoNodeError:
                continue
            endpoint = decode_broker(int(child), data, source=f"{BROKER_IDS}/{child}").endpoint()
            if endpoint is not None:
                result.append((int(child), endpoint.host, endpoint.port))
        return result

    def connection(self, host: str, port: int) -> wire.Connection:
        key = (host, port)
        if key not in self._connections:
            self._connections[key] = wire.Connection(host, port, timeout=10.0)
        return self._connections[key]

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections = {}


class Producer:
    def __init__(self, zk: KazooClient, *, acks: int = -1, timeout_ms: int = 5000) -> None:
        self.view = ClusterView(zk)
        self.acks = acks
        self.timeout_ms = timeout_ms

    def send(
        self, topic: str, partition: int, records: Sequence[tuple[str, str]]
    ) -> tuple[int | None, str | None]:
        """Send one batch to the partition's leader: (base offset, None) or (None, error name)."""
        leader = self.view.leader(topic, partition)
        if leader is None:
            return None, NO_LEADER
        _, host, port = leader
        request = {
            "api": "Produce",
            "topic": topic,
            "partition": partition,
            "acks": self.acks,
            "timeout_ms": self.timeout_ms,
            "records": [[k, v] for k, v in records],
        }
        try:
            response = self.view.connection(host, port).call(
                request, timeout=self.timeout_ms / 1000 + 5
            )
        except wire.WireError:
            return None, CONNECTION_ERROR
        if response.get("error", wire.NONE) != wire.NONE:
            return None, wire.ERROR_NAMES.get(response["error"], str(response["error"]))
        return int(response["base_offset"]), None

    def close(self) -> None:
        self.view.close()


def produce(
    zk: KazooClient,
    topic: str,
    *,
    count: int,
    key_prefix: str = "k",
    acks: int = -1,
    partitions: Iterable[int] | None = None,
    retries: int = 0,
    timeout_ms: int = 5000,
    acked_log: TextIO | None = None,
) -> ProduceReport:
    """Produce `count` records, one per request, keys `<prefix>-<n>`, partitioned by key."""
    producer = Producer(zk, acks=acks, timeout_ms=timeout_ms)
    report = ProduceReport(topic)
    try:
        all_partitions = producer.view.partitions(topic)
        targets = list(partitions) if partitions is not None else all_partitions
        for number in range(count):
            key = f"{key_prefix}-{number}"
            partition = targets[partition_for(key, len(targets))]
            for attempt in range(retries + 1):
                offset, error = producer.send(topic, partition, [(key, f"value-{number}")])
                if error is None and offset is not None:
                    acked = Acked(partition, offset, key)
                    report.acked.append(acked)
                    if acked_log is not None:
                        acked_log.write(
                            json.dumps({"partition": partition, "offset": offset, "key": key})
                            + "\n"
                        )
                        acked_log.flush()
                    break
                report.add_error(partition, error or "UNKNOWN")
                if attempt < retries:
                    time.sleep(0.2)
    finally:
        producer.close()
    return report


def consume(
    zk: KazooClient, topic: str, *, timeout: float = 10.0, refused_by: Collection[str] = ()
) -> tuple[list[ConsumedRecord], dict[int, str]]:
    """Read every partition from offset 0 to its high watermark, all of them within one
    `timeout` as a consumer fetching them together would; errors per partition. A partition
    refused with an error of `refused_by` is not fetched again."""
    view = ClusterView(zk)
    records: list[ConsumedRecord] = []
    errors: dict[int, str] = {}
    try:
        # A modern consumer fetches by topic id (Fetch v13+), which a 3.x leader checks.
        topic_id = view.topic_id(topic)
        offsets = dict.fromkeys(view.partitions(topic), 0)
        deadline = time.monotonic() + timeout
        while offsets and time.monotonic() < deadline:
            failed = False
            for partition in list(offsets):
                error = _fetch_once(view, topic, topic_id, partition, offsets, records)
                if error is None:
                    errors.pop(partition, None)
                    continue
                errors[partition] = error
                if error in refused_by:
                    del offsets[partition]
                else:
                    failed = True
            if failed and offsets:
                time.sleep(0.2)
    finally:
        view.close()
    return records, errors


def _fetch_once(
    view: ClusterView,
    topic: str,
    topic_id: str | None,
    partition: int,
    offsets: dict[int, int],
    records: list[ConsumedRecord],
) -> str | None:
    """One fetch of `partition` from its leader at `offsets[partition]`; the partition leaves
    `offsets` once read to its high watermark. The error's name, or None."""
    leader = view.leader(topic, partition)
    if leader is None:
        return NO_LEADER
    request = {
        "api": "Fetch",
        "replica_id": -1,
        "max_wait_ms": 0,
        "max_records": 1000,
        "partitions": [
            {
                "topic": topic,
                "partition": partition,
                "offset": offsets[partition],
                "topic_id": topic_id,
            }
        ],
    }
    try:
        response = view.connection(leader[1], leader[2]).call(request)
    except wire.WireError:
        return CONNECTION_ERROR
    result = response["partitions"][0]
    if result["error"] != wire.NONE:
        return wire.ERROR_NAMES.get(result["error"], str(result["error"]))
    for record_offset, _epoch, key, value in result["records"]:
        records.append(ConsumedRecord(partition, record_offset, key, value))
        offsets[partition] = record_offset + 1
    if offsets[partition] >= result["high_watermark"]:
        del offsets[partition]
    return None
