"""`check` and `scan` are read by monitoring as Nagios states: a failure of the command itself
(a bug: any uncaught exception; a usage error) exits 3, UNKNOWN, never 1 or 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from remediate.execute.failpoints import ENV
from remediate.exit_codes import EXIT_UNKNOWN


def remediate(*args: str, failpoints: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if failpoints:
        env[ENV] = failpoints
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, check=False, env=env, timeout=120
    )


@pytest.mark.parametrize("command", ["check", "scan"])
def test_an_unexpected_error_is_unknown(command: str, tmp_path: Path) -> None:
    result = remediate(
        command, "-c", str(tmp_path / "cluster.yaml"), failpoints=f"command:{command}=raise"
    )
    assert result.returncode == EXIT_UNKNOWN, result.stderr
    assert "unexpected error" in result.stderr and "RuntimeError" in result.stderr


def test_a_usage_error_of_check_is_unknown() -> None:
    assert remediate("check").returncode == EXIT_UNKNOWN
    assert remediate("check", "--no-such-option").returncode == EXIT_UNKNOWN
