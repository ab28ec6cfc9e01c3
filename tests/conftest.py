"""Shared fixtures. Sandbox clusters are started and stopped by the tests themselves."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.sandbox import cluster
from tests import fault_table


@pytest.fixture
def sandbox_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for one sandbox; whatever was started in it is stopped afterwards."""
    directory = tmp_path / "sandbox"
    yield directory
    if (directory / cluster.STATE_FILE).exists():
        cluster.down(directory)


@pytest.fixture
def sandbox(sandbox_dir: Path) -> cluster.SandboxState:
    """A running three-broker sandbox (Kafka 2.8 emulation)."""
    return cluster.up(sandbox_dir)


# -- the fault table in docs/faults.md (tests/fault_table.py) -------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fault table")
    group.addoption(
        "--fault-table",
        metavar="FILE",
        help="run the @fault tests and, if all pass, write their table into FILE (docs/faults.md)",
    )
    group.addoption(
        "--fault-table-check",
        metavar="FILE",
        help="fail unless FILE's fault table is the one the @fault markers give",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    document = session.config.getoption("--fault-table-check")
    if document is None:
        return
    expected = fault_table.render(fault_table.rows_of(session.items))
    found = fault_table.current_table(Path(document).read_text(encoding="utf-8"))
    if found != expected:
        raise pytest.UsageError(
            f"{document}'s fault table is out of date with the @fault tests: run `make fault-table`"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    document = session.config.getoption("--fault-table")
    if document is None or session.config.getoption("collectonly"):
        return
    rows = fault_table.rows_of(session.items)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus != 0 or not rows:
        if reporter is not None:
            reporter.write_line(f"fault table not written: exit status {exitstatus}", red=True)
        return
    path = Path(document)
    path.write_text(
        fault_table.replace_table(path.read_text(encoding="utf-8"), fault_table.render(rows)),
        encoding="utf-8",
    )
    if reporter is not None:
        reporter.write_line(f"fault table: {len(rows)} rows written to {document}")


# -- the real-Kafka lab (tests/lab, marker `lab`): only where a Docker engine answers ---------

LAB_NOT_RUN = pytest.StashKey[tuple[int, str]]()


def docker_engine_problem() -> str | None:
    """Why the lab cannot run here (no docker client, no engine, no compose plugin), or None."""
    docker = shutil.which("docker")
    if docker is None:
        return "no docker command"
    for args, missing in (
        (["info", "--format", "{{.ServerVersion}}"], "no Docker engine"),
        (["compose", "version"], "no `docker compose` plugin"),
    ):
        try:
            answer = subprocess.run(
                [docker, *args], capture_output=True, text=True, check=False, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{missing} ({exc})"
        if answer.returncode != 0:
            said = (answer.stderr.strip() or answer.stdout.strip()).splitlines()
            return f"{missing} (docker {args[0]}: {said[-1] if said else answer.returncode})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the lab tests where no Docker engine answers; the summary says so."""
    lab = [item for item in items if item.get_closest_marker("lab") is not None]
    if not lab:
        return
    problem = docker_engine_problem()
    if problem is None:
        return
    items[:] = [item for item in items if item.get_closest_marker("lab") is None]
    config.hook.pytest_deselected(items=lab)
    config.stash[LAB_NOT_RUN] = (len(lab), problem)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if LAB_NOT_RUN in config.stash:
        count, problem = config.stash[LAB_NOT_RUN]
        terminalreporter.write_line(
            f"lab: {count} tests against real Kafka not run: {problem}", yellow=True
        )
