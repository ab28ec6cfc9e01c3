"""Renderers of a plan for people: a rich table for the terminal, markdown for a change ticket.

Both are views of the same Plan; the JSON form (`Plan.to_json`) is the contract.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError
from rich.console import Group
from rich.table import Table
from rich.text import Text

from remediate.plan import MoveStep, Plan, Prediction, RestartStep, RestoreStep, TriggerStep
from remediate.plan.moves import ReplicaMove
from remediate.plan.summary import (
    LIMIT,
    by_topic,
    file_lines,
    impact_lines,
    names_text,
    partition_lines,
    partitions_text,
    phase_groups,
)
from remediate.playbook import Timeouts
from remediate.state import TopicPartition


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _model_lines(plan: Plan) -> list[object]:
    """The availability model's verdict in the console form of the plan."""
    parts: list[object] = []
    if plan.newly_unavailable:
        impact = Text(
            "\nmade unavailable that are available now (approve to accept):\n", style="bold yellow"
        )
        for tps, phases in phase_groups(plan.newly_unavailable):
            impact.append(f"  - {tps}: {', '.join(phases)}\n")
        parts.append(impact)
    if plan.unavailable_now:
        parts.append(Text(f"\nunavailable now: {partitions_text(plan.unavailable_now)}\n"))
    if plan.candidates:
        weighed = Text("\ncandidates:\n")
        for c in plan.candidates:
            mark = "chosen" if c.chosen else f"--candidate {c.name}"
            weighed.append(
                f"  - {c.name} ({mark}): {c.restarts} restart(s), newly unavailable"
                f" {partitions_text(c.newly_unavailable) or 'none'}, {c.unavailable_phases}"
                f" unavailable phase(s), converges {'yes' if c.converges else 'no'}"
                + (
                    "; copies "
                    + ", ".join(
                        f"{_bytes(n)} on broker {b}" for b, n in sorted(c.bytes_to_copy.items())
                    )
                    if c.bytes_to_copy
                    else ""
                )
                + "\n"
            )
        parts.append(weighed)
    if plan.batchings:
        batchings = Text("\nbatchings of the restarts weighed:\n")
        for line in batching_lines(plan):
            batchings.append(f"  - {line}\n")
        parts.append(batchings)
    return parts


def batching_lines(plan: Plan) -> list[str]:
    """One line per batching weighed (plan/batches.py): its batches and its predicted harm."""
    lines = []
    for b in plan.batchings:
        harm = b.harm
        batches = " then ".join("{" + ", ".join(map(str, batch)) + "}" for batch in b.batches)
        lines.append(
            f"{b.name}{' (chosen)' if b.chosen else ''}: {batches}; {harm.get('batches')}"
            f" batch(es), newly unavailable {harm.get('newly_unavailable')},"
            f" {harm.get('unavailable_phases')} unavailable phase(s), converges"
            f" {'yes' if harm.get('converges') else 'no'}, racks mixed {b.racks_mixed}"
        )
    return lines


def _batch_text(step: RestartStep) -> str:
    if not step.batched:
        return ""
    others = ", ".join(str(b) for b in step.batch if b != step.broker)
    return f" (batch with {others})"


def min_isr_lines(plan: Plan) -> list[str]:
    """Where the plan's min.insync.replicas came from: the brokers' value, then each topic
    the plan touches that overrides it."""
    if plan.min_isr is None:
        return []
    lines = [f"min.insync.replicas without a topic override: {plan.min_isr}"]
    lines += [
        f"min.insync.replicas of {topic}: {m}"
        for topic, m in sorted(plan.min_isr_topics.items())
        if m != plan.min_isr
    ]
    return lines


def kafka_line(plan: Plan) -> list[str]:
    """The Kafka release of each broker the plan was made for (its rules), when it was read."""
    if plan.kafka_lines is None:
        return []
    return [f"planned by the rules of {plan.kafka_lines.summary()} (read from ApiVersions)"]


def min_isr_of(plan: Plan, topics: Iterable[str]) -> str:
    """The min.insync.replicas of `topics` with its source, as the plan resolved it."""
    said: dict[str, list[str]] = {}
    for topic in sorted(set(topics)):
        known = plan.min_isr_topics.get(topic, plan.min_isr)
        if known is not None:
            said.setdefault(str(known), []).append(topic)
    return "; ".join(f"{', '.join(t)}: min.insync.replicas {m}" for m, t in said.items())


def _waits(plan: Plan, loading: str) -> list[str]:
    """The timeouts each playbook of the plan waits by, as the plan records them (cluster.yaml's
    `timeouts` already in them), one line per playbook; `loading` says that the start waits on
    while the broker loads its logs."""
    lines = []
    for name, values in sorted(plan.gates.items()):
        try:
            t = Timeouts.model_validate(values)
        except ValidationError:
            lines.append(f"{name}: not valid gates ({dict(values)!r})")
            continue
        lines.append(
            f"{name}: stop {_duration(t.stop_timeout_s)}, start {_duration(t.start_timeout_s)}"
            f" ({loading}), in sync {_duration(t.in_sync_timeout_s)}, each service command"
            f" {_duration(t.service_command_timeout_s)}"
        )
    return lines


def _throttle(step: MoveStep) -> str:
    if step.throttle is None:
        return ""
    return f", throttled to {_bytes(step.throttle)}/s per broker (put back afterwards)"


def _bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def plan_table(plan: Plan) -> Group:
    header = Text()
    verdict = "REFUSED" if plan.refused else ("OVERRIDDEN" if plan.refusals else "ready")
    header.append(
        f"plan for {plan.cluster} ({plan.playbook} v{plan.playbook_version}): ", style="bold"
    )
    header.append(
        verdict, style="bold red" if plan.refused else ("yellow" if plan.refusals else "green")
    )
    header.append(f"\ndigest {plan.digest}\ncontroller: broker {plan.controller}")
    header.append(f"; {len(plan.steps)} step(s), about {_duration(plan.estimate_s)}")
    for line in _waits(plan, "more while it loads its logs"):
        header.append(f"\ntimeouts of {line}")
    for line in [*kafka_line(plan), *min_isr_lines(plan)]:
        header.append(f"\n{line}")
    table = Table("#", "broker", "reason", "partitions", "files", "while down", show_lines=True)
    for number, step in enumerate(plan.steps, 1):
        if isinstance(step, RestoreStep):
            table.add_row(
                str(number),
                f"none (restore {step.topic})",
                step.reason,
                "\n".join(partition_lines(step.partitions)),
                f"znode /brokers/topics/{step.topic} v{step.znode_version}",
                "\n".join(impact_lines(step.impact)),
            )
            continue
        if isinstance(step, MoveStep):
            table.add_row(
                str(number),
                ", ".join(str(b) for b in step.brokers) + " (no restart)",
                step.reason,
                "\n".join(partition_lines(step.partitions)),
                "\n".join(_move_lines(step, arrow="->", quote="")),
                f"none; copies {_bytes(sum(m.size for m in step.moves))} on the broker's disk"
                + _throttle(step),
            )
            continue
        if isinstance(step, TriggerStep):
            table.add_row(
                str(number),
                "none (reassign to the same replicas)",
                step.reason,
                "\n".join(partition_lines(step.partitions)),
                "",
                "a leader epoch bump per partition",
            )
            continue
        table.add_row(
            str(number),
            f"{step.broker}" + (" (controller)" if step.is_controller else "") + _batch_text(step),
            step.reason + (f"\nbatch: {step.batch_reason}" if step.batch_reason else ""),
            "\n".join(partition_lines(step.partitions)),
            "\n".join(file_lines(step.files)),
            "\n".join(impact_lines(step.impact)) or "no in-sync replica lost",
        )
    parts: list[object] = [header, table]
    parts += _model_lines(plan)
    if plan.refusals:
        refusals = Text("\nrefusals:\n", style="bold red" if plan.refused else "yellow")
        for reason in plan.refusals:
            refusals.append(f"  - {reason}\n")
        parts.append(refusals)
    if plan.notes:
        notes = Text("\nnotes:\n")
        for note in plan.notes:
            notes.append(f"  - {note}\n")
        parts.append(notes)
    if plan.skipped:
        skipped = Text("\nleft out:\n")
        for broker, reason in plan.skipped:
            skipped.append(f"  - broker {broker}: {reason}\n")
        parts.append(skipped)
    return Group(*parts)  # type: ignore[arg-type]


def _names(partitions: Iterable[TopicPartition]) -> str:
    return partitions_text(tuple(partitions), quote="`")


def _move_lines(step: MoveStep, *, arrow: str, quote: str) -> list[str]:
    """Each replica's move, or past the summary's limit one line per broker and log dirs."""
    if len(step.moves) <= LIMIT:
        return [
            f"broker {m.broker}, {quote}{m.partition}{quote}: {quote}{m.from_dir}{quote} {arrow}"
            f" {quote}{m.to_dir}{quote} ({_bytes(m.size)})"
            if quote
            else f"broker {m.broker} {m.partition}: {m.from_dir} {arrow} {m.to_dir}"
            for m in step.moves
        ]
    grouped: dict[tuple[int, str, str], list[ReplicaMove]] = {}
    for m in step.moves:
        grouped.setdefault((m.broker, m.from_dir, m.to_dir), []).append(m)
    return [
        f"broker {broker}: {len(moved)} replica(s) {quote}{src}{quote} {arrow} {quote}{dst}{quote}"
        f" ({_bytes(sum(m.size for m in moved))}): {by_topic(m.partition for m in moved)}"
        for (broker, src, dst), moved in sorted(grouped.items())
    ]


def _quoted(partitions: str) -> str:
    """A partition's name in backticks; a summary of many as it is."""
    return partitions if " " in partitions else f"`{partitions}`"


def _impact_markdown(plan: Plan) -> list[str]:
    """What the approval accepts: partitions available now that the plan makes unavailable."""
    lines: list[str] = []
    if plan.newly_unavailable:
        lines += [
            "## Impact to approve",
            "",
            "The availability model predicts that these partitions, available now, have no"
            " leader that accepts acks=all writes during these steps. Approving this digest"
            " (`apply --approve`, or `fix --yes --approve`) accepts it; `fix --yes` alone"
            " needs `--accept-unavailable`.",
            "",
            "| partition | unavailable during |",
            "|---|---|",
        ]
        lines += [
            f"| {_quoted(tps)} | {', '.join(phases)} |"
            for tps, phases in phase_groups(plan.newly_unavailable)
        ]
        lines.append("")
        if plan.min_isr is not None:
            topics = {tp.topic for tp in plan.newly_unavailable}
            lines += [f"Judged with {min_isr_of(plan, topics)}.", ""]
    if plan.unavailable_now:
        lines += [
            "Already unavailable now (the repair cannot make them worse; see each step for"
            f" when they come back): {_names(plan.unavailable_now)}",
            "",
        ]
    return lines


def _batchings_markdown(plan: Plan) -> list[str]:
    if not plan.batchings:
        return []
    return [
        "## Batchings of the restarts weighed",
        "",
        "Brokers restart together only where every partition writable at that point keeps at"
        " least its min.insync.replicas in-sync replicas, and a replica that could lead it,"
        " outside the batch; the least predicted harm wins, then the fewest racks mixed.",
        "",
        *[f"- {line}" for line in batching_lines(plan)],
        "",
    ]


def _candidates_markdown(plan: Plan) -> list[str]:
    if not plan.candidates:
        return []
    lines = [
        "## Candidates weighed",
        "",
        "Least harm first: partitions made unavailable that are available now, then"
        " convergence, then (partition, phase) pairs unavailable, then restarts.",
        "",
        "| candidate | chosen | restarts | newly unavailable | unavailable phases | converges |",
        "|---|---|---|---|---|---|",
    ]
    for c in plan.candidates:
        lines.append(
            f"| `{c.name}` | {'**yes**' if c.chosen else 'no'} | {c.restarts} restart(s) |"
            f" {_names(c.newly_unavailable) or 'none'} | {c.unavailable_phases} |"
            f" {'yes' if c.converges else 'no'} |"
        )
    lines.append("")
    for c in plan.candidates:
        lines += [f"### `{c.name}`{' (chosen)' if c.chosen else ''}", "", c.summary, ""]
        if c.bytes_to_copy:
            copied = ", ".join(
                f"broker {b}: {_bytes(n)}" for b, n in sorted(c.bytes_to_copy.items())
            )
            lines += [f"Copied on each broker's own disk: {copied}.", ""]
        if c.blocked:
            lines += [f"Not possible for some topics: {c.blocked}", ""]
        if c.windows:
            lines += [
                f"- {_quoted(tps)}: unavailable {', '.join(phases)}"
                for tps, phases in phase_groups(c.windows)
            ] + [""]
        if not c.chosen:
            lines += [f"To plan this one instead: `--candidate {c.name}`.", ""]
    return lines


def _prediction_markdown(predicted: Prediction) -> list[str]:
    lines = []
    if predicted.during:
        lines.append(f"- Predicted unavailable while it runs: {_names(predicted.during)}")
    if predicted.after:
        lines.append(f"- Still unavailable after it: {_names(predicted.after)}")
    if predicted.out_of_isr_after:
        lines.append(
            "- Its broker cannot rejoin the ISR yet of: " + _names(predicted.out_of_isr_after)
        )
    if predicted.last_in_isr:
        lines.append(
            "- Last in-sync replica of "
            + _names(predicted.last_in_isr)
            + ": its controlled shutdown retries, then they are offline until it is back"
        )
    return ["Predicted by the availability model:", "", *lines, ""] if lines else []


def _restart_markdown(number: int, step: RestartStep) -> list[str]:
    lines: list[str] = []
    role = " (active controller, last)" if step.is_controller else ""
    lines += [
        f"### {number}. Broker {step.broker}{role}{_batch_text(step)}",
        "",
        f"Why: {step.reason}",
        "",
    ]
    if step.order_reason:
        lines += [f"Why in this position: {step.order_reason}", ""]
    if step.batch_reason:
        lines += [f"Batch: {step.batch_reason}", ""]
    lines += ["Actions: " + " → ".join(f"`{a}`" for a in step.actions), ""]
    if step.files:
        lines += [
            "Files backed up, then deleted (Kafka rebuilds them with ZooKeeper's id):",
            "",
        ]
        shown = file_lines(step.files)
        whole = len(shown) == len(step.files)
        lines += [f"- `{line}`" if whole else f"- {line}" for line in shown] + [""]
    lines += ["Impact while the broker is down (in-sync replicas, min.insync.replicas):", ""]
    lines += [f"- {line}" for line in impact_lines(step.impact)] or [
        "- no partition loses an in-sync replica"
    ]
    lines.append("")
    lines += _prediction_markdown(step.predicted)
    return lines


def plan_markdown(
    plan: Plan, *, config_path: str = "cluster.yaml", plan_path: str = "plan.json"
) -> str:
    """The change-ticket form: what, why, in what order, the impact and how long."""
    lines = [
        f"# Change: `{plan.playbook}` on `{plan.cluster}`",
        "",
        f"- Playbook: `{plan.playbook}` version {plan.playbook_version}",
        f"- Plan digest (sha256): `{plan.digest}`",
        f"- Cluster id: `{plan.cluster_id}`; active controller: broker {plan.controller}",
        f"- Made: {plan.created_at or 'unknown'}",
        f"- Steps: {len(plan.steps)}; expected duration: about {_duration(plan.estimate_s)}",
        *[
            f"- Timeouts of {line}"
            for line in _waits(plan, "more while the broker's server.log shows its logs loading")
        ],
        *[f"- {line}" for line in [*kafka_line(plan), *min_isr_lines(plan)]],
        "",
    ]
    if plan.refused:
        lines += ["**This plan is REFUSED: a step could not be gated safely.** Reasons:", ""]
        lines += [f"- {reason}" for reason in plan.refusals] + [""]
    elif plan.refusals:
        lines += [
            "**Safety refusals were overridden (`--allow-unsafe`).** The operator accepted:",
            "",
        ]
        lines += [f"- {reason}" for reason in plan.refusals] + [""]
    lines += _impact_markdown(plan) + _candidates_markdown(plan) + _batchings_markdown(plan)
    lines += ["## What will be done, in order", ""]
    if not plan.steps:
        lines += ["Nothing: no broker needs this playbook.", ""]
    for number, step in enumerate(plan.steps, 1):
        if isinstance(step, RestoreStep):
            lines += [
                (
                    f"### {number}. Have a new controller mint the id of `{step.topic}`"
                    " (no restart)"
                    if step.mint
                    else f"### {number}. Restore the topic id of `{step.topic}` (no restart)"
                ),
                "",
                f"Why: {step.reason}",
                "",
                "Actions: " + " → ".join(f"`{a}`" for a in step.actions),
                "",
                (
                    f"Nothing is written: the new controller mints the id of"
                    f" `/brokers/topics/{step.topic}` (still at version {step.znode_version},"
                    " and no replica with a partition.metadata, or nothing is done)."
                    if step.mint
                    else f"Write `{step.topic_id}` into `/brokers/topics/{step.topic}` (now"
                    f" {step.zk_topic_id or 'no id'}), only if the znode is still at version"
                    f" {step.znode_version}."
                ),
                "",
                "Impact:",
                "",
                *[f"- {line}" for line in step.impact],
                "",
                *_prediction_markdown(step.predicted),
            ]
            if step.rolled_later:
                lines += ["Replicas that keep the other id until the restarts below:", ""]
                kept = list(step.rolled_later)
                lines += [f"- {r}" for r in kept[:LIMIT]]
                lines += [f"- and {len(kept) - LIMIT} more"] if len(kept) > LIMIT else []
                lines += [""]
            continue
        if isinstance(step, MoveStep):
            lines += [
                f"### {number}. Move replicas to another log dir of their broker (no restart)",
                "",
                f"Why: {step.reason}",
                "",
                "Actions: " + " → ".join(f"`{a}`" for a in step.actions),
                "",
                f"Copies {_bytes(sum(m.size for m in step.moves))}, each replica on its"
                f" broker's own disk{_throttle(step)}:",
                "",
                *[f"- {line}" for line in _move_lines(step, arrow="→", quote="`")],
                "",
                *_prediction_markdown(step.predicted),
            ]
            continue
        if isinstance(step, TriggerStep):
            lines += [
                f"### {number}. Reassign each partition to its own replicas (no restart)",
                "",
                f"Why: {step.reason}",
                "",
                "Actions: " + " → ".join(f"`{a}`" for a in step.actions),
                "",
                "Partitions: " + _names(step.partitions),
                "",
                *_prediction_markdown(step.predicted),
            ]
            continue
        lines += _restart_markdown(number, step)
    if plan.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in plan.notes] + [""]
    if plan.skipped:
        lines += ["## Brokers left out", ""]
        lines += [f"- Broker {broker}: {reason}" for broker, reason in plan.skipped] + [""]
    lines += [
        "## Fingerprint (apply refuses if any of this changed)",
        "",
        f"- Registered brokers: {', '.join(map(str, plan.fingerprint.brokers))}",
        f"- Controller epoch: {plan.fingerprint.controller_epoch}",
        "- Topic znode versions: "
        + (
            names_text([f"`{t}` v{v}" for t, v in plan.fingerprint.topics.items()], shown=LIMIT)
            or "none"
        ),
        f"- partition.metadata files to delete: {len(plan.fingerprint.files)}",
        "",
        "## To apply",
        "",
        "```",
        f"remediate apply -c {config_path} --plan {plan_path} --approve {plan.digest}",
        "```",
        "",
    ]
    return "\n".join(lines)
