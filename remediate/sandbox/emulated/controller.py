"""The ZooKeeper-mode controller, as kafka.controller.KafkaController behaves at 2.8.2/3.4.1.

One broker holds the ephemeral `/controller` znode, created in the same multi-op that bumps
`/controller_epoch`. Its event thread handles, one at a time: failover (read everything,
assign ids to topics that have none, elect leaders for offline partitions, send LeaderAndIsr
for every live replica), broker changes, new topics and partitions, controlled shutdown and
AlterIsr. Every write is fenced by the version of `/controller_epoch`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import ZnodeStat

from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    ControllerRegistration,
    PartitionState,
    TopicAssignment,
    decode_broker,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_path,
)
from remediate.sandbox.emulated import wire
from remediate.sandbox.emulated.kafkalog import STATE_CHANGE_LOGGER

log = logging.getLogger("kafka.controller.KafkaController")
state_change_log = logging.getLogger(STATE_CHANGE_LOGGER)

TopicPartition = tuple[str, int]


class ControllerMovedError(Exception):
    """A fenced write failed: another broker is the controller now."""


@dataclass
class LiveBroker:
    broker_id: int
    host: str
    port: int
    epoch: int


@dataclass
class Context:
    """What the active controller holds in memory (ControllerContext)."""

    epoch: int = 0
    epoch_zk_version: int = -1
    live: dict[int, LiveBroker] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    topic_ids: dict[str, TopicId] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, replicas in self.assignments.items() if broker_id in replicas)

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live and broker_id not in self.shutting_down


@dataclass
class Event:
    kind: str
    payload: Any = None
    reply: queue.Queue[dict[str, Any]] | None = None


class Controller:
    """Controller election and, while active, the controller's event loop."""

    def __init__(
        self,
        *,
        zk: KazooClient,
        broker_id: int,
        uses_topic_ids: bool,
        unclean_leader_election: bool,
        broker_epoch: Callable[[], int],
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.uses_topic_ids = uses_topic_ids
        self.unclean_leader_election = unclean_leader_election
        self.broker_epoch = broker_epoch
        self.active = False
        self.active_controller_id = -1
        self.context = Context()
        self.events: queue.Queue[Event] = queue.Queue()
        self.channels: dict[int, BrokerChannel] = {}
        self._watched_topics: set[str] = set()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="controller-event-thread", daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self.zk.DataWatch(CONTROLLER, self._on_controller_znode)
        self.zk.ChildrenWatch(BROKER_IDS, lambda _children: self._put("BrokerChange"))
        self.zk.ChildrenWatch(BROKER_TOPICS, lambda _children: self._put("TopicChange"))

    def shutdown(self) -> None:
        self._stopped.set()
        self.events.put(Event("Shutdown"))
        self._thread.join(timeout=5)
        self._resign()

    def _put(self, kind: str, payload: Any = None) -> bool:
        if not self._stopped.is_set():
            self.events.put(Event(kind, payload))
        return not self._stopped.is_set()

    def _on_controller_znode(self, data: bytes | None, _stat: ZnodeStat | None) -> bool:
        self._put("ControllerChange", data)
        return not self._stopped.is_set()

    def request(self, kind: str, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        """Run a broker request (ControlledShutdown, AlterIsr) on the event thread."""
        reply: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
        self.events.put(Event(kind, payload, reply))
        try:
            return reply.get(timeout=timeout)
        except queue.Empty:
            return {"error": wire.REQUEST_TIMED_OUT}

    def expire(self) -> None:
        """The ZooKeeper session expired: stop acting as controller at once (Kafka's Expire
        event). A seat this broker held went with the session's ephemeral /controller."""
        self._put("Expire")

    def reelect(self) -> None:
        """After a new ZooKeeper session: resign if needed and take part in election again."""
        self._put("Reelect")

    # -- event loop ---------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped.is_set():
            event = self.events.get()
            if event.kind == "Shutdown":
                return
            try:
                self._handle(event)
            except ControllerMovedError:
                log.info(
                    "[Controller id=%d] Controller moved to another broker. Resigning.",
                    self.broker_id,
                )
                self._resign()
                if event.reply is not None:
                    event.reply.put({"error": wire.NOT_CONTROLLER})
            except Exception:
                log.exception(
                    "[Controller id=%d] Error processing event %s", self.broker_id, event.kind
                )
                if event.reply is not None:
                    event.reply.put({"error": wire.UNKNOWN_SERVER_ERROR})

    def _handle(self, event: Event) -> None:
        if event.kind == "Expire":
            self._resign()
            self.active_controller_id = -1
        elif event.kind in ("ControllerChange", "Reelect"):
            # Kafka's maybeResign + elect: resign only if /controller is no longer this broker,
            # so a seat won in the new session (a ControllerChange can get there before the
            # Reelect does) is kept, not given up with /controller still naming this broker.
            self._maybe_elect()
        elif event.reply is not None and not self.active:
            event.reply.put({"error": wire.NOT_CONTROLLER})
        elif not self.active:
            return
        elif event.kind == "BrokerChange":
            self._process_broker_change()
        elif event.kind == "TopicChange":
            self._process_topic_change()
        elif event.kind == "PartitionModifications":
            self._process_partition_modifications(event.payload)
        elif event.kind == "ControlledShutdown" and event.reply is not None:
            event.reply.put(self._process_controlled_shutdown(event.payload))
        elif event.kind == "AlterIsr" and event.reply is not None:
            event.reply.put(self._process_alter_isr(event.payload))
        elif event.kind == "AlterPartitionReassignments" and event.reply is not None:
            event.reply.put(self._process_alter_partition_reassignments(event.payload))
        elif event.kind == "ListPartitionReassignments" and event.reply is not None:
            # A reassignment the sandbox takes (to the current replicas) is done at once.
            event.reply.put({"error": wire.NONE, "partitions": []})

    # -- election -----------------------------------------------------------------------------

    def _maybe_elect(self) -> None:
        try:
            data, _ = self.zk.get(CONTROLLER)
            current = decode_controller(data).broker_id
        except NoNodeError:
            current = -1
        if current == self.broker_id and self.active:
            return
        if self.active:
            self._resign()
        self.active_controller_id = current
        if current == -1:
            self._elect()

    def _elect(self) -> None:
        try:
            data, stat = self.zk.get(CONTROLLER_EPOCH)
            epoch, epoch_version = decode_controller_epoch(data), stat.version
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                self.zk.create(CONTROLLER_EPOCH, encode_controller_epoch(0))
            data, stat = self.zk.get(CONTROLLER_EPOCH)
            epoch, epoch_version = decode_controller_epoch(data), stat.version
        registration = ControllerRegistration(self.broker_id, int(time.time() * 1000))
        transaction = self.zk.transaction()
        transaction.create(CONTROLLER, encode_controller(registration), ephemeral=True)
        transaction.set_data(
            CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=epoch_version
        )
        results = transaction.commit()
        if any(isinstance(r, Exception) for r in results):
            log.info("[Controller id=%d] Lost the election (%s)", self.broker_id, results)
            self._maybe_elect()
            return
        self.context = Context(epoch=epoch + 1, epoch_zk_version=epoch_version + 1)
        self.active = True
        self.active_controller_id = self.broker_id
        log.info(
            "[Controller id=%d] %d successfully elected as the controller. Epoch incremented to %d"
            " and epoch zk version is now %d",
            self.broker_id,
            self.broker_id,
            self.context.epoch,
            self.context.epoch_zk_version,
        )
        self._on_controller_failover()

    def _resign(self) -> None:
        if self.active:
            log.info("[Controller id=%d] Resigned", self.broker_id)
        self.active = False
        for channel in self.channels.values():
            channel.stop()
        self.channels = {}
        self.context = Context()

    # -- reading ZooKeeper (pipelined) --------------------------------------------------------

    def _read_live_brokers(self) -> dict[int, LiveBroker]:
        ids = [int(c) for c in self.zk.get_children(BROKER_IDS) if c.lstrip("-").isdigit()]
        pending = {i: self.zk.get_async(f"{BROKER_IDS}/{i}") for i in ids}
        live: dict[int, LiveBroker] = {}
        for broker_id, result in pending.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            registration = decode_broker(broker_id, data, source=f"{BROKER_IDS}/{broker_id}")
            endpoint = registration.endpoint()
            if endpoint is not None:
                live[broker_id] = LiveBroker(broker_id, endpoint.host, endpoint.port, stat.czxid)
        return live

    def _read_topics(self, topics: Iterable[str]) -> dict[str, tuple[TopicAssignment, int]]:
        pending = {t: self.zk.get_async(topic_path(t)) for t in topics}
        result: dict[str, tuple[TopicAssignment, int]] = {}
        for topic, async_result in pending.items():
            try:
                data, stat = async_result.get()
            except NoNodeError:
                continue
            result[topic] = (decode_topic(data, source=topic_path(topic)), stat.version)
        return result

    def _read_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionState]:
        pending = {tp: self.zk.get_async(partition_state_path(*tp)) for tp in partitions}
        states: dict[TopicPartition, PartitionState] = {}
        for tp, result in pending.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            states[tp] = decode_partition_state(
                data, source=partition_state_path(*tp), zk_version=stat.version
            )
        return states

    # -- fenced writes ------------------------------------------------------------------------

    def _commit(self, path: str, data: bytes, *, version: int | None = None) -> object:
        """One fenced write: create `path` (version None) or CAS-set it; returns the op result.

        The multi-op also checks /controller_epoch's version, so a controller that lost its
        seat cannot write (KafkaZkClient's controller-epoch fencing).
        """
        transaction = self.zk.transaction()
        transaction.check(CONTROLLER_EPOCH, self.context.epoch_zk_version)
        if version is None:
            transaction.create(path, data)
        else:
            transaction.set_data(path, data, version=version)
        results = transaction.commit()
        if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise ControllerMovedError
        return results[1]

    def _assign_topic_ids(self, topics: dict[str, tuple[TopicAssignment, int]]) -> None:
        """processTopicIds: topics without an id get a fresh one, written back to ZooKeeper."""
        for topic, (assignment, _version) in sorted(topics.items()):
            if assignment.topic_id is None and self.uses_topic_ids:
                topic_id = TopicId.random()
                self._commit(
                    topic_path(topic),
                    encode_topic(replace(assignment, topic_id=topic_id)),
                    version=-1,
                )
                self.context.topic_ids[topic] = topic_id
            elif assignment.topic_id is not None:
                self.context.topic_ids[topic] = assignment.topic_id

    def _write_states(
        self, updates: dict[TopicPartition, PartitionState]
    ) -> dict[TopicPartition, PartitionState]:
        """CAS-write partition states; returns the states that were written, with new versions."""
        written: dict[TopicPartition, PartitionState] = {}
        for tp, state in sorted(updates.items()):
            old = self.context.states.get(tp)
            data = encode_partition_state(state)
            if old is None:
                self._ensure_partition_parents(tp)
                result = self._commit(partition_state_path(*tp), data)
                new_version = 0
            else:
                result = self._commit(partition_state_path(*tp), data, version=old.zk_version)
                new_version = old.zk_version + 1
            if isinstance(result, BadVersionError | NodeExistsError):
                # Someone else changed it; re-read so the next decision uses fresh state.
                fresh = self._read_states([tp]).get(tp)
                if fresh is not None:
                    self.context.states[tp] = fresh
                continue
            if isinstance(result, Exception):
                log.error("Failed to write state of %s-%d: %s", tp[0], tp[1], result)
                continue
            written[tp] = replace(state, zk_version=new_version)
            self.context.states[tp] = written[tp]
        return written

    def _ensure_partition_parents(self, tp: TopicPartition) -> None:
        for path in (partitions_path(tp[0]), partition_path(*tp)):
            with contextlib.suppress(NodeExistsError):
                self.zk.create(path, b"")

    # -- failover -----------------------------------------------------------------------------

    def _on_controller_failover(self) -> None:
        ctx = self.context
        ctx.live = self._read_live_brokers()
        topics = self._read_topics(self.zk.get_children(BROKER_TOPICS))
        self._assign_topic_ids(topics)
        for topic, (assignment, _) in topics.items():
            for number, replicas in assignment.partitions.items():
                ctx.assignments[(topic, number)] = replicas
            self._watch_topic(topic)
        ctx.states = self._read_states(ctx.assignments)
        self._sync_channels()
        log.info(
            "[Controller id=%d] Initialized controller context: %d live brokers, %d topics,"
            " %d partitions",
            self.broker_id,
            len(ctx.live),
            len(topics),
            len(ctx.assignments),
        )
        # replicaStateMachine.startup(): LeaderAndIsr for every live replica, current state.
        batch = RequestBatch(self)
        for tp, state in ctx.states.items():
            live_replicas = [r for r in ctx.assignments[tp] if r in ctx.live]
            batch.add(live_replicas, tp, state)
        batch.send()
        # ... and OfflineReplica for replicas on dead brokers: out of the ISR (leader -1 if
        # they led; the last ISR member stays).
        dead = sorted(
            {r for replicas in ctx.assignments.values() for r in replicas} - set(ctx.live)
        )
        for broker_id in dead:
            self._remove_replica_from_isr(broker_id, ctx.partitions_on(broker_id))
        # partitionStateMachine.startup(): elect leaders where the leader is not live.
        self._elect_offline_partitions()
        new_partitions = [tp for tp in ctx.assignments if tp not in ctx.states]
        if new_partitions:
            self._on_new_partition_creation(new_partitions)

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def on_change(data: bytes | None, _stat: ZnodeStat | None) -> bool:
            if data is None:
                self._watched_topics.discard(topic)
                return False
            return self._put("PartitionModifications", topic)

        self.zk.DataWatch(topic_path(topic), on_change)

    def _sync_channels(self) -> None:
        for broker_id in list(self.channels):
            live = self.context.live.get(broker_id)
            channel = self.channels[broker_id]
            if live is None or (live.host, live.port) != (channel.host, channel.port):
                channel.stop()
                del self.channels[broker_id]
        for broker_id, live in self.context.live.items():
            if broker_id not in self.channels:
                channel = BrokerChannel(self.broker_id, live.broker_id, live.host, live.port)
                channel.start()
                self.channels[broker_id] = channel

    # -- leader election ----------------------------------------------------------------------

    def _offline_leader_election(self, tp: TopicPartition) -> PartitionState | None:
        ctx = self.context
        state = ctx.states[tp]
        assignment = ctx.assignments[tp]
        live_isr = [r for r in state.isr if ctx.is_live(r)]
        leader = next((r for r in assignment if r in live_isr), None)
        if leader is None:
            if not self.unclean_leader_election:
                state_change_log.error(
                    "[Controller id=%d epoch=%d] Controller %d epoch %d failed to change state for"
                    " partition %s-%d from OfflinePartition to OnlinePartition: no live in-sync"
                    " replica in ISR %s",
                    self.broker_id,
                    ctx.epoch,
                    self.broker_id,
                    ctx.epoch,
                    tp[0],
                    tp[1],
                    list(state.isr),
                )
                return None
            leader = next((r for r in assignment if ctx.is_live(r)), None)
            if leader is None:
                return None
            live_isr = [leader]
        return PartitionState(
            leader=leader,
            leader_epoch=state.leader_epoch + 1,
            isr=tuple(live_isr),
            controller_epoch=ctx.epoch,
            zk_version=state.zk_version,
        )

    def _elect_offline_partitions(self) -> None:
        """triggerOnlinePartitionStateChange: elect for partitions whose leader is not live."""
        ctx = self.context
        updates: dict[TopicPartition, PartitionState] = {}
        for tp, state in sorted(ctx.states.items()):
            if state.leader in ctx.live and state.leader not in ctx.shutting_down:
                continue
            elected = self._offline_leader_election(tp)
            if elected is not None:
                updates[tp] = elected
        written = self._write_states(updates)
        batch = RequestBatch(self)
        for tp, state in written.items():
            batch.add([r for r in ctx.assignments[tp] if r in ctx.live], tp, state)
        batch.send()

    # -- broker changes -----------------------------------------------------------------------

    def _process_broker_change(self) -> None:
        ctx = self.context
        current = self._read_live_brokers()
        new = sorted(set(current) - set(ctx.live))
        dead = sorted(set(ctx.live) - set(current))
        bounced = sorted(
            b for b in set(current) & set(ctx.live) if current[b].epoch != ctx.live[b].epoch
        )
        if not (new or dead or bounced):
            return
        log.info(
            "[Controller id=%d] Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s,"
            " all live brokers: %s",
            self.broker_id,
            ",".join(map(str, new)),
            ",".join(map(str, dead)),
            ",".join(map(str, bounced)),
            ",".join(map(str, sorted(current))),
        )
        if bounced:
            for broker_id in bounced:
                del ctx.live[broker_id]
            self._on_broker_failure(bounced)
        for broker_id in dead:
            ctx.live.pop(broker_id, None)
            ctx.shutting_down.discard(broker_id)
        if dead:
            self._on_broker_failure(dead)
        ctx.live = current
        for broker_id in new + bounced:
            ctx.shutting_down.discard(broker_id)
        self._sync_channels()
        if new or bounced:
            self._on_broker_startup(new + bounced)

    def _on_broker_startup(self, brokers: list[int]) -> None:
        ctx = self.context
        batch = RequestBatch(self)
        for broker_id in brokers:
            for tp in ctx.partitions_on(broker_id):
                state = ctx.states.get(tp)
                if state is not None:
                    batch.add([broker_id], tp, state)
        batch.send()
        self._elect_offline_partitions()

    def _on_broker_failure(self, dead: list[int]) -> None:
        """onReplicasBecomeOffline: elect new leaders, then remove the dead from every ISR."""
        self._sync_channels()
        self._elect_offline_partitions()
        for broker_id in dead:
            self._remove_replica_from_isr(broker_id, self.context.partitions_on(broker_id))

    def _remove_replica_from_isr(self, replica: int, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        updates: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None or replica not in state.isr:
                continue
            new_leader = -1 if state.leader == replica else state.leader
            new_isr = (
                state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
            )
            updates[tp] = PartitionState(
                leader=new_leader,
                leader_epoch=state.leader_epoch + 1,
                isr=new_isr,
                controller_epoch=ctx.epoch,
                zk_version=state.zk_version,
            )
        written = self._write_states(updates)
        batch = RequestBatch(self)
        for tp, state in written.items():
            recipients = [r for r in ctx.assignments[tp] if r != replica and r in ctx.live]
            batch.add(recipients, tp, state)
        batch.send()

    # -- topics and partitions ----------------------------------------------------------------

    def _process_topic_change(self) -> None:
        ctx = self.context
        children = set(self.zk.get_children(BROKER_TOPICS))
        known = {tp[0] for tp in ctx.assignments}
        new_topics = sorted(children - known)
        for topic in sorted(known - children):
            for tp in [tp for tp in ctx.assignments if tp[0] == topic]:
                ctx.assignments.pop(tp, None)
                ctx.states.pop(tp, None)
            ctx.topic_ids.pop(topic, None)
        if not new_topics:
            return
        topics = self._read_topics(new_topics)
        self._assign_topic_ids(topics)
        created: list[TopicPartition] = []
        for topic, (assignment, _) in topics.items():
            for number, replicas in assignment.partitions.items():
                ctx.assignments[(topic, number)] = replicas
                created.append((topic, number))
            self._watch_topic(topic)
        log.info("[Controller id=%d] New topics: [%s]", self.broker_id, ",".join(sorted(topics)))
        self._on_new_partition_creation(created)

    def _process_partition_modifications(self, topic: str) -> None:
        """New partitions of an existing topic. The topic id is neither read nor written here."""
        ctx = self.context
        try:
            data, _ = self.zk.get(topic_path(topic))
        except NoNodeError:
            return
        assignment = decode_topic(data, source=topic_path(topic))
        added = [(topic, p) for p in assignment.partitions if (topic, p) not in ctx.assignments]
        if not added:
            return
        for tp in added:
            ctx.assignments[tp] = assignment.partitions[tp[1]]
        log.info(
            "[Controller id=%d] New partitions to be added %s",
            self.broker_id,
            ", ".join(f"{t}-{p}" for t, p in sorted(added)),
        )
        self._on_new_partition_creation(added)

    def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        updates: dict[TopicPartition, PartitionState] = {}
        for tp in sorted(partitions):
            live = [r for r in ctx.assignments[tp] if ctx.is_live(r)]
            if not live:
                state_change_log.error(
                    "[Controller id=%d epoch=%d] Encountered error during state change of partition"
                    " %s-%d from New to Online: no assigned replica is alive",
                    self.broker_id,
                    ctx.epoch,
                    tp[0],
                    tp[1],
                )
                continue
            updates[tp] = PartitionState(
                leader=live[0], leader_epoch=0, isr=tuple(live), controller_epoch=ctx.epoch
            )
        written = self._write_states(updates)
        batch = RequestBatch(self)
        for tp, state in written.items():
            batch.add([r for r in ctx.assignments[tp] if r in ctx.live], tp, state, is_new=True)
        batch.send()

    # -- requests from brokers ----------------------------------------------------------------

    def _process_controlled_shutdown(self, payload: dict[str, Any]) -> dict[str, Any]:
        ctx = self.context
        broker_id = payload["broker_id"]
        if broker_id not in ctx.live:
            return {"error": wire.BROKER_NOT_AVAILABLE}
        if payload.get("broker_epoch", -1) < ctx.live[broker_id].epoch:
            return {"error": wire.STALE_BROKER_EPOCH}
        log.info("[Controller id=%d] Shutting down broker %d", self.broker_id, broker_id)
        ctx.shutting_down.add(broker_id)
        replicated = [
            tp
            for tp in ctx.partitions_on(broker_id)
            if len(ctx.assignments[tp]) > 1 and tp in ctx.states
        ]
        led = [tp for tp in replicated if ctx.states[tp].leader == broker_id]
        followed = [tp for tp in replicated if ctx.states[tp].leader != broker_id]
        updates: dict[TopicPartition, PartitionState] = {}
        for tp in led:
            state = ctx.states[tp]
            new_isr = tuple(r for r in state.isr if r not in ctx.shutting_down)
            leader = next((r for r in ctx.assignments[tp] if r in new_isr and ctx.is_live(r)), None)
            if leader is None:
                continue
            updates[tp] = PartitionState(
                leader=leader,
                leader_epoch=state.leader_epoch + 1,
                isr=new_isr,
                controller_epoch=ctx.epoch,
                zk_version=state.zk_version,
            )
        written = self._write_states(updates)
        batch = RequestBatch(self)
        for tp, state in written.items():
            batch.add([r for r in ctx.assignments[tp] if r in ctx.live], tp, state)
        batch.send()
        channel = self.channels.get(broker_id)
        if channel is not None and followed:
            channel.send(
                {
                    "api": "StopReplica",
                    "controller_id": self.broker_id,
                    "controller_epoch": ctx.epoch,
                    "delete_partitions": False,
                    "partitions": [list(tp) for tp in followed],
                }
            )
        self._remove_replica_from_isr(broker_id, followed)
        remaining = [
            list(tp)
            for tp in ctx.partitions_on(broker_id)
            if len(ctx.assignments[tp]) > 1
            and tp in ctx.states
            and ctx.states[tp].leader == broker_id
        ]
        return {"error": wire.NONE, "remaining_partitions": remaining}

    def _process_alter_isr(self, payload: dict[str, Any]) -> dict[str, Any]:
        ctx = self.context
        broker_id = payload["broker_id"]
        live = ctx.live.get(broker_id)
        # As KafkaController.processAlterIsr: unknown broker, or an epoch older than the one
        # the controller knows, is stale; a newer one (a bounce not yet processed) is not.
        if live is None or payload.get("broker_epoch", -1) < live.epoch:
            return {"error": wire.STALE_BROKER_EPOCH}
        results: list[dict[str, Any]] = []
        updates: dict[TopicPartition, PartitionState] = {}
        for item in payload["partitions"]:
            tp = (item["topic"], item["partition"])
            base = {"topic": tp[0], "partition": tp[1]}
            current = ctx.states.get(tp)
            if current is None:
                results.append({**base, "error": wire.UNKNOWN_TOPIC_OR_PARTITION})
            elif item["leader_epoch"] < current.leader_epoch or current.leader != broker_id:
                results.append({**base, "error": wire.FENCED_LEADER_EPOCH})
            elif item["zk_version"] != current.zk_version:
                results.append({**base, "error": wire.INVALID_UPDATE_VERSION})
            elif tuple(item["new_isr"]) == current.isr:
                results.append({**base, "error": wire.NONE, **_state_fields(current)})
            else:
                updates[tp] = replace(
                    current, isr=tuple(item["new_isr"]), controller_epoch=ctx.epoch
                )
        written = self._write_states(updates)
        for tp in updates:
            base = {"topic": tp[0], "partition": tp[1]}
            if tp in written:
                state_change_log.info(
                    "[Controller id=%d epoch=%d] Updated ISR of %s-%d to %s",
                    self.broker_id,
                    ctx.epoch,
                    tp[0],
                    tp[1],
                    list(written[tp].isr),
                )
                results.append({**base, "error": wire.NONE, **_state_fields(written[tp])})
            else:
                results.append({**base, "error": wire.INVALID_UPDATE_VERSION})
        return {"error": wire.NONE, "partitions": results}

    def _process_alter_partition_reassignments(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A reassignment to a partition's current replica list, in order: Kafka's
        onPartitionReassignment finds nothing to add or remove (ControllerContext.reassignTo),
        so the reassignment is complete at once (isReassignmentComplete) and its last phase
        runs: moveReassignedPartitionLeaderIfRequired keeps the leader, alive and in the
        list, and updateLeaderEpochAndSendRequest bumps the leader epoch in ZooKeeper and sends
        LeaderAndIsr to every replica; updateReplicaAssignmentForPartition writes the topic
        znode back with the id in the controller's memory (KafkaController.scala at 2.8.2,
        724-757, 996-1085, 1030-1037). The sandbox takes no other reassignment."""
        ctx = self.context
        results: list[dict[str, Any]] = []
        updates: dict[TopicPartition, PartitionState] = {}
        for item in payload["partitions"]:
            tp = (item["topic"], item["partition"])
            base = {"topic": tp[0], "partition": tp[1]}
            replicas = ctx.assignments.get(tp)
            state = ctx.states.get(tp)
            if replicas is None or state is None:
                results.append({**base, "error": wire.UNKNOWN_TOPIC_OR_PARTITION})
            elif item.get("replicas") is None or tuple(item["replicas"]) != tuple(replicas):
                results.append(
                    {
                        **base,
                        "error": wire.INVALID_REPLICA_ASSIGNMENT,
                        "message": "the sandbox reassigns a partition to its current replicas only",
                    }
                )
            elif state.leader not in replicas or not ctx.is_live(state.leader):
                results.append({**base, "error": wire.LEADER_NOT_AVAILABLE})
            else:
                updates[tp] = replace(
                    state, leader_epoch=state.leader_epoch + 1, controller_epoch=ctx.epoch
                )
        written = self._write_states(updates)
        for topic in sorted({tp[0] for tp in written}):
            partitions = {p: replicas for (t, p), replicas in ctx.assignments.items() if t == topic}
            self._commit(
                topic_path(topic),
                encode_topic(TopicAssignment(partitions, topic_id=ctx.topic_ids.get(topic))),
                version=-1,
            )
        batch = RequestBatch(self)
        for tp, state in written.items():
            log.info(
                "[Controller id=%d] Updated leader epoch for partition %s-%d to %d",
                self.broker_id,
                tp[0],
                tp[1],
                state.leader_epoch,
            )
            batch.add([r for r in ctx.assignments[tp] if r in ctx.live], tp, state)
            results.append({"topic": tp[0], "partition": tp[1], "error": wire.NONE})
        batch.send()
        results += [
            {"topic": tp[0], "partition": tp[1], "error": wire.INVALID_UPDATE_VERSION}
            for tp in updates
            if tp not in written
        ]
        return {"error": wire.NONE, "partitions": results}


def _state_fields(state: PartitionState) -> dict[str, Any]:
    return {
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "zk_version": state.zk_version,
    }


class RequestBatch:
    """LeaderAndIsr requests collected per broker, then sent (ControllerBrokerRequestBatch)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.per_broker: dict[int, dict[TopicPartition, tuple[PartitionState, bool]]] = {}

    def add(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        state: PartitionState,
        *,
        is_new: bool = False,
    ) -> None:
        for broker_id in brokers:
            self.per_broker.setdefault(broker_id, {})[tp] = (state, is_new)

    def send(self) -> None:
        ctx = self.controller.context
        for broker_id, partitions in sorted(self.per_broker.items()):
            channel = self.controller.channels.get(broker_id)
            if channel is None:
                continue
            topics = {tp[0] for tp in partitions}
            leaders = {s.leader for s, _ in partitions.values() if s.leader in ctx.live}
            request = {
                "api": "LeaderAndIsr",
                "controller_id": self.controller.broker_id,
                "controller_epoch": ctx.epoch,
                "broker_epoch": ctx.live[broker_id].epoch if broker_id in ctx.live else -1,
                "topic_ids": {
                    t: str(ctx.topic_ids[t])
                    for t in sorted(topics)
                    if t in ctx.topic_ids and self.controller.uses_topic_ids
                },
                "partitions": [
                    {
                        "topic": tp[0],
                        "partition": tp[1],
                        "leader": state.leader,
                        "leader_epoch": state.leader_epoch,
                        "isr": list(state.isr),
                        "zk_version": state.zk_version,
                        "controller_epoch": state.controller_epoch,
                        "replicas": list(ctx.assignments[tp]),
                        "is_new": is_new,
                    }
                    for tp, (state, is_new) in sorted(partitions.items())
                ],
                "live_leaders": {
                    str(b): [ctx.live[b].host, ctx.live[b].port] for b in sorted(leaders)
                },
            }
            channel.send(request)
        self.per_broker = {}


class BrokerChannel:
    """A queue and a sender thread per broker (ControllerChannelManager's RequestSendThread)."""

    def __init__(self, controller_id: int, broker_id: int, host: str, port: int) -> None:
        self.controller_id = controller_id
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stopped = threading.Event()
        self._connection = wire.Connection(host, port, timeout=5.0)
        self._thread = threading.Thread(
            target=self._run,
            name=f"Controller-{controller_id}-to-broker-{broker_id}-send-thread",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def send(self, request: dict[str, Any]) -> None:
        self.queue.put(request)

    def stop(self) -> None:
        self._stopped.set()
        self.queue.put(None)
        self._connection.close()

    def _run(self) -> None:
        while not self._stopped.is_set():
            request = self.queue.get()
            if request is None:
                return
            while not self._stopped.is_set():
                try:
                    response = self._connection.call(request, timeout=10.0)
                except wire.WireError as exc:
                    log.warning(
                        "[RequestSendThread controllerId=%d] Controller %d's connection to"
                        " broker %d"
                        " was unsuccessful: %s",
                        self.controller_id,
                        self.controller_id,
                        self.broker_id,
                        exc,
                    )
                    self._stopped.wait(0.3)
                    continue
                self._log_response(request, response)
                break

    def _log_response(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        if request["api"] != "LeaderAndIsr":
            return
        code = response.get("error", wire.NONE)
        if code not in (wire.NONE, wire.STALE_CONTROLLER_EPOCH):
            state_change_log.warning(
                "[Controller id=%d epoch=%d] LeaderAndIsr request to broker %d failed with %s%s",
                self.controller_id,
                request["controller_epoch"],
                self.broker_id,
                wire.ERROR_NAMES.get(code, code),
                f": {response['message']}" if response.get("message") else "",
            )
        failed = [
            e
            for e in response.get("errors", [])
            if e[2] not in (wire.NONE, wire.STALE_CONTROLLER_EPOCH)
        ]
        for topic, number, code in failed:
            state_change_log.info(
                "[Controller id=%d epoch=%d] LeaderAndIsr for %s-%d on broker %d failed with %s",
                self.controller_id,
                request["controller_epoch"],
                topic,
                number,
                self.broker_id,
                wire.ERROR_NAMES.get(code, code),
            )
