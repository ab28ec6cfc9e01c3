"""The executor's vocabulary: the actions a step is made of (the playbook's `Action`s and the
run's own `RunAction`s), and the key each action is journaled under.

A key reads `"{index}:broker-{N}:{action}"`, `"{index}:topic-{T}:{action}"` or, for the
moves and the trigger, which act on several brokers at once, `"{index}:cluster:{action}"` (the
plan's step index, what the step acts on, the action); the run's own closing action, after
the last step, reads `"{number of steps}:cluster:{action}"`. Rollback keys read
`"rollback{n}:broker-{N}:{action}"`, and gate decisions are journaled under keys without an
index (`"broker-{N}:pre-gate"`). Journals on disk hold these strings, so their format never
changes; `StepKey` is the one place that writes and reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from remediate.playbook import Action

# The actions of a restart step, in the order a playbook may list them.
RESTART_ACTIONS = (
    Action.GATE_RESTART_SAFETY,
    Action.STOP,
    Action.BACKUP,
    Action.DELETE,
    Action.START,
    Action.WAIT_REGISTERED,
    Action.WAIT_IN_SYNC,
    Action.VERIFY_TOPIC_IDS,
)

# The actions of a restore step (ZooKeeper's topic id written back; no broker restarts).
RESTORE_ACTIONS = (
    Action.GATE_AGREEMENT,
    Action.ZK_WRITE_TOPIC_ID,
    Action.ZK_WRITE_CONTROLLER_ELECTION,
    Action.WAIT_IN_SYNC,
    Action.VERIFY_TOPIC_IDS,
)


class RunAction(StrEnum):
    """The executor's own actions, which no playbook lists."""

    # After the last step of a repair: every partition of the plan's topics has a leader, its
    # full ISR and ZooKeeper's id in every file (one action of the run, keyed after its last
    # step).
    CONVERGE = "wait converged"
    # A rollback puts a broker's verified backup back, between its stop and its start.
    RESTORE_BACKUP = "restore"
    # A broker the run stopped, started again because a signal asked the run to stop before
    # its files were deleted (the stop, and the backup if made, are then undone).
    START_AGAIN = "start again"
    # cluster.yaml's hooks around a batch of restarts (remediate/execute/hooks.py).
    HOOK_BEFORE = "hook before-batch"
    HOOK_AFTER = "hook after-batch"


# A rollback's actions, broker by broker.
ROLLBACK_ACTIONS = (
    Action.GATE_RESTART_SAFETY,
    Action.STOP,
    RunAction.RESTORE_BACKUP,
    Action.START,
    Action.WAIT_REGISTERED,
)


class Decision(StrEnum):
    """Journal-only key parts: what a gate record, or a rollback's own records, are about."""

    PRE_GATE = "pre-gate"  # a restart's gate, decided before its broker is stopped
    AGREEMENT = "agreement"  # a restore's gate: every replica holds the id to write
    ORDER = "order"  # the controller-last decision of a step
    ROLLBACK = "rollback"  # a broker's rollback, started and finished
    ROLLBACK_GATE = "gate"  # a rollback's gate


CLUSTER = "cluster"
BROKER = "broker-"
TOPIC = "topic-"
ROLLBACK_PREFIX = "rollback"

_KEY = re.compile(
    r"(?:(?P<rollback>rollback)?(?P<index>\d+):)?(?P<target>(?:broker|topic)-[^:]+|cluster)"
    r":(?P<action>.+)"
)


@dataclass(frozen=True)
class StepKey:
    """One journaled action: which step (`index`, None for an un-indexed gate key), on what
    (`target`: "broker-3", "topic-orders") and which `action`."""

    index: int | None
    target: str
    action: str
    rollback: bool = False

    @classmethod
    def for_broker(cls, index: int | None, broker: int, action: str) -> StepKey:
        return cls(index, f"{BROKER}{broker}", action)

    @classmethod
    def for_topic(cls, index: int | None, topic: str, action: str) -> StepKey:
        return cls(index, f"{TOPIC}{topic}", action)

    @classmethod
    def for_cluster(cls, index: int, action: str) -> StepKey:
        return cls(index, CLUSTER, action)

    @classmethod
    def for_rollback(cls, number: int, broker: int, part: str) -> StepKey:
        return cls(number, f"{BROKER}{broker}", part, rollback=True)

    @classmethod
    def parse(cls, text: str) -> StepKey:
        """The key journaled as `text`; ValueError if it has none of the shapes above."""
        match = _KEY.fullmatch(text)
        if match is None:
            raise ValueError(f"not a step key: {text!r}")
        index = match["index"]
        return cls(
            int(index) if index is not None else None,
            match["target"],
            match["action"],
            rollback=match["rollback"] is not None,
        )

    @property
    def broker(self) -> int | None:
        if not self.target.startswith(BROKER):
            return None
        number = self.target.removeprefix(BROKER)
        return int(number) if number.isdigit() else None

    @property
    def topic(self) -> str | None:
        return self.target.removeprefix(TOPIC) if self.target.startswith(TOPIC) else None

    def with_action(self, action: str) -> StepKey:
        """Another action of the same step."""
        return StepKey(self.index, self.target, action, self.rollback)

    def __str__(self) -> str:
        if self.index is None:
            return f"{self.target}:{self.action}"
        prefix = ROLLBACK_PREFIX if self.rollback else ""
        return f"{prefix}{self.index}:{self.target}:{self.action}"
