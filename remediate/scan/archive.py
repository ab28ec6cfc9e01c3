"""The scan JVM's class-data archive (Java's CDS): Spark's classes mapped, not loaded.

A scan's driver JVM loads some fifteen thousand classes from Spark's jars before and while it
classifies; that is most of its start-up and much of its first query. Java can store the
classes a run loaded in an archive that later runs map from disk. `build()` makes one: a
training run (the warm-up sample of remediate/scan/warmup.py, classified with
-XX:DumpLoadedClassList) lists the classes, then the JVM dumps them (-Xshare:dump), started by
Spark's own launcher so that its class path is exactly the one every scan's JVM gets. `make
setup` builds it; `remediate prepare-spark` does it by hand. Without an archive a scan runs as
before, only slower to start.

An archive is valid for one Java, one set of Spark jars and one class path, and the JVM
refuses one that does not match them. Its file name carries a digest of all three (`key()`),
so a scan only ever finds an archive made for what it runs; a new Java or PySpark simply has
none until `prepare-spark` runs again. The class path starts with SPARK_CONF_DIR, which Java
allows in an archived class path only when it is an empty directory: scans use an empty one
of their own, and give Spark's log settings to the driver as a file (-Dlog4j2.configurationFile).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from remediate.errors import ScanError

FORMAT = 1
CACHE_ENV = "REMEDIATE_CACHE_DIR"
LOG_SETTINGS = Path(__file__).parent / "sparkconf" / "log4j2.properties"
# Spark's launcher, Java and the dump take half a minute to a minute on two cores.
DUMP_TIMEOUT_S = 600.0


def cache_dir() -> Path:
    """$REMEDIATE_CACHE_DIR, else $XDG_CACHE_HOME/remediate, else ~/.cache/remediate."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "remediate"


def empty_conf_dir() -> Path:
    """The empty directory scans give Spark as SPARK_CONF_DIR (created when missing; a new
    temporary one where the cache cannot be written, with which no archive is used)."""
    directory = cache_dir() / "spark-conf"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path(tempfile.mkdtemp(prefix="remediate-spark-conf-"))
    return directory


def spark_home() -> Path | None:
    """PySpark's install (its jars are Spark's), found without importing it."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def java_home() -> Path | None:
    """The Java that Spark's launcher starts: $JAVA_HOME, else `java` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    if java is None:
        return None
    return Path(os.path.realpath(java)).parent.parent


def _stat_line(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path} absent"
    return f"{path} {stat.st_size} {stat.st_mtime_ns}"


def key(java_options: str, *, java: Path | None = None, spark: Path | None = None) -> str | None:
    """A digest of what an archive is valid for: the Java (its launcher and its JVM library),
    every Spark jar (name, size, modification time), the class path's conf dir and the driver's
    Java options. None when Java or PySpark cannot be found. `java` and `spark` default to
    the Java home and the PySpark install a scan would use."""
    home = java if java is not None else java_home()
    jars_home = spark if spark is not None else spark_home()
    if home is None or jars_home is None:
        return None
    lines = [
        f"remediate-spark-cds {FORMAT}",
        _stat_line(home / "bin" / "java"),
        _stat_line(home / "lib" / "server" / "libjvm.so"),
        f"SPARK_CONF_DIR={os.environ.get('SPARK_CONF_DIR', '')}",
        f"options={java_options}",
    ]
    jars = jars_home / "jars"
    try:
        names = sorted(os.listdir(jars))
    except OSError:
        return None
    lines += [_stat_line(jars / name) for name in names if name.endswith(".jar")]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


def path_for(java_options: str) -> Path | None:
    """Where the archive for the current Java, jars and options lives (None if unknowable)."""
    digest = key(java_options)
    return None if digest is None else cache_dir() / "spark-cds" / f"{digest}.jsa"


def usable(java_options: str) -> Path | None:
    """The archive a scan started with `java_options` can map, if it was built."""
    if not _conf_dir_is_empty():
        return None
    archive = path_for(java_options)
    return archive if archive is not None and archive.is_file() else None


def _conf_dir_is_empty() -> bool:
    conf = os.environ.get("SPARK_CONF_DIR")
    try:
        return bool(conf) and not os.listdir(conf)
    except OSError:
        return False


def with_archive(java_options: str, archive: Path) -> str:
    """The driver's Java options mapping `archive`. A JVM that cannot map it runs without it,
    and says nothing (its class-sharing log is off: stdout carries --json)."""
    return f"{java_options} -XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds=off"


Progress = Callable[[str], None]


def build(java_options: str, *, progress: Progress | None = None, force: bool = False) -> Path:
    """Build the archive for the current Java and Spark jars (if there is none, or `force`);
    its path. ScanError when Java, PySpark or the dump fails."""
    from remediate.scan.session import prepare_environment  # noqa: PLC0415

    prepare_environment()
    archive = path_for(java_options)
    if archive is None:
        raise ScanError("no Java or no PySpark found: cannot build Spark's class-data archive")
    if archive.is_file() and not force:
        return archive
    if not _conf_dir_is_empty():
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
    _prune(archive.parent)
    return archive


# Archives of other installs (another checkout, an older Java or PySpark) are kept, the newest
# few: each is some 180 MB.
KEEP = 3


def _prune(directory: Path) -> None:
    archives = sorted(directory.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in archives[KEEP:]:
        stale.unlink(missing_ok=True)


def _training_run(java_options: str, classes: Path) -> None:
    """Classify the warm-up sample in a session of its own, listing every class it loads."""
    from remediate.scan.session import spark_session, warm_up  # noqa: PLC0415

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
    from remediate.scan.session import settings  # noqa: PLC0415

    spark = spark_home()
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
