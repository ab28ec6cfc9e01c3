"""What an execution acts through (`Services`), what it keeps while it runs (`RunLedger`) and
what it returns (`RunOutcome`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from remediate.config import ClusterConfig
from remediate.execute import failpoints, interrupt
from remediate.execute.backup import Backup
from remediate.execute.journal import RunProgress, RunStatus
from remediate.minisr import KAFKA_DEFAULT, MinIsrRule
from remediate.playbook import Timeouts
from remediate.ports import Clock, KafkaAdmin, Transport, ZooKeeper
from remediate.state import ClusterState, ReplicaRef


@dataclass(frozen=True)
class Services:
    """What the executor acts through; only execute/locked.py builds the real ones."""

    config: ClusterConfig
    zk: ZooKeeper
    transport_for: Callable[[int], Transport]
    clock: Clock
    gates: Mapping[str, Timeouts]
    log: Any = None
    progress: Callable[[str], None] = lambda _message: None
    # Called at every named point of a run (remediate/execute/failpoints.py).
    failpoint: Callable[[str], None] = failpoints.hit
    # The signal that asked the run to stop, if one did (remediate/execute/interrupt.py).
    stop_requested: Callable[[], str | None] = interrupt.requested
    # Opens a client of Kafka's admin requests (a plan that moves replicas needs one).
    kafka_admin: Callable[[ClusterState], KafkaAdmin] | None = None
    # min.insync.replicas of a partition without a topic override, as the plan resolved it
    # (remediate/minisr.py); None: a plan made without it, cluster.yaml's value.
    planned_min_isr: MinIsrRule | None = None

    @property
    def min_isr(self) -> MinIsrRule:
        if self.planned_min_isr is not None:
            return self.planned_min_isr
        # A plan from before the plan recorded it: what cluster.yaml states, else Kafka's.
        return MinIsrRule(self.config.min_insync_replicas_default or KAFKA_DEFAULT)


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: RunStatus
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


@dataclass
class RunLedger:
    """What this execution has done so far (the journal is the durable copy)."""

    progress: RunProgress  # as the journal stood when this process started
    finished: set[str] = field(default_factory=set)  # step keys
    backups: dict[int, Backup] = field(default_factory=dict)  # by broker
    deleted: list[str] = field(default_factory=list)
    repaired: set[ReplicaRef] = field(default_factory=set)
    gated: set[str] = field(default_factory=set)  # gates passed by this process

    def outcome(self, run_id: str, status: RunStatus, error: str | None = None) -> RunOutcome:
        return RunOutcome(
            run_id,
            status,
            error,
            tuple(self.deleted),
            tuple(b.to_json() for b in self.backups.values()),
        )
