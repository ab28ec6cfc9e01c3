"""The brokers' disks, for the repairs that move replicas between log dirs: the free space of
each log dir (POSIX `df -Pk` over the broker's transport) and what Kafka itself says of its
log dirs, its replicas and its version (the KafkaAdmin port). Read-only."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence

from remediate.errors import RemediationError
from remediate.ports import CommandKind, KafkaAdmin, Transport
from remediate.state import BrokerDisks, MoveFacts, TopicPartition

# Filesystem, 1024-blocks, Used, Available, Capacity, Mounted on: anchored on the numbers, so
# a filesystem or mount point with spaces in its name still parses.
_DF_LINE = re.compile(r"^(?P<fs>.*?)\s+(\d+)\s+(\d+)\s+(?P<avail>\d+)\s+(\d+)%\s+(?P<mount>.*)$")


def free_space_command(log_dirs: Sequence[str]) -> str:
    return "df -Pk -- " + " ".join(shlex.quote(d) for d in log_dirs)


def parse_df(output: str, log_dirs: Sequence[str]) -> dict[str, int]:
    """Free bytes per log dir from `df -Pk` (one line per operand, in order, after a header);
    a line that does not parse leaves its dir out."""
    lines = [line for line in output.splitlines()[1:] if line.strip()]
    free: dict[str, int] = {}
    for log_dir, line in zip(log_dirs, lines, strict=False):
        match = _DF_LINE.match(line)
        if match is not None:
            free[log_dir] = int(match["avail"]) * 1024
    return free


def free_space(transport: Transport, log_dirs: Sequence[str]) -> dict[str, int]:
    result = transport.run(free_space_command(log_dirs), timeout=60, kind=CommandKind.FREE_SPACE)
    if not result.ok:
        return {}
    return parse_df(result.stdout, log_dirs)


def read_disks(
    admin: KafkaAdmin,
    transports: Mapping[int, Transport],
    brokers: Iterable[int],
    partitions: Iterable[TopicPartition],
) -> MoveFacts:
    """The facts a move needs of each broker: its Kafka version, its online and offline log
    dirs, where its replicas of `partitions` are and their size, the room in each dir."""
    wanted = sorted(set(brokers))
    try:
        described = admin.log_dirs(wanted, partitions)
        versions = {b: admin.kafka_version(b) for b in wanted}
    except RemediationError as exc:
        return MoveFacts(problem=f"Kafka's admin API did not answer: {exc}")
    found: dict[int, BrokerDisks] = {}
    for broker in wanted:
        dirs = described.get(broker)
        if dirs is None:
            continue
        transport = transports.get(broker)
        free = free_space(transport, dirs.online) if transport is not None and dirs.online else {}
        found[broker] = BrokerDisks(
            broker=broker,
            kafka_version=versions.get(broker),
            online_dirs=dirs.online,
            offline_dirs=dirs.offline,
            free_bytes=free,
            replicas=dict(dirs.replicas),
        )
    return MoveFacts(brokers=found)
