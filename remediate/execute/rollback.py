"""Rollback: put back what a run deleted, broker by broker: gate, stop, restore the verified
backup, start, wait until registered. Every action goes through the recorder like a run's
(journaled before and after under `rollback{n}:broker-{N}:{action}` keys, failpoints at
`<action>:started|done|finished`), between a broker's rollback-started and rollback-finished
records. A rollback is carried out whole each time it is asked for: its actions are never
skipped as done by an earlier rollback."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from remediate.errors import HaltedError, StopRequestedError
from remediate.execute.backup import Backup, restore_backup
from remediate.execute.journal import JournalEvent
from remediate.execute.probes import Probes
from remediate.execute.recorder import Recorder
from remediate.execute.services import Services
from remediate.execute.startwait import wait_started
from remediate.execute.steps import Decision, RunAction, StepKey
from remediate.gates import StaleIdHolder, migration_blocker, pre_restart_blocker
from remediate.plan import Plan
from remediate.playbook import Action, Timeouts


class BrokerRollback:
    """Rollback number `number` of the run: `broker`'s files put back from `backup`."""

    def __init__(
        self,
        services: Services,
        recorder: Recorder,
        probes: Probes,
        gates: Timeouts,
        number: int,
        broker: int,
        backup: Backup,
    ) -> None:
        self.services = services
        self.recorder = recorder
        self.probes = probes
        self.gates = gates
        self.number = number
        self.broker = broker
        self.backup = backup
        self.restored: list[str] = []

    def key(self, action: str) -> str:
        return str(StepKey.for_rollback(self.number, self.broker, action))

    def run(self) -> list[str]:
        """The files put back."""
        recorder = self.recorder
        recorder.record(
            JournalEvent.ROLLBACK_STARTED, step=self.key(Decision.ROLLBACK), broker=self.broker
        )

        def act(
            action: str, carry_out: Callable[[], dict[str, Any]], *, destructive: bool = False
        ) -> None:
            key = StepKey.for_rollback(self.number, self.broker, action)
            recorder.act(key, carry_out, destructive=destructive, once=False)

        try:
            act(Action.GATE_RESTART_SAFETY, self.gate)
            act(Action.STOP, self.stop, destructive=True)
            act(RunAction.RESTORE_BACKUP, self.restore, destructive=True)
            act(Action.START, self.start)
            act(Action.WAIT_REGISTERED, self.wait_registered)
        except StopRequestedError:
            self.start_again()
            raise
        recorder.record(
            JournalEvent.ROLLBACK_FINISHED, step=self.key(Decision.ROLLBACK), broker=self.broker
        )
        return self.restored

    def start_again(self) -> None:
        """A signal asked the rollback to stop: the broker it stopped and has not started yet
        is started, with its files put back or not (either way a state the broker ran in),
        whatever the signal; `rollback` again does the whole of it."""
        finished = self.recorder.finished
        key = partial(StepKey.for_rollback, self.number, self.broker)
        if finished(key(Action.STOP)) and not finished(key(Action.START)):
            self.recorder.act(
                key(Action.START), self.start, destructive=True, once=False, interruptible=False
            )

    def gate(self) -> dict[str, Any]:
        """The restart-safety gate, as before a run's stop; a broker already down has
        nothing left to protect by waiting, so its blocker does not hold the rollback, unless
        a ZooKeeper-to-KRaft migration has begun: files written back then hold ids that
        KRaft's controller does not know."""
        config = self.services.config
        state = self.probes.read()
        blocker = pre_restart_blocker(
            state,
            self.broker,
            expected=config.broker_ids,
            targeted=(),
            stale=StaleIdHolder({}),
            min_isr=self.services.min_isr,
        )
        self.recorder.record(
            JournalEvent.GATE, step=self.key(Decision.ROLLBACK_GATE), blocker=blocker
        )
        migration = migration_blocker(state)
        if migration is not None or (blocker and self.broker in state.brokers):
            raise HaltedError(f"rollback of broker {self.broker} refused: {migration or blocker}")
        return {"blocker": blocker, "registered": self.broker in state.brokers}

    def stop(self) -> dict[str, Any]:
        probes, broker = self.probes, self.broker
        if not probes.is_down(broker):
            probes.service(broker, "stop", done=partial(probes.is_down, broker))
        probes.wait(
            partial(probes.running_blocker, broker),
            timeout=self.gates.stop_timeout_s,
            what=f"broker {broker} to stop",
        )
        return {"stopped": broker}

    def restore(self) -> dict[str, Any]:
        broker = self.broker
        self.probes.require_down(broker, "restored")
        self.probes.require_no_migration(f"restore of broker {broker}'s backup")
        paths = restore_backup(self.services.transport_for(broker), self.backup)
        self.restored = list(paths)
        self.recorder.record(
            JournalEvent.ROLLBACK_RESTORED,
            step=self.key(RunAction.RESTORE_BACKUP),
            restored=list(paths),
        )
        return {"restored": list(paths)}

    def start(self) -> dict[str, Any]:
        broker = self.broker
        self.probes.service(broker, "start", done=partial(self.probes.registered, broker))
        return {"started": broker}

    def wait_registered(self) -> dict[str, Any]:
        broker = self.broker
        waited = wait_started(
            self.probes,
            self.recorder,
            broker,
            partial(self.probes.unregistered_blocker, broker),
            timeout=self.gates.start_timeout_s,
            step=self.key(Action.WAIT_REGISTERED),
        )
        return {"registered": broker, **waited}


def rollback(
    plan: Plan,
    services: Services,
    recorder: Recorder,
    probes: Probes,
    *,
    broker: int | None = None,
) -> dict[int, list[str]]:
    """Restore every backup the run's journal holds (only `broker`'s, if given); the files
    put back, by broker."""
    run_id = recorder.journal.run_id
    chosen = {b: backup for b, backup in recorder.ledger.backups.items() if broker in (None, b)}
    if not chosen:
        which = f"broker {broker}" if broker is not None else "any broker"
        raise HaltedError(f"run {run_id} holds no backup for {which}")
    gates = services.gates[plan.playbook]
    restored: dict[int, list[str]] = {}
    for number, (target, backup) in enumerate(sorted(chosen.items())):
        one = BrokerRollback(services, recorder, probes, gates, number, target, backup)
        restored[target] = one.run()
    return restored
