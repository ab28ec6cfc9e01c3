"""Shared fixtures. Sandbox clusters are started and stopped by the tests themselves."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from remediate.plan import model
from remediate.sandbox import cluster
from tests import fault_table, suite_parts

# No time limit per hypothesis example: on two cores shared with sandbox JVMs an example that
# takes milliseconds can take more than hypothesis' default 200 ms, and a test fails on time
# alone (timing targets live in bench/, never in assertions).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# `scan`, `plan` and `fix` classify on Spark unless told otherwise; the suite's commands
# classify on the embedded engine, which runs the same rules (tests/scan/test_engines.py
# proves the two agree) in a second where a Spark driver takes twenty on two cores. The
# commands' own defaults are proved in tests/scan/test_scan_sandbox.py, and one repair end to
# end on Spark in tests/acceptance/test_repair_28.py. `REMEDIATE_ENGINE=spark make test` runs
# every command of the suite on Spark.
os.environ.setdefault("REMEDIATE_ENGINE", "duckdb")
# Real brokers in the suite's sandboxes are tuned for it (jvm_broker.Tuning.TEST): shorter
# controlled-shutdown retries and ZooKeeper session, which the suite would otherwise wait out
# at every `sandbox down` and every killed broker, and a JVM that spends less of two cores on
# compiling; `make matrix`, `make demo` and the benches keep Kafka's.
# `REMEDIATE_SANDBOX_TUNING=kafka make test` runs the suite as Kafka ships.
os.environ.setdefault(cluster.TUNING_ENV, "test")


@pytest.fixture(autouse=True, scope="session")
def every_plan_reads_back_byte_for_byte() -> Iterator[None]:
    """Every plan any test writes (`Plan.to_json`) is read back (`plan_from_json`) and written
    again here: the same plan, the same bytes; only a digest the plan was given by hand, not
    the digest of its content, is made again (a plan's digest is never trusted)."""
    to_json = model.Plan.to_json

    def checked(plan: model.Plan) -> dict[str, Any]:
        document = to_json(plan)
        again = model.plan_from_json(json.loads(json.dumps(document)))
        assert again == plan, "the plan read back from its JSON is another plan"
        written = to_json(again)
        assert again.digest == model.compute_digest(plan.body())
        assert json.dumps({**written, "digest": document["digest"]}) == json.dumps(document), (
            "the plan read back from its JSON writes other bytes"
        )
        return document

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model.Plan, "to_json", checked)
        yield


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


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(suite_parts.SuiteParts(), "suite-parts")
    # The controller of a run side by side names where its workers write each test's group
    # (tests/suite_parts.py); the workers it starts inherit the variable.
    if getattr(config.option, "dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        groups = Path(tempfile.mkdtemp(prefix="remediate-suite-groups-"))
        os.environ[suite_parts.GROUPS_ENV] = str(groups)
        config.add_cleanup(lambda: shutil.rmtree(groups, ignore_errors=True))


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist chooses its own
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadgroup":
        return suite_parts.PartScheduling(config, log)
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    suite_parts.schedule(items)


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
