"""The scan's Spark session: quick to start, quiet, and startable in the background.

Quiet: Spark's log goes to stderr at level error (sparkconf/log4j2.properties, which also sets
the level PySpark's shell would announce, so it announces nothing), and the driver JVM's own
stderr passes through a filter that drops the JVM's notice about incubator modules. Nothing
reaches the console that the user did not ask for; Spark's errors still do.

Quick: the driver JVM runs with the C1 compiler only and the serial collector
(`DRIVER_JAVA_OPTIONS`): a scan is seconds of cold code, where C2's compilations and parallel
GC threads cost more than they give. cluster.yaml's spark.conf overrides them
(`spark.driver.extraJavaOptions`). It maps Spark's classes from the class-data archive when
one was built for it (remediate/scan/archive.py), and where the machine is idle while the
cluster is being read, a scan's session classifies a small sample meanwhile (`warm`), so that
the real classification runs warm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from remediate.errors import SparkNotInstalledError
from remediate.scan import archive as cds

DEFAULT_MASTER = "local[*]"
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Lines the driver JVM prints on stderr at start-up that carry nothing for the user.
JVM_NOISE = ("WARNING: Using incubator modules:",)
# What installs Spark for `scan`, `plan` and `fix` (pyproject.toml's `spark` extra).
SPARK_INSTALL = "pip install 'kafka-topicid-remediate[spark]'"


def require_pyspark() -> None:
    """Raise SparkNotInstalledError, in one line naming the install, unless PySpark is
    importable (looked up, not imported: a command that does not classify on Spark never
    loads it)."""
    if cds.spark_home() is None:
        raise SparkNotInstalledError(
            "this command classifies on Spark and PySpark is not installed here:"
            f" {SPARK_INSTALL} (the spark extra; Spark also needs a Java runtime);"
            " check, and scan, plan and fix with --engine duckdb, run without it"
        )


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
    the workers, PySpark's own SPARK_HOME, an empty SPARK_CONF_DIR (the class-data archive
    needs it empty; see remediate/scan/archive.py; the log settings are given to the driver
    as a file instead), the loopback address."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    home = cds.spark_home()
    if home is not None:  # spark-submit would otherwise start a Python to find it
        os.environ.setdefault("SPARK_HOME", str(home))
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
    require_pyspark()
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


def warm_up(spark: Any, stop: threading.Event | None = None) -> None:
    """Classify remediate/scan/warmup.py's sample: the session's cold start (classes loaded,
    the query's code compiled) is paid on it rather than on the real snapshot. With `stop`,
    the second job is not started once it is set."""
    from remediate.scan.job import classify  # noqa: PLC0415
    from remediate.scan.warmup import write_sample  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="remediate-warm-up-") as tmp:
        summary, brokers = classify(spark, [str(write_sample(Path(tmp) / "snapshot"))])
        if stop is None or not stop.is_set():
            summary.collect()
            brokers.collect()


WARM_UP_TAG = "remediate-warm-up"
# The warm-up takes a core for seconds: only worth it when the machine is mostly idle while
# the cluster is read (brokers and ZooKeeper elsewhere), not when the collection itself keeps
# the cores busy.
WARM_UP_MIN_IDLE = 0.5
_IDLE_SAMPLE_S = 0.2


def idle_share(sample_s: float = _IDLE_SAMPLE_S) -> float | None:
    """The share of the machine's CPU time that went idle over `sample_s` seconds (Linux's
    /proc/stat); None where it cannot be read."""

    def times() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as handle:
                fields = handle.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu" or len(fields) < 6:
            return None
        values = [int(v) for v in fields[1:]]
        return values[3] + values[4], sum(values)  # idle + iowait, all

    before = times()
    if before is None:
        return None
    time.sleep(sample_s)
    after = times()
    if after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def warm_up_blocker(*, collected: bool, idle: float | None) -> str | None:
    """Why not to warm up now, or None to warm up."""
    if collected:
        return "the snapshot is ready: classify it"
    if idle is not None and idle < WARM_UP_MIN_IDLE:
        return f"the machine is busy ({idle:.0%} idle): the collection needs the cores"
    return None


class BackgroundSession:
    """A Spark session starting in a thread while the caller collects the cluster; `get()`
    waits for it. Always `close()`: it stops the session, once started, also when the caller
    never used it.

    With `warm`, a session that is ready while the cluster is still being read, on a machine
    that is mostly idle meanwhile, classifies the warm-up sample (remediate/scan/warmup.py):
    time that would otherwise be idle goes into the cold start the real classification would
    pay (`warm_up_blocker` says when not). `collected()` says the
    snapshot is ready: a warm-up not yet begun is skipped (a small cluster is read before the
    JVM is up, and its own classification is as quick as the sample's), one under way is
    cancelled, so the real classification never waits for more than a job to stop.
    """

    def __init__(
        self,
        master: str = DEFAULT_MASTER,
        conf: Mapping[str, str] | None = None,
        *,
        warm: bool = False,
    ):
        require_pyspark()  # here, not in the thread: before the caller reads the cluster
        self._collected = threading.Event()
        self._lock = threading.Lock()
        self._warming: Any = None  # the session while it warms up
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spark-start")
        self._future: Future[Any] = self._pool.submit(self._start, master, conf, warm)

    def _start(self, master: str, conf: Mapping[str, str] | None, warm: bool) -> Any:
        spark = spark_session(master, conf)
        if not warm or self._collected.is_set():
            return spark
        idle = idle_share()
        with self._lock:
            if warm_up_blocker(collected=self._collected.is_set(), idle=idle) is not None:
                return spark
            self._warming = spark
            spark.sparkContext.addJobTag(WARM_UP_TAG)
        try:
            warm_up(spark, self._collected)
        except Exception:  # noqa: S110 - cancelled, or failing as the real run will
            pass
        finally:
            with self._lock:
                self._warming = None
            spark.sparkContext.removeJobTag(WARM_UP_TAG)
        return spark

    def collected(self) -> None:
        """The snapshot is written: skip or cancel the warm-up."""
        with self._lock:
            self._collected.set()
            if self._warming is not None:
                self._warming.sparkContext.cancelJobsWithTag(WARM_UP_TAG)

    def get(self) -> Any:
        self.collected()
        return self._future.result()

    def close(self) -> None:
        self.collected()
        self._pool.shutdown(wait=True)
        if self._future.exception() is None:
            self._future.result().stop()
