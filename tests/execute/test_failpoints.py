"""Failpoints are inert unless named, and a malformed specification never breaks a run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from remediate.execute import failpoints
from tests.wait import wait_until


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("", {}),
        ("backup:done=kill", {"backup:done": "kill"}),
        (
            "wait in-sync:started=sleep:2, delete:done=stop",
            {"wait in-sync:started": "sleep:2", "delete:done": "stop"},
        ),
        ("no-equals-sign,=kill,stop:done=", {"stop:done": ""}),
    ],
)
def test_parse(spec: str, expected: dict[str, str]) -> None:
    assert failpoints.parse(spec) == expected


def run_hit(point: str, spec: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != failpoints.ENV}
    if spec is not None:
        env[failpoints.ENV] = spec
    code = (
        f"from remediate.execute import failpoints\nfailpoints.hit({point!r})\nprint('survived')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.parametrize(
    ("point", "spec", "survives"),
    [
        ("backup:done", None, True),
        ("backup:done", "delete:done=kill", True),
        ("backup:done", "backup:done=kill", False),
        ("backup:done", "backup:done=sleep:0.01", True),
        ("backup:done", "backup:done=sleep:soon", True),
        ("backup:done", "backup:done=explode", True),
    ],
)
def test_hit_acts_only_on_the_named_point(point: str, spec: str | None, survives: bool) -> None:
    result = run_hit(point, spec)
    if survives:
        assert result.returncode == 0 and result.stdout == "survived\n", result.stderr
    else:
        assert result.returncode == -signal.SIGKILL and result.stdout == ""


def test_a_pause_holds_the_operator_until_released(tmp_path: Path) -> None:
    """`pause:<path>`: the point says it is reached and holds until the test releases it."""
    point = tmp_path / "p"
    env = {**os.environ, failpoints.ENV: f"backup:done=pause:{point}"}
    code = "from remediate.execute import failpoints\nfailpoints.hit('backup:done')\nprint('on')\n"
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        wait_until(lambda: (tmp_path / "p.reached").exists(), "the pause to be reached")
        assert process.poll() is None  # held
        (tmp_path / "p.release").touch()
        assert process.wait(timeout=30) == 0
        assert process.stdout is not None and process.stdout.read() == "on\n"
    finally:
        process.kill()
