"""Step keys: the journal's key format, written and read back exactly."""

from __future__ import annotations

import pytest

from remediate.execute import steps
from remediate.execute.steps import Decision, StepKey
from remediate.playbook import Action, load_playbook


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("0:broker-3:gate restart-safety", StepKey(0, "broker-3", Action.GATE_RESTART_SAFETY)),
        ("12:broker-10:wait in-sync", StepKey(12, "broker-10", Action.WAIT_IN_SYNC)),
        ("1:topic-orders.v2:zk-write topic-id", StepKey(1, "topic-orders.v2", "zk-write topic-id")),
        ("2:broker-1:order", StepKey(2, "broker-1", Decision.ORDER)),
        ("rollback0:broker-3:rollback", StepKey(0, "broker-3", "rollback", rollback=True)),
        ("rollback1:broker-2:gate", StepKey(1, "broker-2", "gate", rollback=True)),
        ("broker-3:pre-gate", StepKey(None, "broker-3", "pre-gate")),
        ("topic-orders:agreement", StepKey(None, "topic-orders", "agreement")),
    ],
)
def test_keys_read_and_write_the_journal_format(text: str, key: StepKey) -> None:
    assert StepKey.parse(text) == key
    assert str(key) == text


def test_constructors_and_targets() -> None:
    assert str(StepKey.for_broker(0, 3, Action.STOP)) == "0:broker-3:stop"
    assert str(StepKey.for_topic(4, "orders", Action.VERIFY_TOPIC_IDS)) == (
        "4:topic-orders:verify topic-ids"
    )
    assert str(StepKey.for_rollback(0, 3, "restore")) == "rollback0:broker-3:restore"
    assert StepKey.parse("0:broker-3:stop").broker == 3
    assert StepKey.parse("0:broker-3:stop").topic is None
    assert StepKey.parse("0:topic-a-1:stop").topic == "a-1"
    assert StepKey.parse("0:topic-a-1:stop").broker is None
    assert StepKey.parse("0:broker-3:stop").with_action(Action.START) == StepKey(
        0, "broker-3", "start"
    )


@pytest.mark.parametrize("text", ["", "odd", "0:broker-3", ":broker-3:stop"])
def test_anything_else_is_not_a_key(text: str) -> None:
    with pytest.raises(ValueError, match="not a step key"):
        StepKey.parse(text)


def test_the_action_vocabulary_is_the_playbooks() -> None:
    assert tuple(str(s) for s in load_playbook("topicid-mismatch").steps) == steps.RESTART_ACTIONS
    assert tuple(str(s) for s in load_playbook("restore-zk-topic-id").steps) == (
        steps.RESTORE_ACTIONS
    )
