"""A batch of restarts in the executor, on plain data: which steps run together once the
controller may have moved (decisions.batch_of), what the clean-shutdown markers say
(execute/cleanshutdown.py), and the gate that counts the whole batch down
(gates.restart_blocker)."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.execute.cleanshutdown import marker_script, read_markers, recovery_note
from remediate.execute.decisions import batch_of
from remediate.execute.steps import StepKey
from remediate.formats.logdir import CLEAN_SHUTDOWN
from remediate.gates import StaleIdHolder, pre_restart_blocker, restart_blocker
from remediate.minisr import MinIsrRule
from remediate.plan import RestartStep
from remediate.state import TopicPartition
from tests.execute.test_decisions import restart
from tests.plan.model import cluster


def batched(broker: int, batch: tuple[int, ...]) -> RestartStep:
    return dataclasses.replace(restart(broker), batch=batch, batch_reason="together")


# Brokers 2 and 3 together, then 4 alone, then 1 (the controller when planned).
PLANNED = [(0, batched(2, (2, 3))), (1, batched(3, (2, 3))), (2, restart(4)), (3, restart(1))]
LEAVES = (
    "broker 3 is now the active controller: it leaves its batch (2, 3) and restarts alone,"
    " after broker(s) 2"
)


@pytest.mark.parametrize(
    ("chosen", "started", "controller", "group", "decision"),
    [
        (0, [], 1, [0, 1], None),
        (0, [], None, [0, 1], None),
        # A step of no batch runs alone.
        (2, [], 1, [2], None),
        # The controller moved into the batch: it leaves it.
        (0, [], 3, [0], LEAVES),
        # ... unless the journal shows it started (a resumed batch is finished together).
        (0, ["1:broker-3:stop"], 3, [0, 1], None),
        (0, ["rollback1:broker-3:gate"], 3, [0], LEAVES),
    ],
)
def test_batch_of(
    chosen: int, started: list[str], controller: int | None, group: list[int], decision: str | None
) -> None:
    keys = [StepKey.parse(k) for k in started]
    found, said = batch_of(PLANNED[chosen], PLANNED, keys, controller)
    assert found == [PLANNED[i] for i in group]
    assert said == decision


def test_a_batch_partly_done_is_what_remains_of_it() -> None:
    remaining = PLANNED[1:]
    assert batch_of(remaining[0], remaining, [], 1) == ([PLANNED[1]], None)


# -- clean-shutdown markers ---------------------------------------------------------------------


def test_the_markers_are_read_by_the_shell_from_hostile_log_dir_names(tmp_path: Path) -> None:
    names = ["plain", "with space", "it's; rm -rf x", "$(touch pwned)", "new\nline"]
    dirs = [tmp_path / n for n in names]
    for d in dirs:
        d.mkdir()
    for d in dirs[::2]:
        (d / CLEAN_SHUTDOWN).touch()
    log_dirs = [str(d) for d in dirs]
    ran = subprocess.run(
        ["sh", "-c", marker_script(log_dirs)], capture_output=True, text=True, check=True
    )
    assert read_markers(log_dirs, ran.stdout) == {str(d): i % 2 == 0 for i, d in enumerate(dirs)}
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


@given(st.lists(st.text(min_size=1), min_size=1, max_size=4), st.text())
def test_an_answer_that_is_not_one_word_per_log_dir_is_no_answer(
    log_dirs: list[str], stdout: str
) -> None:
    found = read_markers(log_dirs, stdout)
    if found is not None:
        assert set(found) == set(log_dirs)
        assert len(stdout.split()) == len(log_dirs)
    assert shlex.split(marker_script(log_dirs))  # always a command the shell can parse


def test_the_journal_names_the_log_dirs_that_face_recovery() -> None:
    assert recovery_note(4, {"/a": True, "/b": True}, 120) is None
    note = recovery_note(4, {"/b": False, "/a": True, "/c": False}, 120)
    assert note is not None
    assert note.startswith(f"broker 4 did not shut down cleanly: no {CLEAN_SHUTDOWN} in /b, /c;")
    assert "(120 s)" in note


# -- the gate that counts the batch down ------------------------------------------------------

# Replication 3 on four brokers, min.insync.replicas 2 ("t") and 1 ("u").
STATE = cluster(
    brokers=[1, 2, 3, 4],
    topics={"t": {0: [1, 2, 3]}, "u": {0: [2, 3, 4]}},
    min_isr={"t": 2, "u": 1},
    controller=4,
)
T0 = TopicPartition("t", 0)


def test_alone_each_may_restart_together_they_may_not() -> None:
    rule = MinIsrRule(1)
    assert restart_blocker(STATE, 2, min_isr=rule) is None
    assert restart_blocker(STATE, 3, min_isr=rule) is None
    blocked = restart_blocker(STATE, 2, min_isr=rule, batch=(2, 3))
    assert blocked == (
        "t-0 would keep 1 in-sync replica(s) outside the batch, under min.insync.replicas=2"
        " (isr [1, 2, 3]); restarting brokers 2, 3 together would take it below"
    )
    # The partition the repair accepts to degrade does not block; "u" (min 1) keeps broker 4.
    assert restart_blocker(STATE, 2, min_isr=rule, batch=(2, 3), ignore={T0}) is None
    assert restart_blocker(STATE, 3, min_isr=rule, batch=(3, 4)) is None


def test_the_pre_gate_of_a_batch_does_not_wait_for_its_mates_to_be_registered() -> None:
    down = cluster(
        brokers=[1, 2, 3, 4],
        topics={"u": {0: [2, 3, 4]}},
        min_isr={"u": 1},
        controller=4,
        registered=[1, 2, 4],
    )

    def gate(batch: tuple[int, ...]) -> str | None:
        return pre_restart_blocker(
            down,
            2,
            expected=[1, 2, 3, 4],
            targeted=(),
            stale=StaleIdHolder({}),
            min_isr=MinIsrRule(1),
            batch=batch,
        )

    alone = gate(())
    assert alone is not None and "3" in alone
    assert gate((2, 3)) is None
