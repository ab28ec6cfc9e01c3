"""Files change only on a broker proved down: without a service.status command nothing proves
it (ZooKeeper cannot: a registration that does not parse looks like a stopped broker), so a
run that deletes or restores files is refused before it starts, and the executor itself halts
before it would change a file (in-memory cluster, tests/execute/fake_cluster.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from remediate.config import ClusterConfig
from remediate.errors import HaltedError, RefusedError
from remediate.execute import steps
from remediate.execute.executor import Executor
from remediate.execute.journal import Journal
from remediate.execute.lock import RunLock
from remediate.execute.locked import require_stop_evidence, rollback_run
from remediate.formats.logdir import encode_partition_metadata
from remediate.formats.znodes import BROKER_IDS
from remediate.plan import Plan
from tests.execute.fake_cluster import OLD_ID, Topic, cluster_config
from tests.execute.test_executor import PAYMENTS, PAYMENTS_0, RUN, World, plan_of, restart, world


def without_status(config: ClusterConfig) -> ClusterConfig:
    return config.model_copy(update={"service": config.service.model_copy(update={"status": None})})


@pytest.mark.parametrize(
    ("files", "status", "rollback", "refused"),
    [
        (True, False, False, True),  # a repair that deletes files, nothing to prove a stop
        (True, True, False, False),
        (False, False, False, False),  # a rolling restart changes no file: ZooKeeper suffices
        (False, False, True, True),  # a rollback puts files back
        (False, True, True, False),
    ],
)
def test_a_run_that_changes_files_needs_a_status_command(
    tmp_path: Path, files: bool, status: bool, rollback: bool, refused: bool
) -> None:
    config = cluster_config(tmp_path, [1, 2, 3])
    if not status:
        config = without_status(config)
    held = str(tmp_path / "data-3" / "payments-0" / "partition.metadata")
    plan = plan_of([restart(3, steps.RESTART_ACTIONS, files=(held,) if files else ())])
    if refused:
        with pytest.raises(RefusedError, match=r"no service\.status command") as raised:
            require_stop_evidence(config, plan, rollback=rollback)
        assert "nothing was changed" in str(raised.value)
    else:
        require_stop_evidence(config, plan, rollback=rollback)


@pytest.fixture
def repaired(tmp_path: Path) -> tuple[World, Plan, Path]:
    """A completed repair of broker 3's payments-0 (tests/execute/test_executor.py's `stale`):
    its backup is there to roll back."""
    w = world(tmp_path, {"payments": Topic("payments", dict(PAYMENTS))})
    w.kafka.boot(out_of_isr=[(3, "payments", 0)])
    held = w.kafka.metadata(3, "payments", 0)
    held.write_bytes(encode_partition_metadata(OLD_ID))
    step = restart(3, steps.RESTART_ACTIONS, partitions=(PAYMENTS_0,), files=(str(held),))
    plan = plan_of([step], files={f"3:{held}": str(OLD_ID)})
    assert w.run(plan).status == "completed"
    assert held.read_bytes() != encode_partition_metadata(OLD_ID)
    return w, plan, held


def test_the_executor_halts_before_restoring_without_proof_of_the_stop(
    repaired: tuple[World, Plan, Path],
) -> None:
    w, plan, held = repaired
    before = held.read_bytes()
    services = w.services(lambda _point: None)
    services = dataclasses.replace(services, config=without_status(services.config))
    lock = RunLock(w.zk, "fake", run_id=RUN)
    lock.acquire()
    try:
        with pytest.raises(HaltedError, match=r"no service\.status command"):
            Executor(plan, services, Journal.open(w.journals, RUN), lock).rollback()
    finally:
        lock.release()
    assert held.read_bytes() == before, "a file was restored without proof the broker is down"
    assert not w.records("rollback-restored")


@pytest.mark.fault(
    "Bad input",
    "`rollback` of a run whose broker's registration does not parse, and cluster.yaml has no"
    " service.status command",
    "Refused (exit 4) before the lock or any command: nothing proves the broker's process is"
    " down, and none of the backed-up files is put back",
)
def test_rollback_refuses_when_a_broker_cannot_be_proved_down(
    repaired: tuple[World, Plan, Path],
) -> None:
    w, _plan, held = repaired
    before = held.read_bytes()
    commands = list(w.kafka.commands)
    w.zk.nodes[f"{BROKER_IDS}/3"] = dataclasses.replace(
        w.zk.nodes[f"{BROKER_IDS}/3"], data=b'{"version":5,"host":'
    )
    config = without_status(cluster_config(w.root, w.kafka.brokers))
    with pytest.raises(RefusedError, match=r"no service\.status command"):
        rollback_run(config, RUN)
    assert held.read_bytes() == before
    assert w.kafka.commands == commands, "a service command ran"
    assert not w.records("rollback-started")
