"""What one step of a plan acts through: the plan, the services, the run's recorder and
probes, and the step with its index (restart.py, restore.py and move.py build on it)."""

from __future__ import annotations

from typing import Generic, TypeVar

from remediate.execute.probes import Probes
from remediate.execute.recorder import Recorder
from remediate.execute.services import Services
from remediate.plan import MoveStep, Plan, RestartStep, RestoreStep, TriggerStep

StepT = TypeVar("StepT", RestartStep, RestoreStep, MoveStep, TriggerStep)


class StepRun(Generic[StepT]):
    """Carries out step `index` of `plan`."""

    def __init__(
        self,
        plan: Plan,
        services: Services,
        recorder: Recorder,
        probes: Probes,
        index: int,
        step: StepT,
    ) -> None:
        self.plan = plan
        self.services = services
        self.recorder = recorder
        self.probes = probes
        self.index = index
        self.step: StepT = step
