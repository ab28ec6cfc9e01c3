"""How long a plan will take. Pure.

A restart's time is what earlier runs on this cluster show, where their journals are at hand
(journal_dir): from the broker's stop to the end of its wait to be back in sync, the median
of its last runs that completed without a halt or a resume. A broker never restarted by a run
counts the playbook's `expected_restart_s` and stability window. A batch of brokers takes as
long as its slowest: they stop, start and catch up side by side. A restore takes its stability
window and a few seconds for the write and the election.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

# The last runs that count, per broker: a cluster's restarts change with its data.
RUNS_KEPT = 5
# A restore's znode write and controller election, beyond its stability window.
RESTORE_S = 5.0


@dataclass(frozen=True)
class ObservedRestarts:
    """Per broker, the median of its restarts' durations in earlier runs' journals, and how
    many runs those came from."""

    seconds: Mapping[int, float] = field(default_factory=dict)
    runs: int = 0

    def note(self, default_s: float) -> str | None:
        """What the plan says of where its estimate comes from; None with nothing observed."""
        if not self.seconds:
            return None
        low, high = min(self.seconds.values()), max(self.seconds.values())
        span = f"{low:.0f} s" if round(low) == round(high) else f"{low:.0f} to {high:.0f} s"
        return (
            f"the estimate counts each broker's restart as earlier runs took it ({self.runs}"
            f" run(s) in the journal dir: {span} per restart, the median per broker, brokers"
            f" {', '.join(map(str, sorted(self.seconds)))}); a broker with none counts"
            f" {default_s:.0f} s (expected_restart_s and the stability window)"
        )


def _broker_of(step: object, action: str) -> int | None:
    """The broker of a restart step's key "<index>:broker-<id>:<action>"."""
    parts = str(step).split(":", 2)
    if len(parts) != 3 or parts[2] != action or not parts[1].startswith("broker-"):
        return None
    number = parts[1].removeprefix("broker-")
    return int(number) if number.isascii() and number.isdigit() else None


def restart_durations(records: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Per broker restarted in one run's journal, from its stop's start to the end of its
    wait in-sync, in seconds; nothing from a run that halted or was resumed (its times hold
    the halt)."""
    events = {r.get("event") for r in records}
    if "run-completed" not in events or events & {"run-halted", "run-resumed"}:
        return {}
    stopped: dict[int, float] = {}
    found: dict[int, float] = {}
    for record in records:
        ts = record.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        event, step = record.get("event"), record.get("step")
        broker = _broker_of(step, "stop")
        if event == "step-started" and broker is not None:
            stopped.setdefault(broker, float(ts))
        broker = _broker_of(step, "wait in-sync")
        if event == "step-finished" and broker is not None and broker in stopped:
            found[broker] = float(ts) - stopped[broker]
    return found


def observed_restarts(journals: Iterable[Sequence[Mapping[str, Any]]]) -> ObservedRestarts:
    """From runs' journals in the order they ran, the last `RUNS_KEPT` restarts per broker."""
    per_broker: dict[int, list[float]] = {}
    runs = 0
    for records in journals:
        durations = restart_durations(records)
        if durations:
            runs += 1
        for broker, seconds in durations.items():
            per_broker.setdefault(broker, []).append(seconds)
    return ObservedRestarts(
        seconds={b: round(median(s[-RUNS_KEPT:]), 1) for b, s in sorted(per_broker.items())},
        runs=runs,
    )


def estimate_s(
    batches: Sequence[Sequence[int]],
    *,
    restart_s: float,
    restores: int,
    restore_s: float,
    observed: ObservedRestarts | None = None,
) -> float:
    """The plan's duration: each batch as long as its slowest broker's restart (observed, else
    `restart_s`), and `restores` of `restore_s` each."""
    seen = observed.seconds if observed is not None else {}
    return round(
        sum(max(seen.get(b, restart_s) for b in batch) for batch in batches if batch)
        + restores * restore_s,
        1,
    )
