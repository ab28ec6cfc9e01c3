"""A restart step: gate, stop, back up, delete, start, wait until registered and in sync,
verify the files now carry ZooKeeper's ids. Each action through the recorder, so each is
journaled and none is repeated on resume."""

from __future__ import annotations

from functools import cached_property, partial
from typing import Any

from remediate.collect.run import inspect_broker
from remediate.errors import HaltedError
from remediate.execute import steps
from remediate.execute.backup import backup_files, delete_backed_up, verify_backup
from remediate.execute.decisions import files_disagreeing, stale_holders
from remediate.execute.services import RunLedger
from remediate.execute.stepbase import StepRun
from remediate.execute.steps import StepKey
from remediate.gates import in_sync_blocker, pre_restart_blocker
from remediate.plan import RestartStep
from remediate.playbook import Timeouts
from remediate.state import TopicPartition


def parse_partition(name: str) -> TopicPartition:
    topic, _, number = name.rpartition("-")
    return topic, int(number)


class Restart(StepRun[RestartStep]):
    """Carries out one restart step of `plan`."""

    @property
    def ledger(self) -> RunLedger:
        return self.recorder.ledger

    @property
    def broker(self) -> int:
        return self.step.broker

    @property
    def gates(self) -> Timeouts:
        return self.services.gates[self.plan.playbook]

    @cached_property
    def targeted(self) -> set[TopicPartition]:
        return {parse_partition(p) for p in self.step.partitions}

    def key(self, action: str) -> StepKey:
        return StepKey.for_broker(self.index, self.broker, action)

    def run(self) -> None:
        self.services.progress(f"broker {self.broker}: {self.step.reason}")
        act = self.recorder.act
        for action in self.step.actions:
            key = self.key(action)
            if action == steps.GATE_RESTART_SAFETY:
                if self.recorder.finished(self.key(steps.STOP)):
                    continue
                act(key, self.pre_gate)
            elif action == steps.STOP:
                act(key, self.stop, destructive=True)
            elif action == steps.BACKUP:
                act(key, self.backup, destructive=True)
            elif action == steps.DELETE:
                act(key, self.delete, destructive=True)
            elif action == steps.START:
                act(key, self.start, destructive=True)
            elif action == steps.WAIT_REGISTERED:
                retried = str(key) in self.ledger.progress.steps
                act(key, partial(self.wait_registered, retried))
            elif action == steps.WAIT_IN_SYNC:
                act(key, self.wait_in_sync)
            elif action == steps.VERIFY_TOPIC_IDS:
                act(key, self.verify)
            else:
                raise HaltedError(f"step {self.index + 1}: unknown action {action!r} in the plan")
        if steps.DELETE in self.step.actions:
            self.ledger.repaired |= {(self.broker, tp) for tp in self.targeted}

    # -- the actions --------------------------------------------------------------------------

    def pre_gate_blocker(self) -> str | None:
        state = self.probes.read()
        config = self.services.config
        return pre_restart_blocker(
            state,
            self.broker,
            expected=config.broker_ids,
            targeted=self.targeted,
            stale=stale_holders(self.plan.fingerprint, state, self.ledger.repaired),
            min_isr_default=config.min_insync_replicas_default,
            restored={r.topic for r in self.plan.restores},
        )

    def pre_gate(self) -> dict[str, Any]:
        blocker = self.pre_gate_blocker()
        gate = StepKey.for_broker(None, self.broker, "pre-gate")
        self.recorder.record("gate", step=str(gate), blocker=blocker)
        if blocker:
            raise HaltedError(f"pre-gate for broker {self.broker}: {blocker}")
        return {"blocker": None}

    def stop(self) -> dict[str, Any]:
        broker = self.broker
        if not self.probes.is_down(broker):
            # A fresh gate right before the action: minutes may have passed since the pre-gate.
            blocker = self.pre_gate_blocker()
            if blocker:
                raise HaltedError(f"broker {broker} was not stopped: {blocker}")
            self.probes.service(broker, "stop", done=partial(self.probes.is_down, broker))
        self.probes.wait(
            partial(self.probes.running_blocker, broker),
            timeout=self.gates.stop_timeout_s,
            what=f"broker {broker} to stop",
        )
        return {"stopped": broker}

    def backup(self) -> dict[str, Any]:
        config = self.services.config
        self.probes.require_down(self.broker, "backed up")
        backup = backup_files(
            self.services.transport_for(self.broker),
            self.step.files,
            backup_dir=f"{str(config.backup_dir).rstrip('/')}/{self.recorder.journal.run_id}",
            label=f"step{self.index + 1}-broker{self.broker}",
            sudo=config.use_sudo(self.broker),
        )
        self.ledger.backups[self.broker] = backup
        self.services.progress(
            f"broker {self.broker}: backed up {len(backup.entries)} file(s) to {backup.archive}"
        )
        return {"backup": backup.to_json()}

    def delete(self) -> dict[str, Any]:
        broker = self.broker
        self.probes.require_down(broker, "deleted")
        backup = self.ledger.backups.get(broker)
        if backup is None:
            raise HaltedError(f"broker {broker}: no verified backup in the journal")
        transport = self.services.transport_for(broker)
        sudo = self.services.config.use_sudo(broker)
        verify_backup(transport, backup, sudo=sudo)
        deleted = delete_backed_up(transport, backup, sudo=sudo)
        # Gone before this call (a crash in the middle of an earlier delete): the script
        # refuses unless every file is gone now, and each is in the verified backup.
        gone = [e.path for e in backup.entries if e.path not in deleted]
        self.ledger.deleted += list(deleted) + gone
        self.services.progress(f"broker {broker}: deleted {len(deleted)} file(s)")
        return {"deleted": list(deleted), "already_gone": gone}

    def start(self) -> dict[str, Any]:
        if not self.probes.registered(self.broker):
            self._start_service()
        return {"started": self.broker}

    def _start_service(self) -> None:
        broker = self.broker
        self.probes.service(broker, "start", done=partial(self.probes.registered, broker))

    def wait_registered(self, retried: bool) -> dict[str, Any]:
        broker = self.broker
        if retried and not self.probes.registered(broker) and self.probes.process_down(broker):
            # A resumed run whose broker never came up (it exited at once, or its start command
            # has been fixed since): the step was waiting for exactly this start.
            self.recorder.lock.ensure_held()
            self.recorder.record(
                "note",
                step=str(StepKey.for_broker(None, broker, steps.WAIT_REGISTERED)),
                decision=f"broker {broker} is not running on resume: starting it again",
            )
            self._start_service()
        self.probes.wait(
            self.probes.registration_blocker(broker),
            timeout=self.gates.start_timeout_s,
            what=f"broker {broker} to register",
        )
        return {"registered": broker}

    def wait_in_sync(self) -> dict[str, Any]:
        broker = self.broker

        def blocker() -> str | None:
            return in_sync_blocker(self.probes.sampled_read(self.probes.topics_on(broker)), broker)

        held = self.probes.wait(
            blocker,
            timeout=self.gates.in_sync_timeout_s,
            what=f"broker {broker} back in the ISR of every partition it hosts",
            stable_for=self.gates.stability_window_s,
        )
        return {"in_sync_after_s": held}

    def verify(self) -> dict[str, Any]:
        broker = self.broker
        state = self.probes.read()
        config = self.services.config
        report = inspect_broker(config, config.broker(broker), self.services.transport_for)
        if not report.reachable:
            raise HaltedError(f"broker {broker}: files could not be read ({report.error})")
        wrong, missing = files_disagreeing(state, broker, report.replicas)
        if wrong:
            raise HaltedError(
                f"broker {broker}: files still disagree with ZooKeeper: {', '.join(wrong)}"
            )
        return {"verified": broker, "without_file_yet": sorted(missing)}
