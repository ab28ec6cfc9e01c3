"""A restart step: gate, stop, back up, delete, start, wait until registered and in sync,
verify the files now carry ZooKeeper's ids. Each action through the recorder, so each is
journaled, none is repeated on resume, and one left out is journaled with the reason."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property, partial
from typing import Any

from remediate.collect.collector import inspect_broker, read_server_properties
from remediate.errors import FormatError, HaltedError, StopRequestedError, TransportError
from remediate.execute import hooks
from remediate.execute.backup import backup_files, delete_backed_up, verify_backup
from remediate.execute.cleanshutdown import (
    MARKER_TIMEOUT_S,
    marker_script,
    read_markers,
    recovery_note,
)
from remediate.execute.decisions import files_disagreeing, stale_holders
from remediate.execute.journal import JournalEvent
from remediate.execute.services import RunLedger
from remediate.execute.startwait import wait_started
from remediate.execute.stepbase import StepRun
from remediate.execute.steps import Decision, RunAction, StepKey
from remediate.gates import (
    Degraded,
    ShutdownAllowance,
    degraded,
    in_sync_blocker,
    newly_degraded_blocker,
    pre_restart_blocker,
    shutdown_allowance,
)
from remediate.plan import RestartStep
from remediate.playbook import Action, Timeouts
from remediate.ports import CommandKind
from remediate.state import ClusterState, ReplicaRef, TopicPartition


class RestartRun(StepRun[RestartStep]):
    """Carries out one restart step of `plan`."""

    # Set by this process's pre-gate and stop (a resumed run reads the journal instead).
    _before: Degraded | None = None
    _allowance: ShutdownAllowance | None = None
    # The brokers restarted together with this one, itself included (execute/batch.py sets
    # it); empty: alone.
    together: frozenset[int] = frozenset()

    @property
    def ledger(self) -> RunLedger:
        return self.recorder.ledger

    @property
    def broker(self) -> int:
        return self.step.broker

    @property
    def gates(self) -> Timeouts:
        return self.services.gates[self.plan.playbook]

    @cached_property
    def targeted(self) -> set[TopicPartition]:
        return set(self.step.partitions)

    @cached_property
    def accepted(self) -> set[TopicPartition]:
        """The partitions the plan predicts this step may leave unavailable: no gate blocks
        on them."""
        predicted = self.step.predicted
        return set(predicted.expected | set(predicted.last_in_isr))

    @cached_property
    def excused(self) -> set[TopicPartition]:
        """The partitions the broker is not expected back in the ISR of after its start."""
        predicted = self.step.predicted
        return {*predicted.out_of_isr_after, *predicted.after}

    @property
    def allowed(self) -> frozenset[TopicPartition]:
        """Partitions that may be offline or under min ISR after the step: the prediction's,
        and those the plan found unavailable before the run."""
        predicted = self.step.predicted
        return (
            predicted.expected
            | frozenset(predicted.last_in_isr)
            | frozenset(self.plan.unavailable_now)
        )

    def key(self, action: str) -> StepKey:
        return StepKey.for_broker(self.index, self.broker, action)

    def run(self) -> None:
        self.services.progress(f"broker {self.broker}: {self.step.reason}")
        try:
            self._run()
        except StopRequestedError as stop:
            self.start_again(stop.signal)
            raise

    def start_again(self, signal: str) -> None:
        """A stop was asked for: a broker this step stopped and has not started yet is
        started. With its files deleted that is the step's own start (resume goes on with the
        waits); before, it is a start of its own, and the stop (and the backup, if made) are
        journaled as undone, so that resume stops and backs it up again."""
        act, finished = self.recorder.act, self.recorder.finished
        start = self.key(Action.START)
        if not finished(self.key(Action.STOP)) or finished(start):
            return
        if Action.START not in self.step.actions:
            return
        if finished(self.key(Action.DELETE)):
            act(start, self.start, destructive=True, interruptible=False)
            return
        act(
            self.key(RunAction.START_AGAIN),
            self.start,
            destructive=True,
            once=False,
            interruptible=False,
        )
        for action in (Action.BACKUP, Action.STOP):
            key = self.key(action)
            if finished(key):
                self.recorder.record(
                    JournalEvent.STEP_UNDONE,
                    step=str(key),
                    reason=f"broker {self.broker} started again before its files were"
                    f" deleted ({signal}): resume does this again",
                )
                self.ledger.finished.discard(str(key))

    def _run(self) -> None:
        for action in self.step.actions:
            self.do(action)
        self.done()

    def done(self) -> None:
        if Action.DELETE in self.step.actions:
            self.ledger.repaired |= {ReplicaRef(self.broker, tp) for tp in self.targeted}

    def do(self, action: Action, *, hooked: bool = True) -> None:
        """One action of the step, through the recorder; `hooked`: with the hooks around it
        (a batch runs its hooks once for all its brokers)."""
        act = self.recorder.act
        key = self.key(action)
        if action == Action.GATE_RESTART_SAFETY:
            self._gate(key)
        elif action == Action.STOP:
            if hooked:
                self._hooked_stop(key)
            else:
                act(key, self.stop, destructive=True)
        elif action == Action.BACKUP:
            act(key, self.backup, destructive=True)
        elif action == Action.DELETE:
            act(key, self.delete, destructive=True)
        elif action == Action.START:
            act(key, self.start, destructive=True)
        elif action == Action.WAIT_REGISTERED:
            retried = str(key) in self.ledger.progress.steps
            act(key, partial(self.wait_registered, retried))
        elif action == Action.WAIT_IN_SYNC:
            act(key, self.wait_in_sync)
            if hooked:
                self.hook(hooks.AFTER, RunAction.HOOK_AFTER, once=True)
        elif action == Action.VERIFY_TOPIC_IDS:
            act(key, self.verify)
        else:
            raise HaltedError(f"step {self.index + 1}: unknown action {action!r} in the plan")

    def _gate(self, key: StepKey) -> None:
        stop = self.key(Action.STOP)
        if self.recorder.finished(stop):
            self.recorder.skip(
                key,
                f"broker {self.broker} was stopped by this run already ({stop}):"
                " the gate before its stop is not checked again",
            )
            return
        self.recorder.act(key, self.pre_gate)

    def _hooked_stop(self, key: StepKey) -> None:
        if not self.recorder.finished(key):
            # Again on a resume that has not stopped the broker yet: a silence the hook set
            # may have ended meanwhile.
            self.hook(hooks.BEFORE, RunAction.HOOK_BEFORE, once=False)
        self.recorder.act(key, self.stop, destructive=True)

    def hook(
        self, name: str, action: RunAction, *, once: bool, brokers: Sequence[int] = ()
    ) -> None:
        """cluster.yaml's hook `name` around this step's batch (`brokers`; by default its
        one broker), if set."""
        brokers = list(brokers) or [self.broker]
        config = self.services.config
        command = getattr(config.hooks, name, None) if config.hooks is not None else None
        if command is None or config.hooks is None:
            return
        timeout_s = config.hooks.timeout_s
        env = hooks.hook_environment(
            hook=name,
            run_id=self.recorder.journal.run_id,
            cluster=config.cluster,
            step=self.index + 1,
            brokers=brokers,
            hosts=[config.broker(b).host for b in brokers],
        )
        self.recorder.act(
            self.key(action),
            lambda: hooks.run_hook(
                name, command, env=env, cwd=config.base_dir, timeout_s=timeout_s
            ),
            once=once,
        )

    # -- the actions --------------------------------------------------------------------------

    def pre_gate_blocker(self, state: ClusterState | None = None) -> str | None:
        state = self.probes.read() if state is None else state
        config = self.services.config
        return pre_restart_blocker(
            state,
            self.broker,
            expected=config.broker_ids,
            targeted=self.targeted,
            stale=stale_holders(self.plan.fingerprint, state, self.ledger.repaired),
            min_isr=self.services.min_isr,
            restored={r.topic for r in self.plan.restores},
            accepted=self.accepted,
            batch=self.together,
        )

    def pre_gate(self) -> dict[str, Any]:
        state = self.probes.read()
        blocker = self.pre_gate_blocker(state)
        gate = StepKey.for_broker(None, self.broker, Decision.PRE_GATE)
        self.recorder.record(JournalEvent.GATE, step=str(gate), blocker=blocker)
        if blocker:
            raise HaltedError(f"pre-gate for broker {self.broker}: {blocker}")
        # What was already degraded before the step: the post-gate compares against it.
        before = degraded(state, self.services.min_isr)
        self._before = before
        return {"blocker": None, "predicted": self.step.predicted.to_json(), **before.to_json()}

    def baseline(self) -> Degraded | None:
        """The partitions degraded before the step, from its pre-gate (this process's, or the
        journal's on resume); None when the step had no pre-gate or an older journal lacks it."""
        if self._before is not None:
            return self._before
        journaled = self.ledger.progress.steps.get(str(self.key(Action.GATE_RESTART_SAFETY)))
        if journaled is None or "offline_partitions" not in journaled.result:
            return None
        return Degraded.from_json(journaled.result)

    def stop(self) -> dict[str, Any]:
        broker = self.broker
        if not self.probes.is_down(broker):
            # A fresh gate right before the action: minutes may have passed since the pre-gate.
            blocker = self.pre_gate_blocker()
            if blocker:
                raise HaltedError(f"broker {broker} was not stopped: {blocker}")
            # Read while the broker still runs; the wait below uses it.
            self._allowance = self.shutdown_allowance()
            self.probes.service(broker, "stop", done=partial(self.probes.is_down, broker))
        allowance = self._allowance or self.shutdown_allowance()
        timeout = self.gates.stop_timeout_s + (allowance.seconds if allowance else 0.0)
        self.probes.wait(
            partial(self.probes.running_blocker, broker),
            timeout=timeout,
            what=f"broker {broker} to stop",
        )
        result: dict[str, Any] = {"stopped": broker}
        if allowance is not None:
            result["stop_timeout_s"] = timeout
            result["controlled_shutdown"] = allowance.to_json()
        clean = self.clean_shutdown()
        if clean is not None:
            result["clean_shutdown"] = clean
        return result

    def clean_shutdown(self) -> dict[str, bool] | None:
        """Per log dir of the stopped broker, whether Kafka left its clean-shutdown marker.
        A log dir without it faces log recovery at the start: journaled, with the wait to
        expect. None when the log dirs could not be read (the next action reads them)."""
        config = self.services.config
        log_dirs = [str(d) for d in config.broker(self.broker).log_dirs or ()]
        if not log_dirs:
            return None
        transport = self.services.transport_for(self.broker)
        step = str(StepKey.for_broker(None, self.broker, Action.STOP))
        try:
            found = transport.run(
                marker_script(log_dirs), timeout=MARKER_TIMEOUT_S, kind=CommandKind.PROBE
            )
            clean = read_markers(log_dirs, found.stdout) if found.ok else None
        except TransportError:
            clean = None
        if clean is None:
            self.recorder.record(
                JournalEvent.NOTE,
                step=step,
                decision=f"broker {self.broker}: its clean-shutdown markers could not be read",
            )
            return None
        unclean = recovery_note(self.broker, clean, self.gates.start_timeout_s)
        if unclean is not None:
            self.recorder.record(JournalEvent.NOTE, step=step, decision=unclean)
        return clean

    def shutdown_allowance(self) -> ShutdownAllowance | None:
        """The controlled-shutdown retries to allow for when the broker is the last in-sync
        replica of a partition (the plan's `last_in_isr`): none otherwise. Read from the
        broker's server.properties when its config names the file, else Kafka's defaults."""
        if not self.step.predicted.last_in_isr:
            return None
        config = self.services.config
        broker = config.broker(self.broker)
        if broker.server_properties is None:
            return shutdown_allowance(None)
        path = f"broker {self.broker}:{broker.server_properties}"
        try:
            props = read_server_properties(config, broker, self.services.transport_for(self.broker))
        except (TransportError, FormatError) as exc:
            # Only a timeout depends on it: Kafka's defaults, and the journal says why.
            self.recorder.record(
                JournalEvent.NOTE,
                step=str(StepKey.for_broker(None, self.broker, Action.STOP)),
                decision=f"{path} could not be read ({exc}): Kafka's defaults allowed",
            )
            return shutdown_allowance(None)
        return shutdown_allowance(props, source=path)

    def backup(self) -> dict[str, Any]:
        config = self.services.config
        self.probes.require_down(self.broker, "backed up")
        # A backup undone (its broker started again after a stop request) is made afresh
        # under a label of its own: the files may have changed while the broker ran.
        journaled = self.ledger.progress.steps.get(str(self.key(Action.BACKUP)))
        again = f"-again{journaled.undone}" if journaled is not None and journaled.undone else ""
        backup = backup_files(
            self.services.transport_for(self.broker),
            self.step.files,
            backup_dir=f"{str(config.backup_dir).rstrip('/')}/{self.recorder.journal.run_id}",
            label=f"step{self.index + 1}-broker{self.broker}{again}",
        )
        self.ledger.backups[self.broker] = backup
        self.services.progress(
            f"broker {self.broker}: backed up {len(backup.entries)} file(s) to {backup.archive}"
        )
        return {"backup": backup.to_json()}

    def delete(self) -> dict[str, Any]:
        broker = self.broker
        self.probes.require_down(broker, "deleted")
        self.probes.require_no_migration(f"deletion on broker {broker}")
        backup = self.ledger.backups.get(broker)
        if backup is None:
            raise HaltedError(f"broker {broker}: no verified backup in the journal")
        transport = self.services.transport_for(broker)
        verify_backup(transport, backup)
        deleted = delete_backed_up(transport, backup)
        # Gone before this call (a crash in the middle of an earlier delete): the script
        # refuses unless every file is gone now, and each is in the verified backup.
        gone = [e.path for e in backup.entries if e.path not in deleted]
        self.ledger.deleted += list(deleted) + gone
        self.services.progress(f"broker {broker}: deleted {len(deleted)} file(s)")
        return {"deleted": list(deleted), "already_gone": gone}

    def start(self) -> dict[str, Any]:
        if not self.probes.registered(self.broker):
            self._start_service()
        return {"started": self.broker}

    def _start_service(self) -> None:
        broker = self.broker
        self.probes.service(broker, "start", done=partial(self.probes.registered, broker))

    def wait_registered(self, retried: bool) -> dict[str, Any]:
        broker = self.broker
        if retried and not self.probes.registered(broker) and self.probes.process_down(broker):
            # A resumed run whose broker never came up (it exited at once, or its start command
            # has been fixed since): the step was waiting for exactly this start.
            self.recorder.lock.ensure_held()
            self.recorder.record(
                JournalEvent.NOTE,
                step=str(StepKey.for_broker(None, broker, Action.WAIT_REGISTERED)),
                decision=f"broker {broker} is not running on resume: starting it again",
            )
            self._start_service()
        waited = wait_started(
            self.probes,
            self.recorder,
            broker,
            self.probes.registration_blocker(broker),
            timeout=self.gates.start_timeout_s,
            step=str(StepKey.for_broker(None, broker, Action.WAIT_REGISTERED)),
        )
        return {"registered": broker, **waited}

    def wait_in_sync(self) -> dict[str, Any]:
        """The post-gate: the broker registered and back in the ISR of every partition it
        hosts but those the plan excuses, and none of those partitions newly offline or under
        min ISR unless the plan names it (a restart of this broker degrades only partitions
        with a replica on it; the next pre-gate reads the whole cluster)."""
        broker = self.broker
        before = self.baseline()
        min_isr = self.services.min_isr
        seen: dict[str, frozenset[TopicPartition]] = {}

        def blocker() -> str | None:
            state = self.probes.sampled_read(self.probes.topics_on(broker))
            now = degraded(state, min_isr)
            seen["degraded"] = now.partitions
            harmed = (
                None
                if before is None
                else newly_degraded_blocker(before, now, allowed=self.allowed)
            )
            return harmed or in_sync_blocker(state, broker, excused=self.excused)

        held = self.probes.wait(
            blocker,
            timeout=self.gates.in_sync_timeout_s,
            what=f"broker {broker} back in the ISR of every partition it hosts",
            stable_for=self.gates.stability_window_s,
        )
        result: dict[str, Any] = {"in_sync_after_s": held}
        predicted = self.step.predicted
        if predicted.expected or predicted.last_in_isr:
            result["excused"] = sorted(str(tp) for tp in self.excused)
            result["unavailable_after"] = sorted(
                str(tp) for tp in seen.get("degraded", frozenset())
            )
        return result

    def verify(self) -> dict[str, Any]:
        broker = self.broker
        state = self.probes.read()
        config = self.services.config
        report = inspect_broker(config, config.broker(broker), self.services.transport_for)
        if not report.reachable:
            raise HaltedError(f"broker {broker}: files could not be read ({report.error})")
        wrong, missing = files_disagreeing(state, broker, report.replicas)
        if wrong:
            raise HaltedError(
                f"broker {broker}: files still disagree with ZooKeeper: {', '.join(wrong)}"
            )
        return {"verified": broker, "without_file_yet": sorted(missing)}
