"""Spark's class-data archive: its key follows exactly what the JVM checks an archive against,
a scan uses only an archive made for it, and a scan's driver JVM really maps the archive that
`make setup` built."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from remediate.errors import ScanError
from remediate.scan import archive, archive_build
from remediate.scan.session import DRIVER_JAVA_OPTIONS, prepare_environment

OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A Java home and a Spark home with the files the key reads, and an empty conf dir."""
    java = tmp_path / "jdk"
    (java / "bin").mkdir(parents=True)
    (java / "bin" / "java").write_bytes(b"java launcher")
    (java / "lib" / "server").mkdir(parents=True)
    (java / "lib" / "server" / "libjvm.so").write_bytes(b"the jvm")
    spark = tmp_path / "pyspark"
    (spark / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "scala-library.jar"):
        (spark / "jars" / name).write_bytes(name.encode())
    (spark / "jars" / "README").write_text("not a jar")
    conf = tmp_path / "conf"
    conf.mkdir()
    # prepare_environment() sets these when unset; the test leaves them as it found them.
    for name in ("SPARK_HOME", "PYSPARK_PYTHON", "SPARK_LOCAL_IP"):
        monkeypatch.setenv(name, "")  # recorded, so that teardown restores the original
        monkeypatch.delenv(name)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    monkeypatch.setenv(archive.CACHE_ENV, str(tmp_path / "cache"))
    return java, spark


def test_the_key_changes_with_everything_the_jvm_checks(
    homes: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java, spark = homes
    first = archive.key(OPTIONS, java=java, spark=spark)
    assert first is not None and first == archive.key(OPTIONS, java=java, spark=spark)
    (spark / "jars" / "README").write_text("still not a jar")
    assert archive.key(OPTIONS, java=java, spark=spark) == first, "only jars count"

    def another_conf_dir() -> str | None:
        monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
        return archive.key(OPTIONS, java=java, spark=spark)

    changes: dict[str, Callable[[], str | None]] = {
        "options": lambda: archive.key(f"{OPTIONS} -Xmx2g", java=java, spark=spark),
        "a jar": lambda: (
            (spark / "jars" / "spark-core.jar").write_bytes(b"spark-core.jar, upgraded"),
            archive.key(OPTIONS, java=java, spark=spark),
        )[1],
        "a new jar": lambda: (
            (spark / "jars" / "extra.jar").write_bytes(b"x"),
            archive.key(OPTIONS, java=java, spark=spark),
        )[1],
        "the jvm": lambda: (
            (java / "lib" / "server" / "libjvm.so").write_bytes(b"another jvm"),
            archive.key(OPTIONS, java=java, spark=spark),
        )[1],
        "the conf dir": another_conf_dir,
    }
    seen: set[str | None] = {first}
    for what, change in changes.items():
        now = change()
        assert now not in seen, what
        seen.add(now)


def test_no_key_without_jars(homes: tuple[Path, Path], tmp_path: Path) -> None:
    java, _spark = homes
    assert archive.key(OPTIONS, java=java, spark=tmp_path / "nowhere") is None


@pytest.fixture
def installed(homes: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake homes as the Java and the PySpark a scan would use."""
    java, spark = homes
    monkeypatch.setattr(archive, "java_home", lambda: java)
    monkeypatch.setattr(archive, "spark_home", lambda: spark)


@pytest.mark.usefixtures("installed")
def test_a_scan_uses_only_an_archive_made_for_it() -> None:
    assert archive.usable(OPTIONS) is None  # none built
    path = archive.path_for(OPTIONS)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"an archive")
    assert archive.usable(OPTIONS) == path
    assert archive.usable(f"{OPTIONS} -Xmx2g") is None  # made for other options
    conf = Path(os.environ["SPARK_CONF_DIR"])
    (conf / "log4j2.properties").write_text("")
    assert archive.usable(OPTIONS) is None, "Java maps no class path with a non-empty dir"


def test_options_with_an_archive_map_it_and_say_nothing() -> None:
    options = archive.with_archive(OPTIONS, Path("/cache/a.jsa"))
    assert options.startswith(OPTIONS)
    assert "-XX:SharedArchiveFile=/cache/a.jsa" in options
    assert "-Xshare:auto" in options  # a JVM that cannot map it runs without it
    assert "-Xlog:cds=off" in options  # and says nothing on stdout, which carries --json


@pytest.mark.usefixtures("installed")
def test_building_with_a_conf_dir_that_is_not_empty_is_refused() -> None:
    (Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf").write_text("")
    with pytest.raises(ScanError, match="not an empty directory"):
        archive_build.build(OPTIONS)


def test_a_cache_that_cannot_be_written_gives_a_conf_dir_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir would be")
    monkeypatch.setenv(archive.CACHE_ENV, str(blocker))
    conf = archive.empty_conf_dir()
    assert conf.is_dir() and not list(conf.iterdir())
    conf.rmdir()


# Reads the JVM's memory map: where Java put the archive (Linux's /proc).
MAPPED = """
import sys
from remediate.scan.session import spark_session
spark = spark_session("local[1]")
pid = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{pid}/maps") as maps:
    print(sys.argv[1] in maps.read())
spark.stop()
"""


def test_the_driver_jvm_maps_the_archive_make_setup_built() -> None:
    """`make setup` builds it (`remediate prepare-spark`); where it has not run, it is built
    here, which takes half a minute to a minute."""
    prepare_environment()
    built = archive.usable(DRIVER_JAVA_OPTIONS) or archive_build.build(DRIVER_JAVA_OPTIONS)
    assert built == archive_build.build(DRIVER_JAVA_OPTIONS), "a second build is a no-op"
    done = subprocess.run(
        [sys.executable, "-c", MAPPED, str(built)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "True", done.stderr[-2000:]
    assert done.stderr == "", "nothing on stderr"


def test_the_newest_archives_are_kept(tmp_path: Path) -> None:
    """Other installs' archives stay (another checkout, an older Java), the newest few only."""
    for n in range(archive_build.KEEP + 2):
        made = tmp_path / f"{n}.jsa"
        made.write_bytes(b"")
        os.utime(made, (1_000_000 + n, 1_000_000 + n))
    (tmp_path / "notes.txt").write_text("not an archive")
    archive_build.prune(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == sorted([f"{n}.jsa" for n in range(2, archive_build.KEEP + 2)] + ["notes.txt"])
