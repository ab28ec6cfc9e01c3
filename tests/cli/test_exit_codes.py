"""`check` and `scan` are read by monitoring as Nagios states: a failure of the command itself
(a bug: any uncaught exception; a usage error) exits 3, UNKNOWN, never 1 or 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


def test_check_says_unknown_when_zookeeper_never_answers(tmp_path: Path) -> None:
    """A ZooKeeper that takes the connection and never answers (a hung server, a black-holed
    path): `check` gives up after cluster.yaml's connect timeout and, as a probe must, still
    prints its one line, or with --json one document, with status UNKNOWN."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        config = tmp_path / "cluster.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "cluster": "probe",
                    "zookeeper": {
                        "connect": f"127.0.0.1:{silent.getsockname()[1]}",
                        "session_timeout_s": 2,
                        "connect_timeout_s": 1,
                    },
                    "brokers": [{"id": 1, "host": "b1", "transport": "local", "log_dirs": ["/d"]}],
                    "service": {"stop": "stop", "start": "start"},
                }
            )
        )
        text = remediate("check", "-c", str(config))
        document = remediate("check", "-c", str(config), "--json")
    finally:
        silent.close()
    assert text.returncode == document.returncode == EXIT_UNKNOWN, text.stderr
    (line,) = text.stdout.splitlines()
    assert line.startswith("UNKNOWN: cannot connect to ZooKeeper at 127.0.0.1:"), line
    assert "within 1s" in line
    said = json.loads(document.stdout)
    assert said["status"] == "UNKNOWN" and said["exit_code"] == EXIT_UNKNOWN
    assert said["error"].startswith("cannot connect to ZooKeeper")
