"""Runs under the cluster's lock: a new run of an approved plan, a resumed run, a rollback.

Everything a run needs before its first action lives here: the plan file and its approval,
the ZooKeeper session, the lock, the drift check against the plan's fingerprint, the journal
and the services the executor acts through. Refusals (RefusedError) come before anything is
changed; the lock is released however the run ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

from remediate.clock import SystemClock
from remediate.collect.cluster_state import read_cluster_state, read_migration
from remediate.collect.collector import collect_brokers, transports, zk_settings
from remediate.config import ClusterConfig
from remediate.errors import JournalError, RefusedError, ZooKeeperError
from remediate.execute import interrupt
from remediate.execute.drift import differences, observed_files
from remediate.execute.executor import Executor, RunOutcome, Services
from remediate.execute.journal import (
    Journal,
    JournalEvent,
    RunStatus,
    latest_run,
    list_runs,
    new_run_id,
    replay,
    run_or_latest,
)
from remediate.execute.journal_mirror import (
    Choice,
    JournalMirror,
    choose_copy,
    cluster_path,
    prune_before,
    read_run,
    zk_runs,
)
from remediate.execute.lock import RunLock
from remediate.gates import migration_blocker
from remediate.logs import run_logger
from remediate.plan import Plan, RestartStep, plan_from_json
from remediate.playbook import Timeouts, cluster_playbook
from remediate.ports import KafkaAdmin, ZooKeeper, ZooKeeperStore
from remediate.scan.findings import ScanReport
from remediate.state import ClusterState
from remediate.zookeeper import session

Progress = Callable[[str], None]

# A new run waits this long for a lock someone else holds, then refuses.
NEW_RUN_LOCK_WAIT_S = 1.0

# Opens a client of Kafka's admin requests for the cluster as read (remediate/workflows.py).
KafkaAdminFactory = Callable[[ClusterState], KafkaAdmin]


def load_plan_file(path: Path) -> tuple[Plan, dict[str, Any]]:
    """The plan in `path` and the JSON document it was read from (its digest field included)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RefusedError(f"{path}: cannot read the plan: {exc.strerror}") from exc
    except ValueError as exc:
        raise RefusedError(f"{path}: not a plan: invalid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise RefusedError(f"{path}: not a plan: expected a JSON object")
    try:
        return plan_from_json(document), document
    except (KeyError, TypeError, ValueError) as exc:
        raise RefusedError(f"{path}: not a valid plan: field {exc} missing or malformed") from exc


def check_approval(plan: Plan, document: dict[str, Any], approve: str | None) -> None:
    """RefusedError unless `approve` is the digest of this very, unedited, unrefused plan."""
    if not approve:
        raise RefusedError(
            f"not approved: review the plan, then pass --approve {plan.digest}"
            " (its digest); nothing was changed"
        )
    if document.get("digest") != plan.digest:
        raise RefusedError(
            "the plan file was edited after it was made: its digest field does not match its"
            " content; plan again; nothing was changed"
        )
    if approve.strip().lower() != plan.digest:
        raise RefusedError(
            f"--approve {approve} is not this plan's digest ({plan.digest}); nothing was changed"
        )
    if plan.refused:
        raise RefusedError(
            "the plan is refused (" + "; ".join(plan.refusals) + "); nothing was changed"
        )


def load_approved_plan(path: Path, approve: str | None) -> Plan:
    """The plan in `path`, if `approve` approves it; RefusedError otherwise."""
    plan, document = load_plan_file(path)
    check_approval(plan, document, approve)
    return plan


def check_drift(config: ClusterConfig, zk: ZooKeeper, plan: Plan) -> None:
    """RefusedError if the cluster is not as the plan's fingerprint recorded it."""
    if plan.cluster != config.cluster:
        raise RefusedError(
            f"the plan is for cluster {plan.cluster}, the configuration is {config.cluster}"
        )
    state = read_cluster_state(zk)
    brokers = [b for b in plan.fingerprint.file_brokers() if b in config.broker_ids]
    reports = collect_brokers(config, brokers, transport_for=transports(config)) if brokers else ()
    rows = {r.broker_id: r.replicas for r in reports if r.reachable}
    unreachable = {r.broker_id: r.error or "unreachable" for r in reports if not r.reachable}
    files = observed_files(plan.fingerprint.files, rows)
    diffs = differences(plan.fingerprint, state, files, unreachable=unreachable)
    if diffs:
        raise RefusedError(
            "the cluster changed since the plan was made; plan again. Differences:\n  "
            + "\n  ".join(diffs)
        )


def require_stop_evidence(config: ClusterConfig, plan: Plan, *, rollback: bool = False) -> None:
    """RefusedError, before anything changes, when the run would delete or restore files on a
    broker and nothing could prove that broker's process down first.

    Only the service's status command proves it. ZooKeeper alone does not: a broker whose
    registration does not parse is missing from the cluster state, exactly as a stopped one
    is, and files changed under a running broker are what the tool must never do.
    """
    if config.service.status is not None:
        return
    if rollback:
        action = "puts back backed-up files"
    else:
        brokers = sorted({s.broker for s in plan.steps if isinstance(s, RestartStep) and s.files})
        if not brokers:
            return
        action = "deletes files on broker(s) " + ", ".join(map(str, brokers))
    raise RefusedError(
        f"the run {action}, but cluster.yaml has no service.status command: nothing would"
        " prove a broker's process is down before its files change (ZooKeeper cannot: a"
        " registration that does not parse looks like a stopped broker). Add service.status;"
        " nothing was changed"
    )


def chosen_run(root: Path, zk: ZooKeeper, cluster: str, run_id: str | None) -> str:
    """The run a command is about: `run_id` if given, else the latest started of those this
    host's journal_dir and ZooKeeper keep. RefusedError if there is none."""
    if run_id:
        return run_id
    known = sorted({*list_runs(root), *zk_runs(zk, cluster)})
    if not known:
        raise RefusedError(f"no run in {root} nor in ZooKeeper for cluster {cluster}")
    return known[-1]


def open_run(
    root: Path,
    zk: ZooKeeperStore,
    cluster: str,
    run_id: str,
    progress: Progress,
    trust: str | None = None,
) -> tuple[Journal, Choice]:
    """Run `run_id`'s journal on this host, brought up to date from ZooKeeper's copy when
    that is ahead or the only one (remediate/execute/journal_mirror.py says which wins), and
    the choice made. Where the copies disagree and the operator chose one (`trust`), the
    other is set aside: a distrusted local journal is kept beside it, a distrusted copy in
    ZooKeeper is deleted (the trusted one is copied there again)."""
    local: Journal | None
    try:
        local = Journal.open(root, run_id)
    except JournalError:
        local = None
    stored = read_run(zk, cluster, run_id)
    choice = choose_copy(
        None if local is None else local.lines(),
        None if stored is None else stored.lines,
        gap=None if stored is None else stored.gap,
        last=0 if stored is None else stored.last,
        trust=trust,
    )
    if choice.overruled is not None:
        progress(f"run {run_id}: {choice.reason}")
    if choice.source == "local":
        assert local is not None
        if choice.overruled is not None:
            zk.delete_tree(f"{cluster_path(cluster)}/{run_id}")
        return local, choice
    assert stored is not None
    if choice.overruled is not None and local is not None:
        kept = local.path.with_name(f"{local.path.name}.distrusted")
        kept.write_bytes(b"".join(local.lines()))
    progress(f"run {run_id}: journal read from ZooKeeper ({choice.reason})")
    return Journal.restore(root, run_id, stored.plan, choice.lines), choice


def read_journal(
    config: ClusterConfig,
    run_id: str | None,
    progress: Progress = lambda _message: None,
    trust_journal: str | None = None,
) -> tuple[str, list[dict[str, Any]], list[str], str]:
    """What `status` shows, read only: the run (`run_id` or the latest), its records, every
    run known here or in ZooKeeper, and which copy was read. Without ZooKeeper, this host's."""
    root = Path(config.journal_dir)
    try:
        with session(zk_settings(config)) as zk:
            chosen = chosen_run(root, zk, config.cluster, run_id)
            try:
                local: list[bytes] | None = Journal.open(root, chosen).lines()
            except JournalError:
                local = None
            stored = read_run(zk, config.cluster, chosen)
            choice = choose_copy(
                local,
                None if stored is None else stored.lines,
                gap=None if stored is None else stored.gap,
                last=0 if stored is None else stored.last,
                trust=trust_journal,
            )
            runs = sorted({*list_runs(root), *zk_runs(zk, config.cluster)})
    except ZooKeeperError as error:
        progress(f"ZooKeeper could not be read ({error}): this host's journal only")
        chosen = run_or_latest(root, run_id)
        lines = Journal.open(root, chosen).lines()
        return chosen, [json.loads(line) for line in lines], list_runs(root), "local"
    records = [json.loads(line) for line in choice.lines]
    return chosen, records, runs, f"{choice.source} ({choice.reason})"


@contextmanager
def locked_run(
    config: ClusterConfig,
    plan: Plan | None,
    *,
    run_id: str | None = None,
    approved_by: str | None = None,
    resumed_by: str | None = None,
    rollback: bool = False,
    log_json: bool = False,
    progress: Progress = lambda _message: None,
    kafka_admin: KafkaAdminFactory | None = None,
    trust_journal: str | None = None,
) -> Iterator[Executor]:
    """An executor for `plan`, holding the cluster's lock for the `with` block.

    With `plan`, a new run: the lock is taken (a short wait, then refused), the cluster is
    checked against the plan's fingerprint, and the journal is created with the approval.
    Without, run `run_id` again (the latest if None: resume, rollback), its plan and journal
    read once the lock is held, from this host or ZooKeeper (`open_run`): a crashed run's lock
    goes with its ZooKeeper session, so the wait is that long; `resumed_by` journals who
    resumed it, and a completed run is refused. `rollback`: the run is for a rollback.
    Every record also goes to ZooKeeper's copy; when the run has completed, older runs' copies
    there are deleted. `trust_journal`: which copy of the journal the operator trusts where
    the local one and ZooKeeper's disagree (journaled).
    """
    clock = SystemClock()
    root = Path(config.journal_dir)
    # Refused before anything is contacted where the plan is known here: the new run's, or a
    # run's whose journal this host holds (one resumed elsewhere is checked once it is read).
    known = plan if plan is not None else _local_plan(root, run_id)
    if known is not None:
        require_stop_evidence(config, known, rollback=rollback)
    wait = NEW_RUN_LOCK_WAIT_S if plan is not None else config.zookeeper.session_timeout_s + 5
    with session(zk_settings(config)) as zk:
        refuse_during_migration(zk)
        if plan is not None:
            run_id = new_run_id(clock.now())
        else:
            run_id = chosen_run(root, zk, config.cluster, run_id)
        lock = RunLock(zk, config.cluster, run_id=run_id)
        lock.acquire(timeout=wait)
        mirror = JournalMirror(zk, config.cluster, run_id)
        journal: Journal | None = None
        try:
            if plan is not None:
                check_drift(config, zk, plan)
                journal = Journal.create(
                    root, run_id, plan.to_json(), now=clock.now(), mirror=mirror
                )
                journal.append(
                    JournalEvent.APPROVED,
                    now=clock.now(),
                    digest=plan.digest,
                    approved_by=approved_by,
                )
                progress(f"run {run_id}: {len(plan.steps)} step(s), journal {journal.path}")
            else:
                journal, choice = open_run(
                    root, zk, config.cluster, run_id, progress, trust_journal
                )
                if resumed_by is not None and (
                    replay(journal.records()).status == RunStatus.COMPLETED
                ):
                    raise RefusedError(f"run {run_id} already completed; nothing to resume")
                plan = plan_from_json(journal.plan())
                require_stop_evidence(config, plan, rollback=rollback)
                mirror.catch_up(journal.plan_text(), journal.lines())
                journal.mirror = mirror
                if choice.overruled is not None:
                    journal.append(
                        JournalEvent.NOTE,
                        now=clock.now(),
                        decision=f"journal: {choice.reason}",
                        by=resumed_by or "rollback",
                    )
                if resumed_by is not None:
                    journal.append(JournalEvent.RUN_RESUMED, now=clock.now(), by=resumed_by)
            log = run_logger(root, run_id, config.cluster, to_stderr=log_json)
            services = _services(config, zk, plan, log, progress, kafka_admin)
            with interrupt.armed():
                yield Executor(plan, services, journal, lock)
            _prune(zk, config.cluster, journal, progress)
        finally:
            if journal is not None and mirror.flush():
                progress(
                    f"warning: {mirror.behind} journal record(s) of run {run_id} are on this"
                    " host only, not in ZooKeeper: resume this run from this host"
                )
            lock.release()


def refuse_during_migration(zk: ZooKeeper) -> None:
    """RefusedError, before the lock is taken or anything changed, once a ZooKeeper-to-KRaft
    migration has begun (`/migration`, or a KRaft controller active): a run, a resumed run
    and a rollback alike (remediate/gates.py, `migration_blocker`)."""
    blocker = migration_blocker(read_migration(zk))
    if blocker is not None:
        raise RefusedError(f"nothing was changed: {blocker}")


def _local_plan(root: Path, run_id: str | None) -> Plan | None:
    """The plan of run `run_id` (the latest if None) from this host's journal, if it has one."""
    chosen = run_id if run_id is not None else latest_run(root)
    if chosen is None:
        return None
    try:
        return plan_from_json(Journal.open(root, chosen).plan())
    except JournalError:
        return None


def _prune(zk: ZooKeeperStore, cluster: str, journal: Journal, progress: Progress) -> None:
    """A completed run's end: ZooKeeper keeps its copy, and no older run's."""
    if replay(journal.records()).status != RunStatus.COMPLETED:
        return
    try:
        pruned = prune_before(zk, cluster, journal.run_id)
    except ZooKeeperError as error:
        progress(f"older runs' journals not deleted from ZooKeeper: {error}")
        return
    if pruned:
        progress(f"deleted {len(pruned)} older run(s)' journal copies from ZooKeeper")


def _services(
    config: ClusterConfig,
    zk: ZooKeeper,
    plan: Plan,
    log: Any,
    progress: Progress,
    kafka_admin: KafkaAdminFactory | None,
) -> Services:
    # The gates the plan was approved with (cluster.yaml's timeouts in them); a plan made
    # without them gets its playbooks' own, with the timeouts cluster.yaml sets now.
    gates = {name: Timeouts.model_validate(values) for name, values in plan.gates.items()}
    used = {
        plan.playbook,
        *(step.playbook for step in plan.restores),
        *(step.playbook for step in plan.moves),
        *(step.playbook for step in plan.triggers),
    }
    for name in used - set(gates):
        gates[name] = cluster_playbook(config, name).gates

    return Services(
        config=config,
        zk=zk,
        transport_for=transports(config),
        clock=SystemClock(),
        gates=gates,
        log=log,
        progress=progress,
        kafka_admin=kafka_admin,
        planned_min_isr=plan.min_isr.rule() if plan.min_isr is not None else None,
    )


def apply_plan(
    config: ClusterConfig,
    plan: Plan,
    *,
    approved_by: str,
    log_json: bool = False,
    progress: Progress = lambda _message: None,
    kafka_admin: KafkaAdminFactory | None = None,
) -> RunOutcome:
    """Carry out an approved plan as a new run. RefusedError before anything changed."""
    with locked_run(
        config,
        plan,
        approved_by=approved_by,
        log_json=log_json,
        progress=progress,
        kafka_admin=kafka_admin,
    ) as executor:
        return executor.run()


def resume_run(
    config: ClusterConfig,
    run_id: str | None,
    *,
    resumed_by: str,
    log_json: bool = False,
    progress: Progress = lambda _message: None,
    kafka_admin: KafkaAdminFactory | None = None,
    trust_journal: str | None = None,
) -> RunOutcome:
    """Continue a halted or crashed run (default: the latest); done actions are not repeated."""
    with locked_run(
        config,
        None,
        run_id=run_id,
        resumed_by=resumed_by,
        log_json=log_json,
        progress=progress,
        kafka_admin=kafka_admin,
        trust_journal=trust_journal,
    ) as executor:
        return executor.run()


def rollback_run(
    config: ClusterConfig,
    run_id: str,
    *,
    broker: int | None = None,
    log_json: bool = False,
    progress: Progress = lambda _message: None,
    trust_journal: str | None = None,
) -> dict[int, list[str]]:
    """Put back the files run `run_id` deleted (on `broker` only, if given)."""
    with locked_run(
        config,
        None,
        run_id=run_id,
        rollback=True,
        log_json=log_json,
        progress=progress,
        trust_journal=trust_journal,
    ) as executor:
        return executor.rollback(broker=broker)


def record_check(config: ClusterConfig, run_id: str, report: ScanReport, *, now: float) -> None:
    """The findings of the scan after a run, in the run's journal (and so in its report),
    and in ZooKeeper's copy unless ZooKeeper cannot be reached now."""
    journal = Journal.open(Path(config.journal_dir), run_id)
    with ExitStack() as stack:
        try:
            zk = stack.enter_context(session(zk_settings(config)))
        except ZooKeeperError:
            zk = None
        if zk is not None:
            mirror = JournalMirror(zk, config.cluster, run_id)
            # The run's records ZooKeeper missed go first: the copy never gets a gap.
            with suppress(ZooKeeperError, JournalError):
                mirror.catch_up(journal.plan_text(), journal.lines())
                journal.mirror = mirror
        journal.append(
            JournalEvent.CHECKED,
            now=now,
            status=report.status,
            summary=report.summary_line(),
            counts=dict(sorted(report.counts().items())),
        )
