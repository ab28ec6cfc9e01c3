"""An in-memory cluster for the executor's fast tests: a fake ZooKeeper (versioned znodes,
ephemeral nodes, a lock recipe, session listeners, injected connection and session loss), a
Kafka side that registers, drops out of and rejoins the ISR as its brokers stop and start, a
clock that only moves when slept on, and broker hosts whose service commands drive it.

The broker hosts run every other command (backup, verify, delete, restore, inventory) for
real through /bin/sh on log dirs under a temporary directory: those scripts are the code that
touches a broker's files, so they are exercised rather than imitated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from remediate.config import ClusterConfig, parse_cluster_config
from remediate.errors import (
    OutcomeUnknownError,
    SudoError,
    VersionConflictError,
    ZnodeMissingError,
    ZooKeeperError,
)
from remediate.formats.logdir import CLEAN_SHUTDOWN, PARTITION_METADATA, encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    BROKER_IDS,
    CLUSTER_ID,
    CONTROLLER,
    CONTROLLER_EPOCH,
    BrokerRegistration,
    ControllerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
    encode_broker,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
    encode_topic_config,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from remediate.ports import (
    SERVICE_COMMANDS,
    CommandKind,
    CommandResult,
    DeleteNode,
    Listener,
    OnRetry,
    SessionState,
    SetData,
    ZkOp,
    ZnodeStat,
)
from remediate.transport import LocalTransport, sudo_refused, timed_out

ZK_ID = TopicId(bytes(15) + b"\x02")
OLD_ID = TopicId(bytes(15) + b"\x01")
SESSION = 0x5E55
SERVICE = {"stop": "svc stop {broker_id}", "start": "svc start {broker_id}"}
SERVICE_STATUS = "svc status {broker_id}"


class FakeClock:
    """Monotonic time advances only on sleep; nothing really sleeps."""

    def __init__(self) -> None:
        self.elapsed = 0.0
        self.alarms: list[tuple[float, Callable[[], None]]] = []

    def at(self, delay: float, action: Callable[[], None]) -> None:
        """Have `action` happen once `delay` seconds of this clock have passed (what the
        cluster does while the executor waits)."""
        self.alarms.append((self.elapsed + delay, action))

    def now(self) -> float:
        return 1_795_343_640.0 + self.elapsed

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.elapsed += seconds
        due = [a for a in self.alarms if a[0] <= self.elapsed]
        self.alarms = [a for a in self.alarms if a[0] > self.elapsed]
        for _when, action in due:
            action()


@dataclass
class Znode:
    data: bytes
    version: int
    czxid: int
    owner: int  # ephemeral owner's session, 0 for persistent
    mzxid: int = 0  # the transaction that last wrote its data


class FakeZooKeeper:
    """The `ZooKeeper` port over a dict of znodes."""

    def __init__(self) -> None:
        self.nodes: dict[str, Znode] = {}
        self.session_id: int | None = SESSION
        self.connected = True
        self.listeners: list[Listener] = []
        self.zxid = 0
        self.on_delete: dict[str, Callable[[], None]] = {}
        self.writes: list[tuple[str, str]] = []  # ("set" | "delete", path) by the executor
        self.drops = 0  # connection drops to inject: each retried request costs one
        self.answers_lost = 0  # transactions to take effect with their answer lost
        # What happens just before a transaction of the executor's (a race), given its ops.
        self.before_commit: Callable[[Sequence[ZkOp]], None] | None = None

    # -- used by the fake cluster itself ------------------------------------------------------

    def put(self, path: str, data: bytes, *, owner: int = 0) -> None:
        """Create or overwrite, unconditionally (Kafka's own writes)."""
        self.zxid += 1
        node = self.nodes.get(path)
        if node is None:
            self.nodes[path] = Znode(data, 0, self.zxid, owner, self.zxid)
        else:
            node.data, node.version, node.mzxid = data, node.version + 1, self.zxid

    def remove(self, path: str) -> None:
        self.nodes.pop(path, None)

    def emit(self, state: str) -> None:
        for listener in list(self.listeners):
            listener(state)

    def lose_session(self) -> None:
        """The session expires: its ephemeral znodes go, listeners hear LOST, a new session
        connects."""
        self.emit(SessionState.SUSPENDED)
        for path in [p for p, n in self.nodes.items() if n.owner == self.session_id]:
            del self.nodes[path]
        self.emit(SessionState.LOST)
        self.session_id = (self.session_id or 0) + 1
        self.emit(SessionState.CONNECTED)

    def _transient(self, on_retry: OnRetry | None) -> None:
        attempt = 0
        while self.drops:
            self.drops -= 1
            attempt += 1
            if on_retry is not None:
                on_retry(attempt, ConnectionError("connection dropped"))

    # -- the port -----------------------------------------------------------------------------

    def _stat(self, node: Znode) -> ZnodeStat:
        return ZnodeStat(node.version, node.czxid, node.owner, node.mzxid)

    def get(self, path: str, *, on_retry: OnRetry | None = None) -> tuple[bytes, ZnodeStat]:
        self._transient(on_retry)
        node = self.nodes.get(path)
        if node is None:
            raise ZnodeMissingError(f"read of {path}: no such znode")
        return node.data, self._stat(node)

    def get_many(
        self, paths: Collection[str], *, on_retry: OnRetry | None = None
    ) -> dict[str, tuple[bytes, ZnodeStat] | None]:
        self._transient(on_retry)
        found: dict[str, tuple[bytes, ZnodeStat] | None] = {}
        for path in paths:
            node = self.nodes.get(path)
            found[path] = None if node is None else (node.data, self._stat(node))
        return found

    def children(self, path: str, *, on_retry: OnRetry | None = None) -> list[str]:
        self._transient(on_retry)
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def exists(self, path: str) -> ZnodeStat | None:
        if not self.connected:
            raise ZooKeeperError("ConnectionLoss")
        node = self.nodes.get(path)
        return None if node is None else self._stat(node)

    def set(self, path: str, data: bytes, *, version: int) -> ZnodeStat:
        node = self.nodes.get(path)
        if node is None:
            raise ZnodeMissingError(f"{path}: no such znode")
        if node.version != version:
            raise VersionConflictError(f"{path} is no longer at version {version}")
        self.writes.append(("set", path))
        self.zxid += 1
        node.data, node.version, node.mzxid = data, node.version + 1, self.zxid
        return self._stat(node)

    def delete(self, path: str, *, timeout: float | None = None) -> None:
        if path not in self.nodes:
            raise ZnodeMissingError(f"{path}: no such znode")
        self._delete(path)

    def _delete(self, path: str) -> None:
        self.writes.append(("delete", path))
        del self.nodes[path]
        hook = self.on_delete.get(path)
        if hook is not None:
            hook()

    def commit(self, ops: Sequence[ZkOp]) -> None:
        if self.before_commit is not None:
            self.before_commit(ops)
        for op in ops:
            node = self.nodes.get(op.path)
            if node is None:
                raise ZnodeMissingError(f"{op.path}: no such znode: nothing written")
            if node.version != op.version:
                raise VersionConflictError(f"{op.path} is no longer at version {op.version}")
        for op in ops:
            if isinstance(op, SetData):
                self.set(op.path, op.data, version=op.version)
            elif isinstance(op, DeleteNode):
                self._delete(op.path)
        if self.answers_lost:
            self.answers_lost -= 1
            raise OutcomeUnknownError("a transaction: no answer (ConnectionLoss)")

    def add_listener(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    def lock(self, path: str, identifier: str = "") -> FakeLock:
        return FakeLock(self, path, identifier)


class FakeLock:
    """kazoo's recipe in miniature: sequential ephemeral contenders, lowest holds."""

    def __init__(self, zk: FakeZooKeeper, path: str, identifier: str) -> None:
        self.zk = zk
        self.path = path
        self.identifier = identifier
        self.node: str | None = None

    def acquire(self, *, timeout: float) -> bool:
        self.zk.zxid += 1
        self.node = f"__lock__{self.zk.zxid:010d}"
        self.zk.put(
            f"{self.path}/{self.node}", self.identifier.encode(), owner=self.zk.session_id or 0
        )
        if self.zk.children(self.path)[0] != self.node:
            self.zk.remove(f"{self.path}/{self.node}")
            self.node = None
            return False
        return True

    def contenders(self) -> list[str]:
        return [
            self.zk.nodes[f"{self.path}/{c}"].data.decode() for c in self.zk.children(self.path)
        ]


@dataclass
class Topic:
    name: str
    assignment: dict[int, tuple[int, ...]]
    topic_id: TopicId | None = ZK_ID


@dataclass
class FakeKafka:
    """Brokers that register, leave and rejoin the ISR as their service is stopped and
    started, and a controller elected when its znode goes."""

    zk: FakeZooKeeper
    root: Path
    brokers: tuple[int, ...]
    topics: dict[str, Topic]
    controller: int | None = None
    running: set[int] = field(default_factory=set)
    isr: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    epoch: int = 10
    commands: list[str] = field(default_factory=list)  # service commands, in order
    start_silently_fails: set[int] = field(default_factory=set)  # started, never registers
    # A stop command that returns while the broker goes on running (a controlled shutdown
    # that retries); the test stops it later.
    stop_lingers: set[int] = field(default_factory=set)
    # Replicas that do not rejoin the ISR on start (their leader refuses them).
    stays_out: set[tuple[int, str, int]] = field(default_factory=set)
    # Partitions whose leader is gone (a fault injected by a test).
    leaderless: set[tuple[str, int]] = field(default_factory=set)
    # Service commands (stop, start, status) sudo will not run: the host lacks the rule.
    refused_by_sudo: set[str] = field(default_factory=set)
    # Called when a broker's start command runs (what a test has the broker do while it
    # starts: log, register later).
    on_start: dict[int, Callable[[], None]] = field(default_factory=dict)
    # Service commands that run out of time (the transport's timeout), and the timeout each
    # service command was given.
    hangs: set[str] = field(default_factory=set)
    timeouts: list[tuple[str, float]] = field(default_factory=list)

    def log_dir(self, broker: int) -> Path:
        return self.root / f"data-{broker}"

    def metadata(self, broker: int, topic: str, partition: int) -> Path:
        return self.log_dir(broker) / f"{topic}-{partition}" / PARTITION_METADATA

    def boot(self, *, out_of_isr: Collection[tuple[int, str, int]] = ()) -> None:
        self.zk.put(CLUSTER_ID, encode_cluster_id("Cl-us_ter-id-abcdefghij"))
        self.zk.put(CONTROLLER_EPOCH, encode_controller_epoch(self.epoch))
        for topic in self.topics.values():
            self.write_topic(topic)
            self.zk.put(topic_config_path(topic.name), encode_topic_config({}))
            for number, replicas in topic.assignment.items():
                self.isr[(topic.name, number)] = [
                    b for b in replicas if (b, topic.name, number) not in out_of_isr
                ]
                for broker in replicas:
                    path = self.metadata(broker, topic.name, number)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if topic.topic_id is not None:
                        path.write_bytes(encode_partition_metadata(topic.topic_id))
        for broker in self.brokers:
            self.log_dir(broker).mkdir(parents=True, exist_ok=True)
            self.running.add(broker)
            self.register(broker)
        self.elect(self.controller or min(self.brokers))
        self.write_states()
        self.zk.on_delete[CONTROLLER] = lambda: self.elect(None)

    def write_topic(self, topic: Topic) -> None:
        self.zk.put(
            topic_path(topic.name), encode_topic(TopicAssignment(topic.assignment, topic.topic_id))
        )

    def register(self, broker: int) -> None:
        registration = BrokerRegistration(
            broker_id=broker,
            endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker),),
            host="127.0.0.1",
            port=9090 + broker,
            timestamp_ms=1,
        )
        self.zk.put(f"{BROKER_IDS}/{broker}", encode_broker(registration), owner=0xB000 + broker)

    def elect(self, broker: int | None) -> None:
        candidates = sorted(self.running)
        chosen = broker if broker is not None else (candidates[0] if candidates else None)
        self.controller = chosen
        if chosen is None:
            self.zk.remove(CONTROLLER)
            return
        self.epoch += 1
        self.zk.put(CONTROLLER_EPOCH, encode_controller_epoch(self.epoch))
        self.zk.remove(CONTROLLER)
        self.zk.put(CONTROLLER, encode_controller(ControllerRegistration(chosen, 1)), owner=0xC0)

    def write_states(self) -> None:
        for (name, number), isr in self.isr.items():
            leader = next((b for b in isr if b in self.running), -1)
            if (name, number) in self.leaderless:
                leader = -1
            state = PartitionState(leader, 1, tuple(isr), self.epoch)
            self.zk.put(partition_state_path(name, number), encode_partition_state(state))

    def stop(self, broker: int) -> None:
        if broker in self.stop_lingers:
            self.stop_lingers.discard(broker)
            return
        self.running.discard(broker)
        self.zk.remove(f"{BROKER_IDS}/{broker}")
        # A clean stop, as Kafka's LogManager.shutdown: the marker in each log dir.
        if self.log_dir(broker).is_dir():
            (self.log_dir(broker) / CLEAN_SHUTDOWN).touch()
        for isr in self.isr.values():
            if broker in isr and len(isr) > 1:
                isr.remove(broker)
        if self.controller == broker:
            self.elect(None)
        self.write_states()

    def start(self, broker: int) -> None:
        self.running.add(broker)
        (self.log_dir(broker) / CLEAN_SHUTDOWN).unlink(missing_ok=True)
        hook = self.on_start.get(broker)
        if hook is not None:
            hook()
        if broker in self.start_silently_fails:
            return
        self.register(broker)
        # Kafka writes the file ZooKeeper's id in when the replica has none, and catches up.
        for (name, number), isr in self.isr.items():
            topic = self.topics[name]
            if broker not in topic.assignment[number]:
                continue
            path = self.metadata(broker, name, number)
            if not path.exists() and topic.topic_id is not None:
                path.write_bytes(encode_partition_metadata(topic.topic_id))
            if broker not in isr and (broker, name, number) not in self.stays_out:
                isr.append(broker)
        if self.controller is None:
            self.elect(None)
        self.write_states()


class FakeHost:
    """A broker's host: its service commands act on the fake Kafka, everything else runs
    through /bin/sh."""

    def __init__(self, kafka: FakeKafka, broker: int) -> None:
        self.kafka = kafka
        self.broker = broker
        self.shell = LocalTransport(f"broker {broker} (fake)", cwd=kafka.root)

    @property
    def description(self) -> str:
        return self.shell.description

    def run(self, command: str, *, timeout: float, kind: CommandKind) -> CommandResult:
        match = re.fullmatch(r"svc (stop|start|status) (\d+)", command)
        if match is None:
            return self.shell.run(command, timeout=timeout, kind=kind)
        verb, broker = match[1], int(match[2])
        if verb in self.kafka.refused_by_sudo:
            raise SudoError(
                sudo_refused(
                    broker=broker,
                    where=self.description,
                    kind=SERVICE_COMMANDS[verb],
                    user="remediate",
                    refusal="sudo: a password is required",
                    exit_code=1,
                )
            )
        self.kafka.timeouts.append((command, timeout))
        if command in self.kafka.hangs:
            raise timed_out(self.description, kind, timeout)
        if verb == "status":
            return CommandResult(0 if broker in self.kafka.running else 3, "", "")
        self.kafka.commands.append(command)
        if verb == "stop":
            self.kafka.stop(broker)
        else:
            self.kafka.start(broker)
        return CommandResult(0, "", "")

    def close(self) -> None:
        self.shell.close()


def server_properties(root: Path, broker: int) -> Path:
    """Where a broker's server.properties is, for a broker configured through it."""
    return root / f"server-{broker}.properties"


def server_log(root: Path, broker: int) -> Path:
    """Where a broker's server.log is, for a broker configured with one."""
    return root / f"logs-{broker}" / "server.log"


def cluster_config(
    root: Path,
    brokers: Collection[int],
    *,
    min_isr: int = 2,
    with_properties: Collection[int] = (),
    with_server_log: Collection[int] = (),
) -> ClusterConfig:
    """The fake cluster's cluster.yaml; brokers in `with_properties` name their
    server.properties (tests write it) instead of listing their log dirs, those in
    `with_server_log` their server.log (tests write it)."""

    def where(b: int) -> dict[str, object]:
        found: dict[str, object] = {"log_dirs": [str(root / f"data-{b}")]}
        if b in with_properties:
            found = {"server_properties": str(server_properties(root, b))}
        if b in with_server_log:
            found["server_log"] = str(server_log(root, b))
        return found

    document = {
        "cluster": "fake",
        "zookeeper": {"connect": "127.0.0.1:2181"},
        "brokers": [
            {"id": b, "host": "127.0.0.1", "transport": "local", **where(b)} for b in brokers
        ],
        "service": {**SERVICE, "status": SERVICE_STATUS},
        "min_insync_replicas_default": min_isr,
        "backup_dir": str(root / "backups"),
        "journal_dir": str(root / "journal"),
    }
    return parse_cluster_config(document, source="fake cluster.yaml", base_dir=root)
