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
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from remediate.collect.collector import Progress, transports, zk_settings
from remediate.collect.disks import read_disks
from remediate.collect.min_isr import resolve_brokers_min_isr
from remediate.config import ClusterConfig
from remediate.errors import ConfigError, JournalError, KafkaAdminError, PlanChoiceError
from remediate.execute.journal import RunStatus, list_runs, read_records
from remediate.execute.locked import apply_plan, record_check
from remediate.exit_codes import EXIT_HALTED, EXIT_NEEDS_ACCEPTANCE, EXIT_REFUSED
from remediate.kafka_admin import (
    KafkaPythonAdmin,
    Security,
    bootstrap_servers,
    broker_addresses,
)
from remediate.kafka_lines import KafkaLines
from remediate.minisr import KAFKA_DEFAULT, MinIsrSource, PlannedMinIsr, unknown_refusal
from remediate.plan import Plan, PlanOptions, make_plan
from remediate.plan.estimate import ObservedRestarts, observed_restarts
from remediate.plan.model import by_name, with_digest
from remediate.plan.render import min_isr_of
from remediate.playbook import Playbook, cluster_playbook
from remediate.ports import KafkaAdmin
from remediate.preflight import AT_RISK_KINDS, Preflight, kraft_preflight
from remediate.scan.kinds import MISMATCH_KINDS, FindingKind
from remediate.scan.pipeline import ClusterScan, collect_and_scan
from remediate.state import ClusterState, MoveFacts, TopicPartition
from remediate.zookeeper import session

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
    engine: str = "spark",
    progress: Progress | None = None,
    candidate: str = "auto",
    restore_only: bool = False,
    max_batch_size: int | None = None,
) -> Plan:
    """The plan for `config`'s cluster as it is now, by the named playbook.

    Raises PlanChoiceError when the operator's candidate is not possible on this state."""
    playbook = cluster_playbook(config, playbook_name)
    # The repair plans a restore, with no restart, wherever the replicas allow one.
    repairs = bool(MISMATCH_KINDS & set(playbook.applies_to))
    restore = cluster_playbook(config, RESTORE_PLAYBOOK) if repairs else None
    scanned = collect_and_scan(
        config, master=spark_master, include_ok=True, progress=progress, engine=engine
    )
    min_isr, min_isr_problems = brokers_min_isr(config, scanned.state)
    lines = kafka_lines(config, scanned.state)
    # The repair without restarts is weighed where Kafka's admin API can be reached.
    moves = cluster_playbook(config, MOVE_PLAYBOOK) if repairs else None
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
            min_isr,
            min_isr_problems,
            lines,
            max_batch_size,
            past_restarts(Path(config.journal_dir)),
        )
    except ValueError as exc:
        raise PlanChoiceError(str(exc)) from None


def past_restarts(journal_dir: Path) -> ObservedRestarts:
    """How long each broker's restarts took in the runs journaled under `journal_dir` (the
    plan's estimate); a journal that cannot be read is left out."""

    def journals() -> Iterator[list[dict[str, Any]]]:
        for run_id in list_runs(journal_dir):
            try:
                yield read_records(journal_dir, run_id)
            except JournalError:
                continue

    return observed_restarts(journals())


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
    min_isr: PlannedMinIsr | None = None,
    min_isr_problems: tuple[str, ...] = (),
    lines: KafkaLines | None = None,
    max_batch_size: int | None = None,
    observed: ObservedRestarts | None = None,
) -> Plan:
    resolved = min_isr or PlannedMinIsr(
        config.min_insync_replicas_default or KAFKA_DEFAULT,
        MinIsrSource.CLUSTER_YAML,
        "not resolved",
    )
    plan = make_plan(
        cluster=config.cluster,
        state=scanned.state,
        findings=scanned.report.findings,
        playbook=playbook,
        options=PlanOptions(
            allow_unsafe=allow_unsafe,
            include_topics=frozenset(include_topics),
            min_isr_default=resolved.value,
            min_isr=resolved,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            candidate=candidate,
            restore_only=restore_only,
            max_batch_size=max_batch_size,
            observed_restarts=observed,
            move_throttle_bytes_per_s=(
                config.kafka.move_throttle_bytes_per_s if config.kafka is not None else None
            ),
        ),
        known_brokers=config.broker_ids,
        lines=lines if lines is not None else kafka_lines(config, scanned.state),
        restore=restore,
        moves=moves,
        disks=disks,
    )
    refusal = unknown_refusal(resolved, min_isr_problems) if plan.steps else None
    if refusal is not None:
        plan = replace(plan, refusals=(*plan.refusals, refusal))
    if not min_isr_problems and refusal is None:
        return plan
    # Which brokers' settings could not be read (counted with cluster.yaml's value, or
    # refusing the plan where it states none).
    return with_digest(replace(plan, notes=(*plan.notes, *min_isr_problems)))


def brokers_min_isr(
    config: ClusterConfig, state: ClusterState
) -> tuple[PlannedMinIsr, tuple[str, ...]]:
    """min.insync.replicas for a topic without an override, as the brokers resolve it, and
    the brokers it could not be read from (remediate/collect/min_isr.py)."""
    opener = (lambda: kafka_admin(config, state)) if config.kafka is not None else None
    with session(zk_settings(config)) as zk:
        return resolve_brokers_min_isr(config, zk, transport_for=transports(config), admin=opener)


def kafka_lines(config: ClusterConfig, state: ClusterState) -> KafkaLines:
    """The Kafka release line of every live broker, as its ApiVersions tell it, or why it is
    not known (no kafka section in cluster.yaml, a broker that does not answer)."""
    live = sorted(state.brokers)
    if config.kafka is None:
        why = (
            f"{config.source} has no kafka section, and the release is read from each"
            " broker's ApiVersions over Kafka's protocol (configuration.md: kafka)"
        )
        return KafkaLines.read(dict.fromkeys(live, why))
    try:
        admin = kafka_admin(config, state)
    except (KafkaAdminError, ConfigError) as exc:  # no client: every release unknown, and why
        why = f"Kafka's admin API cannot be reached: {exc}"
        return KafkaLines.read(dict.fromkeys(live, why))
    answers: dict[int, tuple[int, int] | str] = {}
    try:
        for broker in live:
            try:
                version = admin.kafka_version(broker)
            except KafkaAdminError as exc:
                answers[broker] = str(exc)
                continue
            answers[broker] = version if version is not None else "ApiVersions gave no release"
    finally:
        admin.close()
    return KafkaLines.read(answers)


def kafka_admin(config: ClusterConfig, state: ClusterState) -> KafkaAdmin:
    """The client of Kafka's admin requests for `config`'s brokers: over Kafka's protocol, at
    the addresses configured or registered, with the listener's security; or the sandbox's
    emulated brokers' own."""
    kafka = config.kafka
    if kafka is None:
        raise ConfigError(f"{config.source}: kafka: no section (the brokers' listener)")
    if kafka.admin == "sandbox":
        from remediate.sandbox.admin_port import SandboxAdmin  # noqa: PLC0415

        return SandboxAdmin.connect(zk_settings(config))
    password = kafka.sasl.resolved_password if kafka.sasl is not None else None
    security = Security(
        protocol=kafka.security_protocol,
        ca_file=str(kafka.tls.ca_file) if kafka.tls is not None else None,
        cert_file=str(kafka.tls.cert_file) if kafka.tls and kafka.tls.cert_file else None,
        key_file=str(kafka.tls.key_file) if kafka.tls and kafka.tls.key_file else None,
        sasl_mechanism=kafka.sasl.mechanism if kafka.sasl is not None else None,
        username=kafka.sasl.username if kafka.sasl is not None else None,
        password=password.get_secret_value() if password is not None else None,
        check_hostname=kafka.tls.verify_hostname if kafka.tls is not None else True,
    )
    bootstrap = bootstrap_servers(state.brokers, kafka.listener, kafka.bootstrap)
    if not bootstrap:
        raise ConfigError(
            f"{config.source}: kafka.bootstrap: no address given, and no broker registered a"
            f" {kafka.listener} listener"
        )
    return KafkaPythonAdmin(
        bootstrap,
        security=security,
        timeout_ms=round(kafka.request_timeout_s * 1000),
        addresses=broker_addresses(state.brokers, kafka.listener),
    )


def admin_factory(config: ClusterConfig) -> Callable[[ClusterState], KafkaAdmin] | None:
    """What the executor opens Kafka's admin client with (None: no kafka section)."""
    if config.kafka is None:
        return None
    return lambda state: kafka_admin(config, state)


def move_facts(
    config: ClusterConfig, scanned: ClusterScan, kinds: Collection[FindingKind] = MISMATCH_KINDS
) -> MoveFacts | None:
    """What the live brokers hosting the topics with a replica of `kinds` (whose replicas
    disagree) say of their disks, or why nothing is known; None where cluster.yaml gives no way
    to Kafka's admin API (no kafka section): the repairs that move replicas are then not
    weighed."""
    if config.kafka is None:
        return None
    state = scanned.state
    topics = {
        f.topic
        for f in scanned.report.findings
        if f.kind in kinds and f.topic is not None and f.topic in state.topics
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
    except KafkaAdminError as exc:  # a client that cannot start: moves are not offered
        return MoveFacts(problem=f"Kafka's admin API cannot be reached: {exc}")
    brokers = sorted({b for _, b in replicas if b in config.broker_ids and b in state.brokers})
    factory = transports(config)
    try:
        return read_disks(
            admin,
            {b: factory(b) for b in brokers},
            brokers,
            {tp for tp, _ in replicas},
        )
    finally:
        admin.close()


def kraft_migration_preflight(
    config: ClusterConfig, *, spark_master: str | None = None, engine: str = "duckdb"
) -> Preflight:
    """`check --before kraft-migration`: what a migration to KRaft would do now (read-only)."""
    scanned = collect_and_scan(config, master=spark_master, include_ok=True, engine=engine)
    facts = move_facts(config, scanned, AT_RISK_KINDS)
    return kraft_preflight(scanned.state, scanned.report, facts)


def write_plan(plan: Plan, path: Path) -> None:
    """The plan's JSON at `path`, replaced whole (never a half-written plan to approve)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


class FixOutcome(StrEnum):
    """How `fix` ended, in its `--json` as `outcome`."""

    REFUSED = "refused"  # the plan is refused: escalate
    NOT_REVIEWED = "not-reviewed"  # --approve names another plan than the one made now
    NEEDS_ACCEPTANCE = "needs-acceptance"  # the plan makes working partitions unavailable
    DRY_RUN = "dry-run"  # without --yes: the plan, nothing changed
    NOTHING_TO_DO = "nothing-to-do"
    APPLIED = "applied"  # the run completed; the check after it gives the exit code
    HALTED = "halted"


@dataclass
class FixResult:
    """What `fix` did: how it ended, its JSON document (plan, applied, run, check, report),
    exit code and the one-line message a person reads."""

    outcome: FixOutcome
    code: int
    message: str
    document: dict[str, Any] = field(default_factory=dict)


def fix(
    config: ClusterConfig,
    plan: Plan,
    *,
    apply: bool,
    accept_unavailable: bool,
    approved_digest: str | None = None,
    approved_by: str,
    spark_master: str | None,
    engine: str = "spark",
    log_json: bool,
    progress: Callable[[str], None],
    write_report: Callable[[str], str | None],
) -> FixResult:
    """Carry out `plan` (made by build_plan on this cluster just now) the way `fix --yes` does,
    or stop before anything changes and say why. `approved_digest`: the digest of the plan
    someone reviewed (a dry run printed it); `plan` is carried out only if it is that very
    plan, and approving it accepts what it makes unavailable. `write_report(run_id)` renders
    the run's report and returns its path."""
    document: dict[str, Any] = {"plan": plan.to_json(), "applied": False, "report": None}

    def result(outcome: FixOutcome, code: int, message: str) -> FixResult:
        return FixResult(outcome, code, message, {**document, "outcome": outcome})

    if plan.refused:
        return result(FixOutcome.REFUSED, EXIT_REFUSED, refused(plan))
    if approved_digest is not None and approved_digest.strip().lower() != plan.digest:
        return result(FixOutcome.NOT_REVIEWED, EXIT_REFUSED, not_reviewed(plan, approved_digest))
    approved = approved_digest is not None
    if plan.needs_acceptance and not (accept_unavailable or approved):
        return result(FixOutcome.NEEDS_ACCEPTANCE, EXIT_NEEDS_ACCEPTANCE, unaccepted(plan))
    if not apply:
        return result(FixOutcome.DRY_RUN, 0, dry_run(plan))
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
            return result(FixOutcome.HALTED, EXIT_HALTED, f"halted: {outcome.error}")
        message = f"run {outcome.run_id} completed"
    report = collect_and_scan(config, master=spark_master, engine=engine).report
    document["check"] = {"status": report.status, "summary": report.summary_line()}
    if run_id is not None:
        # The findings after the run belong in its record (and its report) too.
        record_check(config, run_id, report, now=time.time())
        document["report"] = write_report(run_id)
    done = FixOutcome.APPLIED if run_id is not None else FixOutcome.NOTHING_TO_DO
    return result(done, report.exit_code, f"{message}; check: {report.summary_line()}")


def apply_hint(plan: Plan) -> str:
    """How to carry out exactly this plan once it is reviewed."""
    return f"to apply exactly this plan: `fix --yes --approve {plan.digest}`"


def refused(plan: Plan) -> str:
    return (
        "the plan is refused ("
        + "; ".join(plan.refusals)
        + "); nothing was changed. Escalate: the tool will not carry this out as it stands"
    )


def not_reviewed(plan: Plan, approved_digest: str) -> str:
    return (
        f"the plan made now (digest {plan.digest}) is not the plan reviewed (--approve"
        f" {approved_digest.strip()}): the cluster, cluster.yaml or the options changed since"
        " that dry run; nothing was changed. Run the dry run again, review the new plan, and"
        " approve its digest"
    )


def dry_run(plan: Plan) -> str:
    return f"dry run: nothing was changed; plan digest {plan.digest}; " + apply_hint(plan)


def unaccepted(plan: Plan) -> str:
    """Why `fix` stops: the partitions the plan makes unavailable that are available now."""
    shown = "; ".join(
        f"{tp} ({', '.join(phases)})" for tp, phases in by_name(plan.newly_unavailable)
    )
    why = min_isr_of(plan, {tp.topic for tp in plan.newly_unavailable})
    return (
        "the plan makes partitions unavailable that are available now: "
        + shown
        + (f" ({why})" if why else "")
        + f"; nothing was changed. Review the plan (digest {plan.digest}); to go ahead,"
        f" approve it: `fix --yes --approve {plan.digest}` (or `apply --approve` of its plan"
        " file), or rerun with --accept-unavailable"
    )
