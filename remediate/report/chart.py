"""The timeline picture: what each broker was doing, and under it the cluster's
under-replicated partitions, drawn with matplotlib as SVG text to inline in the page.

Only matplotlib's object API is used (a `Figure`, never pyplot): it keeps no global figure
state and never opens a display, so rendering is safe in a CLI process, a test, or a thread.
"""

from __future__ import annotations

import io
import re
from typing import Literal

import matplotlib
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from remediate.execute.journal import JournalEvent
from remediate.report.model import FAILED, IN_FLIGHT
from remediate.report.timeline import PHASE_ORDER, STOPPED, HealthPoint, RunTimeline, Span

# Colour per phase; colour-blind safe where it matters (stopped vs waiting vs deleting).
COLOURS = {
    STOPPED: "#f3d3d3",
    "gate": "#9e9e9e",
    "stopping": "#c0392b",
    "backing up": "#e69f00",
    "deleting": "#8c4b2b",
    "starting": "#009e73",
    "waiting for ISR": "#0072b2",
    "verifying": "#56b4e9",
    "writing ZooKeeper": "#8e44ad",
    "controller election": "#cc79a7",
    "throttle": "#d4c36a",
    "moving replicas": "#f0e442",
    "reassigning": "#7f3c8d",
    "rolling back": "#555555",
}
OTHER = "#bbbbbb"
LineStyle = Literal["-", "--", "-.", ":"]
MARKER_STYLE: dict[str, tuple[str, LineStyle, str]] = {
    JournalEvent.RUN_HALTED: ("#c0392b", "--", "halted"),
    JournalEvent.RUN_RESUMED: ("#009e73", "-.", "resumed"),
    JournalEvent.CHECKED: ("#555555", ":", "scan after the run"),
}
WIDTH_IN = 11.0
ROW_IN = 0.5
HEALTH_IN = 2.4
# A gate takes milliseconds; drawn at its true width it would not show at all.
MIN_WIDTH = 0.004  # of the time axis
LABEL_WIDTH = 0.07  # of the time axis: wide enough to write the duration inside the bar
# More would make the legend wider than the plot, and the layout would shrink the plot.
LEGEND_COLUMNS = 7


def timeline_svg(line: RunTimeline, *, started: str, salt: str) -> str:
    """The picture as an `<svg>` element (no XML prolog), the same for the same input."""
    rows = line.rows or ("(no broker)",)
    length = line.length if line.length > 0 else 1.0
    figure = Figure(figsize=(WIDTH_IN, ROW_IN * len(rows) + 1.6 + HEALTH_IN), layout="constrained")
    top: Axes
    bottom: Axes
    top, bottom = figure.subplots(
        2,
        1,
        sharex=True,
        gridspec_kw={"height_ratios": [ROW_IN * len(rows) + 0.8, HEALTH_IN]},
    )
    _draw_spans(top, line, rows, length)
    _draw_health(bottom, line)
    for axes in (top, bottom):
        for marker in line.markers:
            colour, style, _ = MARKER_STYLE.get(marker.event, ("#555555", ":", marker.event))
            axes.axvline(marker.at, color=colour, linestyle=style, linewidth=1.2, zorder=3)
        axes.set_xlim(-0.01 * length, length * 1.01)
        axes.grid(axis="x", color="#dddddd", linewidth=0.6)
        axes.set_axisbelow(True)
    bottom.set_xlabel(f"seconds since the run started ({started})")
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return _svg_element(buffer.getvalue())


def _draw_spans(axes: Axes, line: RunTimeline, rows: tuple[str, ...], length: float) -> None:
    position = {row: len(rows) - 1 - i for i, row in enumerate(rows)}  # first row on top
    seen: set[str] = set()
    for span in line.spans:
        if span.row not in position:
            continue
        seen.add(span.phase)
        y = position[span.row]
        stopped = span.phase == STOPPED
        height = 0.8 if stopped else 0.46
        width = max(span.duration, MIN_WIDTH * length)
        axes.broken_barh(
            [(span.start, width)],
            (y - height / 2, height),
            facecolors=COLOURS.get(span.phase, OTHER),
            edgecolor=_edge(span),
            hatch=_hatch(span),
            linewidth=1.0 if span.outcome != "finished" else 0.0,
            zorder=1 if stopped else 2,
        )
        if not stopped and span.duration >= LABEL_WIDTH * length:
            axes.text(
                span.start + span.duration / 2,
                y,
                f"{span.duration:.1f} s",
                ha="center",
                va="center",
                fontsize=8,
                color="white",
                zorder=4,
            )
    axes.set_yticks(range(len(rows)), labels=list(reversed(rows)))
    axes.set_ylim(-0.7, len(rows) - 0.3)
    topics = any(row.startswith("topic ") for row in rows)
    what = "per broker and restored topic" if topics else "per broker"
    axes.set_title(f"What the run was doing, {what}", loc="left", fontsize=11)
    handles: list[Artist] = [
        Patch(facecolor=COLOURS.get(p, OTHER), label=p)
        for p in (*PHASE_ORDER, *sorted(seen - set(PHASE_ORDER)))
        if p in seen
    ]
    outcomes = {s.outcome for s in line.spans}
    if FAILED in outcomes:
        handles.append(Patch(facecolor="white", edgecolor="#b00000", hatch="xxx", label="failed"))
    if IN_FLIGHT in outcomes:
        handles.append(
            Patch(facecolor="white", edgecolor="#333333", hatch="///", label="not finished")
        )
    for event in dict.fromkeys(m.event for m in line.markers):
        colour, style, label = MARKER_STYLE.get(event, ("#555555", ":", event))
        handles.append(Line2D([], [], color=colour, linestyle=style, label=label))
    if handles:
        axes.legend(
            handles=_row_major(handles, LEGEND_COLUMNS),
            loc="lower left",
            bbox_to_anchor=(0.0, 1.08),
            ncol=min(len(handles), LEGEND_COLUMNS),
            frameon=False,
            fontsize=8.5,
        )


def _row_major(handles: list[Artist], columns: int) -> list[Artist]:
    """Reordered so the legend, which matplotlib fills column by column, reads row by row."""
    rows = -(-len(handles) // columns)
    return [
        handles[row * columns + column]
        for column in range(columns)
        for row in range(rows)
        if row * columns + column < len(handles)
    ]


def _draw_health(axes: Axes, line: RunTimeline) -> None:
    axes.set_title("Under-replicated partitions (whole cluster)", loc="left", fontsize=11)
    if not line.health:
        axes.text(
            0.5, 0.5, "no health samples in the journal", ha="center", transform=axes.transAxes
        )
        axes.set_yticks([])
        return
    series = (
        ("under-replicated", "under_replicated", "#0072b2", "-"),
        ("offline", "offline", "#c0392b", "--"),
        ("below min ISR", "below_min_isr", "#e69f00", ":"),
    )
    for start, end in line.unsampled:
        axes.axvspan(start, end, facecolor="#f2f2f2", edgecolor="#cccccc", hatch="..", lw=0)
    for label, field, colour, style in series:
        for number, part in enumerate(_sampled_parts(line)):
            # Each sample holds until the next one: a step, not a slope between samples.
            axes.step(
                [p.at for p in part],
                [getattr(p, field) for p in part],
                where="post",
                label=label if number == 0 else None,
                color=colour,
                linestyle=style,
                lw=1.8,
            )
    axes.plot(
        [p.at for p in line.health],
        [p.under_replicated for p in line.health],
        "o",
        color="#0072b2",
        markersize=2.5,
    )
    highest = max(max(p.under_replicated, p.offline, p.below_min_isr) for p in line.health)
    axes.set_ylim(-0.2, highest + 1)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("partitions")
    handles, _ = axes.get_legend_handles_labels()
    if line.unsampled:
        handles.append(
            Patch(facecolor="#f2f2f2", edgecolor="#cccccc", hatch="..", label="not sampled")
        )
    # Above the plot, right of its title: a legend inside would hide the counts.
    axes.legend(
        handles=handles,
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
        frameon=False,
        ncol=4,
    )


def _sampled_parts(line: RunTimeline) -> list[list[HealthPoint]]:
    """The samples cut where the executor did not sample (see `Timeline.unsampled`)."""
    cuts = {end for _, end in line.unsampled}
    parts: list[list[HealthPoint]] = [[]]
    for point in line.health:
        if point.at in cuts and parts[-1]:
            parts.append([])
        parts[-1].append(point)
    return parts


def _edge(span: Span) -> str:
    if span.outcome == FAILED:
        return "#b00000"
    if span.outcome == IN_FLIGHT:
        return "#333333"
    return "none"


def _hatch(span: Span) -> str | None:
    if span.outcome == FAILED:
        return "xxx"
    if span.outcome == IN_FLIGHT:
        return "///"
    return None


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)


def _svg_element(document: str) -> str:
    """The `<svg>` element alone: an XML declaration or DOCTYPE is not allowed inline in HTML."""
    return _PROLOG.sub("", document, count=1).strip()
