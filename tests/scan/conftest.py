from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remediate.sandbox.plumbing.zkserver import free_port
from remediate.scan.scanner import spark_session
from tests.wait import wait_until


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every classification test (start-up costs seconds)."""
    session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "1"})
    yield session
    session.stop()


def _spark_class() -> Path:
    import pyspark  # noqa: PLC0415

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    def logged() -> bool:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        if process.poll() is not None:
            raise AssertionError(
                f"{text!r} never appeared in {log}:\n{log.read_text(errors='replace')[-3000:]}"
            )
        return False

    wait_until(logged, f"{text!r} in {log}", timeout=timeout, interval=0.2)


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark standalone master and one worker on loopback, started through spark-class."""
    work = tmp_path_factory.mktemp("spark-standalone")
    conf = work / "conf"
    conf.mkdir()
    # INFO on stdout, so the fixture can see the master's election and the worker's registration.
    (conf / "log4j2.properties").write_text(
        "rootLogger.level = info\n"
        "rootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d %p %c{1}: %m%n\n"
    )
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_CONF_DIR": str(conf),
    }
    port, ui, worker_ui = free_port(), free_port(), free_port()
    started: list[subprocess.Popen[bytes]] = []
    try:
        master_log = work / "master.log"
        master = subprocess.Popen(
            [
                str(_spark_class()),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            stdout=master_log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        started.append(master)
        _wait_for(master_log, "I have been elected leader", master)
        url = f"spark://127.0.0.1:{port}"
        worker_log = work / "worker.log"
        worker = subprocess.Popen(
            [
                str(_spark_class()),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(worker_ui),
                url,
            ],
            stdout=worker_log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        started.append(worker)
        _wait_for(worker_log, "Successfully registered with master", worker)
        yield url
    finally:
        for proc in reversed(started):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
