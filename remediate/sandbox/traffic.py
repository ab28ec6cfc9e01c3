"""acks=all traffic on every partition of a topic while something is done to the cluster, one
thread per partition so that an unavailable partition holds back no other. Shared by the
acceptance tests, the harm bench and the compatibility lab (lab/compatibility.py).

- `RetryingProducer` is a producer with retries: a record not acknowledged is sent again (the
  same key) until it is; every acknowledged record and every error is kept with its time.
- `Prober` writes one new record per attempt and keeps whether each attempt was acknowledged:
  the unavailable seconds of each partition are read from it.
- `IsrSampler` reads every partition's ISR from ZooKeeper at the prober's pace: the smallest
  ISR each partition had within a window is read from it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from remediate.errors import FormatError
from remediate.formats.znodes import decode_partition_state, partition_state_path
from remediate.sandbox import clients, cluster
from remediate.sandbox.records import Acked


@dataclass
class RetryingProducer:
    """acks=all on every partition of `topic` at once. A record that is not acknowledged is
    sent again (the same key) until it is or the producer stops, as a producer with retries
    does; every acknowledged record and every error is remembered with its time."""

    state: cluster.SandboxState
    topic: str
    partitions: list[int]
    prefix: str = "repair"
    timeout_ms: int = 2000
    acked: list[Acked] = field(default_factory=list)
    errors: dict[int, list[tuple[float, str]]] = field(default_factory=dict)
    acked_at: dict[int, list[float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> RetryingProducer:
        self._zk = cluster.zk_client(self.state)
        for partition in self.partitions:
            thread = threading.Thread(target=self._run, args=(partition,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._zk.stop()
        self._zk.close()

    def _run(self, partition: int) -> None:
        producer = clients.for_sandbox(self.state, self._zk).producer(timeout_ms=self.timeout_ms)
        number = 0
        try:
            while not self._stop.is_set():
                key = f"{self.prefix}-{partition}-{number}"
                offset, error = producer.send(self.topic, partition, [(key, "value")])
                now = time.monotonic()
                with self._lock:
                    if error is None and offset is not None:
                        self.acked.append(Acked(partition, offset, key))
                        self.acked_at.setdefault(partition, []).append(now)
                        number += 1
                        continue
                    self.errors.setdefault(partition, []).append((now, error or "UNKNOWN"))
                self._stop.wait(0.1)  # the same record again, after a short backoff
        finally:
            producer.close()

    def error_summary(self) -> dict[int, dict[str, int]]:
        summary: dict[int, dict[str, int]] = {}
        for partition, errors in sorted(self.errors.items()):
            for _, error in errors:
                counts = summary.setdefault(partition, {})
                counts[error] = counts.get(error, 0) + 1
        return summary


@dataclass
class Prober:
    """acks=all writes to every partition of `topic`, one record per attempt (a 1 s delivery
    timeout, 50 ms between attempts). A partition counts as unavailable from the start of a
    failed attempt to the start of its next successful one."""

    state: cluster.SandboxState
    zk: Any
    topic: str
    partitions: Sequence[int]
    attempts: dict[int, list[tuple[float, bool]]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Prober:
        for partition in self.partitions:
            thread = threading.Thread(target=self._run, args=(partition,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, partition: int) -> None:
        producer = clients.for_sandbox(self.state, self.zk).producer(timeout_ms=1000)
        number = 0
        try:
            while not self._stop.is_set():
                started = time.time()
                offset, error = producer.send(self.topic, partition, [(f"probe-{number}", "x")])
                number += 1
                with self._lock:
                    self.attempts.setdefault(partition, []).append(
                        (started, error is None and offset is not None)
                    )
                self._stop.wait(0.05)
        finally:
            producer.close()

    def unavailable(self, start: float, end: float) -> dict[int, float]:
        """Per partition, its unavailable seconds within [start, end]."""
        with self._lock:
            attempts = {p: list(a) for p, a in self.attempts.items()}
        found = {}
        for partition, tries in attempts.items():
            total, down_since = 0.0, None
            for at, ok in [*tries, (end, True)]:
                if not ok and down_since is None:
                    down_since = at
                elif ok and down_since is not None:
                    total += max(0.0, min(at, end) - max(down_since, start))
                    down_since = None
            found[partition] = total
        return found

    def all_writable_since(self, moment: float) -> bool:
        with self._lock:
            return all(
                any(at >= moment and ok for at, ok in self.attempts.get(p, []))
                and self.attempts[p][-1][1]
                for p in self.partitions
            )

    def wait_all_writable(self, after: float, *, limit_s: float) -> float:
        """When every partition took a write after `after` (or `limit_s` from now)."""
        limit = time.time() + limit_s
        while time.time() < limit and not self.all_writable_since(after):
            time.sleep(0.1)
        return time.time()


@dataclass
class IsrSampler:
    """The ISR size of every partition of `topic`, read from ZooKeeper every 50 ms (the
    Prober's pace), all partitions in one pipelined round trip, each sample kept with the time
    it was asked at. A read that fails (a dropped connection, a state being rewritten) is
    counted in `failed_reads` and skipped: the next one is 50 ms away."""

    zk: KazooClient
    topic: str
    partitions: Sequence[int]
    interval_s: float = 0.05
    samples: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    failed_reads: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> IsrSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.time()
            try:
                sizes = self.isr_sizes()
            except (KazooException, KazooTimeoutError, FormatError):
                with self._lock:
                    self.failed_reads += 1
            else:
                with self._lock:
                    self.samples.append((started, sizes))
            self._stop.wait(self.interval_s)

    def isr_sizes(self) -> dict[int, int]:
        """Each partition's ISR size in ZooKeeper now."""
        paths = {p: partition_state_path(self.topic, p) for p in self.partitions}
        pending = {p: self.zk.get_async(path) for p, path in paths.items()}
        return {
            p: len(decode_partition_state(result.get(timeout=10)[0], source=paths[p]).isr)
            for p, result in pending.items()
        }

    def smallest_isr(self, start: float, end: float) -> dict[int, int]:
        """Per partition, the smallest ISR size sampled within [start, end] ({} when no
        sample falls in it)."""
        with self._lock:
            within = [sizes for at, sizes in self.samples if start <= at <= end]
        return {p: min(sizes[p] for sizes in within) for p in self.partitions if within}
