"""A real Kafka client for a sandbox of real brokers: confluent-kafka (librdkafka).

The producer is idempotent with acks=all by default, and a record counts as acknowledged
only when its delivery report comes back without an error; the consumer reads every
partition from its first offset to its end. Reports and records have the same shape as the
emulated client's (records.py), so the sandbox's commands and the tests read either.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TextIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from remediate.errors import SandboxError
from remediate.sandbox.records import Acked, ConsumedRecord, ProduceReport, partition_for

TIMED_OUT = "TIMED_OUT"
# librdkafka logs to stderr (request timeouts, refused connections while a broker restarts);
# the reports carry every error that matters, per partition, so only its critical lines show.
_QUIET = {"log_level": 2}


def _error_name(error: KafkaError) -> str:
    return str(error.name())


def producer_config(
    bootstrap: str, *, acks: int, timeout_ms: int, settings: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        **(settings or {}),
        "acks": "all" if acks == -1 else str(acks),
        # Idempotence needs acks=all; with it a retried batch is written once, in order.
        "enable.idempotence": acks == -1,
        "message.timeout.ms": timeout_ms,
        # The broker answers a produce request once every partition in it is done or this
        # passes: a stuck partition does not hold back the others' acknowledgements.
        "request.timeout.ms": max(500, timeout_ms // 2),
        "linger.ms": 0,
        **_QUIET,
    }


class RealProducer:
    """One producer; `send` blocks until the records' delivery reports are in."""

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int = -1,
        timeout_ms: int = 5000,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.config = producer_config(
            bootstrap, acks=acks, timeout_ms=timeout_ms, settings=settings
        )
        self.timeout_ms = timeout_ms
        self._producer = Producer(self.config)

    def send(
        self, topic: str, partition: int, records: Sequence[tuple[str | None, str]]
    ) -> tuple[int | None, str | None]:
        """Produce `records` to one partition: (offset of the first, None) once all are
        acknowledged, else (None, the first error's name)."""
        reports: list[tuple[KafkaError | None, Message]] = []
        for key, value in records:
            try:
                self._producer.produce(
                    topic,
                    value=value.encode("utf-8"),
                    key=None if key is None else key.encode("utf-8"),
                    partition=partition,
                    on_delivery=lambda err, msg: reports.append((err, msg)),
                )
            except KafkaException as exc:
                _refresh_metadata(self._producer, topic)
                return None, _error_name(exc.args[0])
        self._producer.flush(self.timeout_ms / 1000 + 5)
        if len(reports) < len(records):
            return None, TIMED_OUT
        for error, _ in reports:
            if error is not None:
                if error.fatal():
                    # An idempotent producer that lost its sequence cannot go on: a new one.
                    self._producer = Producer(self.config)
                return None, _error_name(error)
        offset = reports[0][1].offset()
        return (int(offset) if offset is not None else None), None

    def close(self) -> None:
        self._producer.flush(1)


def _refresh_metadata(producer: Producer, topic: str) -> None:
    """Ask a broker for the topic's metadata: librdkafka's cache takes the answer."""
    with contextlib.suppress(KafkaException):
        producer.list_topics(topic, timeout=5)


def create_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int,
    replication: int,
    timeout: float = 60.0,
    settings: Mapping[str, str] | None = None,
) -> None:
    """Create a topic through the brokers (CreateTopics), as Kafka's admin client does; asked
    again until `timeout` while the controller is not ready for it (a broker just started)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(settings or {}), **_QUIET})
    deadline = time.monotonic() + timeout
    while True:
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication)],
            operation_timeout=5,
            request_timeout=10,
        )
        try:
            futures[topic].result(timeout=15)
            return
        except KafkaException as error:
            if error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if time.monotonic() >= deadline:
                raise
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise SandboxError(f"{topic} was not created within {timeout:.0f}s") from None
        time.sleep(0.5)


def partitions_of(
    bootstrap: str,
    topic: str,
    *,
    timeout: float = 10.0,
    settings: Mapping[str, str] | None = None,
) -> list[int]:
    """The topic's partitions, as the brokers' metadata has them. A topic just created may be
    unknown to the broker asked for a moment (its metadata is on its way): asked again until
    `timeout`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "remediate-sandbox-metadata",
            **(settings or {}),
            **_QUIET,
        }
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            metadata = consumer.list_topics(topic, timeout=timeout)
            found = metadata.topics.get(topic)
            if found is not None and found.error is None and found.partitions:
                return sorted(found.partitions)
            if time.monotonic() >= deadline:
                error = found.error if found is not None else None
                raise KafkaException(error or KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            time.sleep(0.2)
    finally:
        consumer.close()


def partition_count(
    address: str, topic: str, *, timeout: float = 5.0, settings: Mapping[str, str] | None = None
) -> int | None:
    """How many partitions of `topic` the broker at `address` shows in its metadata; None if
    it does not answer within `timeout` or does not know the topic. A client that has only
    this broker's address asks it (librdkafka connects to another broker only on demand)."""
    try:
        return len(partitions_of(address, topic, timeout=timeout, settings=settings))
    except KafkaException:
        return None


def produce(
    bootstrap: str,
    topic: str,
    *,
    count: int,
    key_prefix: str = "k",
    acks: int = -1,
    partitions: Iterable[int] | None = None,
    retries: int = 0,
    timeout_ms: int = 5000,
    acked_log: TextIO | None = None,
    settings: Mapping[str, str] | None = None,
) -> ProduceReport:
    """Produce `count` records, keys `<prefix>-<n>`, each to the partition the emulated client
    picks for its key; a record not acknowledged is sent again up to `retries` times."""
    targets = (
        list(partitions)
        if partitions is not None
        else partitions_of(bootstrap, topic, settings=settings)
    )
    report = ProduceReport(topic)
    producer = Producer(
        producer_config(bootstrap, acks=acks, timeout_ms=timeout_ms, settings=settings)
    )
    pending = list(range(count))
    outcomes: dict[int, tuple[KafkaError | None, int, int | None]] = {}
    try:
        for _attempt in range(retries + 1):
            if not pending:
                break
            outcomes.clear()
            for number in pending:
                key = f"{key_prefix}-{number}"
                partition = targets[partition_for(key, len(targets))]

                def delivered(err: KafkaError | None, msg: Message, number: int = number) -> None:
                    outcomes[number] = (err, msg.partition() or 0, msg.offset())

                try:
                    producer.produce(
                        topic,
                        key=key.encode("utf-8"),
                        value=f"value-{number}".encode(),
                        partition=partition,
                        on_delivery=delivered,
                    )
                except KafkaException as exc:
                    # Refused before sending: a partition the producer's metadata does not
                    # know yet (just added), a full queue. Sent again in the next round.
                    outcomes[number] = (exc.args[0], partition, None)
            producer.flush(timeout_ms / 1000 + 5)
            failed = []
            for number in pending:
                key = f"{key_prefix}-{number}"
                err, partition, offset = outcomes.get(number, (None, -1, None))
                if number not in outcomes or err is not None:
                    failed.append(number)
                    target = targets[partition_for(key, len(targets))]
                    report.add_error(target, _error_name(err) if err else TIMED_OUT)
                    continue
                acked = Acked(partition, int(offset if offset is not None else -1), key)
                report.acked.append(acked)
                if acked_log is not None:
                    acked_log.write(
                        json.dumps({"partition": partition, "offset": acked.offset, "key": key})
                        + "\n"
                    )
                    acked_log.flush()
            pending = failed
            if pending:
                time.sleep(0.2)
                # A partition the producer did not know (just added) is learned by asking.
                _refresh_metadata(producer, topic)
    finally:
        producer.flush(1)
    return report


def consume(
    bootstrap: str,
    topic: str,
    *,
    timeout: float = 10.0,
    refused_by: Collection[str] = (),
    settings: Mapping[str, str] | None = None,
) -> tuple[list[ConsumedRecord], dict[int, str]]:
    """Read every partition from its first offset to its end (librdkafka's partition EOF);
    a partition that does not get there within `timeout` is an error, with the last error
    the client saw for it. A partition refused with an error of `refused_by` is waited for
    no longer (librdkafka would go on retrying it)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"remediate-sandbox-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            **(settings or {}),
            **_QUIET,
        }
    )
    records: list[ConsumedRecord] = []
    errors: dict[int, str] = {}
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return [], {-1: _error_name(found.error) if found and found.error else "UNKNOWN"}
        remaining = set(found.partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(remaining)])
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            partition = message.partition()
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and partition is not None:
                    remaining.discard(partition)
                    errors.pop(partition, None)
                elif partition is not None:
                    errors[partition] = _error_name(error)
                    if errors[partition] in refused_by:
                        remaining.discard(partition)
                continue
            if partition is None:
                continue
            key = message.key()
            value = message.value() or b""
            records.append(
                ConsumedRecord(
                    partition,
                    int(message.offset() or 0),
                    None if key is None else bytes(key).decode("utf-8", "replace"),
                    bytes(value).decode("utf-8", "replace"),
                )
            )
        for partition in remaining:
            errors.setdefault(partition, TIMED_OUT)
    finally:
        consumer.close()
    return records, errors
