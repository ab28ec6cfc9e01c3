"""A restore step: ZooKeeper's topic id written back to what every replica holds, then, when a
controller already loaded the wrong id, a controller election so that it sends the right one.
No broker restarts. An action left out (its write already done, or no election needed) is
journaled with the reason.

Each of the two writes is one ZooKeeper transaction: the topic znode set at the plan's version,
`/controller` deleted at the version read, each with a check of `/controller_epoch` at the
version read with `/migration` (remediate/collect/cluster_state.py, `ControllerFence`), so
that neither lands once a migration has begun or another controller took over. Neither is
sent twice: a lost answer is read again."""

from __future__ import annotations

from functools import partial
from typing import Any

from remediate.collect.cluster_state import ControllerFence, read_fence
from remediate.collect.collector import collect_brokers
from remediate.collect.snapshot import ReplicaRow
from remediate.errors import (
    HaltedError,
    OutcomeUnknownError,
    VersionConflictError,
    ZnodeMissingError,
    ZooKeeperError,
)
from remediate.execute.decisions import (
    agreement_blocker,
    claimed_blocker,
    disagreement_blocker,
    replica_hosts,
    unconfigured_hosts_blocker,
)
from remediate.execute.journal import JournalEvent
from remediate.execute.stepbase import StepRun
from remediate.execute.steps import Decision, StepKey
from remediate.formats.topic_id import parse_topic_id
from remediate.formats.znodes import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    decode_topic,
    topic_path,
    with_topic_id,
)
from remediate.gates import migration_blocker, missing_id_blocker, topic_in_sync_blocker
from remediate.plan import RestoreStep
from remediate.playbook import Action, Timeouts
from remediate.ports import DeleteNode, SetData, ZkOp
from remediate.state import ClusterState

ELECTION_TIMEOUT_S = 60.0


class RestoreRun(StepRun[RestoreStep]):
    """Carries out one restore step of `plan`."""

    @property
    def gates(self) -> Timeouts:
        gates = self.services.gates
        return gates.get(self.step.playbook) or gates[self.plan.playbook]

    @property
    def gate_key(self) -> StepKey:
        return StepKey.for_topic(None, self.step.topic, Decision.AGREEMENT)

    def key(self, action: str) -> StepKey:
        return StepKey.for_topic(self.index, self.step.topic, action)

    def run(self) -> None:
        step, recorder, ledger = self.step, self.recorder, self.recorder.ledger
        self.services.progress(f"topic {step.topic}: {step.reason}")
        for action in step.actions:
            key = self.key(action)
            if action == Action.GATE_AGREEMENT:
                done = self.key(
                    Action.ZK_WRITE_CONTROLLER_ELECTION if step.mint else Action.ZK_WRITE_TOPIC_ID
                )
                if recorder.finished(done):
                    recorder.skip(
                        key,
                        f"{done} was done by this run already: the gate before it is not"
                        " checked again",
                    )
                    continue
                if recorder.act(key, self.agreement_gate):
                    ledger.gated.add(str(key))
            elif action == Action.ZK_WRITE_TOPIC_ID:
                # Resumed after the gate passed in an earlier process: checked again.
                regate = str(self.key(Action.GATE_AGREEMENT)) not in ledger.gated
                recorder.act(key, partial(self.write_topic_id, regate=regate), destructive=True)
            elif action == Action.ZK_WRITE_CONTROLLER_ELECTION:
                if not step.reelect:
                    recorder.skip(
                        key,
                        f"ZooKeeper held no id for {step.topic} that a controller could have"
                        " loaded: no election is needed",
                    )
                    continue
                recorder.act(key, partial(self.reelect, key), destructive=True)
            elif action == Action.WAIT_IN_SYNC:
                recorder.act(key, self.wait_in_sync)
            elif action == Action.VERIFY_TOPIC_IDS:
                recorder.act(key, self.verify)
            else:
                raise HaltedError(f"step {self.index + 1}: unknown action {action!r} in the plan")

    # -- the gate -----------------------------------------------------------------------------

    def agreement_gate(self) -> dict[str, Any]:
        state = self.probes.read()
        restored = {r.topic for r in self.plan.restores}
        blocker = (
            migration_blocker(state)
            or agreement_blocker(self.step, state, restored)
            or (
                self.claimed_blocker(state)
                if self.step.mint
                else self.disagreement_blocker(state, self.step.topic_id)
            )
        )
        self.recorder.record(JournalEvent.GATE, step=str(self.gate_key), blocker=blocker)
        if blocker:
            raise HaltedError(f"restore of {self.step.topic} refused: {blocker}")
        return {"blocker": None}

    def rows(self, state: ClusterState) -> dict[int, tuple[ReplicaRow, ...] | str]:
        """Every replica host's rows, read at once, in parallel, as the scan collects them."""
        reports = collect_brokers(
            self.services.config,
            replica_hosts(state, self.step.topic),
            transport_for=self.services.transport_for,
        )
        return {r.broker_id: r.replicas if r.reachable else str(r.error) for r in reports}

    def claimed_blocker(self, state: ClusterState) -> str | None:
        """For a mint: the topic still has no id and no replica a partition.metadata."""
        topic = self.step.topic
        blocker = unconfigured_hosts_blocker(state, topic, self.services.config.broker_ids)
        return blocker or claimed_blocker(state, topic, self.rows(state))

    def disagreement_blocker(
        self, state: ClusterState, expected: str, *, require_one: bool = True
    ) -> str | None:
        """Every replica of the topic present, readable, and holding `expected`."""
        topic = self.step.topic
        blocker = unconfigured_hosts_blocker(state, topic, self.services.config.broker_ids)
        if blocker:
            return blocker
        return disagreement_blocker(
            state,
            topic,
            expected,
            self.rows(state),
            rolled=self.step.rolled_later,
            rolled_id=self.step.zk_topic_id,
            require_one=require_one,
        )

    # -- the writes ---------------------------------------------------------------------------

    def fence(self) -> ControllerFence:
        """The controller's fence, read right before a write: halts if a migration has begun
        (remediate/collect/cluster_state.py, `ControllerFence`)."""
        fence = read_fence(self.services.zk, on_retry=self.recorder.retried("a ZooKeeper request"))
        blocker = migration_blocker(fence.state)
        if blocker is not None:
            raise HaltedError(f"nothing written: {blocker}")
        if fence.epoch_version is None:
            raise HaltedError(f"{CONTROLLER_EPOCH} does not exist: no controller ever ran here")
        return fence

    def after_conflict(self, fence: ControllerFence, what: str) -> str:
        """Why a write conditioned on `fence` was refused by ZooKeeper: a controller took over
        since the read (an election), or `what` changed. A migration begun since halts."""
        now = read_fence(self.services.zk, on_retry=self.recorder.retried("a ZooKeeper request"))
        blocker = migration_blocker(now.state)
        if blocker is not None:
            raise HaltedError(f"nothing written: {blocker}")
        if now.epoch_version != fence.epoch_version:
            return (
                f"a controller took over between the check and the write (controller epoch"
                f" {fence.state.controller_epoch} -> {now.state.controller_epoch}); nothing"
                " written: `resume` checks again"
            )
        return f"{what} changed while writing; nothing written"

    def write_topic_id(self, *, regate: bool) -> dict[str, Any]:
        step, zk = self.step, self.services.zk
        path = topic_path(step.topic)
        data, stat = zk.get(path, on_retry=self.recorder.retried("a ZooKeeper request"))
        current = decode_topic(data, source=path)
        if current.topic_id is not None and str(current.topic_id) == step.topic_id:
            return {"znode_version": stat.version, "already": True}
        if regate:
            # Minutes may have passed since the gate passed in an earlier process.
            self.recorder.record(
                JournalEvent.NOTE,
                step=str(self.gate_key),
                decision="resumed: the gate is checked again",
            )
            self.agreement_gate()
        if stat.version != step.znode_version:
            raise HaltedError(
                f"{path} changed since the plan (version {stat.version}, plan"
                f" {step.znode_version}); nothing written"
            )
        updated = with_topic_id(
            data, parse_topic_id(step.topic_id, source="plan", field="topic_id"), source=path
        )
        fence = self.fence()
        self.services.failpoint("zk-write topic-id:read")
        self.recorder.lock.ensure_held()
        try:
            zk.commit([fence.check, SetData(path, updated, step.znode_version)])
        except (VersionConflictError, ZnodeMissingError) as exc:
            try:
                reason = self.after_conflict(fence, path)
            except HaltedError as migrating:
                raise HaltedError(f"{path}: {migrating}") from exc
            raise HaltedError(f"{path}: {reason}") from exc
        except OutcomeUnknownError as exc:
            # Never written again blind: read to learn whether the write took effect.
            data, stat = zk.get(path, on_retry=self.recorder.retried("a ZooKeeper request"))
            if str(decode_topic(data, source=path).topic_id) != step.topic_id:
                raise HaltedError(
                    f"{path}: the write's answer was lost and the znode does not hold"
                    f" {step.topic_id}: nothing written; `resume` checks again"
                ) from exc
            self.recorder.record(
                JournalEvent.NOTE,
                step=str(self.key(Action.ZK_WRITE_TOPIC_ID)),
                decision=f"the write's answer was lost ({exc}); read again: it took effect",
            )
        except ZooKeeperError as exc:
            raise HaltedError(f"{path}: ZooKeeper write failed: {exc}") from exc
        self.services.progress(f"topic {step.topic}: wrote {step.topic_id} into {path}")
        # A conditional write that took effect moved the znode one version on.
        return {"znode_version": step.znode_version + 1, "topic_id": step.topic_id}

    def reelect(self, key: StepKey) -> dict[str, Any]:
        probes, recorder = self.probes, self.recorder
        fence = self.fence()
        before = fence.state.controller_epoch
        if before is None:
            raise HaltedError(f"{CONTROLLER_EPOCH} does not parse: {fence.state.problems}")
        # Resumed: if an election already happened after the one this action recorded, the
        # delete took effect and is not repeated.
        recorded = [
            r.get("controller_epoch_before")
            for r in recorder.journal.records()
            if r.get("event") == JournalEvent.NOTE and r.get("step") == str(key)
        ]
        if recorded and isinstance(recorded[-1], int) and before > recorded[-1]:
            return {"controller_epoch": before, "already": True}
        # A fresh check right before the election (a resumed run may come minutes later): no
        # topic may be without an id, or the new controller mints one no replica holds.
        minted = {r.topic for r in self.plan.restores if r.mint}
        blocker = missing_id_blocker(probes.read(), restored=minted)
        recorder.record(JournalEvent.GATE, step=str(key), blocker=blocker)
        if blocker:
            raise HaltedError(f"controller election refused: {blocker}")
        recorder.record(JournalEvent.NOTE, step=str(key), controller_epoch_before=before)
        recorder.lock.ensure_held()
        self.delete_controller(key, fence)
        probes.wait(
            lambda: (
                None
                if probes.controller_epoch() > before and probes.read().controller_id is not None
                else "no new controller yet"
            ),
            timeout=ELECTION_TIMEOUT_S,
            what="a new controller",
        )
        after = probes.read()
        self.services.progress(f"controller re-elected: broker {after.controller_id}")
        return {"controller": after.controller_id, "controller_epoch": after.controller_epoch}

    def delete_controller(self, key: StepKey, fence: ControllerFence) -> None:
        """Delete the `/controller` that was read, in one transaction with the fence's check:
        never a controller elected since (whose own election already loaded the id written),
        never once a migration has begun. Never sent twice: a lost answer is read again by
        the wait for the election that follows."""
        if fence.controller_version is None:
            decision = "no /controller at the read: an election is under way already"
        else:
            ops: list[ZkOp] = [fence.check, DeleteNode(CONTROLLER, fence.controller_version)]
            try:
                self.services.zk.commit(ops)
                return
            except (VersionConflictError, ZnodeMissingError):
                try:
                    self.after_conflict(fence, CONTROLLER)
                except HaltedError as exc:
                    raise HaltedError(f"controller election refused: {exc}") from None
                decision = (
                    "a controller took over since the read (its election loaded the id"
                    " written): /controller not deleted"
                )
            except OutcomeUnknownError as exc:
                decision = (
                    f"the delete's answer was lost ({exc}): not sent again; the wait for a new"
                    " controller shows whether it took effect"
                )
        self.recorder.record(JournalEvent.NOTE, step=str(key), decision=decision)

    # -- after ------------------------------------------------------------------------------

    def wait_in_sync(self) -> dict[str, Any]:
        topic = self.step.topic
        held = self.probes.wait(
            lambda: topic_in_sync_blocker(
                self.probes.sampled_read([topic]), topic, self.step.offline_until_restart
            ),
            timeout=self.gates.in_sync_timeout_s,
            what=f"every partition of {topic} in sync",
            stable_for=self.gates.stability_window_s,
        )
        return {"in_sync_after_s": held}

    def verify(self) -> dict[str, Any]:
        step = self.step
        state = self.probes.read()
        topic = state.topics.get(step.topic)
        if step.mint:
            if topic is None or topic.topic_id is None:
                raise HaltedError(f"{topic_path(step.topic)} still has no topic id")
            blocker = self.disagreement_blocker(state, topic.topic_id, require_one=False)
            if blocker:
                raise HaltedError(f"topic {step.topic}: {blocker}")
            return {"verified": step.topic, "topic_id": topic.topic_id, "minted": True}
        if topic is None or topic.topic_id != step.topic_id:
            raise HaltedError(f"{topic_path(step.topic)} does not hold {step.topic_id}")
        blocker = self.disagreement_blocker(state, step.topic_id)
        if blocker:
            raise HaltedError(f"topic {step.topic}: {blocker}")
        return {"verified": step.topic, "topic_id": step.topic_id}
