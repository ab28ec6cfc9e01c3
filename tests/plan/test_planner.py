"""The planner on plain data: table-driven cases and properties over generated clusters."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from remediate.config import ClusterTimeouts
from remediate.execute import steps
from remediate.kafka_lines import KafkaLines
from remediate.minisr import MinIsrRule, MinIsrSource, PlannedMinIsr
from remediate.plan import (
    FileKey,
    Plan,
    PlanOptions,
    RestartStep,
    compute_digest,
    make_plan,
    plan_from_json,
)
from remediate.plan.availability import RestartOp, build_model, harm, simulate
from remediate.plan.planner import _cleared
from remediate.plan.render import plan_markdown, plan_table
from remediate.playbook import Action, Playbook, load_playbook
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from remediate.state import ClusterState, TopicPartition
from remediate.workflows import unaccepted
from tests.plan.model import cluster, findings_for

REPAIR = load_playbook("topicid-mismatch")
ROLLING = load_playbook("rolling-restart")
ORDERS = {"orders": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}


def plan_for(
    state: ClusterState,
    findings: list[Finding],
    playbook: Playbook = REPAIR,
    lines: KafkaLines | None = None,
    **options: Any,
) -> Plan:
    return make_plan(
        cluster="c",
        state=state,
        findings=findings,
        playbook=playbook,
        options=PlanOptions(**options),
        known_brokers=sorted(state.brokers),
        lines=lines if lines is not None else KafkaLines.uniform((2, 8), state.brokers),
    )


def files(broker: int, *partitions: str) -> list[str]:
    return sorted(
        f"/data/{broker}/kafka/{p}/{name}" for p in partitions for name in ("partition.metadata",)
    )


def test_a_healthy_cluster_gets_no_step_and_every_broker_a_reason() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=1)
    plan = plan_for(state, findings_for(state))
    assert plan.steps == ()
    assert plan.skipped == tuple(
        (b, "nothing to fix: 3 replica(s) agree with ZooKeeper") for b in (1, 2, 3)
    )
    assert not plan.refused and plan.refusals == ()


def test_followers_of_a_leader_that_agrees_are_repaired_controller_last() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=2)
    kinds = {(2, "t", 0): "TOPIC_ID_MISMATCH", (3, "t", 0): "TOPIC_ID_MISMATCH"}
    plan = plan_for(state, findings_for(state, kinds))
    assert [s.broker for s in plan.steps] == [3, 2]
    assert [s.is_controller for s in plan.steps] == [False, True]
    assert plan.steps[0].files == tuple(files(3, "t-0"))
    assert plan.steps[0].partitions == (TopicPartition("t", 0),)
    assert isinstance(plan.steps[0], RestartStep)
    assert plan.steps[0].impact == ("t-0: isr 3 -> 2 (min 2)",)
    assert plan.steps[0].actions == steps.RESTART_ACTIONS
    assert "will leave the ISR" not in plan.steps[0].reason
    assert (
        "1 replica(s) hold an old topic id and leave the ISR at their next restart (t-0)"
        in plan.steps[0].reason
    )
    assert plan.skipped == ((1, "nothing to fix: 1 replica(s) agree with ZooKeeper"),)
    assert plan.refusals == ()


def test_after_reproduce_the_plan_is_the_repair_with_its_impact() -> None:
    # Every old replica holds the old id, broker 1 was restarted and is out of the ISR; no
    # leader has met an epoch bump yet (no fenced finding), so the partitions work now and the
    # restarts of brokers 2 and 3 will fence them: the plan carries that out as its impact, to
    # be accepted, instead of refusing the only repair there is.
    state = cluster(
        brokers=[1, 2, 3],
        topics=ORDERS,
        isr={("orders", 0): [2, 3], ("orders", 1): [2, 3], ("orders", 2): [3, 2]},
        leaders={("orders", 0): 2},
        controller=3,
    )
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for b in (1, 2, 3) for p in (0, 1, 2)}
    plan = plan_for(state, findings_for(state, kinds))
    # Broker 1's restart changes nothing for them while they still work: first; 2 and 3 (the
    # controller, last) back to back.
    assert [s.broker for s in plan.steps] == [1, 2, 3]
    assert "out of the ISR" in plan.steps[0].reason
    assert "less unavailability" in plan.restarts[0].order_reason
    assert "active controller" in plan.restarts[2].order_reason
    assert plan.steps[0].files == tuple(files(1, "orders-0", "orders-1", "orders-2"))
    assert not plan.refused and plan.refusals == ()
    assert plan.needs_acceptance
    # Broker 1, back with no file, takes ZooKeeper's id and joins the ISR of the old-id
    # leaders (a 2.8 follower's fetch carries no id), so orders-0 (replicas 1, 2, 3) moves to
    # broker 1 when broker 2 stops and stays available; orders-1 and orders-2 move to broker 3,
    # which rejects the leadership until its own restart.
    orders_1, orders_2 = TopicPartition("orders", 1), TopicPartition("orders", 2)
    assert plan.newly_unavailable == {
        orders_1: ("step 2", "after step 2"),
        orders_2: ("step 2", "after step 2"),
    }
    assert plan.restarts[1].predicted.during == (orders_1, orders_2)
    assert plan.restarts[2].predicted.after == ()


@pytest.mark.parametrize(
    ("name", "state_kwargs", "kinds", "refusal"),
    [
        (
            "offline partition",
            {"leaders": {("t", 1): -1}, "isr": {("t", 1): [3]}},
            {(2, "t", 0): "TOPIC_ID_MISMATCH"},
            "partition(s) without a leader: t-1",
        ),
        (
            "exactly min isr in sync",
            {"isr": {("t", 0): [1, 2]}},
            {(2, "t", 0): "TOPIC_ID_MISMATCH"},
            "t-0 has exactly min.insync.replicas=2 in sync (isr [1, 2]);"
            " restarting broker 2 would take it below",
        ),
        (
            "unregistered replica",
            {"registered": [1, 2]},
            {(2, "t", 0): "TOPIC_ID_MISMATCH"},
            "broker(s) [3] are not registered in ZooKeeper",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_refusals(
    name: str, state_kwargs: dict[str, Any], kinds: dict[Any, str], refusal: str
) -> None:
    state = cluster(
        brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3], 1: [3, 1, 2]}}, controller=1, **state_kwargs
    )
    plan = plan_for(state, findings_for(state, kinds))
    assert plan.refused
    assert any(refusal in r for r in plan.refusals), plan.refusals


def test_an_unreachable_broker_refuses_the_plan() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=1)
    findings = findings_for(state, {(2, "t", 0): "TOPIC_ID_MISMATCH"})
    findings.append(
        Finding(kind=FindingKind.BROKER_UNREACHABLE, cluster="c", broker=3, detail="ssh: timed out")
    )
    plan = plan_for(state, [f for f in findings if f.broker != 3 or f.kind == "BROKER_UNREACHABLE"])
    assert plan.refused
    assert (
        plan.refusals[0]
        == "broker 3 could not be inspected (ssh: timed out); its replicas are unknown"
    )
    assert (3, "its disk could not be inspected") in plan.skipped


def test_internal_topics_are_left_alone_unless_named() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"__consumer_offsets": {0: [1, 2, 3]}}, controller=1)
    findings = findings_for(state, {(2, "__consumer_offsets", 0): "TOPIC_ID_MISMATCH"})
    plan = plan_for(state, findings)
    assert plan.steps == ()
    assert (
        2,
        "only excluded topics need the fix (__consumer_offsets);"
        " name them with --include-topic to act on them",
    ) in plan.skipped
    named = plan_for(state, findings, include_topics=frozenset({"__consumer_offsets"}))
    assert [s.broker for s in named.steps] == [2]
    assert named.steps[0].files == tuple(files(2, "__consumer_offsets-0"))


def test_corrupt_files_are_repaired_too() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=1)
    plan = plan_for(state, findings_for(state, {(3, "t", 0): "METADATA_CORRUPT"}))
    assert [s.broker for s in plan.steps] == [3]
    assert "1 partition.metadata file(s) Kafka cannot read (t-0)" in plan.steps[0].reason
    assert plan.fingerprint.files == {FileKey(3, "/data/3/kafka/t-0/partition.metadata"): None}
    # In the plan's JSON, the key is "broker:path".
    assert plan.to_json()["fingerprint"]["files"] == {
        "3:/data/3/kafka/t-0/partition.metadata": None
    }


def test_scope_all_deletes_every_non_internal_partition_on_the_broker() -> None:
    state = cluster(
        brokers=[1, 2, 3],
        topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}, "__transaction_state": {0: [2, 1, 3]}},
        controller=1,
    )
    scope_all = REPAIR.model_copy(update={"scope": "all"})
    plan = plan_for(
        state, findings_for(state, {(2, "t", 0): "TOPIC_ID_MISMATCH"}), playbook=scope_all
    )
    assert [s.broker for s in plan.steps] == [2]
    assert plan.steps[0].files == tuple(files(2, "t-0", "t-1"))


def test_max_brokers_per_run_leaves_the_rest_for_a_later_plan() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=1)
    limited = REPAIR.model_copy(
        update={"gates": REPAIR.gates.model_copy(update={"max_brokers_per_run": 1})}
    )
    kinds = {(b, "t", 0): "TOPIC_ID_MISMATCH" for b in (2, 3)}
    plan = plan_for(state, findings_for(state, kinds), playbook=limited)
    assert [s.broker for s in plan.steps] == [2]
    assert (3, "beyond max_brokers_per_run=1; plan again after this run") in plan.skipped


def test_rolling_restart_takes_every_broker_and_no_file() -> None:
    state = cluster(brokers=[1, 2, 3, 4], topics={"t": {0: [1, 2, 3]}}, controller=2)
    plan = plan_for(state, findings_for(state), playbook=ROLLING)
    assert [s.broker for s in plan.steps] == [1, 3, 2]
    assert all(s.files == () for s in plan.steps)
    # The rolling restart: every restart action but those that touch or check the files.
    assert plan.steps[0].actions == tuple(
        a
        for a in steps.RESTART_ACTIONS
        if a not in (Action.BACKUP, Action.DELETE, Action.VERIFY_TOPIC_IDS)
    )
    assert plan.skipped == ((4, "hosts no partition or is not registered"),)


def test_the_plan_round_trips_through_json_with_the_same_digest() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=3)
    plan = plan_for(
        state,
        findings_for(state, {(1, "orders", 0): "TOPIC_ID_MISMATCH"}),
        created_at="2026-11-22T05:00:00+00:00",
    )
    document = json.loads(json.dumps(plan.to_json()))
    assert document["digest"] == plan.digest == compute_digest(plan.body())
    assert plan_from_json(document).digest == plan.digest
    assert {"digest", "playbook", "fingerprint", "controller", "steps"} <= set(document)
    assert {"broker", "reason", "partitions", "files"} <= set(document["steps"][0])


def test_markdown_says_what_why_in_what_order_and_how_long() -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=3)
    kinds = {(b, "orders", 0): "TOPIC_ID_MISMATCH" for b in (1, 3)}
    plan = plan_for(state, findings_for(state, kinds), created_at="2026-11-22T05:00:00+00:00")
    text = plan_markdown(plan, plan_path="p.json")
    assert text.startswith("# Change: `topicid-mismatch` on `c`")
    assert "### 1. Broker 1\n" in text and "### 2. Broker 3 (active controller, last)" in text
    assert "orders-0: isr 3 -> 2 (min 2)" in text
    assert "expected duration: about 2 min 20 s" in text
    assert f"--approve {plan.digest}" in text
    assert "`/data/1/kafka/orders-0/partition.metadata`" in text


# -- properties over generated clusters ---------------------------------------------------------

KINDS = ("OK", "OK", "TOPIC_ID_MISMATCH", "METADATA_MISSING", "METADATA_CORRUPT")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterState, list[Finding]]:
    brokers = list(range(1, draw(st.integers(1, 6)) + 1))
    topics: dict[str, dict[int, list[int]]] = {}
    isr: dict[tuple[str, int], list[int]] = {}
    names = draw(
        st.lists(
            st.sampled_from(["orders", "payments", "__consumer_offsets", "logs.v2"]),
            min_size=1,
            unique=True,
        )
    )
    for name in names:
        rf = draw(st.integers(1, min(3, len(brokers))))
        topics[name] = {}
        for number in range(draw(st.integers(1, 4))):
            replicas = draw(st.permutations(brokers))[:rf]
            topics[name][number] = replicas
            isr[(name, number)] = [r for r in replicas if r == replicas[0] or draw(st.booleans())]
    state = cluster(
        brokers=brokers,
        topics=topics,
        isr=isr,
        controller=draw(st.sampled_from(brokers)),
        min_isr={t: draw(st.integers(1, 3)) for t in topics},
    )
    kinds = {
        (b, t, p): draw(st.sampled_from(KINDS))
        for t, assignment in topics.items()
        for p, replicas in assignment.items()
        for b in replicas
    }
    return state, findings_for(state, kinds)


@settings(max_examples=300, deadline=None)
@given(clusters(), st.booleans(), st.sampled_from(["affected", "all"]))
def test_plan_properties(
    generated: tuple[ClusterState, list[Finding]], unsafe: bool, scope: str
) -> None:
    state, findings = generated
    playbook = REPAIR.model_copy(update={"scope": scope})
    plan = plan_for(state, findings, playbook=playbook, allow_unsafe=unsafe)
    order = [s.broker for s in plan.steps]
    assert len(order) == len(set(order)), "no broker appears twice"
    if state.controller_id in order:
        assert order[-1] == state.controller_id, "the controller is always last"
    needing = {
        f.broker
        for f in findings
        if f.kind in playbook.applies_to
        and f.topic is not None
        and f.topic not in playbook.exclude_topics
    }
    assert set(order) == needing, "exactly the brokers with findings get a step"
    out_of_isr = {
        f.broker
        for f in findings
        if f.kind == "TOPIC_ID_MISMATCH_OUT_OF_ISR" and f.topic not in playbook.exclude_topics
    }
    body = [b for b in order if b != state.controller_id]
    thumb = sorted(body, key=lambda b: (b not in out_of_isr, b))
    controller = [b for b in order if b == state.controller_id]
    model = build_model(
        state, findings, min_isr=MinIsrRule(1), lines=KafkaLines.uniform((2, 8), state.brokers)
    )
    cleared = {s.broker: _cleared(s) for s in plan.restarts}

    def predicted(brokers: list[int | None]) -> tuple[int, ...]:
        restarts = []
        for b in (*brokers, *controller):
            assert b is not None  # called for plans of restarts only: each names its broker
            restarts.append(RestartOp(b, cleared[b]))
        return harm(simulate(model, restarts), len(restarts))

    if plan.restores == ():
        assert predicted(body) <= predicted(thumb), "never worse than out-of-ISR first"
    assert all(s.order_reason for s in plan.restarts), "every position has its reason"
    mismatched = {
        (f.broker, f"{f.topic}-{f.partition}") for f in findings if f.kind in playbook.applies_to
    }
    for step in plan.steps:
        for path in step.files:
            partition = path.split("/")[-2]
            assert path.startswith(f"/data/{step.broker}/kafka/")
            if scope == "affected":
                assert (step.broker, partition) in mismatched
            else:
                assert not partition.startswith("__consumer_offsets")
    assert plan.refused == (bool(plan.refusals) and not unsafe)


FIELD_MUTATIONS = [
    ("cluster", "other"),
    ("cluster_id", "other"),
    ("playbook", "other"),
    ("playbook_version", 99),
    ("controller", 42),
    ("allow_unsafe", True),
    ("estimate_s", 1.5),
]


@pytest.mark.parametrize(("field", "value"), FIELD_MUTATIONS, ids=[f for f, _ in FIELD_MUTATIONS])
def test_the_digest_changes_when_any_field_changes(field: str, value: Any) -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=3)
    plan = plan_for(state, findings_for(state, {(1, "orders", 0): "TOPIC_ID_MISMATCH"}))
    changed = replace(plan, **{field: value})
    assert compute_digest(changed.body()) != plan.digest


def test_the_digest_does_not_depend_on_when_the_plan_was_made() -> None:
    """The same state and options make the same plan, whenever: what `fix --yes --approve`
    compares with the digest a dry run printed."""
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=3)
    plan = plan_for(state, findings_for(state, {(1, "orders", 0): "TOPIC_ID_MISMATCH"}))
    later = replace(plan, created_at="2030-01-01T00:00:00+00:00")
    assert compute_digest(later.body()) == plan.digest
    assert later.to_json()["created_at"] == "2030-01-01T00:00:00+00:00"
    assert plan_from_json(later.to_json()).created_at == later.created_at


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_digest_changes_when_any_nested_value_changes(data: st.DataObject) -> None:
    state = cluster(brokers=[1, 2, 3], topics=ORDERS, controller=3)
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for b in (1, 2) for p in (0, 1)}
    body = plan_for(state, findings_for(state, kinds)).body()
    original = compute_digest(body)
    leaves: list[tuple[list[Any], Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*path, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, [*path, index])
        else:
            leaves.append((path, node))

    walk(body, [])
    path, old = data.draw(st.sampled_from(leaves))
    new = data.draw(
        st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()).filter(
            lambda v: v != old or type(v) is not type(old)
        )
    )
    target = json.loads(json.dumps(body))
    node = target
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    assert compute_digest(target) != original


def render_table(plan: Plan) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(plan_table(plan))
    return console.export_text()


def test_the_table_shows_every_step_in_order_with_its_files_and_impact() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=2)
    kinds = {(2, "t", 0): "TOPIC_ID_MISMATCH", (3, "t", 0): "TOPIC_ID_MISMATCH"}
    plan = plan_for(state, findings_for(state, kinds))
    text = render_table(plan)
    assert f"digest {plan.digest}" in text
    assert "controller: broker 2; 2 step(s)" in text
    assert ": ready" in text
    rows = [
        line for line in text.splitlines() if line.startswith("│ 1 ") or line.startswith("│ 2 ")
    ]
    assert [row.split("│")[2].strip() for row in rows] == ["3", "2 (controller)"]
    for path in files(3, "t-0") + files(2, "t-0"):
        assert path in text
    assert "t-0: isr 3 -> 2 (min 2)" in text
    assert "broker 1: nothing to fix: 1 replica(s) agree with ZooKeeper" in text


def test_the_table_of_a_refused_plan_says_so_and_lists_every_refusal() -> None:
    state = cluster(
        brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=2, isr={("t", 0): [1, 2]}
    )
    kinds = {(2, "t", 0): "TOPIC_ID_MISMATCH"}
    plan = plan_for(state, findings_for(state, kinds))
    assert plan.refused and plan.refusals
    text = render_table(plan)
    assert ": REFUSED" in text
    for reason in plan.refusals:
        assert reason[:60] in " ".join(text.split())


def test_the_markdown_names_the_impact_to_approve_and_both_candidates() -> None:
    state = cluster(
        brokers=[1, 2, 3],
        topics=ORDERS,
        isr={("orders", 0): [2, 3], ("orders", 1): [2, 3], ("orders", 2): [3, 2]},
        leaders={("orders", 0): 2},
        controller=3,
    )
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for b in (1, 2, 3) for p in (0, 1, 2)}
    plan = plan_for(state, findings_for(state, kinds))
    text = plan_markdown(plan)
    impact = text.split("## Impact to approve", 1)[1].split("##", 1)[0]
    for name, phases in plan.newly_unavailable.items():
        assert f"| `{name}` | {', '.join(phases)} |" in impact
    assert text.index("## Impact to approve") < text.index("## What will be done")
    assert "`fix --yes --approve`) accepts it; `fix --yes` alone needs `--accept-unavailable`" in (
        impact
    )
    for number, step in enumerate(plan.restarts, 1):
        assert f"Why in this position: {step.order_reason}" in text, number
    console = " ".join(render_table(plan).split())
    assert "made unavailable that are available now" in console


def test_fix_names_every_partition_it_would_make_unavailable() -> None:
    state = cluster(
        brokers=[1, 2, 3],
        topics=ORDERS,
        isr={("orders", 0): [2, 3], ("orders", 1): [2, 3], ("orders", 2): [3, 2]},
        leaders={("orders", 0): 2},
        controller=3,
    )
    kinds = {(b, "orders", p): "TOPIC_ID_MISMATCH" for b in (1, 2, 3) for p in (0, 1, 2)}
    message = unaccepted(plan_for(state, findings_for(state, kinds)))
    assert "orders-1 (step 2, after step 2)" in message
    assert "--accept-unavailable" in message


@pytest.mark.parametrize(
    ("name", "deleted"),
    [
        ("topicid-mismatch", {"partition.metadata"}),
        ("topicid-mismatch-both-files", {"partition.metadata", "leader-epoch-checkpoint"}),
    ],
)
def test_the_default_deletes_only_partition_metadata_the_manual_procedure_both(
    name: str, deleted: set[str]
) -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=1)
    findings = findings_for(state, {(2, "t", 0): "TOPIC_ID_MISMATCH"})
    plan = plan_for(state, findings, playbook=load_playbook(name))
    (step,) = plan.restarts
    assert {path.rsplit("/", 1)[1] for path in step.files} == deleted


def test_the_plan_records_and_shows_the_timeouts_cluster_yaml_sets() -> None:
    state = cluster(brokers=[1, 2, 3], topics={"t": {0: [1, 2, 3]}}, controller=2)
    found = findings_for(state, {(3, "t", 0): "TOPIC_ID_MISMATCH"})
    fitted = REPAIR.with_cluster(ClusterTimeouts(start_s=900, service_command_s=45))
    plan = plan_for(state, found, fitted)
    assert plan.gates["topicid-mismatch"] == {
        **REPAIR.gates.model_dump(mode="json"),
        "start_timeout_s": 900.0,
        "service_command_timeout_s": 45.0,
    }
    # Under the digest: another timeout is another plan to approve.
    assert plan.digest != plan_for(state, found).digest
    assert (
        "- Timeouts of topicid-mismatch: stop 2 min 0 s, start 15 min 0 s (more while the"
        " broker's server.log shows its logs loading), in sync 5 min 0 s, each service"
        " command 45 s"
    ) in plan_markdown(plan).splitlines()
    console = Console(width=160, record=True, color_system=None)
    console.print(plan_table(plan))
    assert (
        "timeouts of topicid-mismatch: stop 2 min 0 s, start 15 min 0 s (more while it loads its"
        " logs), in sync 5 min 0 s, each service command 45 s"
    ) in console.export_text().splitlines()


@pytest.mark.parametrize(
    ("resolved", "unavailable"),
    [
        pytest.param(PlannedMinIsr(2, MinIsrSource.SERVER_PROPERTIES, "broker(s) 1, 2, 3"), True),
        pytest.param(PlannedMinIsr(1, MinIsrSource.CLUSTER_YAML, "nothing known"), False),
    ],
    ids=["brokers-say-2", "fallback-1"],
)
def test_the_brokers_min_isr_decides_what_a_restart_makes_unavailable(
    resolved: PlannedMinIsr, unavailable: bool
) -> None:
    """A topic of two replicas without an override: with the brokers' min.insync.replicas=2 a
    restart of either replica leaves it unwritable (acks=all), which the plan names and the
    message of `fix` explains; with 1 it stays writable."""
    state = cluster(brokers=[1, 2, 3], topics={**ORDERS, "ledger": {0: [3, 1]}}, controller=1)
    ledger = replace(state.topics["ledger"], config={})
    state = replace(state, topics={**state.topics, "ledger": ledger})
    kinds = {(3, "orders", p): "TOPIC_ID_MISMATCH" for p in (0, 1, 2)}
    plan = plan_for(
        state, findings_for(state, kinds), min_isr_default=resolved.value, min_isr=resolved
    )
    assert plan.min_isr == resolved
    assert plan.min_isr_topics["ledger"] == resolved
    assert plan.min_isr_topics["orders"] == PlannedMinIsr(
        2, MinIsrSource.TOPIC_OVERRIDE, "/config/topics/orders"
    )
    assert (TopicPartition("ledger", 0) in plan.newly_unavailable) is unavailable
    if unavailable:
        message = unaccepted(plan)
        assert "ledger-0 (" in message
        assert "ledger: min.insync.replicas 2 (server.properties: broker(s) 1, 2, 3)" in message
        assert f"min.insync.replicas without a topic override: {resolved}" in plan_markdown(plan)
    assert plan_from_json(plan.to_json()) == plan
