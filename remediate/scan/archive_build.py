"""Building the scan JVM's class-data archive (remediate/scan/archive.py says what it is):
a training run in a Spark session of its own lists the classes a scan loads, then the JVM
dumps them, started by Spark's launcher with a scan's class path. `make setup` runs it through
`remediate prepare-spark`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from remediate.errors import ScanError
from remediate.scan import archive as cds
from remediate.scan.session import prepare_environment, settings, spark_session, warm_up

# Spark's launcher, Java and the dump take half a minute to a minute on two cores.
DUMP_TIMEOUT_S = 600.0

Progress = Callable[[str], None]


def build(java_options: str, *, progress: Progress | None = None, force: bool = False) -> Path:
    """Build the archive for the current Java and Spark jars (if there is none, or `force`);
    its path. ScanError when Java, PySpark or the dump fails."""
    prepare_environment()
    archive = cds.path_for(java_options)
    if archive is None:
        raise ScanError("no Java or no PySpark found: cannot build Spark's class-data archive")
    if archive.is_file() and not force:
        return archive
    if not cds.conf_dir_is_empty():
        raise ScanError(
            f"SPARK_CONF_DIR {os.environ.get('SPARK_CONF_DIR')} is not an empty directory:"
            " Java archives a class path only without files in its directories"
        )
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="remediate-cds-") as tmp:
        classes = Path(tmp) / "classes.lst"
        if progress is not None:
            progress("listing the classes a scan loads (a classification of the warm-up sample)")
        _training_run(java_options, classes)
        if progress is not None:
            progress(f"dumping them into {archive}")
        partial = archive.with_suffix(f".{os.getpid()}.tmp")
        _dump(java_options, classes, partial)
        os.replace(partial, archive)
    prune(archive.parent)
    return archive


# Archives of other installs (another checkout, an older Java or PySpark) are kept, the newest
# few: each is some 180 MB.
KEEP = 3


def prune(directory: Path) -> None:
    """Delete all but the `KEEP` newest archives in `directory`."""
    archives = sorted(directory.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in archives[KEEP:]:
        stale.unlink(missing_ok=True)


def _training_run(java_options: str, classes: Path) -> None:
    """Classify the warm-up sample in a session of its own, listing every class it loads."""
    options = f"{java_options} -XX:DumpLoadedClassList={classes}"
    spark = spark_session("local[*]", {"spark.driver.extraJavaOptions": options}, archive=False)
    try:
        warm_up(spark)
    finally:
        spark.stop()
    if not classes.is_file() or classes.stat().st_size == 0:
        raise ScanError(f"the training run listed no classes ({classes})")


def _dump(java_options: str, classes: Path, archive: Path) -> None:
    """Dump the listed classes with the class path Spark's launcher gives the driver: the same
    spark-submit call as a scan's, whose JVM dumps and exits instead of starting Spark."""
    spark = cds.spark_home()
    assert spark is not None
    options = (
        f"{java_options} -Xshare:dump -XX:SharedClassListFile={classes}"
        f" -XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+heap=off"
    )
    conf = settings("local[*]", {"spark.driver.extraJavaOptions": options})
    command = [str(spark / "bin" / "spark-submit")]
    for name, value in conf.items():
        command += ["--conf", f"{name}={value}"]
    command.append("pyspark-shell")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ScanError(f"dumping Spark's class-data archive failed: {exc}") from exc
    if done.returncode != 0 or not archive.is_file():
        archive.unlink(missing_ok=True)
        said = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise ScanError(
            f"dumping Spark's class-data archive failed (exit {done.returncode}): {said}"
        )
