"""Real Kafka's jars from Maven Central (remediate/sandbox/kafka_jars.py, lab/kafka/pom.xml):
fetched once, never again while complete, and a download that fails names the artifact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from remediate.errors import SandboxError
from remediate.sandbox import kafka_jars

# Maven's own words when an artifact is not there, as maven-resolver 1.x prints them.
MAVEN_OUTPUTS = [
    (
        "[ERROR] Failed to execute goal on project broker-2.8.2: Could not resolve dependencies"
        " for project remediate.lab:broker-2.8.2:pom:1: Could not find artifact"
        " org.apache.kafka:kafka_2.13:jar:2.8.9 in central (https://repo.maven.apache.org/maven2)",
        ["org.apache.kafka:kafka_2.13:jar:2.8.9"],
    ),
    (
        "[ERROR] Failed to execute goal on project x: Could not resolve dependencies for project"
        " a:x:pom:1: Failed to collect dependencies at org.apache.kafka:kafka_2.13:jar:0.0.1:"
        " Failed to read artifact descriptor for org.apache.kafka:kafka_2.13:jar:0.0.1",
        ["org.apache.kafka:kafka_2.13:jar:0.0.1"],
    ),
    (
        "[ERROR] Failed to execute goal on project x: Could not resolve dependencies for project"
        " a:x:pom:1: The following artifacts could not be resolved: log4j:log4j:jar:9.9,"
        " ch.qos.reload4j:reload4j:jar:9.9: Could not find artifact log4j:log4j:jar:9.9",
        ["log4j:log4j:jar:9.9", "ch.qos.reload4j:reload4j:jar:9.9"],
    ),
    (
        "[ERROR] Failed to execute goal on project x: Could not transfer artifact"
        " com.101tec:zkclient:jar:0.10 from/to central: Connection refused",
        ["com.101tec:zkclient:jar:0.10"],
    ),
    ("[ERROR] Non-parseable POM /x/pom.xml: in comment after two dashes", []),
]


@pytest.mark.parametrize(("output", "expected"), MAVEN_OUTPUTS)
def test_the_artifacts_maven_could_not_get(output: str, expected: list[str]) -> None:
    assert kafka_jars.missing_artifacts(output) == expected


def test_a_complete_cache_is_never_fetched_again() -> None:
    """make setup fetched it; a second fetch does not even start Maven."""
    for name in kafka_jars.CLASSPATHS:
        assert kafka_jars.problem(kafka_jars.jars_dir() / name, verify=True) is None
    assert kafka_jars.fetch(mvn="/bin/false") == []


def test_an_incomplete_entry_is_named_and_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A jar gone from one classpath: that classpath says which, and only it is fetched again
    (from Maven's local repository, where make setup left the jars)."""
    cache = tmp_path / "jars"
    shutil.copytree(kafka_jars.jars_dir(), cache)
    monkeypatch.setenv("REMEDIATE_KAFKA_JARS", str(cache))
    legacy = cache / kafka_jars.LEGACY_CLIENT
    (legacy / "zkclient-0.10.jar").unlink()
    assert kafka_jars.problem(legacy) == f"{legacy / 'zkclient-0.10.jar'}: missing"
    with pytest.raises(SandboxError, match="run `remediate sandbox fetch-kafka`"):
        kafka_jars.classpath(kafka_jars.LEGACY_CLIENT)
    untouched = (cache / kafka_jars.BROKER_2_8 / kafka_jars.MANIFEST).stat().st_mtime_ns

    assert kafka_jars.fetch() == [kafka_jars.LEGACY_CLIENT]
    assert kafka_jars.problem(legacy, verify=True) is None
    assert kafka_jars.classpath(kafka_jars.LEGACY_CLIENT) == f"{legacy}/*"
    assert (cache / kafka_jars.BROKER_2_8 / kafka_jars.MANIFEST).stat().st_mtime_ns == untouched
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


def test_a_jar_changed_on_disk_is_not_complete(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    shutil.copytree(kafka_jars.jars_dir() / kafka_jars.LEGACY_CLIENT, entry)
    jar = entry / "zkclient-0.10.jar"
    data = bytearray(jar.read_bytes())
    data[100] ^= 0xFF
    jar.write_bytes(bytes(data))
    assert kafka_jars.problem(entry) is None  # same size: the quick check cannot see it
    assert kafka_jars.problem(entry, verify=True) == f"{jar}: its sha256 is not the manifest's"
    (entry / kafka_jars.MANIFEST).write_text("{")
    assert kafka_jars.problem(entry) == f"{entry}: no {kafka_jars.MANIFEST}"


def test_a_download_that_fails_stops_with_the_artifacts_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module asking Maven Central for a Kafka that was never released: fetch fails with
    the artifact's name, and nothing is left behind in the cache."""
    lab = tmp_path / "lab"
    shutil.copytree(kafka_jars.lab_dir(), lab, ignore=shutil.ignore_patterns("jars"))
    pom = lab / "broker-2.8.2" / "pom.xml"
    pom.write_text(
        pom.read_text().replace("<version>2.8.2</version>", "<version>2.8.404</version>")
    )
    cache = tmp_path / "jars"
    monkeypatch.setenv("REMEDIATE_KAFKA_LAB", str(lab))
    monkeypatch.setenv("REMEDIATE_KAFKA_JARS", str(cache))
    with pytest.raises(SandboxError) as failure:
        kafka_jars.fetch()
    assert "org.apache.kafka:kafka_2.13:jar:2.8.404" in str(failure.value)
    assert list(cache.iterdir()) == []


def test_the_manifest_lists_every_jar_with_its_size_and_digest() -> None:
    entry = kafka_jars.jars_dir() / kafka_jars.BROKER_2_8
    manifest = json.loads((entry / kafka_jars.MANIFEST).read_text())
    names = {j["name"] for j in manifest["jars"]}
    assert names == {p.name for p in entry.glob("*.jar")}
    assert {"kafka_2.13-2.8.2.jar", "log4j-1.2.17.jar", "zookeeper-3.5.9.jar"} <= names
