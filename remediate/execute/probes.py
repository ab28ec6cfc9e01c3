"""What the executor reads and waits for: ZooKeeper reads (with a health sample in the journal
now and then), whether a broker's process runs, its service commands, what its server.log
says of its start, and the bounded waits that halt a run when a gate does not open in time."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Literal

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_fixed,
)

from remediate.collect.cluster_state import read_cluster_state, read_migration
from remediate.collect.collector import read_file_tail
from remediate.errors import (
    CommandTimeoutError,
    HaltedError,
    HostKeyError,
    RemediationError,
    SudoError,
    TransportError,
)
from remediate.execute.journal import JournalEvent
from remediate.execute.recorder import Recorder
from remediate.execute.services import Services
from remediate.formats.logloading import LogLoading, parse_log_loading, unreadable
from remediate.formats.znodes import CONTROLLER_EPOCH, decode_controller_epoch
from remediate.gates import health_sample, migration_blocker, stopped_blocker
from remediate.ports import SERVICE_COMMANDS, CommandKind
from remediate.state import ClusterState

# Between two reads of a wait. A read is a handful of pipelined requests (for thousands of
# partitions it is the read, not this pause, that sets the pace), so a short pause lets a gate
# open within a few tens of milliseconds of the state being reached.
POLL_S = 0.02
SAMPLE_EVERY_S = 1.0
EXIT_CHECK_S = 1.0  # how often a wait for registration asks the service whether it runs
# How much of a starting broker's server.log is read at each look: hundreds of Kafka's
# log-loading lines, more than any two looks apart need to tell new lines from old.
SERVER_LOG_TAIL_BYTES = 256 * 1024

Blocker = Callable[[], "str | None"]
# Asked when a wait's timeout runs out: None grants another timeout; a string is why not,
# which the halt's message ends with.
Extension = Callable[[], "str | None"]


def dropped_connection(exc: BaseException) -> bool:
    """A transport error worth retrying: never a host key that failed verification, nor a
    command sudo would not run (both stay so until a person changes the host), nor a command
    that ran out of time (its timeout is the operator's bound on it)."""
    return isinstance(exc, TransportError) and not isinstance(
        exc, HostKeyError | SudoError | CommandTimeoutError
    )


class Probes:
    """`service_timeout_s`: how long each service command may run (the plan's gates)."""

    def __init__(self, services: Services, recorder: Recorder, *, service_timeout_s: float) -> None:
        self.services = services
        self.recorder = recorder
        self.service_timeout_s = service_timeout_s
        self._last_sample = 0.0
        self._topic_cache: dict[int, list[str]] = {}
        # Each broker's server.log as it was right before this process ran its start command:
        # what the wait for its registration counts new lines from (remediate/execute/
        # startwait.py), so that lines a quick start writes before the wait begins count.
        self.before_start: dict[int, LogLoading] = {}

    # -- ZooKeeper ----------------------------------------------------------------------------

    def read(self, topics: Collection[str] | None = None) -> ClusterState:
        try:
            return read_cluster_state(
                self.services.zk, topics=topics, on_retry=self.recorder.retried("a ZooKeeper read")
            )
        except RemediationError as exc:
            raise HaltedError(f"ZooKeeper could not be read: {exc}") from exc

    def controller_epoch(self) -> int:
        data, _ = self.services.zk.get(
            CONTROLLER_EPOCH, on_retry=self.recorder.retried("a ZooKeeper request")
        )
        return decode_controller_epoch(data)

    def topics_on(self, broker: int) -> list[str]:
        """The topics with a replica on `broker` (read once per wait; a wait is short)."""
        if broker not in self._topic_cache:
            state = self.read()
            self._topic_cache[broker] = sorted({t for t, _ in state.partitions_on(broker)})
        return self._topic_cache[broker]

    def sampled_read(self, topics: Collection[str] | None = None) -> ClusterState:
        """A read of `topics` for a wait, with a health sample of the whole cluster in the
        journal now and then (the report draws them; the tests check them)."""
        state = self.read(topics)
        now = self.services.clock.monotonic()
        if now - self._last_sample >= SAMPLE_EVERY_S:
            self.sample(state if topics is None else None)
        return state

    def sample(self, state: ClusterState | None = None) -> None:
        """Journal the cluster's health now, from `state` if it covers every topic."""
        self._last_sample = self.services.clock.monotonic()
        whole = self.read() if state is None else state
        self.recorder.record(
            JournalEvent.SAMPLE,
            **health_sample(whole, self.services.min_isr),
        )

    # -- a broker's state ---------------------------------------------------------------------

    def running_blocker(self, broker: int) -> str | None:
        """Why `broker` is not down: still registered, or its process still runs."""
        # Registration needs no topic; the whole cluster is read only for the sample.
        blocker = stopped_blocker(self.sampled_read(()), broker)
        if blocker is None and not self.process_down(broker):
            blocker = f"broker {broker}'s process still runs"
        return blocker

    def is_down(self, broker: int) -> bool:
        return self.running_blocker(broker) is None

    def registered(self, broker: int) -> bool:
        return broker in self.read().brokers

    def unregistered_blocker(self, broker: int) -> str | None:
        registered = broker in self.sampled_read(()).brokers
        return None if registered else f"broker {broker} is not registered"

    def registration_blocker(self, broker: int) -> Blocker:
        """Why `broker` is not registered yet; a process that exited after its start (the
        status command says twice, a second apart, that it is not running) halts at once
        instead of waiting out the start timeout."""
        clock = self.services.clock
        watch = {"next": clock.monotonic() + EXIT_CHECK_S, "down": 0}

        def blocker() -> str | None:
            reason = self.unregistered_blocker(broker)
            now = clock.monotonic()
            if reason is None or self.services.config.service.status is None:
                return reason
            if now < watch["next"]:
                return reason
            watch["next"] = now + EXIT_CHECK_S
            try:
                down = self.process_down(broker)
            except SudoError:
                raise  # it will not run until the host's sudoers changes: halt now
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

    def process_down(self, broker: int) -> bool:
        """The service's status command says it is not running (no command: trust ZK)."""
        config = self.services.config
        if config.service.status is None:
            return True
        command = config.service_command("status", config.broker(broker))
        # Read-only, so a dropped connection is simply retried.
        for attempt in self.over_ssh(f"broker {broker}'s status command", wait_s=1):
            with attempt:
                transport = self.services.transport_for(broker)
                return not transport.run(
                    command, timeout=self.service_timeout_s, kind=CommandKind.STATUS
                ).ok
        raise TransportError("unreachable")  # pragma: no cover

    def require_down(self, broker: int, what: str) -> None:
        """Halt unless `broker` is proved down now: unregistered, and its status command says
        its process is not running (without a status command nothing proves it; runs that
        change files are refused before they start then, remediate/execute/locked.py)."""
        if self.services.config.service.status is None:
            raise HaltedError(
                f"broker {broker}: no service.status command proves its process down; files"
                f" are {what} only on a broker proved stopped"
            )
        if not self.is_down(broker):
            raise HaltedError(
                f"broker {broker} is running again: files are {what} only on a stopped broker"
            )

    def require_no_migration(self, doing: str) -> None:
        """Halt if a ZooKeeper-to-KRaft migration has begun, read right before `doing` (a
        file on a broker cannot be changed in one transaction with a check in ZooKeeper: the
        fresh read is as close as it gets)."""
        state = read_migration(
            self.services.zk, on_retry=self.recorder.retried("a ZooKeeper request")
        )
        blocker = migration_blocker(state)
        if blocker is not None:
            raise HaltedError(f"{doing} refused: {blocker}")

    # -- commands and waits -------------------------------------------------------------------

    def service(
        self, broker: int, verb: Literal["stop", "start"], *, done: Callable[[], bool]
    ) -> None:
        """Run a service command, retrying a dropped connection only after re-checking that
        the command has not already taken effect."""
        config = self.services.config
        command = config.service_command(verb, config.broker(broker))
        if verb == "start" and config.broker(broker).server_log is not None:
            self.before_start[broker] = self.log_loading(broker)
        for attempt in self.over_ssh(f"broker {broker}'s {verb} command", wait_s=2):
            with attempt:
                if attempt.retry_state.attempt_number > 1 and done():
                    return
                transport = self.services.transport_for(broker)
                result = transport.run(
                    command, timeout=self.service_timeout_s, kind=SERVICE_COMMANDS[verb]
                )
                if not result.ok:
                    raise HaltedError(
                        f"broker {broker}: {verb} command exited {result.exit_code}:"
                        f" {result.stderr.strip()[-300:]}"
                    )

    def over_ssh(self, what: str, *, wait_s: float) -> Retrying:
        """Three attempts at a remote command whose connection may drop, each retry journaled
        (a host key that fails verification is never retried)."""
        record = self.recorder.retried(what)

        def tell(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            if error is not None:
                record(state.attempt_number, error)

        return Retrying(
            stop=stop_after_attempt(3),
            wait=wait_fixed(wait_s),
            sleep=self.services.clock.sleep,
            retry=retry_if_exception(dropped_connection),
            before_sleep=tell,
            reraise=True,
        )

    def wait(
        self,
        blocker: Blocker,
        *,
        timeout: float,
        what: str,
        stable_for: float = 0.0,
        on_timeout: Extension | None = None,
    ) -> float:
        """Poll until `blocker` returns None and keeps doing so for `stable_for` seconds, for
        at most `timeout` seconds, or another `timeout` each time `on_timeout` grants one."""
        clock = self.services.clock
        start = period = clock.monotonic()
        since: float | None = None
        last = "not checked"
        extended = 0
        while True:
            if self.recorder.waiting:
                self.recorder.check_stop(f"while waiting for {what}")
            now = clock.monotonic()
            reason = blocker()
            if reason is None:
                since = now if since is None else since
                if now - since >= stable_for:
                    return round(now - start, 3)
            else:
                since, last = None, reason
            if now - period > timeout:
                why = None if on_timeout is None else on_timeout()
                if on_timeout is None or why is not None:
                    raise HaltedError(wait_halted(what, timeout, now - start, extended, last, why))
                period, extended = now, extended + 1
            clock.sleep(POLL_S)

    # -- a starting broker's own log ----------------------------------------------------------

    def log_loading(self, broker: int) -> LogLoading:
        """What the broker's server.log (cluster.yaml's `server_log`) says of its latest start;
        a log that cannot be read is a look that says why."""
        config = self.services.config
        path = config.broker(broker).server_log
        if path is None:
            return unreadable("no server_log in cluster.yaml")
        what = f"the read of broker {broker}'s server.log ({path})"
        try:
            for attempt in self.over_ssh(what, wait_s=1):
                with attempt:
                    tail = read_file_tail(
                        self.services.transport_for(broker),
                        str(path),
                        SERVER_LOG_TAIL_BYTES,
                        kind=CommandKind.SERVER_LOG,
                    )
                    return parse_log_loading(tail.splitlines())
        except TransportError as exc:
            return unreadable(str(exc))
        raise TransportError("unreachable")  # pragma: no cover


def wait_halted(
    what: str, timeout: float, waited: float, extended: int, last: str, why: str | None
) -> str:
    """A wait's halt: what it waited for, how long, what it last saw and why it did not wait
    longer."""
    if extended:
        head = (
            f"timed out after {waited:.0f}s waiting for {what} (the {timeout:g}s timeout,"
            f" extended {extended} time(s))"
        )
    else:
        head = f"timed out after {timeout:g}s waiting for {what}"
    return f"{head}; last seen: {last}" + (f"; {why}" if why else "")
