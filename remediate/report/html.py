"""The report as one self-contained HTML page: inline CSS, the picture as inline SVG, no script,
nothing fetched (its Content-Security-Policy forbids loading anything). Pure.
"""

from __future__ import annotations

from html import escape

from remediate import __version__
from remediate.report.model import RunReport
from remediate.report.summary import Code, Section, Table, sections, title

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 24px auto; max-width: 1200px; padding: 0 16px; color: #1d1d1f; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.status { display: inline-block; padding: 2px 10px; border-radius: 10px; font-weight: 600;
          background: #eee; }
.status-completed { background: #d7f0e3; color: #0b5d37; }
.status-halted, .status-refused { background: #f8d7d7; color: #8a1414; }
.status-running { background: #fff1cc; color: #6b4e00; }
figure { margin: 16px 0; border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { color: #555; font-size: 12px; margin-top: 4px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 0; }
dt { color: #555; }
dd { margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #e3e3e3; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f6f6f6; }
tr.blocked td { background: #fdecec; }
code { font: 12px/1.3 ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
ul { margin: 6px 0; padding-left: 20px; }
footer { color: #777; font-size: 12px; margin-top: 32px; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'"


def report_html(report: RunReport, svg: str) -> str:
    """The page; `svg` is the timeline picture's `<svg>` element, inlined as it is."""
    heading = title(report)
    body = [
        "<header>",
        f"<h1>{escape(heading)}</h1>",
        f'<span class="status status-{escape(report.status)}">{escape(report.status)}</span>',
        "</header>",
        '<figure id="timeline">',
        svg,
        "<figcaption>Top: one row per broker, what the run was doing and when (the light band:"
        " the broker was stopped). Bottom: the cluster's under-replicated, offline and below"
        " min ISR partition counts as the run sampled them; shaded where it took no sample."
        "</figcaption>",
        "</figure>",
        *(section_html(s) for s in sections(report)),
        f"<footer>remediate {escape(__version__)}, from the journal of run"
        f" {escape(report.run_id)}.</footer>",
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(heading)}</title>",
            f"<style>{CSS}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def section_html(section: Section) -> str:
    parts = [f"<section><h2>{escape(section.title)}</h2>"]
    if section.lines:
        parts.append("<dl>")
        parts += [f"<dt>{escape(k)}</dt><dd>{cell(v)}</dd>" for k, v in section.lines]
        parts.append("</dl>")
    parts += [table_html(t) for t in section.tables]
    if section.items:
        parts.append("<ul>" + "".join(f"<li>{cell(i)}</li>" for i in section.items) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def table_html(table: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.header)
    rows = "".join(
        # A blocked gate is the one line a reader must not miss.
        ('<tr class="blocked">' if "BLOCKED" in row else "<tr>")
        + "".join(f"<td>{cell(c)}</td>" for c in row)
        + "</tr>"
        for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def cell(text: str) -> str:
    return f"<code>{escape(text)}</code>" if isinstance(text, Code) else escape(text)
