"""The journal side of a run: every record goes through here, and so does every action
(journaled before and after, the lock checked before a destructive one, failpoints hit), and
every action not carried out (journaled with the reason).

ZooKeeper's session changes arrive on the client's own thread; they are queued and written
by the run itself, before its next record, so that the journal has one writer. The brokers of
a batch (execute/batch.py) act side by side on threads of the run: their records are written
one at a time, under a lock.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from remediate.errors import (
    FormatError,
    HaltedError,
    KafkaAdminError,
    LockLostError,
    StopRequestedError,
    TransportError,
    ZooKeeperError,
)
from remediate.execute.journal import Journal, JournalEvent
from remediate.execute.lock import RunLock
from remediate.execute.services import RunLedger, Services
from remediate.execute.steps import StepKey
from remediate.ports import OnRetry


class Recorder:
    def __init__(
        self, services: Services, journal: Journal, lock: RunLock, ledger: RunLedger
    ) -> None:
        self.services = services
        self.journal = journal
        self.lock = lock
        self.ledger = ledger
        self._session_states: queue.SimpleQueue[tuple[float, str]] = queue.SimpleQueue()
        self._writing = threading.RLock()
        self._local = threading.local()
        self._stop_journaled = False

    @property
    def waiting(self) -> bool:
        """The action this thread carries out now is a wait, which a stop request may cut
        short (it changes nothing); every other action is finished first."""
        return bool(getattr(self._local, "waiting", False))

    @waiting.setter
    def waiting(self, value: bool) -> None:
        self._local.waiting = value

    # -- records ------------------------------------------------------------------------------

    def record(self, event: JournalEvent, **fields: Any) -> None:
        with self._writing:
            self.flush_session_states()
            self.journal.append(event, now=self.services.clock.now(), **fields)

    def on_session_state(self, state: str) -> None:
        # The client's connection thread: only queue it.
        self._session_states.put((self.services.clock.now(), str(state)))

    def flush_session_states(self) -> None:
        with self._writing:
            self._flush_session_states()

    def _flush_session_states(self) -> None:
        while not self._session_states.empty():
            at, session = self._session_states.get_nowait()
            self.journal.append(
                JournalEvent.ZOOKEEPER,
                now=self.services.clock.now(),
                session=session,
                observed=round(at, 3),
            )

    def retried(self, what: str) -> OnRetry:
        """Journals a retry of `what` (the journal explains what a run lived through)."""

        def record(attempt: int, error: BaseException) -> None:
            self.record(
                JournalEvent.RETRY,
                what=what,
                attempt=attempt,
                error=f"{type(error).__name__}: {error}",
            )
            if self.services.log is not None:
                self.services.log.warning("retrying", what=what, attempt=attempt, error=repr(error))

        return record

    def log(self, message: str, key: StepKey, **fields: Any) -> None:
        if self.services.log is None:
            return
        self.services.log.info(
            message, broker=key.broker, topic=key.topic, step=key.action, **fields
        )

    # -- actions ------------------------------------------------------------------------------

    def check_stop(self, where: str) -> None:
        """StopRequestedError if a signal asked the run to stop (journaled once)."""
        name = self.services.stop_requested()
        if name is None:
            return
        with self._writing:
            if not self._stop_journaled:
                self._stop_journaled = True
                self.record(JournalEvent.STOP_REQUESTED, signal=name, where=where)
        raise StopRequestedError(name, where)

    def finished(self, key: StepKey) -> bool:
        return str(key) in self.ledger.finished

    def skip(self, key: StepKey, reason: str) -> None:
        """Journal that the action `key` is not carried out, and why."""
        self.record(JournalEvent.STEP_SKIPPED, step=str(key), reason=reason)
        self.log("step skipped", key, reason=reason)

    def act(
        self,
        key: StepKey,
        action: Callable[[], dict[str, Any]],
        *,
        destructive: bool = False,
        once: bool = True,
        interruptible: bool = True,
    ) -> bool:
        """Carry out `action`, journaled before and after; whether it was carried out now.

        With `once` (a run's actions), an action the journal has finished is not repeated:
        it is journaled as skipped. Without (a rollback's, carried out whole each time it is
        asked for), it always runs. Any failure halts the run (HaltedError), the lock's loss
        as LockLostError. A stop asked for by a signal halts the run before the action
        (StopRequestedError), unless it is not `interruptible` (the start that undoes a stop)."""
        if once and self.finished(key):
            self.skip(key, "finished earlier in this run: not repeated")
            return False
        text = str(key)
        if interruptible:
            self.check_stop(f"before {text}")
        resumed = self.ledger.progress.in_flight == text
        failpoint = self.services.failpoint
        self.record(JournalEvent.STEP_STARTED, step=text, resumed=resumed)
        self.log("step started", key)
        failpoint(f"{key.action}:started")
        try:
            if destructive:
                self.lock.ensure_held()
            self.waiting = interruptible and key.action.startswith("wait ")
            try:
                result = action()
            finally:
                self.waiting = False
            failpoint(f"{key.action}:done")
        except LockLostError as exc:
            self.record(JournalEvent.STEP_FAILED, step=text, error=str(exc))
            raise
        except (HaltedError, TransportError, ZooKeeperError, FormatError, KafkaAdminError) as exc:
            self.record(JournalEvent.STEP_FAILED, step=text, error=str(exc))
            self.log("step failed", key, error=str(exc))
            if isinstance(exc, HaltedError):
                raise
            raise HaltedError(f"{text}: {exc}") from exc
        self.record(JournalEvent.STEP_FINISHED, step=text, result=result)
        self.log("step finished", key)
        self.ledger.finished.add(text)
        failpoint(f"{key.action}:finished")
        return True
