"""The workflows behind the commands that plan and repair, free of the command line.

- `build_plan`: collect, scan, then the pure planner (remediate.plan stays free of I/O);
  `plan` and `fix` make their plans here.
- `fix`: the runbook step: plan, stop where the plan is refused or makes working partitions
  unavailable without acceptance, apply it with its own digest, then check again.

The CLI (remediate/cli/) parses options, calls these and prints what they return.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from remediate.collect.collector import Progress, transports
from remediate.collect.disks import read_disks
from remediate.config import ClusterConfig
from remediate.errors import ConfigError, PlanChoiceError
from remediate.execute.journal import RunStatus
from remediate.execute.locked import apply_plan, record_check
from remediate.exit_codes import EXIT_HALTED, EXIT_REFUSED
from remediate.kafka_admin import KafkaAdmin, KafkaPythonAdmin, Security, bootstrap_servers
from remediate.plan import Plan, PlanOptions, make_plan
from remediate.plan.model import by_name
from remediate.playbook import Playbook, load_playbook
from remediate.scan.kinds import MISMATCH_KINDS
from remediate.scan.pipeline import ClusterScan, collect_and_scan
from remediate.state import ClusterState, MoveFacts, TopicPartition

REPAIR_PLAYBOOK = "topicid-mismatch"
RESTORE_PLAYBOOK = "restore-zk-topic-id"
MOVE_PLAYBOOK = "move-replicas"


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
    # The repair without restarts is weighed where Kafka's admin API can be reached.
    moves = load_playbook(MOVE_PLAYBOOK) if repairs else None
    disks = move_facts(config, scanned) if moves is not None else None
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
            moves,
            disks,
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
    moves: Playbook | None = None,
    disks: MoveFacts | None = None,
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
            move_throttle_bytes_per_s=(
                config.kafka.move_throttle_bytes_per_s if config.kafka is not None else None
            ),
        ),
        known_brokers=config.broker_ids,
        restore=restore,
        moves=moves,
        disks=disks,
    )


def kafka_admin(config: ClusterConfig, state: ClusterState) -> KafkaAdmin:
    """The client of Kafka's admin requests for `config`'s brokers: over Kafka's protocol, at
    the addresses configured or registered, with the listener's security; or the sandbox's
    emulated brokers' own."""
    kafka = config.kafka
    if kafka is None:
        raise ConfigError(f"{config.source}: kafka: no section (the brokers' listener)")
    if kafka.admin == "sandbox":
        from remediate.sandbox.admin_port import SandboxAdmin  # noqa: PLC0415

        return SandboxAdmin.connect(config.zookeeper.connect)
    password = kafka.sasl.resolved_password if kafka.sasl is not None else None
    security = Security(
        protocol=kafka.security_protocol,
        ca_file=str(kafka.tls.ca_file) if kafka.tls is not None else None,
        cert_file=str(kafka.tls.cert_file) if kafka.tls and kafka.tls.cert_file else None,
        key_file=str(kafka.tls.key_file) if kafka.tls and kafka.tls.key_file else None,
        sasl_mechanism=kafka.sasl.mechanism if kafka.sasl is not None else None,
        username=kafka.sasl.username if kafka.sasl is not None else None,
        password=password.get_secret_value() if password is not None else None,
    )
    bootstrap = bootstrap_servers(state.brokers, kafka.listener, kafka.bootstrap)
    if not bootstrap:
        raise ConfigError(
            f"{config.source}: kafka.bootstrap: no address given, and no broker registered a"
            f" {kafka.listener} listener"
        )
    return KafkaPythonAdmin(bootstrap, security=security)


def admin_factory(config: ClusterConfig) -> Callable[[ClusterState], KafkaAdmin] | None:
    """What the executor opens Kafka's admin client with (None: no kafka section)."""
    if config.kafka is None:
        return None
    return lambda state: kafka_admin(config, state)


def move_facts(config: ClusterConfig, scanned: ClusterScan) -> MoveFacts | None:
    """What the live brokers hosting the topics whose replicas disagree say of their disks,
    or why nothing is known; None where cluster.yaml gives no way to Kafka's admin API (no
    kafka section): the repairs that move replicas are then not weighed."""
    if config.kafka is None:
        return None
    state = scanned.state
    topics = {
        f.topic
        for f in scanned.report.findings
        if f.kind in MISMATCH_KINDS and f.topic is not None and f.topic in state.topics
    }
    if not topics:
        return MoveFacts(problem="no replica holds another id than ZooKeeper's")
    # Every replica of those topics: the stale ones move one way, the others the other.
    replicas = {
        (TopicPartition(topic, partition), broker)
        for topic in topics
        for partition, brokers in state.topics[topic].assignment.partitions.items()
        for broker in brokers
    }
    try:
        admin = kafka_admin(config, scanned.state)
    except ConfigError as exc:
        return MoveFacts(problem=str(exc))
    except Exception as exc:  # a client that cannot start: moves are simply not offered
        return MoveFacts(problem=f"Kafka's admin API cannot be reached: {exc}")
    brokers = sorted({b for _, b in replicas if b in config.broker_ids and b in state.brokers})
    factory = transports(config)
    try:
        return read_disks(
            admin,
            {b: factory(b) for b in brokers},
            brokers,
            {tp for tp, _ in replicas},
            sudo={b: config.use_sudo(b) for b in brokers},
        )
    finally:
        admin.close()


def write_plan(plan: Plan, path: Path) -> None:
    """The plan's JSON at `path`, replaced whole (never a half-written plan to approve)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


@dataclass
class FixResult:
    """What `fix` did: its JSON document (plan, applied, run, check, report), exit code and
    the one-line message a person reads."""

    code: int
    message: str
    document: dict[str, Any] = field(default_factory=dict)


def fix(
    config: ClusterConfig,
    plan: Plan,
    *,
    apply: bool,
    accept_unavailable: bool,
    approved_by: str,
    spark_master: str | None,
    log_json: bool,
    progress: Callable[[str], None],
    write_report: Callable[[str], str | None],
) -> FixResult:
    """Carry out `plan` (made by build_plan on this cluster just now) the way `fix --yes` does,
    or stop before anything changes and say why. `write_report(run_id)` renders the run's
    report and returns its path."""
    document: dict[str, Any] = {"plan": plan.to_json(), "applied": False, "report": None}
    if plan.refused:
        return FixResult(EXIT_REFUSED, "the plan is refused; nothing was changed", document)
    if plan.needs_acceptance and not accept_unavailable:
        return FixResult(EXIT_REFUSED, unaccepted(plan), document)
    if not apply:
        return FixResult(0, "dry run: nothing was changed; add --yes to apply", document)
    run_id: str | None = None
    if not plan.steps:
        message = "nothing to repair"
    else:
        outcome = apply_plan(
            config,
            plan,
            approved_by=approved_by,
            log_json=log_json,
            progress=progress,
            kafka_admin=admin_factory(config),
        )
        run_id = outcome.run_id
        document.update(applied=True, run=outcome.to_json())
        if outcome.status != RunStatus.COMPLETED:
            document["report"] = write_report(run_id)
            return FixResult(EXIT_HALTED, f"halted: {outcome.error}", document)
        message = f"run {outcome.run_id} completed"
    report = collect_and_scan(config, master=spark_master).report
    document["check"] = {"status": report.status, "summary": report.summary_line()}
    if run_id is not None:
        # The findings after the run belong in its record (and its report) too.
        record_check(config, run_id, report, now=time.time())
        document["report"] = write_report(run_id)
    return FixResult(report.exit_code, f"{message}; check: {report.summary_line()}", document)


def unaccepted(plan: Plan) -> str:
    """Why `fix` stops: the partitions the plan makes unavailable that are available now."""
    shown = "; ".join(
        f"{tp} ({', '.join(phases)})" for tp, phases in by_name(plan.newly_unavailable)
    )
    return (
        "the plan makes partitions unavailable that are available now: "
        + shown
        + "; nothing was changed. Review the plan (`remediate plan --format markdown`), then"
        " rerun with --accept-unavailable, or approve its digest with `apply --approve`"
    )
