"""The executor: carries out exactly an approved plan, one journaled action at a time.

Every action is journaled (fsynced) before and after. A destructive action (stop, delete,
znode write, controller election) is preceded by a check that the run still holds the
cluster's lock and by a fresh gate decided on state read a moment before. Completed actions
are never repeated on resume; the one that was in flight is re-verified (it either took
effect, which is checked, or it is carried out now). Any gate that does not pass within its
timeout halts the run with the exact state it saw.

This module is the run loop (recover from the journal; the restores, moves and triggers in
the plan's order, then the restarts with the controller last, then the convergence gate); the
steps are in restart.py, restore.py, move.py and converge.py, what they read and wait for in
probes.py, their decisions in decisions.py.
"""

from __future__ import annotations

from remediate.errors import HaltedError, StopRequestedError
from remediate.execute.backup import Backup
from remediate.execute.batch import BatchRun
from remediate.execute.converge import Converge
from remediate.execute.decisions import IndexedStep, batch_of, next_restart, started_restart
from remediate.execute.journal import Journal, JournalEvent, RunStatus, replay
from remediate.execute.lock import RunLock
from remediate.execute.move import MoveRun, TriggerRun
from remediate.execute.probes import Probes
from remediate.execute.recorder import Recorder
from remediate.execute.restart import RestartRun
from remediate.execute.restore import RestoreRun
from remediate.execute.rollback import rollback
from remediate.execute.services import RunLedger, RunOutcome, Services
from remediate.execute.steps import Decision, StepKey
from remediate.plan import MoveStep, Plan, RestartStep, RestoreStep, TriggerStep
from remediate.playbook import Action

__all__ = ["Executor", "RunOutcome", "Services"]


def recover(ledger: RunLedger) -> None:
    """Backups and deletions already done (a resumed run) come from the journal."""
    for text, step in ledger.progress.steps.items():
        if not step.finished:
            continue
        ledger.finished.add(text)
        try:
            key = StepKey.parse(text)
        except ValueError:
            continue
        if key.action == Action.BACKUP and key.broker is not None:
            ledger.backups[key.broker] = Backup.from_json(step.result["backup"])
        if key.action == Action.DELETE:
            result = step.result
            ledger.deleted += list(result.get("deleted", [])) + list(result.get("already_gone", []))


class Executor:
    def __init__(self, plan: Plan, services: Services, journal: Journal, lock: RunLock) -> None:
        self.plan = plan
        self.services = services
        self.journal = journal
        self.lock = lock
        self.run_id = journal.run_id

    def _start(self) -> tuple[Recorder, Probes]:
        ledger = RunLedger(replay(self.journal.records()))
        recover(ledger)
        recorder = Recorder(self.services, self.journal, self.lock, ledger)
        gates = self.services.gates[self.plan.playbook]
        return recorder, Probes(
            self.services, recorder, service_timeout_s=gates.service_command_timeout_s
        )

    def run(self) -> RunOutcome:
        recorder, probes = self._start()
        zk = self.services.zk
        # The session's ups and downs go into the journal: a run that lived through a
        # ZooKeeper outage says so, even when every read simply waited for the reconnect.
        zk.add_listener(recorder.on_session_state)
        try:
            return self._run(recorder, probes)
        finally:
            zk.remove_listener(recorder.on_session_state)
            recorder.flush_session_states()

    def _run(self, recorder: Recorder, probes: Probes) -> RunOutcome:
        ledger = recorder.ledger
        try:
            probes.sample()
            # Restores, moves and triggers in the plan's order (a restore before the restarts
            # it goes with; the moves before the trigger or the restore they prepare).
            for index, step in enumerate(self.plan.steps):
                if isinstance(step, RestoreStep):
                    RestoreRun(self.plan, self.services, recorder, probes, index, step).run()
                elif isinstance(step, MoveStep):
                    MoveRun(self.plan, self.services, recorder, probes, index, step).run()
                elif isinstance(step, TriggerStep):
                    TriggerRun(self.plan, self.services, recorder, probes, index, step).run()
            remaining = [
                (i, s) for i, s in enumerate(self.plan.steps) if isinstance(s, RestartStep)
            ]
            while remaining:
                # The controller is re-read before every step: it may have moved.
                started = [
                    StepKey.parse(k) for k, p in recorder.ledger.progress.steps.items() if p.started
                ]
                chosen = self._next(remaining, started, recorder, probes)
                group = self._batch(chosen, remaining, started, recorder, probes)
                for item in group:
                    remaining.remove(item)
                runs = [
                    RestartRun(self.plan, self.services, recorder, probes, index, step)
                    for index, step in group
                ]
                if len(runs) == 1:
                    runs[0].run()
                else:
                    BatchRun(runs).run()
            Converge(self.plan, self.services, recorder, probes).run()
            probes.sample()
        except StopRequestedError as exc:
            recorder.record(JournalEvent.RUN_HALTED, error=str(exc), signal=exc.signal)
            return ledger.outcome(self.run_id, RunStatus.HALTED, str(exc))
        except HaltedError as exc:
            recorder.record(JournalEvent.RUN_HALTED, error=str(exc))
            return ledger.outcome(self.run_id, RunStatus.HALTED, str(exc))
        recorder.record(JournalEvent.RUN_COMPLETED)
        return ledger.outcome(self.run_id, RunStatus.COMPLETED)

    def _next(
        self,
        remaining: list[IndexedStep],
        started: list[StepKey],
        recorder: Recorder,
        probes: Probes,
    ) -> IndexedStep:
        # Only a fresh choice needs the controller (a started step is finished first).
        resumed = started_restart(remaining, started)
        controller = None if resumed is not None else probes.read().controller_id
        chosen, decision = next_restart(remaining, started, controller)
        if decision is not None:
            head_index, head = remaining[0]
            recorder.record(
                JournalEvent.GATE,
                step=str(StepKey.for_broker(head_index, head.broker, Decision.ORDER)),
                blocker=None,
                decision=decision,
            )
        return chosen

    def _batch(
        self,
        chosen: IndexedStep,
        remaining: list[IndexedStep],
        started: list[StepKey],
        recorder: Recorder,
        probes: Probes,
    ) -> list[IndexedStep]:
        """`chosen` and the rest of its batch, as the controller is now."""
        if not chosen[1].batched:
            return [chosen]
        group, decision = batch_of(chosen, remaining, started, probes.read().controller_id)
        if decision is not None:
            recorder.record(
                JournalEvent.GATE,
                step=str(StepKey.for_broker(chosen[0], chosen[1].broker, Decision.ORDER)),
                blocker=None,
                decision=decision,
            )
        return group

    def rollback(self, *, broker: int | None = None) -> dict[int, list[str]]:
        """Put back what the run deleted, broker by broker: gate, stop, restore, start."""
        recorder, probes = self._start()
        return rollback(self.plan, self.services, recorder, probes, broker=broker)
