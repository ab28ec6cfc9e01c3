"""Planning a repair from a fresh read of the cluster: collect, scan, then the pure planner.

`plan` and `fix` make their plans here; the planner itself (remediate.plan) stays free of I/O.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from remediate.collect.run import Progress
from remediate.config import ClusterConfig
from remediate.errors import PlanChoiceError
from remediate.plan import Plan, PlanOptions, make_plan
from remediate.playbook import Playbook, load_playbook
from remediate.scan.kinds import MISMATCH_KINDS
from remediate.scan.pipeline import ClusterScan, collect_and_scan

REPAIR_PLAYBOOK = "topicid-mismatch"
RESTORE_PLAYBOOK = "restore-zk-topic-id"


def build_plan(
    config: ClusterConfig,
    *,
    playbook_name: str = REPAIR_PLAYBOOK,
    allow_unsafe: bool = False,
    include_topics: tuple[str, ...] = (),
    spark_master: str | None = None,
    progress: Progress | None = None,
    candidate: str = "auto",
    restore_only: bool = False,
) -> Plan:
    """The plan for `config`'s cluster as it is now, by the named playbook.

    Raises PlanChoiceError when the operator's candidate is not possible on this state."""
    playbook = load_playbook(playbook_name)
    # The repair plans a restore, with no restart, wherever the replicas allow one.
    repairs = bool(MISMATCH_KINDS & set(playbook.applies_to))
    restore = load_playbook(RESTORE_PLAYBOOK) if repairs else None
    scanned = collect_and_scan(config, master=spark_master, include_ok=True, progress=progress)
    try:
        return _plan(
            config,
            scanned,
            playbook,
            restore,
            candidate,
            restore_only,
            allow_unsafe,
            include_topics,
        )
    except ValueError as exc:
        raise PlanChoiceError(str(exc)) from None


def _plan(
    config: ClusterConfig,
    scanned: ClusterScan,
    playbook: Playbook,
    restore: Playbook | None,
    candidate: str,
    restore_only: bool,
    allow_unsafe: bool,
    include_topics: tuple[str, ...],
) -> Plan:
    return make_plan(
        cluster=config.cluster,
        state=scanned.state,
        findings=scanned.report.findings,
        playbook=playbook,
        options=PlanOptions(
            allow_unsafe=allow_unsafe,
            include_topics=frozenset(include_topics),
            min_isr_default=config.min_insync_replicas_default,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            candidate=candidate,
            restore_only=restore_only,
        ),
        known_brokers=config.broker_ids,
        restore=restore,
    )


def write_plan(plan: Plan, path: Path) -> None:
    """The plan's JSON at `path`, replaced whole (never a half-written plan to approve)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
