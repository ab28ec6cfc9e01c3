"""What doctor found: one finding per item and place, and the exit code of them all."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from remediate.exit_codes import EXIT_UNKNOWN


class Status(StrEnum):
    OK = "OK"
    WARNING = "WARNING"  # a run goes ahead, with less (a repair not offered, a wait blind)
    CRITICAL = "CRITICAL"  # a run needs it and would be refused or halted without it
    UNKNOWN = "UNKNOWN"  # not checked: what it needs failed first


@dataclass(frozen=True)
class Finding:
    """One item in one place: `where` is "cluster", "this host" or "broker N"; `fix` says
    what to change when the status is not OK."""

    item: str
    where: str
    status: Status
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        document = {
            "item": self.item,
            "where": self.where,
            "status": str(self.status),
            "detail": self.detail,
        }
        if self.fix:
            document["fix"] = self.fix
        return document


def ok(item: str, where: str, detail: str) -> Finding:
    return Finding(item, where, Status.OK, detail)


def critical(item: str, where: str, detail: str, fix: str = "") -> Finding:
    return Finding(item, where, Status.CRITICAL, detail, fix)


def warning(item: str, where: str, detail: str, fix: str = "") -> Finding:
    return Finding(item, where, Status.WARNING, detail, fix)


def unknown(item: str, where: str, detail: str) -> Finding:
    return Finding(item, where, Status.UNKNOWN, detail)


# Nagios's codes, as `check`'s: a missing requirement outweighs a check that could not run.
_EXIT = {Status.OK: 0, Status.WARNING: 1, Status.CRITICAL: 2, Status.UNKNOWN: EXIT_UNKNOWN}
_WORST_FIRST = (Status.CRITICAL, Status.UNKNOWN, Status.WARNING, Status.OK)


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...]

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> Diagnosis:
        return cls(tuple(findings))

    @property
    def status(self) -> Status:
        seen = {f.status for f in self.findings}
        return next((s for s in _WORST_FIRST if s in seen), Status.OK)

    @property
    def exit_code(self) -> int:
        return _EXIT[self.status]

    def problems(self) -> Sequence[Finding]:
        return [f for f in self.findings if f.status is not Status.OK]

    def summary_line(self) -> str:
        problems = self.problems()
        if not problems:
            return f"doctor OK: {len(self.findings)} item(s) in place"
        named = "; ".join(f"{f.where}: {f.item} {f.status}" for f in problems[:6])
        more = f" and {len(problems) - 6} more" if len(problems) > 6 else ""
        return f"doctor {self.status}: {len(problems)} item(s) not in place ({named}{more})"

    def lines(self) -> list[str]:
        """The summary, then one line per finding (and its fix on the next)."""
        out = [self.summary_line()]
        for f in self.findings:
            out.append(f"{f.status:<8} {f.where:<10} {f.item:<22} {f.detail}")
            if f.fix and f.status is not Status.OK:
                out.append(f"{'':<8} {'':<10} {'':<22} fix: {f.fix}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "exit_code": self.exit_code,
            "summary": self.summary_line(),
            "findings": [f.to_json() for f in self.findings],
        }
