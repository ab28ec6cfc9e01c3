"""The report model -> the report's sections in words: short lines and tables of text. Pure.

The HTML page and the markdown for a change ticket are two renderings of these same sections,
so the two never say different things.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from remediate.report.model import FINISHED, HealthSample, RunReport
from remediate.report.timeline import PHASES, row_name

RESULT_WIDTH = 160


class Code(str):
    """Text shown as code (digests, paths): verbatim, in a fixed-width font."""

    __slots__ = ()


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Section:
    title: str
    lines: tuple[tuple[str, str], ...] = ()  # (label, value) pairs
    tables: tuple[Table, ...] = ()
    items: tuple[str, ...] = ()  # a plain list, after the lines


def title(report: RunReport) -> str:
    return f"Run report: {report.run_id} on {report.cluster or 'unknown cluster'}"


def sections(report: RunReport) -> tuple[Section, ...]:
    found = [
        overview(report),
        before(report),
        steps(report),
        gates(report),
        backups(report),
        health(report),
        unavailable(report),
        after(report),
        events(report),
    ]
    return tuple(s for s in found if s.lines or s.tables or s.items)


def _estimate_line(report: RunReport) -> list[tuple[str, str]]:
    """The plan's estimate against the run's duration."""
    if report.estimate_s is None or report.estimate_s <= 0:
        return []
    ratio = report.duration_s / report.estimate_s
    return [
        (
            "estimate",
            f"{duration(report.estimate_s)} planned; the run took {ratio:.0%} of it"
            f" ({duration(report.duration_s)})",
        )
    ]


def overview(report: RunReport) -> Section:
    lines = [
        ("cluster", report.cluster),
        ("run", Code(report.run_id)),
        ("status", report.status),
        ("started", f"{report.started}" + (f" on {report.host}" if report.host else "")),
        ("ended", f"{report.ended} (last journal record; {duration(report.duration_s)})"),
        *_estimate_line(report),
        (
            "playbook",
            report.playbook
            + (f" v{report.playbook_version}" if report.playbook_version is not None else ""),
        ),
        ("plan digest", Code(report.digest or "none")),
    ]
    if not report.digest_matches:
        lines.append(
            ("digest check", f"the run was started with {report.journal_digest or 'no digest'}")
        )
    if report.approvals:
        lines += [
            (
                "approved by",
                f"{a.by} at {a.time}" + (f" (digest {a.digest[:12]}...)" if a.digest else ""),
            )
            for a in report.approvals
        ]
    else:
        lines.append(("approved by", "not recorded in the journal"))
    if report.plan_created:
        lines.append(("plan made", report.plan_created))
    if report.controller is not None:
        lines.append(("controller when planned", f"broker {report.controller}"))
    if report.last_error:
        lines.append(("last error", report.last_error))
    return Section("Summary", lines=tuple(lines))


def before(report: RunReport) -> Section:
    """What the plan found and intended, and the cluster's health as the run began."""
    lines: list[tuple[str, str]] = []
    if report.samples:
        lines.append(("health at start", health_text(report.samples[0])))
    table = Table(
        ("#", "target", "reason", "partitions", "impact", "actions"),
        tuple(
            (
                str(s.number),
                s.target,
                s.reason,
                f"{len(s.partitions)}: " + ", ".join(s.partitions) if s.partitions else "none",
                "; ".join(s.impact) or "no in-sync replica lost",
                ", ".join(s.actions),
            )
            for s in report.steps
        ),
    )
    items = [f"broker {b} left out: {reason}" for b, reason in report.skipped]
    items += [f"refusal (overridden): {r}" for r in report.refusals]
    items += [f"note: {n}" for n in report.plan_notes]
    return Section(
        "Before: what the plan found",
        lines=tuple(lines),
        tables=(table,) if report.steps else (),
        items=tuple(items),
    )


def steps(report: RunReport) -> Section:
    rows = tuple(
        (
            Code(a.key),
            row_name(a.target),
            PHASES.get(a.name, a.name),
            at(report, a.started_ts, a.started),
            duration(a.duration_s) if a.duration_s is not None else "-",
            a.outcome + (" (resumed)" if a.resumed else ""),
            a.error or result_text(a.result),
        )
        for a in report.actions
    )
    return Section(
        "Steps",
        tables=(Table(("step", "target", "phase", "started", "took", "outcome", "result"), rows),)
        if rows
        else (),
    )


def gates(report: RunReport) -> Section:
    rows = tuple(
        (
            at(report, g.ts, g.time),
            Code(g.step),
            "passed" if g.passed else "BLOCKED",
            g.reason,
        )
        for g in report.gates
    )
    notes = tuple(f"{n.time} {n.step}: {n.text}" for n in report.notes)
    return Section(
        "Gate decisions",
        tables=(Table(("time", "gate", "decision", "reason"), rows),) if rows else (),
        items=notes,
    )


def backups(report: RunReport) -> Section:
    tables = []
    if report.backups:
        tables.append(
            Table(
                ("target", "archive", "archive sha256", "files"),
                tuple(
                    (
                        row_name(b.target),
                        Code(b.archive),
                        Code(b.archive_sha256),
                        str(len(b.files))
                        + (f" ({len(b.missing)} planned file(s) absent)" if b.missing else ""),
                    )
                    for b in report.backups
                ),
            )
        )
        tables.append(
            Table(
                ("target", "file", "sha256", "bytes"),
                tuple(
                    (
                        row_name(b.target),
                        Code(f.path),
                        Code(f.sha256),
                        "-" if f.size is None else str(f.size),
                    )
                    for b in report.backups
                    for f in b.files
                ),
            )
        )
    items = tuple(f"deleted {path}" for path in report.deleted)
    if not report.backups and not report.deleted:
        items = ("no file was backed up or deleted",)
    return Section("Backups", tables=tuple(tables), items=items)


def health(report: RunReport) -> Section:
    found = report.samples
    if not found:
        return Section("Cluster health", lines=(("samples", "none recorded"),))
    controllers = sorted({s.controller for s in found if s.controller is not None})
    return Section(
        "Cluster health",
        lines=(
            ("samples", f"{len(found)} from {found[0].time} to {found[-1].time}"),
            (
                "under-replicated partitions",
                f"{found[0].under_replicated} at start, at most"
                f" {max(s.under_replicated for s in found)}, {found[-1].under_replicated} at end",
            ),
            ("offline partitions", f"at most {max(s.offline for s in found)}"),
            ("below min.insync.replicas", f"at most {max(s.below_min_isr for s in found)}"),
            ("active controller", ", ".join(f"broker {c}" for c in controllers) or "none"),
        ),
    )


def unavailable(report: RunReport) -> Section:
    """Per partition, the phases the plan predicted it unavailable in against those the
    health samples saw it offline or under min ISR in."""
    rows = tuple(
        (
            a.partition,
            ", ".join(a.predicted) or "-",
            ", ".join(a.observed) or "-",
            "NOT PREDICTED: " + ", ".join(a.unpredicted) if a.unpredicted else "as predicted",
        )
        for a in report.availability
    )
    if not rows:
        return Section("Unavailable partitions")
    surprises = sum(1 for a in report.availability if a.unpredicted)
    return Section(
        "Unavailable partitions",
        lines=(
            (
                "observed against the plan",
                f"{surprises} partition(s) unavailable when the plan did not predict it"
                if surprises
                else "no partition was seen unavailable that the plan did not name",
            ),
        ),
        tables=(Table(("partition", "predicted", "observed", "verdict"), rows),),
    )


def after(report: RunReport) -> Section:
    """The run's own verification, the last health sample, and the scan after it (fix)."""
    lines: list[tuple[str, str]] = [("status", report.status)]
    if report.samples:
        lines.append(("health at end", health_text(report.samples[-1])))
    if report.check is not None:
        lines.append(("scan after the run", f"{report.check.summary} ({report.check.time})"))
        counts = ", ".join(f"{k}={v}" for k, v in sorted(report.check.counts.items()))
        if counts:
            lines.append(("findings after", counts))
    else:
        lines.append(
            ("scan after the run", "not recorded (fix scans after its run; apply does not)")
        )
    items = tuple(f"{row_name(a.target)}: {result_text(a.result)}" for a in report.verified)
    unverified = sorted(
        {
            row_name(a.target)
            for a in report.actions
            if a.name.startswith("verify") and a.outcome != FINISHED
        }
        - {row_name(a.target) for a in report.verified}
    )
    items += tuple(f"{target}: not verified" for target in unverified)
    return Section("After", lines=tuple(lines), items=items)


def events(report: RunReport) -> Section:
    rows = tuple((at(report, e.ts, e.time), e.event, e.detail) for e in report.events)
    return Section("Run events", tables=(Table(("time", "event", "detail"), rows),) if rows else ())


def health_text(sample: HealthSample) -> str:
    return (
        f"{sample.under_replicated} under-replicated, {sample.offline} offline,"
        f" {sample.below_min_isr} below min ISR; brokers"
        f" {', '.join(map(str, sample.brokers)) or 'none'} registered,"
        f" controller {sample.controller if sample.controller is not None else 'none'}"
    )


def at(report: RunReport, ts: float, time: str) -> str:
    """Time of day from the ISO time, and the offset from the run's start."""
    clock = time.partition("T")[2].removesuffix("Z") or time
    return f"{clock} (+{duration(max(0.0, ts - report.started_ts))})"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s"


def result_text(result: Mapping[str, Any]) -> str:
    """An action's result in one short line (backups in full live in their own section)."""
    if not result:
        return ""
    shown: dict[str, Any] = dict(result)
    backup = shown.pop("backup", None)
    parts = []
    if isinstance(backup, Mapping):
        entries = backup.get("entries")
        count = len(entries) if isinstance(entries, list) else 0
        parts.append(f"{count} file(s) into {backup.get('archive')}")
    deleted = shown.pop("deleted", None)
    if isinstance(deleted, list):
        parts.append(f"deleted {len(deleted)} file(s)")
    parts += [f"{k}={json.dumps(v, default=str)}" for k, v in sorted(shown.items())]
    text = "; ".join(parts)
    return text if len(text) <= RESULT_WIDTH else text[: RESULT_WIDTH - 3] + "..."
