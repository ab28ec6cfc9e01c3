"""Ports: the interfaces through which the tool touches the outside world.

Only the wiring builds real clients (kazoo, fabric, invoke): the collectors' entry points and
execute/locked.py; everything else takes these protocols, so decisions can be tested on plain
data, the executor on an in-memory cluster, and integration tests on the real services.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol

from remediate.state import ReplicaRef, TopicPartition


@dataclass(frozen=True)
class CommandResult:
    """What one command on a broker host returned."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class CommandKind(StrEnum):
    """What a command run on a broker host is for: messages name it (a timeout, a refusal)."""

    INVENTORY = "inventory"
    SERVER_PROPERTIES = "read of server.properties"
    SERVER_LOG = "read of server.log"
    FREE_SPACE = "free-space check"
    STOP = "stop command"
    START = "start command"
    STATUS = "status command"
    BACKUP = "backup"
    BACKUP_READ_BACK = "backup read-back"
    DELETE = "deletion"
    RESTORE = "restore"
    PROBE = "read-only check"


# cluster.yaml's service commands (config.ServiceKind) as commands on a broker.
SERVICE_COMMANDS: Final = {
    "stop": CommandKind.STOP,
    "start": CommandKind.START,
    "status": CommandKind.STATUS,
}


class Transport(Protocol):
    """Runs shell commands on one broker's host (ssh or local)."""

    @property
    def description(self) -> str:
        """Where commands run, for messages (never contains secrets)."""
        ...

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        """Run `command` (a `kind` of command) through the host's shell; raise TransportError
        if it could not run."""
        ...

    def close(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SessionState:
    """What a ZooKeeper client's connection listeners are told (the strings kazoo uses)."""

    CONNECTED: Final = "CONNECTED"
    SUSPENDED: Final = "SUSPENDED"  # connection dropped; the session may still be alive
    LOST: Final = "LOST"  # the session expired: its ephemeral znodes are gone


@dataclass(frozen=True)
class ZnodeStat:
    """The parts of a znode's stat the tool reads."""

    version: int
    czxid: int  # the transaction that created it (a broker registration's epoch)
    ephemeral_owner: int  # the session owning an ephemeral znode, 0 for a persistent one
    mzxid: int = 0  # the transaction that last wrote its data (0: not known)


@dataclass(frozen=True)
class ZnodeAcl:
    """One entry of a znode's ACL: ZooKeeper's permission bits (READ 1, WRITE 2, CREATE 4,
    DELETE 8, ADMIN 16) for one identity (`scheme`:`id`, e.g. world:anyone, sasl:kafka)."""

    perms: int
    scheme: str
    id: str


@dataclass(frozen=True)
class CheckVersion:
    """A transaction's condition: `path` is still at `version` (nothing written)."""

    path: str
    version: int


@dataclass(frozen=True)
class SetData:
    """A transaction's write of `data` into `path`, if it is still at `version`."""

    path: str
    data: bytes
    version: int


@dataclass(frozen=True)
class DeleteNode:
    """A transaction's delete of `path`, if it is still at `version`."""

    path: str
    version: int


ZkOp = CheckVersion | SetData | DeleteNode


# Told of each retry of a ZooKeeper request: the attempt that failed and its error.
OnRetry = Callable[[int, BaseException], None]
Listener = Callable[[str], None]


class ZooKeeperLock(Protocol):
    """A lock recipe (kazoo's Lock): sequential ephemeral contender nodes under one path."""

    @property
    def node(self) -> str | None:
        """Our contender node's name (not its path) once created."""
        ...

    def acquire(self, *, timeout: float) -> bool:
        """Take the lock, waiting at most `timeout` seconds (0: do not wait); False if it
        stayed held. ZooKeeperError if ZooKeeper failed."""
        ...

    def contenders(self) -> list[str]:
        """The identifiers of the holder and the waiting contenders, holder first."""
        ...


class ZooKeeper(Protocol):
    """A ZooKeeper session. Every error is a ZooKeeperError; requests that only read are
    retried on a dropped connection (bounded), each retry told to `on_retry`; writes never
    are (their caller reads again)."""

    @property
    def connected(self) -> bool: ...

    @property
    def session_id(self) -> int | None:
        """The current session's id (None when there is none)."""
        ...

    def get(self, path: str, *, on_retry: OnRetry | None = None) -> tuple[bytes, ZnodeStat]:
        """The znode's data and stat; ZnodeMissingError if it does not exist."""
        ...

    def get_many(
        self, paths: Collection[str], *, on_retry: OnRetry | None = None
    ) -> dict[str, tuple[bytes, ZnodeStat] | None]:
        """Every znode of `paths` in one pipelined round trip; None for a missing one."""
        ...

    def children(self, path: str, *, on_retry: OnRetry | None = None) -> list[str]:
        """The children's names, sorted; none for a missing znode."""
        ...

    def exists(self, path: str) -> ZnodeStat | None:
        """One request, never retried: its caller treats any doubt as an answer."""
        ...

    def set(self, path: str, data: bytes, *, version: int) -> ZnodeStat:
        """Write `data` if the znode is still at `version`; VersionConflictError if not.
        Never retried: a conditional write whose answer was lost could conflict with itself."""
        ...

    def delete(self, path: str, *, timeout: float | None = None) -> None:
        """Delete `path`, whatever its version; ZnodeMissingError if it is not there. One
        attempt, never retried (a delete whose answer was lost, sent again, could delete a
        znode created since): OutcomeUnknownError without an answer (within `timeout`)."""
        ...

    def commit(self, ops: Sequence[ZkOp]) -> None:
        """`ops` as one ZooKeeper transaction (multi): every one of them or none. Never
        retried: VersionConflictError or ZnodeMissingError, naming the first op whose
        condition failed; OutcomeUnknownError when the answer was lost (read again)."""
        ...

    def add_listener(self, listener: Listener) -> None:
        """Call `listener` with each SessionState change, from the client's own thread."""
        ...

    def remove_listener(self, listener: Listener) -> None: ...

    def lock(self, path: str, identifier: str = "") -> ZooKeeperLock: ...


class ZooKeeperStore(ZooKeeper, Protocol):
    """A session that also creates znodes and deletes subtrees: what keeps the journal's copy
    in ZooKeeper (remediate/execute/journal_mirror.py)."""

    def create(self, path: str, data: bytes, *, makepath: bool = False) -> None:
        """Create `path` holding `data` (its parents too with `makepath`); ZnodeExistsError
        if it exists. Retried on a dropped connection: a create that took effect before the
        answer was lost shows as ZnodeExistsError, which its caller checks."""
        ...

    def delete_tree(self, path: str) -> None:
        """Delete `path` and everything under it; nothing if it is not there."""
        ...


# -- Kafka's admin requests ---------------------------------------------------------------------

# What an adapter says of a replica or a partition that Kafka's answer left out.
NO_ANSWER: Final = "NO_ANSWER"
# Kafka's dynamic broker setting that limits how fast a replica is copied between log dirs.
MOVE_THROTTLE: Final = "replica.alter.log.dirs.io.max.bytes.per.second"


@dataclass(frozen=True)
class DescribedSetting:
    """One broker setting as DescribeConfigs gives it: its value and Kafka's source name
    (STATIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG...), or the error."""

    value: str | None
    source: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ReplicaPlace:
    """Where a replica's log is on its broker, and the move under way, if any."""

    log_dir: str | None
    future_dir: str | None
    size: int


@dataclass(frozen=True)
class BrokerLogDirs:
    """One broker's log dirs as DescribeLogDirs gives them: the online ones, those that
    answered with an error (offline), and each replica asked about: its dir and size, and the
    dir of a copy under way (its future log)."""

    online: tuple[str, ...]
    offline: tuple[str, ...]
    replicas: Mapping[TopicPartition, tuple[str, int]]
    futures: Mapping[TopicPartition, str]


def places(described: Mapping[int, BrokerLogDirs]) -> dict[ReplicaRef, ReplicaPlace]:
    """Where each replica is, from DescribeLogDirs' answers."""
    found: dict[ReplicaRef, ReplicaPlace] = {}
    for broker, dirs in described.items():
        for tp in set(dirs.replicas) | set(dirs.futures):
            current = dirs.replicas.get(tp)
            found[ReplicaRef(broker, tp)] = ReplicaPlace(
                log_dir=current[0] if current else None,
                future_dir=dirs.futures.get(tp),
                size=current[1] if current else 0,
            )
    return found


class KafkaAdmin(Protocol):
    """Kafka's admin requests (remediate/kafka_admin.py over Kafka's protocol; the sandbox's
    emulated brokers have their own). A partition's or a replica's error comes back as
    Kafka's error name, or None; a request that fails as a whole (no broker answers, a
    timeout, credentials refused) raises KafkaAdminError naming the request and the broker."""

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaRef, str]
    ) -> dict[ReplicaRef, str | None]:
        """Ask each broker to move its replicas to the given log dirs; the error per replica."""
        ...

    def log_dirs(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> dict[int, BrokerLogDirs]:
        """Each broker's log dirs, and where it keeps its replica of each partition."""
        ...

    def reassign(
        self, reassignments: Mapping[TopicPartition, Sequence[int]]
    ) -> dict[TopicPartition, str | None]:
        """Reassign partitions to the replica lists given; the error per partition."""
        ...

    def ongoing_reassignments(self) -> set[TopicPartition]: ...

    def kafka_version(self, broker: int) -> tuple[int, int] | None:
        """The broker's Kafka release (major, minor), as its own ApiVersions tell it."""
        ...

    def broker_setting(self, broker: int, name: str) -> str | None:
        """The dynamic setting `name` set for `broker` alone (DescribeConfigs), or None."""
        ...

    def effective_setting(self, broker: int, name: str) -> DescribedSetting:
        """The value `broker` runs with for its setting `name`, whatever set it
        (DescribeConfigs), with Kafka's name for where it came from; or why it is not known."""
        ...

    def set_broker_setting(self, broker: int, name: str, value: str | None) -> str | None:
        """Set `broker`'s own dynamic setting `name`, or with None remove it
        (IncrementalAlterConfigs); the error, or None."""
        ...

    def cluster_operations(self) -> frozenset[str] | None:
        """The operations on the Cluster resource Kafka authorizes this client for (its names:
        DESCRIBE, ALTER, DESCRIBE_CONFIGS...), read without changing anything; None where the
        broker does not tell."""
        ...

    def close(self) -> None: ...
