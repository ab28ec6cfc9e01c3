"""The scan's Spark session: quick to start, quiet, and startable in the background.

Quiet: Spark's log goes to stderr at level error (sparkconf/log4j2.properties, which also sets
the level PySpark's shell would announce, so it announces nothing), and the driver JVM's own
stderr passes through a filter that drops the JVM's notice about incubator modules. Nothing
reaches the console that the user did not ask for; Spark's errors still do.

Quick: the driver JVM runs with the C1 compiler only and the serial collector
(`DRIVER_JAVA_OPTIONS`): a scan is seconds of cold code, where C2's compilations and parallel
GC threads cost more than they give. cluster.yaml's spark.conf overrides them
(`spark.driver.extraJavaOptions`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

DEFAULT_MASTER = "local[*]"
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Lines the driver JVM prints on stderr at start-up that carry nothing for the user.
JVM_NOISE = ("WARNING: Using incubator modules:",)


def _settings(master: str, conf: Mapping[str, str] | None) -> dict[str, str]:
    return {
        "spark.master": master,
        "spark.app.name": "remediate-scan",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
        **(conf or {}),
    }


def _relay(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours, without the start-up notices in JVM_NOISE."""
    for line in iter(stream.readline, b""):
        if not line.decode("utf-8", "replace").startswith(JVM_NOISE):
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()


def spark_session(master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None) -> Any:
    """A SparkSession for the scan (an existing one in this process is reused)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).parent / "sparkconf"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Spark is only needed when scanning on it.
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415
    from pyspark.sql import SparkSession  # noqa: PLC0415

    settings = _settings(master, conf)
    if SparkContext._active_spark_context is not None:
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    threading.Thread(target=_relay, args=(gateway.proc.stderr,), daemon=True).start()
    context = SparkContext(conf=spark_conf, gateway=gateway)
    context.setLogLevel("ERROR")
    return SparkSession(context)


class BackgroundSession:
    """A Spark session starting in a thread while the caller does something else (collecting
    the cluster); `get()` waits for it. Always `close()`: it stops the session, once started,
    also when the caller never used it."""

    def __init__(self, master: str = DEFAULT_MASTER, conf: Mapping[str, str] | None = None):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spark-start")
        self._future: Future[Any] = self._pool.submit(spark_session, master, conf)

    def get(self) -> Any:
        return self._future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._future.exception() is None:
            self._future.result().stop()
