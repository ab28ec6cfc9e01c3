"""Rollback: put back what a run deleted, broker by broker: gate, stop, restore the verified
backup, start. Journaled as rollback-* records under `rollback{n}:broker-{N}:...` keys."""

from __future__ import annotations

from functools import partial

from remediate.errors import HaltedError
from remediate.execute import steps
from remediate.execute.backup import restore_backup
from remediate.execute.probes import Probes
from remediate.execute.recorder import Recorder
from remediate.execute.services import Services
from remediate.execute.steps import StepKey
from remediate.gates import StaleIdHolder, pre_restart_blocker
from remediate.plan import Plan


def rollback(
    plan: Plan,
    services: Services,
    recorder: Recorder,
    probes: Probes,
    *,
    broker: int | None = None,
) -> dict[int, list[str]]:
    """Restore every backup the run's journal holds (only `broker`'s, if given); the files
    put back, by broker."""
    config = services.config
    run_id = recorder.journal.run_id
    chosen = {b: backup for b, backup in recorder.ledger.backups.items() if broker in (None, b)}
    if not chosen:
        which = f"broker {broker}" if broker is not None else "any broker"
        raise HaltedError(f"run {run_id} holds no backup for {which}")
    gates = services.gates[plan.playbook]
    lock = recorder.lock
    restored: dict[int, list[str]] = {}
    for number, (target, backup) in enumerate(sorted(chosen.items())):

        def key(part: str, number: int = number, target: int = target) -> str:
            return str(StepKey.for_rollback(number, target, part))

        recorder.record("rollback-started", step=key(steps.ROLLBACK), broker=target)
        state = probes.read()
        blocker = pre_restart_blocker(
            state,
            target,
            expected=config.broker_ids,
            targeted=(),
            stale=StaleIdHolder({}),
            min_isr_default=config.min_insync_replicas_default,
        )
        recorder.record("gate", step=key("gate"), blocker=blocker)
        if blocker and target in state.brokers:
            raise HaltedError(f"rollback of broker {target} refused: {blocker}")
        lock.ensure_held()
        if not probes.is_down(target):
            probes.service(target, "stop", done=partial(probes.is_down, target))
        probes.wait(
            partial(probes.running_blocker, target),
            timeout=gates.stop_timeout_s,
            what=f"broker {target} to stop",
        )
        lock.ensure_held()
        probes.require_down(target, "restored")
        paths = restore_backup(services.transport_for(target), backup, sudo=config.use_sudo(target))
        recorder.record("rollback-restored", step=key("restore"), restored=list(paths))
        probes.service(target, "start", done=partial(probes.registered, target))
        probes.wait(
            partial(probes.unregistered_blocker, target),
            timeout=gates.start_timeout_s,
            what=f"broker {target} to register",
        )
        recorder.record("rollback-finished", step=key(steps.ROLLBACK), broker=target)
        restored[target] = list(paths)
    return restored
