"""The report as markdown, for a change ticket: every section, no picture. Pure."""

from __future__ import annotations

from remediate.report.model import RunReport
from remediate.report.summary import Code, Section, Table, sections, title


def report_markdown(report: RunReport) -> str:
    parts = [f"# {title(report)}\n"]
    for section in sections(report):
        parts.append(section_markdown(section))
    return "\n".join(parts)


def section_markdown(section: Section) -> str:
    lines = [f"## {section.title}", ""]
    lines += [f"- **{label}**: {cell(value)}" for label, value in section.lines]
    if section.lines:
        lines.append("")
    for table in section.tables:
        lines += table_markdown(table)
        lines.append("")
    lines += [f"- {cell(item)}" for item in section.items]
    if section.items:
        lines.append("")
    return "\n".join(lines)


def table_markdown(table: Table) -> list[str]:
    return [
        "| " + " | ".join(cell(h) for h in table.header) + " |",
        "|" + "|".join("---" for _ in table.header) + "|",
        *("| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows),
    ]


def cell(text: str) -> str:
    """One table cell or list item: one line, pipes escaped (they would split the cell)."""
    # GitHub-style tables take an escaped pipe even inside a code span.
    flat = " ".join(text.split()).replace("|", "\\|")
    if isinstance(text, Code) and flat:
        fence = "``" if "`" in flat else "`"
        return f"{fence}{flat}{fence}"
    return flat
