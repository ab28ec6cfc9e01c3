"""Every benchmark runs at a tiny size, so that a broken bench fails here rather than rotting:
each must exit 0 and end with one JSON line carrying its figures. Only the fields are checked,
never the times (the targets are measured by `make bench`, bench/README.md).

Slow: each starts its own ZooKeeper (and Spark, or a sandbox): 20 to 60 s apiece on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench"

# Each bench with its tiny size and the fields its JSON line must have (a number unless noted).
SMOKE: list[tuple[str, list[str], dict[str, type | tuple[type, ...]]]] = [
    (
        "scan_scale.py",
        ["--replicas", "300", "--brokers", "3"],
        {
            "collect_s": float,
            "classify_s": float,
            "floor_s": float,
            "ratio": float,
            "ratio_with_states_in_floor": float,
            "multiread_states_s": float,
            "speedup_vs_naive": float,
            "whole_scan_s": float,
            "whole_scan_runs_s": list,
            "whole_scan_duckdb_runs_s": list,
            "spark_startup_s": float,
            "precision": float,
            "recall": float,
            "breakdown_classify": dict,
        },
    ),
    (
        "apply_overhead.py",
        ["--brokers", "3", "--partitions", "2", "--rounds", "1", "--log-recovery-ms", "0"],
        {"tool_s": float, "floor_s": float, "ratio": float, "dead_s": float, "fixed_s": float},
    ),
    (
        "check_latency.py",
        ["--runs", "1"],
        {"check_s": float, "scan_s": float, "check_on_spark_s": float, "stderr_bytes": int},
    ),
    (
        "repair_harm.py",
        [
            "--kafka",
            "emulated",
            "--procedures",
            "chosen",
            "manual",
            "--racks",
            "3",
            "--partitions",
            "2",
        ],
        {
            "figures": dict,
            "chosen_vs_manual": dict,
            "chosen_vs_predicted": dict,
            "racks": int,
            "partitions": int,
            "bystander": dict,
            "bystander_below_min_isr": dict,
        },
    ),
    (
        "plan_scale.py",
        ["--brokers", "3", "--partitions", "100", "--incident-topics", "1"],
        {
            "plan_s": float,
            "phases": dict,
            "markdown_chars": int,
            "table_chars": int,
            "json_chars": int,
            "steps": int,
            "targets": dict,
            "met": bool,
        },
    ),
]


def test_every_bench_has_a_smoke_run() -> None:
    assert sorted(p.name for p in BENCH.glob("*.py")) == sorted(name for name, _, _ in SMOKE)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("script", "args", "fields"), SMOKE, ids=[s[0] for s in SMOKE])
def test_bench_runs_at_a_tiny_size_and_prints_its_figures(
    script: str, args: list[str], fields: dict[str, type | tuple[type, ...]]
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=540,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"{script}: stdout must be one JSON line, got {lines[:5]}"
    figures: dict[str, Any] = json.loads(lines[0])
    assert figures["bench"] == script.removesuffix(".py")
    for field, kind in fields.items():
        expected = (int, float) if kind is float else kind
        assert isinstance(figures.get(field), expected), (
            f"{script}: {field} = {figures.get(field)!r}"
        )
