"""The scan JVM's class-data archive (Java's CDS): Spark's classes mapped, not loaded.

A scan's driver JVM loads some fifteen thousand classes from Spark's jars before and while it
classifies; that is most of its start-up and much of its first query. Java can store the
classes a run loaded in an archive that later runs map from disk. `build()`
(remediate/scan/archive_build.py) makes one: a training run (the warm-up sample of
remediate/scan/warmup.py, classified with -XX:DumpLoadedClassList) lists the classes, then
the JVM dumps them (-Xshare:dump), started by Spark's own launcher so that its class path is
exactly the one every scan's JVM gets. `make setup` builds it; `remediate prepare-spark` does
it by hand. Without an archive a scan runs as before, only slower to start. This module finds,
keys and uses archives; it starts no Spark.

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
import tempfile
from pathlib import Path

FORMAT = 1
CACHE_ENV = "REMEDIATE_CACHE_DIR"
LOG_SETTINGS = Path(__file__).parent / "sparkconf" / "log4j2.properties"


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


def file_identity(path: Path) -> str:
    """A file as a class-data archive depends on it: its path, size and modification time."""
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
        file_identity(home / "bin" / "java"),
        file_identity(home / "lib" / "server" / "libjvm.so"),
        f"SPARK_CONF_DIR={os.environ.get('SPARK_CONF_DIR', '')}",
        f"options={java_options}",
    ]
    jars = jars_home / "jars"
    try:
        names = sorted(os.listdir(jars))
    except OSError:
        return None
    lines += [file_identity(jars / name) for name in names if name.endswith(".jar")]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


def path_for(java_options: str) -> Path | None:
    """Where the archive for the current Java, jars and options lives (None if unknowable)."""
    digest = key(java_options)
    return None if digest is None else cache_dir() / "spark-cds" / f"{digest}.jsa"


def usable(java_options: str) -> Path | None:
    """The archive a scan started with `java_options` can map, if it was built."""
    if not conf_dir_is_empty():
        return None
    archive = path_for(java_options)
    return archive if archive is not None and archive.is_file() else None


def conf_dir_is_empty() -> bool:
    """Whether SPARK_CONF_DIR is an empty directory, the only kind Java archives in a class path."""
    conf = os.environ.get("SPARK_CONF_DIR")
    try:
        return bool(conf) and not os.listdir(conf)
    except OSError:
        return False


def with_archive(java_options: str, archive: Path) -> str:
    """The driver's Java options mapping `archive`. A JVM that cannot map it runs without it,
    and says nothing (its class-sharing log is off: stdout carries --json)."""
    return f"{java_options} -XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds=off"
