"""A batch of restarts as one step: the brokers the plan restarts together (plan/batches.py).

Each broker keeps its own step and its own journaled actions, so a batch resumes exactly as
a single restart does: whatever the journal shows finished is not done again. The batch runs
them action by action across its brokers: the gates one by one, each on fresh state and
counting the whole batch down; the before hook once; every broker stopped side by side (each
stop still gated afresh, and its clean-shutdown markers read); the backups and deletions one
by one; every broker started side by side; the waits for each to register and rejoin its ISRs
side by side; the after hook once the whole batch is back in sync; the verifications one by
one. Side by side means a thread per broker; the journal takes their records one at a time
(execute/recorder.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from remediate.errors import HaltedError, LockLostError, StopRequestedError
from remediate.execute import hooks
from remediate.execute.restart import RestartRun
from remediate.execute.steps import RunAction
from remediate.playbook import Action

# The actions the brokers of a batch carry out side by side: the ones that wait on Kafka.
TOGETHER = frozenset({Action.STOP, Action.START, Action.WAIT_REGISTERED, Action.WAIT_IN_SYNC})


class BatchRun:
    """Carries out the restart steps of one batch together."""

    def __init__(self, runs: Sequence[RestartRun]) -> None:
        self.runs = list(runs)
        self.brokers = [r.broker for r in self.runs]
        for run in self.runs:
            run.together = frozenset(self.brokers)

    def run(self) -> None:
        first = self.runs[0]
        first.services.progress(
            f"brokers {', '.join(map(str, self.brokers))} together: {first.step.batch_reason}"
        )
        try:
            self._run()
        except StopRequestedError as stop:
            for run in self.runs:
                run.start_again(stop.signal)
            raise

    def _run(self) -> None:
        first = self.runs[0]
        for action in first.step.actions:
            if action == Action.STOP and not all(
                r.recorder.finished(r.key(Action.STOP)) for r in self.runs
            ):
                # Again on a resume that has not stopped every broker yet: a silence the hook
                # set may have ended meanwhile.
                first.hook(hooks.BEFORE, RunAction.HOOK_BEFORE, once=False, brokers=self.brokers)
            if action in TOGETHER:
                self._together(partial(RestartRun.do, action=action, hooked=False))
            else:
                for run in self.runs:
                    run.do(action, hooked=False)
            if action == Action.WAIT_IN_SYNC:
                first.hook(hooks.AFTER, RunAction.HOOK_AFTER, once=True, brokers=self.brokers)
        for run in self.runs:
            run.done()

    def _together(self, act: Callable[[RestartRun], None]) -> None:
        """`act` on every broker of the batch side by side; once all are done, the first
        failure (a stop request first, then the loss of the lock, then any other) is raised."""
        with ThreadPoolExecutor(max_workers=len(self.runs)) as pool:
            futures = [pool.submit(act, run) for run in self.runs]
        failures = [f.exception() for f in futures if f.exception() is not None]
        for kind in (StopRequestedError, LockLostError, HaltedError, BaseException):
            for failure in failures:
                if isinstance(failure, kind):
                    raise failure
