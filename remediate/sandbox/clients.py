"""The sandbox's producer and consumer, whichever brokers it runs.

Emulated brokers speak the sandbox's own protocol (emulated/client.py); real ones are reached
with confluent-kafka (real/kafka_client.py). `for_sandbox` gives the one that fits, behind one
shape (records.py), so reproduce, the CLI and the tests never ask which.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol, TextIO

from kazoo.client import KazooClient

from remediate.sandbox.cluster import SandboxState
from remediate.sandbox.emulated import client
from remediate.sandbox.records import ConsumedRecord, ProduceReport


class RecordSender(Protocol):
    def send(
        self, topic: str, partition: int, records: Sequence[tuple[str, str]]
    ) -> tuple[int | None, str | None]:
        """(offset of the first record, None) once acknowledged, else (None, error name)."""

    def close(self) -> None: ...


class SandboxClient(Protocol):
    def produce(
        self,
        topic: str,
        *,
        count: int,
        key_prefix: str = "k",
        acks: int = -1,
        partitions: Iterable[int] | None = None,
        retries: int = 0,
        timeout_ms: int = 5000,
        acked_log: TextIO | None = None,
    ) -> ProduceReport: ...

    def consume(
        self, topic: str, *, timeout: float = 10.0, refused_by: Collection[str] = ()
    ) -> tuple[list[ConsumedRecord], dict[int, str]]:
        """Every partition read from its start to its end within `timeout`; the errors of
        those that were not, per partition. A partition that gets an error of `refused_by`
        is not asked again: the consumer was refused, and waiting would not change it."""

    def producer(self, *, acks: int = -1, timeout_ms: int = 5000) -> RecordSender: ...

    def serves_partitions(self, topic: str, count: int) -> bool:
        """Whether every broker's metadata shows `count` partitions of `topic` (the
        controller's UpdateMetadata reaches each broker in its own time; until it does, a
        client that asks that broker sees the partitions it had)."""


class EmulatedClient:
    """The sandbox protocol's client; leaders are looked up in ZooKeeper."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def produce(
        self,
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
        return client.produce(
            self.zk,
            topic,
            count=count,
            key_prefix=key_prefix,
            acks=acks,
            partitions=partitions,
            retries=retries,
            timeout_ms=timeout_ms,
            acked_log=acked_log,
        )

    def consume(
        self, topic: str, *, timeout: float = 10.0, refused_by: Collection[str] = ()
    ) -> tuple[list[ConsumedRecord], dict[int, str]]:
        return client.consume(self.zk, topic, timeout=timeout, refused_by=refused_by)

    def producer(self, *, acks: int = -1, timeout_ms: int = 5000) -> RecordSender:
        return client.Producer(self.zk, acks=acks, timeout_ms=timeout_ms)

    def serves_partitions(self, topic: str, count: int) -> bool:
        return True  # its clients read the partitions from ZooKeeper


class RealClient:
    """confluent-kafka against the sandbox's real brokers."""

    def __init__(self, bootstrap: str, settings: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        # librdkafka's settings for a secured listener (security protocol, TLS, SASL).
        self.settings = dict(settings or {})

    def produce(
        self,
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
        from remediate.sandbox.real import kafka_client  # noqa: PLC0415 (librdkafka only when used)

        return kafka_client.produce(
            self.bootstrap,
            topic,
            count=count,
            key_prefix=key_prefix,
            acks=acks,
            partitions=partitions,
            retries=retries,
            timeout_ms=timeout_ms,
            acked_log=acked_log,
            settings=self.settings,
        )

    def consume(
        self, topic: str, *, timeout: float = 10.0, refused_by: Collection[str] = ()
    ) -> tuple[list[ConsumedRecord], dict[int, str]]:
        from remediate.sandbox.real import kafka_client  # noqa: PLC0415

        return kafka_client.consume(
            self.bootstrap, topic, timeout=timeout, refused_by=refused_by, settings=self.settings
        )

    def producer(self, *, acks: int = -1, timeout_ms: int = 5000) -> RecordSender:
        from remediate.sandbox.real import kafka_client  # noqa: PLC0415

        return kafka_client.RealProducer(
            self.bootstrap, acks=acks, timeout_ms=timeout_ms, settings=self.settings
        )

    def serves_partitions(self, topic: str, count: int) -> bool:
        from remediate.sandbox.real import kafka_client  # noqa: PLC0415

        return all(
            kafka_client.partition_count(address, topic, settings=self.settings) == count
            for address in self.bootstrap.split(",")
        )


def for_sandbox(state: SandboxState, zk: KazooClient) -> SandboxClient:
    """The client that speaks to the sandbox's brokers (`zk` is its ZooKeeper)."""
    if state.real_kafka is None:
        return EmulatedClient(zk)
    return RealClient(
        ",".join(f"{b.host}:{b.port}" for b in state.brokers), state.client_settings()
    )
