"""The migration's settings: the KRaft controller's, and a broker's in migration mode and in
KRaft mode (pure: values in, values out)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from remediate.errors import SandboxError
from remediate.sandbox.real import jvm_broker

CONTROLLER_ID = 3000
CONTROLLER_HOST = "127.0.0.9"  # brokers are 127.0.0.(10+N)
CONTROLLER_LISTENER = "CONTROLLER"


@dataclass(frozen=True)
class ControllerNode:
    node_id: int
    host: str
    port: int

    @property
    def voter(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"


def _listener_map() -> str:
    return f"PLAINTEXT:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT"


def controller_properties(
    node: ControllerNode, *, zookeeper_connect: str, data_dir: Path, migrating: bool
) -> dict[str, str]:
    """The KRaft controller's settings, with the migration (`migrating`) or after it."""
    values = {
        "process.roles": "controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": node.voter,
        "controller.listener.names": CONTROLLER_LISTENER,
        "listeners": f"{CONTROLLER_LISTENER}://{node.host}:{node.port}",
        "listener.security.protocol.map": _listener_map(),
        "log.dirs": str(data_dir),
        **jvm_broker.TWO_CORE_SETTINGS,
    }
    if migrating:
        values["zookeeper.metadata.migration.enable"] = "true"
        values["zookeeper.connect"] = zookeeper_connect
    return values


# The ZooKeeper-mode keys a KRaft-mode broker must not have.
ZK_ONLY_KEYS = (
    "broker.id",
    "zookeeper.connect",
    "zookeeper.metadata.migration.enable",
    "inter.broker.protocol.version",
)


def hybrid_broker_properties(
    current: Mapping[str, str], node: ControllerNode, line: str
) -> dict[str, str]:
    """A ZooKeeper-mode broker's settings in migration mode."""
    return {
        **current,
        "zookeeper.metadata.migration.enable": "true",
        "inter.broker.protocol.version": line,
        "controller.quorum.voters": node.voter,
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": _listener_map(),
    }


def kraft_broker_properties(current: Mapping[str, str], node: ControllerNode) -> dict[str, str]:
    """A migration-mode broker's settings in KRaft mode: its broker.id becomes its node.id."""
    if "broker.id" not in current:
        raise SandboxError("the broker's server.properties has no broker.id to migrate")
    values = {k: v for k, v in current.items() if k not in ZK_ONLY_KEYS}
    values.update(
        {
            "process.roles": "broker",
            "node.id": current["broker.id"],
            "controller.quorum.voters": node.voter,
            "controller.listener.names": CONTROLLER_LISTENER,
            "listener.security.protocol.map": _listener_map(),
        }
    )
    return values
