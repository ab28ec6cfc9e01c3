"""The run's closing gate after a repair's last step: every partition of the plan's topics
has a leader, its full ISR and ZooKeeper's id in every file, within the playbook's in-sync
timeout; otherwise the run halts. Journaled as one action keyed after the last step, so a
resumed run does it once; journaled as skipped, with why, after a plan that deletes no file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from remediate.collect.collector import inspect_broker
from remediate.collect.snapshot import ReplicaRow
from remediate.execute.decisions import (
    ConvergenceScope,
    converged_files_blocker,
    convergence_scope,
    scope_hosts,
)
from remediate.execute.probes import Probes
from remediate.execute.recorder import Recorder
from remediate.execute.services import Services
from remediate.execute.steps import RunAction, StepKey
from remediate.gates import converged_blocker
from remediate.plan import Plan
from remediate.state import ClusterState

# Files change only when Kafka writes a missing one: read them again at most this often.
FILES_EVERY_S = 1.0


class Converge:
    def __init__(self, plan: Plan, services: Services, recorder: Recorder, probes: Probes) -> None:
        self.plan = plan
        self.services = services
        self.recorder = recorder
        self.probes = probes
        self._files_read_at: float | None = None
        self._files_blocker: str | None = None

    @property
    def key(self) -> StepKey:
        return StepKey.for_cluster(len(self.plan.steps), RunAction.CONVERGE)

    def run(self) -> None:
        scope = convergence_scope(self.plan)
        if scope is None:
            self.recorder.skip(
                self.key,
                "the plan deletes no file: nothing converges after its last step that its"
                " steps' own gates did not wait for",
            )
            return
        self.recorder.act(self.key, lambda: self.wait(scope))

    def wait(self, scope: ConvergenceScope) -> dict[str, Any]:
        gates = self.services.gates[self.plan.playbook]

        def blocker() -> str | None:
            state = self.probes.sampled_read(sorted(scope.topics))
            found = converged_blocker(state, scope.topics, excused=scope.excused)
            if found is not None:
                self._files_read_at = None  # read the files again once ZooKeeper converges
                return found
            return self.files_blocker(scope)

        held = self.probes.wait(
            blocker,
            timeout=gates.in_sync_timeout_s,
            what="every partition of the plan's topics to converge (a leader, its full ISR,"
            " ZooKeeper's id in every file)",
            stable_for=gates.stability_window_s,
        )
        return {
            "converged_after_s": held,
            "topics": sorted(scope.topics),
            "excused": sorted(str(tp) for tp in scope.excused),
        }

    def files_blocker(self, scope: ConvergenceScope) -> str | None:
        now = self.services.clock.monotonic()
        if self._files_read_at is not None and now - self._files_read_at < FILES_EVERY_S:
            return self._files_blocker
        state = self.probes.read(sorted(scope.topics))
        self._files_blocker = converged_files_blocker(state, scope, self.read_files(state, scope))
        self._files_read_at = now
        return self._files_blocker

    def read_files(
        self, state: ClusterState, scope: ConvergenceScope
    ) -> dict[int, Sequence[ReplicaRow] | str]:
        config = self.services.config
        rows: dict[int, Sequence[ReplicaRow] | str] = {}
        for broker in scope_hosts(state, scope):
            if broker not in config.broker_ids:
                rows[broker] = "not in the configuration"
                continue
            report = inspect_broker(config, config.broker(broker), self.services.transport_for)
            rows[broker] = report.replicas if report.reachable else str(report.error)
        return rows
