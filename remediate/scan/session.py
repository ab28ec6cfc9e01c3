"""The scan's Spark session: quick to start, quiet, and startable in the background.

Quiet: Spark's log goes to stderr at level error (sparkconf/log4j2.properties, which also sets
the level PySpark's shell would announce, so it announces nothing), and the driver JVM's own
stderr passes through a filter that drops the JVM's notice about incubator modules. Nothing
reaches the console that the user did not ask for; Spark's errors still do.

Quick: the driver JVM runs with the C1 compiler only and the serial collector
(`DRIVER_JAVA_OPTIONS`): a scan is seconds of cold code, where C2's compilations and parallel
GC threads cost more than they give. cluster.yaml's spark.conf overrides them
(`spark.driver.extraJavaOptions`). It maps Spark's classes from the class-data archive when
one was built for it (remediate/scan/archive.py), and a scan's session classifies a small
sample while the cluster is being read (`warm`), so the real classification runs warm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from remediate.scan import archive as cds

DEFAULT_MASTER = "local[*]"
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Lines the driver JVM prints on stderr at start-up that carry nothing for the user.
JVM_NOISE = ("WARNING: Using incubator modules:",)


def settings(master: str, conf: Mapping[str, str] | None) -> dict[str, str]:
    """The scan's Spark settings: the defaults here, then cluster.yaml's spark.conf."""
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


def prepare_environment() -> None:
    """What Spark's launcher reads from the environment, unless already set: this Python for
    the workers, an empty SPARK_CONF_DIR (the class-data archive needs it empty; see
    remediate/scan/archive.py; the log settings are given to the driver as a file instead),
    the loopback address."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_CONF_DIR", str(cds.empty_conf_dir()))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def driver_options(options: str, archive: Path | None) -> str:
    """The driver JVM's options: the log settings (first, so that cluster.yaml's options can
    name others), `options`, and the class-data archive when there is one."""
    chosen = f"-Dlog4j2.configurationFile={cds.LOG_SETTINGS} {options}"
    return chosen if archive is None else cds.with_archive(chosen, archive)


def _relay(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours, without the start-up notices in JVM_NOISE."""
    for line in iter(stream.readline, b""):
        if not line.decode("utf-8", "replace").startswith(JVM_NOISE):
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()


def spark_session(
    master: str = DEFAULT_MASTER,
    conf: Mapping[str, str] | None = None,
    *,
    archive: bool = True,
) -> Any:
    """A SparkSession for the scan (an existing one in this process is reused). With
    `archive`, the driver maps the class-data archive built for its Java and jars, if any."""
    prepare_environment()
    # Spark is only needed when scanning on it.
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415
    from pyspark.sql import SparkSession  # noqa: PLC0415

    chosen = settings(master, conf)
    if SparkContext._active_spark_context is not None:
        builder = SparkSession.builder
        for key, value in chosen.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    options = chosen["spark.driver.extraJavaOptions"]
    chosen["spark.driver.extraJavaOptions"] = driver_options(
        options, cds.usable(options) if archive else None
    )
    spark_conf = SparkConf(loadDefaults=False).setAll(list(chosen.items()))
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    threading.Thread(target=_relay, args=(gateway.proc.stderr,), daemon=True).start()
    context = SparkContext(conf=spark_conf, gateway=gateway)
    context.setLogLevel("ERROR")
    return SparkSession(context)


def warm_up(spark: Any) -> None:
    """Classify remediate/scan/warmup.py's sample: the session's cold start (classes loaded,
    the query's code compiled) is paid on it rather than on the real snapshot."""
    from remediate.scan.runner import classify_snapshots  # noqa: PLC0415
    from remediate.scan.warmup import write_sample  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="remediate-warm-up-") as tmp:
        classify_snapshots(spark, [write_sample(Path(tmp) / "snapshot")])


def _started(master: str, conf: Mapping[str, str] | None, warm: bool) -> Any:
    spark = spark_session(master, conf)
    if warm:
        try:
            warm_up(spark)
        except BaseException:
            spark.stop()
            raise
    return spark


class BackgroundSession:
    """A Spark session starting in a thread while the caller does something else (collecting
    the cluster); `get()` waits for it. With `warm`, the thread also classifies the warm-up
    sample before the session is handed over. Always `close()`: it stops the session, once
    started, also when the caller never used it."""

    def __init__(
        self,
        master: str = DEFAULT_MASTER,
        conf: Mapping[str, str] | None = None,
        *,
        warm: bool = False,
    ):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spark-start")
        self._future: Future[Any] = self._pool.submit(_started, master, conf, warm)

    def get(self) -> Any:
        return self._future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._future.exception() is None:
            self._future.result().stop()
