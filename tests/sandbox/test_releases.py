"""The releases the sandbox runs (remediate/sandbox/real/releases.py): each one's classpath, and a
version outside the list refused with the list."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from remediate.cli import cli
from remediate.errors import SandboxError
from remediate.sandbox.real import jvm_broker, kafka_jars, releases

# Each tag's gradle/dependencies.gradle: log4j 1.2.17 through 3.0, reload4j from 3.1 (1.2.19
# until 3.3, 1.2.25 from 3.4), with the slf4j binding of its slf4j version.
BACKENDS = {
    "2.8.0": ("log4j:log4j:1.2.17", "org.slf4j:slf4j-log4j12:1.7.30"),
    "2.8.1": ("log4j:log4j:1.2.17", "org.slf4j:slf4j-log4j12:1.7.30"),
    "2.8.2": ("log4j:log4j:1.2.17", "org.slf4j:slf4j-log4j12:1.7.30"),
    "3.0.2": ("log4j:log4j:1.2.17", "org.slf4j:slf4j-log4j12:1.7.30"),
    "3.1.2": ("ch.qos.reload4j:reload4j:1.2.19", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.2.3": ("ch.qos.reload4j:reload4j:1.2.19", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.3.2": ("ch.qos.reload4j:reload4j:1.2.19", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.4.1": ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.5.2": ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.6.2": ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.7.2": ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.8.1": ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36"),
    "3.9.2": ("ch.qos.reload4j:reload4j:1.2.25", "org.slf4j:slf4j-reload4j:1.7.36"),
}


def test_the_sandbox_runs_every_zookeeper_mode_line() -> None:
    assert tuple(BACKENDS) == releases.VERSIONS
    assert {r.line for r in releases.RELEASES} == {"2.8", *(f"3.{n}" for n in range(10))}
    assert set(releases.TESTED) <= set(releases.VERSIONS)


@pytest.mark.parametrize(("version", "backend"), BACKENDS.items())
def test_each_broker_is_kafka_with_the_backend_its_tarball_ships(
    version: str, backend: tuple[str, str]
) -> None:
    release = releases.release(version)
    assert release.name == f"real-{version}"
    assert release.rules == ("2.8" if version.startswith("2.8") else "3.4")
    classpath = release.classpath
    assert classpath.name == f"broker-{version}"
    assert [a.coordinate for a in classpath.artifacts] == [
        f"org.apache.kafka:kafka_2.13:{version}",
        *backend,
    ]
    assert jvm_broker.REAL_KAFKA[f"real-{version}"] is release


@pytest.mark.parametrize("wanted", ["3.9.2", "real-3.9.2"])
def test_a_release_is_named_by_version_or_by_sandbox_name(wanted: str) -> None:
    assert releases.release(wanted).version == "3.9.2"


@pytest.mark.parametrize("wanted", ["3.9.3", "4.0.0", "2.7.2", "3.9", "", "real-", "latest"])
def test_a_version_not_in_the_list_is_refused_with_the_list(wanted: str) -> None:
    with pytest.raises(SandboxError) as refused:
        releases.release(wanted)
    assert f"Kafka {wanted!r} is not a release the sandbox runs" in str(refused.value)
    assert ", ".join(releases.VERSIONS) in str(refused.value)
    assert f"real-{wanted}" not in jvm_broker.REAL_KAFKA


def test_fetch_kafka_refuses_an_unknown_version_before_starting_maven() -> None:
    result = CliRunner().invoke(cli, ["sandbox", "fetch-kafka", "3.4.1", "3.9.9"])
    assert result.exit_code == 2
    assert "'3.9.9' is not a release the sandbox runs" in result.output
    assert "3.9.2" in result.output


def test_sandbox_up_refuses_an_unknown_release_with_the_list(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["sandbox", "up", "--dir", str(tmp_path), "--kafka", "real-3.9.3"]
    )
    assert result.exit_code == 2
    assert "real-3.9.2" in result.output and "real-2.8.0" in result.output


def test_the_default_fetch_is_what_make_test_runs_and_the_old_client() -> None:
    assert [c.name for c in kafka_jars.default_classpaths()] == [
        "broker-2.8.2",
        "broker-3.4.1",
        "broker-3.6.2",
        "broker-3.9.2",
        "legacy-client-1.0.2",
    ]
    chosen = kafka_jars.classpaths_for(["3.0.2", "real-3.0.2", "2.8.0"])
    assert [c.name for c in chosen] == ["broker-3.0.2", "broker-2.8.0", "legacy-client-1.0.2"]
