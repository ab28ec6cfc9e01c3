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


class TransportError(RemediationError):
    """A command could not be run on a broker host (connection, host key, timeout)."""


class HostKeyError(TransportError):
    """The broker host's SSH key is unknown or has changed: never connect anyway."""


class CollectError(RemediationError):
    """Cluster state could not be collected."""


class ScanError(RemediationError):
    """A snapshot could not be read or classified."""


class SandboxError(RemediationError):
    """The sandbox cluster could not be started, stopped or driven."""


def _printable(value: object, limit: int = 80) -> str:
    """A short repr of untrusted input, safe to put in one log line."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
