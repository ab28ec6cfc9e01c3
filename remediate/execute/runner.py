"""The executor: carries out exactly an approved plan, one journaled action at a time.

Every action is journaled (fsynced) before and after. A destructive action (stop, delete,
znode write, controller election) is preceded by a check that the run still holds the
cluster's lock and by a fresh gate decided on state read a moment before. Completed actions
are never repeated on resume; the one that was in flight is re-verified (it either took
effect, which is checked, or it is carried out now). Any gate that does not pass within its
timeout halts the run with the exact state it saw.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_fixed,
)

from remediate.collect.run import collect_brokers, inspect_broker
from remediate.collect.zookeeper import read_cluster_state
from remediate.config import ClusterConfig
from remediate.errors import (
    FormatError,
    HaltedError,
    HostKeyError,
    LockLostError,
    RemediationError,
    TransportError,
    VersionConflictError,
    ZnodeMissingError,
    ZooKeeperError,
)
from remediate.execute import failpoints
from remediate.execute.backup import (
    Backup,
    backup_files,
    delete_backed_up,
    restore_backup,
    verify_backup,
)
from remediate.execute.journal import Journal, RunProgress, replay
from remediate.execute.lock import RunLock
from remediate.execute.steps import BACKUP, DELETE, StepKey
from remediate.formats.logdir import parse_partition_dir
from remediate.formats.topic_id import parse_topic_id
from remediate.formats.znodes import (
    CONTROLLER,
    decode_controller_epoch,
    decode_topic,
    topic_path,
    with_topic_id,
)
from remediate.gates import (
    StaleIdHolder,
    health_sample,
    in_sync_blocker,
    missing_id_blocker,
    pre_restart_blocker,
    stopped_blocker,
    topic_in_sync_blocker,
)
from remediate.plan import Plan, PlanStep, RestoreStep
from remediate.playbook import Gates
from remediate.ports import Clock, Transport, ZooKeeper
from remediate.state import ClusterState, TopicPartition

# Between two reads of a wait. A read is a handful of pipelined requests (for thousands of
# partitions it is the read, not this pause, that sets the pace), so a short pause lets a gate
# open within a few tens of milliseconds of the state being reached.
POLL_S = 0.02
NO_FILE = "no partition.metadata yet"
SAMPLE_EVERY_S = 1.0
EXIT_CHECK_S = 1.0  # how often a wait for registration asks the service whether it runs
ELECTION_TIMEOUT_S = 60.0
SERVICE_TIMEOUT_S = 300.0


def dropped_connection(exc: BaseException) -> bool:
    """A transport error worth retrying: never a host key that failed verification."""
    return isinstance(exc, TransportError) and not isinstance(exc, HostKeyError)


@dataclass(frozen=True)
class Services:
    """What the executor acts through; only the command line builds the real ones."""

    config: ClusterConfig
    zk: ZooKeeper
    transport_for: Callable[[int], Transport]
    clock: Clock
    gates: Mapping[str, Gates]
    log: Any = None
    progress: Callable[[str], None] = lambda _message: None


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: str
    error: str | None = None
    deleted: tuple[str, ...] = ()
    backups: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "error": self.error,
            "deleted": list(self.deleted),
            "backups": list(self.backups),
        }


def parse_partition(name: str) -> TopicPartition:
    topic, _, number = name.rpartition("-")
    return topic, int(number)


def action_key(index: int, step: PlanStep | RestoreStep, action: str) -> str:
    target = f"broker-{step.broker}" if isinstance(step, PlanStep) else f"topic-{step.topic}"
    return f"{index}:{target}:{action}"


@dataclass
class _Run:
    """Mutable bookkeeping of one execution (the journal is the durable copy)."""

    progress: RunProgress  # as the journal stood when this process started
    finished: set[str] = field(default_factory=set)
    backups: dict[int, Backup] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    repaired: set[tuple[int, TopicPartition]] = field(default_factory=set)
    gated: set[str] = field(default_factory=set)  # gates passed by this process


class Executor:
    def __init__(self, plan: Plan, services: Services, journal: Journal, lock: RunLock) -> None:
        self.plan = plan
        self.s = services
        self.journal = journal
        self.lock = lock
        self.run_id = journal.run_id
        self._last_sample = 0.0
        self._topic_cache: dict[int, list[str]] = {}
        self._zk_states: queue.SimpleQueue[tuple[float, str]] = queue.SimpleQueue()

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        # The session's ups and downs go into the journal: a run that lived through a
        # ZooKeeper outage says so, even when every read simply waited for the reconnect.
        self.s.zk.add_listener(self._on_zk_state)
        try:
            return self._run()
        finally:
            self.s.zk.remove_listener(self._on_zk_state)
            self._journal_zk_states()

    def _on_zk_state(self, state: str) -> None:
        # kazoo's connection thread: only queue it; the journal is written by the run itself.
        self._zk_states.put((self.s.clock.now(), str(state)))

    def _journal_zk_states(self) -> None:
        while not self._zk_states.empty():
            at, zk_state = self._zk_states.get_nowait()
            self.journal.append(
                "zookeeper", now=self.s.clock.now(), session=zk_state, observed=round(at, 3)
            )

    def _run(self) -> RunOutcome:
        progress = replay(self.journal.records())
        state = _Run(progress)
        self._recover(state)
        try:
            self._sample()
            for index, step in enumerate(self.plan.steps):
                if isinstance(step, RestoreStep):
                    self._restore(index, step, state)
            remaining = [(i, s) for i, s in enumerate(self.plan.steps) if isinstance(s, PlanStep)]
            while remaining:
                # The controller is re-read before every step: it may have moved.
                chosen = self._next(remaining, state)
                remaining.remove(chosen)
                self._restart(*chosen, state)
            self._sample()
        except HaltedError as exc:
            self._journal("run-halted", error=str(exc))
            return RunOutcome(
                self.run_id,
                "halted",
                str(exc),
                tuple(state.deleted),
                tuple(b.to_json() for b in state.backups.values()),
            )
        self._journal("run-completed")
        return RunOutcome(
            self.run_id,
            "completed",
            None,
            tuple(state.deleted),
            tuple(b.to_json() for b in state.backups.values()),
        )

    def _recover(self, state: _Run) -> None:
        """Backups and deletions already done (a resumed run) come from the journal."""
        for key, step in state.progress.steps.items():
            if not step.finished:
                continue
            state.finished.add(key)
            parsed = StepKey.parse(key)
            if parsed.action == BACKUP and parsed.broker is not None:
                state.backups[parsed.broker] = Backup.from_json(step.result["backup"])
            if parsed.action == DELETE:
                result = step.result
                state.deleted += list(result.get("deleted", [])) + list(
                    result.get("already_gone", [])
                )

    def _next(self, remaining: list[tuple[int, PlanStep]], state: _Run) -> tuple[int, PlanStep]:
        started = [
            (i, s)
            for i, s in remaining
            if any(
                k.startswith(f"{i}:broker-{s.broker}:") and p.started
                for k, p in state.progress.steps.items()
            )
        ]
        if started:
            return started[0]
        head = remaining[0]
        controller = self._read().controller_id
        if head[1].broker == controller and len(remaining) > 1:
            later = next(r for r in remaining if r[1].broker != controller)
            self._journal(
                "gate",
                step=action_key(head[0], head[1], "order"),
                blocker=None,
                decision=f"broker {controller} is now the active controller: it goes last;"
                f" broker {later[1].broker} goes first",
            )
            return later
        return head

    # -- restart steps ------------------------------------------------------------------------

    def _restart(self, index: int, step: PlanStep, state: _Run) -> None:
        gates = self.s.gates[self.plan.playbook]
        broker = step.broker
        targeted = {parse_partition(p) for p in step.partitions}
        self.s.progress(f"broker {broker}: {step.reason}")
        for action in step.actions:
            key = action_key(index, step, action)
            if action == "gate restart-safety":
                if self._finished(state, action_key(index, step, "stop")):
                    continue
                self._act(state, key, lambda: self._pre_gate(step, targeted, state))
            elif action == "stop":
                self._act(state, key, lambda: self._stop(step, targeted, state, gates), True)
            elif action == "backup":
                self._act(state, key, lambda: self._backup(index, step, state), True)
            elif action == "delete":
                self._act(state, key, lambda: self._delete(step, state), True)
            elif action == "start":
                self._act(state, key, lambda: self._start(broker, gates), True)
            elif action == "wait registered":
                retried = key in state.progress.steps
                self._act(state, key, partial(self._wait_registered, broker, gates, retried))
            elif action == "wait in-sync":
                self._act(state, key, lambda: self._wait_in_sync(broker, gates))
            elif action == "verify topic-ids":
                self._act(state, key, lambda: self._verify_broker(step))
            else:
                raise HaltedError(f"step {index + 1}: unknown action {action!r} in the plan")
        if "delete" in {a for a in step.actions}:
            state.repaired |= {(broker, tp) for tp in targeted}

    def _stale(self, state: _Run, zk_state: ClusterState) -> StaleIdHolder:
        """Replicas the plan saw holding an id ZooKeeper does not, less those repaired."""
        stale: dict[TopicPartition, set[int]] = {}
        for key, file_id in self.plan.fingerprint.get("files", {}).items():
            broker_text, path = key.split(":", 1)
            name = path.rsplit("/", 2)[-2]
            try:
                parsed = parse_partition_dir(name, source="plan fingerprint")
            except FormatError:
                continue
            if parsed.kind != "live":
                continue
            tp = (parsed.topic, parsed.partition)
            topic = zk_state.topics.get(parsed.topic)
            broker = int(broker_text)
            if topic is None or file_id is None or file_id == topic.topic_id:
                continue
            if (broker, tp) not in state.repaired:
                stale.setdefault(tp, set()).add(broker)
        return StaleIdHolder({tp: frozenset(b) for tp, b in stale.items()})

    def _pre_gate_reason(
        self, step: PlanStep, targeted: Collection[TopicPartition], state: _Run
    ) -> str | None:
        zk_state = self._read()
        return pre_restart_blocker(
            zk_state,
            step.broker,
            expected=self.s.config.broker_ids,
            targeted=targeted,
            stale=self._stale(state, zk_state),
            min_isr_default=self.s.config.min_insync_replicas_default,
            restored={r.topic for r in self.plan.restores},
        )

    def _pre_gate(
        self, step: PlanStep, targeted: Collection[TopicPartition], state: _Run
    ) -> dict[str, Any]:
        blocker = self._pre_gate_reason(step, targeted, state)
        self._journal("gate", step=f"broker-{step.broker}:pre-gate", blocker=blocker)
        if blocker:
            raise HaltedError(f"pre-gate for broker {step.broker}: {blocker}")
        return {"blocker": None}

    def _stop(
        self, step: PlanStep, targeted: Collection[TopicPartition], state: _Run, gates: Gates
    ) -> dict[str, Any]:
        broker = step.broker
        if not self._is_down(broker):
            # A fresh gate right before the action: minutes may have passed since the pre-gate.
            blocker = self._pre_gate_reason(step, targeted, state)
            if blocker:
                raise HaltedError(f"broker {broker} was not stopped: {blocker}")
            self._service(broker, "stop", done=partial(self._is_down, broker))
        self._wait(
            partial(self._running_reason, broker),
            timeout=gates.stop_timeout_s,
            what=f"broker {broker} to stop",
        )
        return {"stopped": broker}

    def _backup(self, index: int, step: PlanStep, state: _Run) -> dict[str, Any]:
        self._require_down(step.broker, "backed up")
        backup = backup_files(
            self.s.transport_for(step.broker),
            step.files,
            backup_dir=f"{str(self.s.config.backup_dir).rstrip('/')}/{self.run_id}",
            label=f"step{index + 1}-broker{step.broker}",
            sudo=self.s.config.use_sudo(step.broker),
        )
        state.backups[step.broker] = backup
        self.s.progress(
            f"broker {step.broker}: backed up {len(backup.entries)} file(s) to {backup.archive}"
        )
        return {"backup": backup.to_json()}

    def _delete(self, step: PlanStep, state: _Run) -> dict[str, Any]:
        self._require_down(step.broker, "deleted")
        backup = state.backups.get(step.broker)
        if backup is None:
            raise HaltedError(f"broker {step.broker}: no verified backup in the journal")
        transport = self.s.transport_for(step.broker)
        sudo = self.s.config.use_sudo(step.broker)
        verify_backup(transport, backup, sudo=sudo)
        deleted = delete_backed_up(transport, backup, sudo=sudo)
        # Gone before this call (a crash in the middle of an earlier delete): the script
        # refuses unless every file is gone now, and each is in the verified backup.
        gone = [e.path for e in backup.entries if e.path not in deleted]
        state.deleted += list(deleted) + gone
        self.s.progress(f"broker {step.broker}: deleted {len(deleted)} file(s)")
        return {"deleted": list(deleted), "already_gone": gone}

    def _start(self, broker: int, gates: Gates) -> dict[str, Any]:
        if not self._registered(broker):
            self._service(broker, "start", done=partial(self._registered, broker))
        return {"started": broker}

    def _wait_registered(self, broker: int, gates: Gates, retried: bool) -> dict[str, Any]:
        if retried and not self._registered(broker) and self._process_down(broker):
            # A resumed run whose broker never came up (it exited at once, or its start command
            # has been fixed since): the step was waiting for exactly this start.
            self.lock.ensure_held()
            self._journal(
                "note",
                step=f"broker-{broker}:wait registered",
                decision=f"broker {broker} is not running on resume: starting it again",
            )
            self._service(broker, "start", done=partial(self._registered, broker))
        self._wait(
            self._registration_blocker(broker),
            timeout=gates.start_timeout_s,
            what=f"broker {broker} to register",
        )
        return {"registered": broker}

    def _registration_blocker(self, broker: int) -> Callable[[], str | None]:
        """Why `broker` is not registered yet; a process that exited after its start (the
        status command says twice, a second apart, that it is not running) halts at once
        instead of waiting out the start timeout."""
        clock = self.s.clock
        watch = {"next": clock.monotonic() + EXIT_CHECK_S, "down": 0}

        def blocker() -> str | None:
            reason = self._unregistered_reason(broker)
            now = clock.monotonic()
            if reason is None or self.s.config.service.status is None or now < watch["next"]:
                return reason
            watch["next"] = now + EXIT_CHECK_S
            try:
                down = self._process_down(broker)
            except TransportError:
                return reason  # unknown: the wait's own timeout still bounds it
            watch["down"] = watch["down"] + 1 if down else 0
            if watch["down"] >= 2:
                raise HaltedError(
                    f"broker {broker} exited after its start: its status command says it is"
                    " not running (see the broker's own log)"
                )
            return reason

        return blocker

    def _wait_in_sync(self, broker: int, gates: Gates) -> dict[str, Any]:
        held = self._wait(
            lambda: in_sync_blocker(self._sampled_read(self._topics_on(broker)), broker),
            timeout=gates.in_sync_timeout_s,
            what=f"broker {broker} back in the ISR of every partition it hosts",
            stable_for=gates.stability_window_s,
        )
        return {"in_sync_after_s": held}

    def _verify_broker(self, step: PlanStep) -> dict[str, Any]:
        zk_state = self._read()
        report = inspect_broker(
            self.s.config, self.s.config.broker(step.broker), self.s.transport_for
        )
        if not report.reachable:
            raise HaltedError(f"broker {step.broker}: files could not be read ({report.error})")
        wrong, missing = [], []
        for row in report.replicas:
            if row["topic"] is None or row["dir_kind"] != "live":
                continue
            topic = zk_state.topics.get(row["topic"])
            if topic is None or step.broker not in topic.assignment.partitions.get(
                row["partition"], ()
            ):
                continue
            name = f"{row['topic']}-{row['partition']}"
            if row["metadata_state"] == "missing":
                missing.append(name)
            elif row["file_topic_id"] != topic.topic_id:
                wrong.append(f"{name} holds {row['file_topic_id'] or row['metadata_state']}")
        if wrong:
            raise HaltedError(
                f"broker {step.broker}: files still disagree with ZooKeeper: {', '.join(wrong)}"
            )
        return {"verified": step.broker, "without_file_yet": sorted(missing)}

    # -- rollback -----------------------------------------------------------------------------

    def rollback(self, *, broker: int | None = None) -> dict[int, list[str]]:
        """Put back what the run deleted, broker by broker: gate, stop, restore, start."""
        state = _Run(replay(self.journal.records()))
        self._recover(state)
        chosen = {b: backup for b, backup in state.backups.items() if broker in (None, b)}
        if not chosen:
            which = f"broker {broker}" if broker is not None else "any broker"
            raise HaltedError(f"run {self.run_id} holds no backup for {which}")
        gates = self.s.gates[self.plan.playbook]
        restored: dict[int, list[str]] = {}
        for number, (target, backup) in enumerate(sorted(chosen.items())):
            key = f"rollback{number}:broker-{target}:"
            self._journal("rollback-started", step=key + "rollback", broker=target)
            zk_state = self._read()
            blocker = pre_restart_blocker(
                zk_state,
                target,
                expected=self.s.config.broker_ids,
                targeted=(),
                stale=StaleIdHolder({}),
                min_isr_default=self.s.config.min_insync_replicas_default,
            )
            self._journal("gate", step=key + "gate", blocker=blocker)
            if blocker and target in zk_state.brokers:
                raise HaltedError(f"rollback of broker {target} refused: {blocker}")
            self.lock.ensure_held()
            if not self._is_down(target):
                self._service(target, "stop", done=partial(self._is_down, target))
            self._wait(
                partial(self._running_reason, target),
                timeout=gates.stop_timeout_s,
                what=f"broker {target} to stop",
            )
            self.lock.ensure_held()
            paths = restore_backup(
                self.s.transport_for(target), backup, sudo=self.s.config.use_sudo(target)
            )
            self._journal("rollback-restored", step=key + "restore", restored=list(paths))
            self._service(target, "start", done=partial(self._registered, target))
            self._wait(
                partial(self._unregistered_reason, target),
                timeout=gates.start_timeout_s,
                what=f"broker {target} to register",
            )
            self._journal("rollback-finished", step=key + "rollback", broker=target)
            restored[target] = list(paths)
        return restored

    # -- restore steps ------------------------------------------------------------------------

    def _restore(self, index: int, step: RestoreStep, state: _Run) -> None:
        gates = self.s.gates.get(step.playbook) or self.s.gates[self.plan.playbook]
        self.s.progress(f"topic {step.topic}: {step.reason}")
        for action in step.actions:
            key = action_key(index, step, action)
            if action == "gate agreement":
                if self._finished(state, action_key(index, step, "zk-write topic-id")):
                    continue
                if not self._finished(state, key):
                    self._act(state, key, lambda: self._agreement_gate(step))
                    state.gated.add(key)
            elif action == "zk-write topic-id":
                # Resumed after the gate passed in an earlier process: checked again.
                regate = action_key(index, step, "gate agreement") not in state.gated
                self._act(state, key, partial(self._write_topic_id, step, regate=regate), True)
            elif action == "zk-write controller-election":
                if not step.reelect:
                    continue
                self._act(state, key, partial(self._reelect, state, key), True)
            elif action == "wait in-sync":
                self._act(
                    state,
                    key,
                    lambda: {
                        "in_sync_after_s": self._wait(
                            lambda: topic_in_sync_blocker(
                                self._sampled_read([step.topic]), step.topic
                            ),
                            timeout=gates.in_sync_timeout_s,
                            what=f"every partition of {step.topic} in sync",
                            stable_for=gates.stability_window_s,
                        )
                    },
                )
            elif action == "verify topic-ids":
                self._act(state, key, lambda: self._verify_topic(step, step.topic_id))
            else:
                raise HaltedError(f"step {index + 1}: unknown action {action!r} in the plan")

    def _agreement_gate(self, step: RestoreStep) -> dict[str, Any]:
        zk_state = self._read()
        topic = zk_state.topics.get(step.topic)
        blocker: str | None = None
        if topic is None:
            blocker = f"topic {step.topic} is gone"
        elif topic.znode_version != step.znode_version:
            blocker = (
                f"{topic_path(step.topic)} is at version {topic.znode_version}, the plan was"
                f" made at {step.znode_version}"
            )
        elif step.reelect:
            restored = {r.topic for r in self.plan.restores}
            blocker = missing_id_blocker(zk_state, restored=restored)
        if blocker is None:
            blocker = self._disagreement(step, step.topic_id)
        self._journal("gate", step=f"topic-{step.topic}:agreement", blocker=blocker)
        if blocker:
            raise HaltedError(f"restore of {step.topic} refused: {blocker}")
        return {"blocker": None}

    def _disagreement(self, step: RestoreStep, expected: str) -> str | None:
        """Every replica of the topic present, readable, and holding `expected`."""
        zk_state = self._read()
        assignment = zk_state.topics[step.topic].assignment.partitions
        hosts = sorted({b for replicas in assignment.values() for b in replicas})
        unknown = [b for b in hosts if b not in self.s.config.broker_ids]
        if unknown:
            return f"broker(s) {unknown} host {step.topic} but are not in the configuration"
        found: dict[tuple[int, int], str | None] = {}
        # Every host at once, in parallel, as the scan collects them.
        for report in collect_brokers(self.s.config, hosts, transport_for=self.s.transport_for):
            if not report.reachable:
                return f"broker {report.broker_id} could not be inspected ({report.error})"
            broker = report.broker_id
            for row in report.replicas:
                if row["topic"] == step.topic and row["dir_kind"] == "live":
                    no_file = row["metadata_state"] == "missing"
                    found[(broker, row["partition"])] = NO_FILE if no_file else row["file_topic_id"]
        # A replica without the file takes ZooKeeper's id at its next LeaderAndIsr.
        bad = [
            f"{step.topic}-{p} on broker {b}: {found.get((b, p)) or 'no directory or unreadable'}"
            for p, replicas in sorted(assignment.items())
            for b in replicas
            if found.get((b, p)) not in (expected, NO_FILE)
        ]
        if bad:
            return f"replicas do not all hold {expected}: " + ", ".join(bad[:6])
        if expected not in found.values():
            return f"no replica holds {expected}"
        return None

    def _write_topic_id(self, step: RestoreStep, *, regate: bool) -> dict[str, Any]:
        path = topic_path(step.topic)
        data, stat = self.s.zk.get(path, on_retry=self._retried("a ZooKeeper request"))
        current = decode_topic(data, source=path)
        if current.topic_id is not None and str(current.topic_id) == step.topic_id:
            return {"znode_version": stat.version, "already": True}
        if regate:
            # Minutes may have passed since the gate passed in an earlier process.
            self._journal(
                "note",
                step=f"topic-{step.topic}:agreement",
                decision="resumed: the gate is checked again",
            )
            self._agreement_gate(step)
        if stat.version != step.znode_version:
            raise HaltedError(
                f"{path} changed since the plan (version {stat.version}, plan"
                f" {step.znode_version}); nothing written"
            )
        updated = with_topic_id(
            data, parse_topic_id(step.topic_id, source="plan", field="topic_id"), source=path
        )
        failpoints.hit("zk-write topic-id:read")
        self.lock.ensure_held()
        try:
            new_stat = self.s.zk.set(path, updated, version=step.znode_version)
        except VersionConflictError as exc:
            raise HaltedError(f"{path} changed while writing; nothing written") from exc
        except ZooKeeperError as exc:
            raise HaltedError(f"{path}: ZooKeeper write failed: {exc}") from exc
        self.s.progress(f"topic {step.topic}: wrote {step.topic_id} into {path}")
        return {"znode_version": new_stat.version, "topic_id": step.topic_id}

    def _reelect(self, state: _Run, key: str) -> dict[str, Any]:
        before = self._controller_epoch()
        # Resumed: if an election already happened after the one this action recorded, the
        # delete took effect and is not repeated.
        recorded = [
            r.get("controller_epoch_before")
            for r in self.journal.records()
            if r.get("event") == "note" and r.get("step") == key
        ]
        if recorded and isinstance(recorded[-1], int) and before > recorded[-1]:
            return {"controller_epoch": before, "already": True}
        # A fresh check right before the election (a resumed run may come minutes later): no
        # topic may be without an id, or the new controller mints one no replica holds.
        blocker = missing_id_blocker(self._read(), restored=())
        self._journal("gate", step=key, blocker=blocker)
        if blocker:
            raise HaltedError(f"controller election refused: {blocker}")
        self._journal("note", step=key, controller_epoch_before=before)
        self.lock.ensure_held()
        with contextlib.suppress(ZnodeMissingError):
            self.s.zk.delete(CONTROLLER, on_retry=self._retried("a ZooKeeper request"))
        self._wait(
            lambda: (
                None
                if self._controller_epoch() > before and self._read().controller_id is not None
                else "no new controller yet"
            ),
            timeout=ELECTION_TIMEOUT_S,
            what="a new controller",
        )
        after = self._read()
        self.s.progress(f"controller re-elected: broker {after.controller_id}")
        return {"controller": after.controller_id, "controller_epoch": after.controller_epoch}

    def _verify_topic(self, step: RestoreStep, expected: str) -> dict[str, Any]:
        zk_state = self._read()
        topic = zk_state.topics.get(step.topic)
        if topic is None or topic.topic_id != expected:
            raise HaltedError(f"{topic_path(step.topic)} does not hold {expected}")
        blocker = self._disagreement(step, expected)
        if blocker:
            raise HaltedError(f"topic {step.topic}: {blocker}")
        return {"verified": step.topic, "topic_id": expected}

    # -- plumbing -----------------------------------------------------------------------------

    def _finished(self, state: _Run, key: str) -> bool:
        return key in state.finished

    def _act(
        self,
        state: _Run,
        key: str,
        action: Callable[[], dict[str, Any]],
        destructive: bool = False,
    ) -> None:
        if self._finished(state, key):
            return
        resumed = state.progress.in_flight == key
        point = StepKey.parse(key).action
        self._journal("step-started", step=key, resumed=resumed)
        self._log("step started", key)
        failpoints.hit(f"{point}:started")
        try:
            if destructive:
                self.lock.ensure_held()
            result = action()
            failpoints.hit(f"{point}:done")
        except LockLostError as exc:
            self._journal("step-failed", step=key, error=str(exc))
            raise
        except (HaltedError, TransportError, ZooKeeperError, FormatError) as exc:
            self._journal("step-failed", step=key, error=str(exc))
            self._log("step failed", key, error=str(exc))
            if isinstance(exc, HaltedError):
                raise
            raise HaltedError(f"{key}: {exc}") from exc
        self._journal("step-finished", step=key, result=result)
        self._log("step finished", key)
        state.finished.add(key)
        failpoints.hit(f"{point}:finished")

    def _journal(self, event: str, **fields: Any) -> None:
        self._journal_zk_states()
        self.journal.append(event, now=self.s.clock.now(), **fields)

    def _log(self, message: str, key: str, **fields: Any) -> None:
        if self.s.log is None:
            return
        parsed = StepKey.parse(key)
        self.s.log.info(
            message, broker=parsed.broker, topic=parsed.topic, step=parsed.action, **fields
        )

    def _retried(self, what: str) -> Callable[[int, BaseException], None]:
        """Journals a retry of `what` (the journal explains what a run lived through)."""

        def record(attempt: int, error: BaseException) -> None:
            self._journal(
                "retry", what=what, attempt=attempt, error=f"{type(error).__name__}: {error}"
            )
            if self.s.log is not None:
                self.s.log.warning("retrying", what=what, attempt=attempt, error=repr(error))

        return record

    def _before_sleep(self, what: str) -> Callable[[RetryCallState], None]:
        record = self._retried(what)

        def tell(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            if error is not None:
                record(state.attempt_number, error)

        return tell

    def _over_ssh(self, what: str, *, wait_s: float) -> Retrying:
        """Three attempts at a remote command whose connection may drop, each retry journaled
        (a host key that fails verification is never retried)."""
        return Retrying(
            stop=stop_after_attempt(3),
            wait=wait_fixed(wait_s),
            retry=retry_if_exception(dropped_connection),
            before_sleep=self._before_sleep(what),
            reraise=True,
        )

    def _read(self, topics: Collection[str] | None = None) -> ClusterState:
        try:
            return read_cluster_state(
                self.s.zk, topics=topics, on_retry=self._retried("a ZooKeeper read")
            )
        except RemediationError as exc:
            raise HaltedError(f"ZooKeeper could not be read: {exc}") from exc

    def _topics_on(self, broker: int) -> list[str]:
        """The topics with a replica on `broker` (read once per wait; a wait is short)."""
        if broker not in self._topic_cache:
            zk_state = self._read()
            self._topic_cache[broker] = sorted({t for t, _ in zk_state.partitions_on(broker)})
        return self._topic_cache[broker]

    def _sampled_read(self, topics: Collection[str] | None = None) -> ClusterState:
        """A read of `topics` for a wait, with a health sample of the whole cluster in the
        journal now and then (the report draws them; the tests check them)."""
        zk_state = self._read(topics)
        now = self.s.clock.monotonic()
        if now - self._last_sample >= SAMPLE_EVERY_S:
            self._sample(zk_state if topics is None else None)
        return zk_state

    def _sample(self, zk_state: ClusterState | None = None) -> None:
        """Journal the cluster's health now, from `zk_state` if it covers every topic."""
        self._last_sample = self.s.clock.monotonic()
        whole = self._read() if zk_state is None else zk_state
        self._journal("sample", **health_sample(whole, self.s.config.min_insync_replicas_default))

    def _controller_epoch(self) -> int:
        data, _ = self.s.zk.get("/controller_epoch", on_retry=self._retried("a ZooKeeper request"))
        return decode_controller_epoch(data)

    def _running_reason(self, broker: int) -> str | None:
        """Why `broker` is not down: still registered, or its process still runs."""
        # Registration needs no topic; the whole cluster is read only for the sample.
        blocker = stopped_blocker(self._sampled_read(()), broker)
        if blocker is None and not self._process_down(broker):
            blocker = f"broker {broker}'s process still runs"
        return blocker

    def _registered(self, broker: int) -> bool:
        return broker in self._read().brokers

    def _unregistered_reason(self, broker: int) -> str | None:
        registered = broker in self._sampled_read(()).brokers
        return None if registered else f"broker {broker} is not registered"

    def _is_down(self, broker: int) -> bool:
        return self._running_reason(broker) is None

    def _process_down(self, broker: int) -> bool:
        """The service's status command says it is not running (no command: trust ZK)."""
        template = self.s.config.service.status
        if template is None:
            return True
        command = self.s.config.service_command("status", self.s.config.broker(broker))
        # Read-only, so a dropped connection is simply retried.
        for attempt in self._over_ssh(f"broker {broker}'s status command", wait_s=1):
            with attempt:
                return not self.s.transport_for(broker).run(command, timeout=60).ok
        raise TransportError("unreachable")  # pragma: no cover

    def _require_down(self, broker: int, what: str) -> None:
        if not self._is_down(broker):
            raise HaltedError(
                f"broker {broker} is running again: files are {what} only on a stopped broker"
            )

    def _service(
        self, broker: int, verb: Literal["stop", "start"], *, done: Callable[[], bool]
    ) -> None:
        """Run a service command, retrying a dropped connection only after re-checking that
        the command has not already taken effect."""
        command = self.s.config.service_command(verb, self.s.config.broker(broker))
        for attempt in self._over_ssh(f"broker {broker}'s {verb} command", wait_s=2):
            with attempt:
                if attempt.retry_state.attempt_number > 1 and done():
                    return
                result = self.s.transport_for(broker).run(command, timeout=SERVICE_TIMEOUT_S)
                if not result.ok:
                    raise HaltedError(
                        f"broker {broker}: {verb} command exited {result.exit_code}:"
                        f" {result.stderr.strip()[-300:]}"
                    )

    def _wait(
        self,
        blocker: Callable[[], str | None],
        *,
        timeout: float,
        what: str,
        stable_for: float = 0.0,
    ) -> float:
        """Poll until `blocker` returns None and keeps doing so for `stable_for` seconds."""
        clock = self.s.clock
        start = clock.monotonic()
        since: float | None = None
        last = "not checked"
        while True:
            now = clock.monotonic()
            reason = blocker()
            if reason is None:
                since = now if since is None else since
                if now - since >= stable_for:
                    return round(now - start, 3)
            else:
                since, last = None, reason
            if now - start > timeout:
                raise HaltedError(
                    f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last}"
                )
            clock.sleep(POLL_S)
