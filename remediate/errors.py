"""The exception tree. Every error the tool raises on purpose is a RemediationError.

Each stage has its own subclass; only the command line maps them to exit codes.
"""

from __future__ import annotations


class RemediationError(Exception):
    """Root of every error this project raises on purpose."""


class FormatError(RemediationError):
    """Bytes that do not parse as the Kafka format they are supposed to hold.

    `source` names the file or znode, `field` the part that is wrong, `expected` what
    Kafka would accept there and `got` a short, printable rendering of what was found.
    """

    def __init__(self, source: str, field: str, expected: str, got: object = None) -> None:
        self.source = source
        self.field = field
        self.expected = expected
        self.got = _printable(got)
        message = f"{source}: {field}: expected {expected}"
        if got is not None:
            message += f", got {self.got}"
        super().__init__(message)


class ConfigError(RemediationError):
    """A configuration file (cluster.yaml, a playbook, server.properties) is not valid."""


class ZooKeeperError(RemediationError):
    """ZooKeeper could not be reached or answered with an error."""


class ZnodeMissingError(ZooKeeperError):
    """The znode asked for does not exist."""


class ZnodeExistsError(ZooKeeperError):
    """The znode to create exists already."""


class VersionConflictError(ZooKeeperError):
    """A conditional write lost: the znode changed since the version it was made against."""


class OutcomeUnknownError(ZooKeeperError):
    """A write's answer was lost (the connection dropped after it was sent): it may or may not
    have taken effect. Never retried as it is: the caller reads again to learn which."""


class KafkaAdminError(RemediationError):
    """A request of Kafka's admin API failed, or its client could not start: which request,
    to which broker, and what Kafka (or the client) said."""

    def __init__(self, request: str, said: str, *, broker: int | None = None) -> None:
        self.request = request
        self.broker = broker
        self.said = said
        to = f" to broker {broker}" if broker is not None else ""
        super().__init__(f"{request}{to} failed: {said}")


class TransportError(RemediationError):
    """A command could not be run on a broker host (connection, host key, timeout)."""


class HostKeyError(TransportError):
    """The broker host's SSH key is unknown or has changed: never connect anyway."""


class SudoError(TransportError):
    """sudo on a broker host would not run a command without a password or a terminal: the
    host's sudoers lacks the rule the tool needs. Never retried, never read as the command's
    own answer (a status command's non-zero exit would otherwise read as "stopped")."""


class CommandTimeoutError(TransportError):
    """A command on a broker host did not finish within its timeout (`timeout_s`); whether
    it took effect is unknown."""

    def __init__(self, message: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(message)


class ScanError(RemediationError):
    """A snapshot could not be read or classified."""


class SparkNotInstalledError(ScanError):
    """A command that classifies on Spark, where PySpark is not installed (the core install
    leaves it out: it is the `spark` extra)."""


class ExecuteError(RemediationError):
    """A plan could not be carried out (apply, fix, resume, rollback)."""


class RefusedError(ExecuteError):
    """Refused before anything changed: no approval, wrong digest, drift, lock held."""


class PlanChoiceError(RefusedError):
    """The repair the operator chose (--candidate, --restore-only) is not possible here."""


class LockHeldError(RefusedError):
    """Another run holds the cluster's lock; `holder` names it."""

    def __init__(self, message: str, holder: str | None = None) -> None:
        self.holder = holder
        super().__init__(message)


class HaltedError(ExecuteError):
    """A run stopped part-way (a gate timed out, a step failed); the journal says where."""


class StopRequestedError(HaltedError):
    """A signal (SIGINT, SIGTERM) asked the run to stop: it halts between two actions."""

    def __init__(self, signal_name: str, where: str) -> None:
        self.signal = signal_name
        super().__init__(f"stopped by {signal_name} {where}; `remediate resume` carries on")


class LockLostError(HaltedError):
    """The ZooKeeper session that held the lock was lost: no further destructive action."""


class BackupError(HaltedError):
    """A backup could not be made, read back or verified, or a restore was refused."""


class JournalError(ExecuteError):
    """A run journal could not be created, read or appended to, or would hold a secret."""


class SandboxError(RemediationError):
    """The sandbox cluster could not be started, stopped or driven."""


def _printable(value: object, limit: int = 80) -> str:
    """A short repr of untrusted input, safe to put in one log line."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
