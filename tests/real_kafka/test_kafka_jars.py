"""Real Kafka's jars from Maven Central (remediate/sandbox/real/kafka_jars.py, releases.py):
fetched once, never again while complete, and a download that fails names the artifact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

from remediate.errors import SandboxError
from remediate.sandbox.real import kafka_jars, releases

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
    for entry in kafka_jars.default_classpaths():
        assert kafka_jars.problem(kafka_jars.jars_dir() / entry.name, verify=True) is None
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
    broker = cache / kafka_jars.broker("2.8.2") / kafka_jars.MANIFEST
    untouched = broker.stat().st_mtime_ns

    assert kafka_jars.fetch() == [kafka_jars.LEGACY_CLIENT]
    assert kafka_jars.problem(legacy, verify=True) is None
    assert kafka_jars.classpath(kafka_jars.LEGACY_CLIENT) == f"{legacy}/*"
    assert broker.stat().st_mtime_ns == untouched
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
    """A classpath asking Maven Central for a Kafka that was never released: fetch fails with
    the artifact's name, and nothing is left behind in the cache."""
    never = releases.Classpath(
        "broker-2.8.404",
        (releases.Artifact("org.apache.kafka", "kafka_2.13", "2.8.404"),),
        "a Kafka that was never released",
    )
    cache = tmp_path / "jars"
    monkeypatch.setenv("REMEDIATE_KAFKA_JARS", str(cache))
    with pytest.raises(SandboxError) as failure:
        kafka_jars.fetch([never])
    assert "org.apache.kafka:kafka_2.13:jar:2.8.404" in str(failure.value)
    assert list(cache.iterdir()) == []


def test_the_project_names_each_classpath_as_a_module_of_its_artifacts() -> None:
    """The generated Maven project: one module per classpath, each depending on exactly the
    registry's artifacts, every name escaped."""
    odd = releases.Classpath(
        "x<&>", (releases.Artifact("g<", "a&", "1>"),), "a name -- with dashes & <marks>"
    )
    files = kafka_jars.project([releases.release("3.9.2").classpath, odd])
    assert sorted(files) == ["broker-3.9.2/pom.xml", "pom.xml", "x<&>/pom.xml"]
    parent = ElementTree.fromstring(files["pom.xml"])
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    assert [m.text for m in parent.iterfind("m:modules/m:module", ns)] == ["broker-3.9.2", "x<&>"]
    for name, expected in [
        (
            "broker-3.9.2",
            [
                ("org.apache.kafka", "kafka_2.13", "3.9.2"),
                ("ch.qos.reload4j", "reload4j", "1.2.25"),
                ("org.slf4j", "slf4j-reload4j", "1.7.36"),
            ],
        ),
        ("x<&>", [("g<", "a&", "1>")]),
    ]:
        module = ElementTree.fromstring(files[f"{name}/pom.xml"])
        assert module.findtext("m:artifactId", namespaces=ns) == name
        found = [
            tuple(d.findtext(f"m:{k}", namespaces=ns) for k in ("groupId", "artifactId", "version"))
            for d in module.iterfind("m:dependencies/m:dependency", ns)
        ]
        assert found == expected


def test_the_manifest_lists_every_jar_with_its_size_and_digest() -> None:
    entry = kafka_jars.jars_dir() / kafka_jars.broker("2.8.2")
    manifest = json.loads((entry / kafka_jars.MANIFEST).read_text())
    names = {j["name"] for j in manifest["jars"]}
    assert names == {p.name for p in entry.glob("*.jar")}
    assert {"kafka_2.13-2.8.2.jar", "log4j-1.2.17.jar", "zookeeper-3.5.9.jar"} <= names
