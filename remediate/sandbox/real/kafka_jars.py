"""Real Apache Kafka's jars, from Maven Central, cached once for the sandbox.

Each classpath of remediate/sandbox/real/releases.py (a broker release, or Kafka 1.0.2's tools) is
one entry of the cache, `<jars>/<name>/`: `fetch` writes a Maven project naming the entries
it lacks (one module each, generated from the registry), resolves their runtime closures with
`mvn dependency:copy-dependencies`, and writes a manifest (each jar's size and sha256) once
everything arrived; a directory without a matching manifest is incomplete and is fetched
again, anything complete is never fetched again. Entries never share a JVM: their
kafka-clients, ZooKeeper and Scala versions conflict.

Where: `$REMEDIATE_KAFKA_JARS`, else `lab/kafka/jars/` in the source tree (ignored by git).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from remediate.errors import SandboxError
from remediate.sandbox.real import releases
from remediate.sandbox.real.releases import Classpath

LEGACY_CLIENT = releases.LEGACY_CLIENT.name
MANIFEST = "MANIFEST.json"
# The maven-dependency-plugin that copies a closure (pinned: the build is the same everywhere).
DEPENDENCY_PLUGIN = "3.6.1"
_SOURCE_TREE = Path(__file__).resolve().parents[3]


def broker(version: str) -> str:
    """The cache entry of the broker of release `version`."""
    return releases.release(version).classpath.name


def default_classpaths() -> tuple[Classpath, ...]:
    """What `make setup` fetches: the releases `make test` runs, and Kafka 1.0.2's tools."""
    return (
        *(releases.release(v).classpath for v in releases.TESTED),
        releases.LEGACY_CLIENT,
    )


def classpaths_for(versions: Sequence[str]) -> tuple[Classpath, ...]:
    """The brokers of `versions` (each refused with the list when unknown), and Kafka 1.0.2's
    tools, which every incident needs."""
    chosen = [releases.release(v).classpath for v in versions]
    unique = {c.name: c for c in (*chosen, releases.LEGACY_CLIENT)}
    return tuple(unique.values())


def jars_dir() -> Path:
    configured = os.environ.get("REMEDIATE_KAFKA_JARS")
    return Path(configured) if configured else _SOURCE_TREE / "lab" / "kafka" / "jars"


@dataclass(frozen=True)
class Jar:
    name: str
    size: int
    sha256: str


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def read_manifest(directory: Path) -> list[Jar] | None:
    """The manifest's jars, or None when there is none or it cannot be read."""
    try:
        document = json.loads((directory / MANIFEST).read_text())
        return [Jar(j["name"], int(j["size"]), str(j["sha256"])) for j in document["jars"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def problem(directory: Path, *, verify: bool = False) -> str | None:
    """Why `directory` is not a complete classpath (no manifest, a jar missing or of another
    size, or with `verify` another sha256), or None."""
    jars = read_manifest(directory)
    if not jars:
        return f"{directory}: no {MANIFEST}"
    for jar in jars:
        path = directory / jar.name
        try:
            size = path.stat().st_size
        except OSError:
            return f"{path}: missing"
        if size != jar.size:
            return f"{path}: {size} bytes, the manifest says {jar.size}"
        if verify and _digest(path) != jar.sha256:
            return f"{path}: its sha256 is not the manifest's"
    return None


def classpath(name: str) -> str:
    """The JVM classpath of one complete cache entry (`<dir>/*`)."""
    directory = jars_dir() / name
    reason = problem(directory)
    if reason is not None:
        version = name.removeprefix("broker-")
        command = "remediate sandbox fetch-kafka" + (f" {version}" if version != name else "")
        setup = " (make setup does)" if version == name or version in releases.TESTED else ""
        raise SandboxError(
            f"real Kafka's jars ({name}) are not fetched: {reason}; run `{command}`{setup}"
        )
    return f"{directory}/*"


def _write_manifest(directory: Path) -> None:
    jars = sorted(p for p in directory.iterdir() if p.suffix == ".jar")
    if not jars:
        raise SandboxError(f"Maven copied no jar into {directory}")
    document = {
        "jars": [{"name": p.name, "size": p.stat().st_size, "sha256": _digest(p)} for p in jars]
    }
    (directory / MANIFEST).write_text(json.dumps(document, indent=1) + "\n")


# Maven's ways of naming what it could not get (maven-resolver 1.x messages).
_MISSING = (
    re.compile(r"(?:Could not (?:find|transfer) artifact|Failure to find|Missing artifact) (\S+)"),
    re.compile(r"Failed to collect dependencies at (\S+)"),
    re.compile(r"The following artifacts could not be resolved: (.+?): (?:Could|Failure|Cannot)"),
    re.compile(r"Failed to read artifact descriptor for (\S+)"),
)


def missing_artifacts(maven_output: str) -> list[str]:
    """The artifacts Maven's output says it could not resolve, in order, each once."""
    found: list[str] = []
    for pattern in _MISSING:
        for match in pattern.finditer(maven_output):
            for artifact in match.group(1).split(", "):
                name = artifact.strip().rstrip(":")
                if name and name not in found:
                    found.append(name)
    return found


def project(classpaths: Sequence[Classpath]) -> dict[str, str]:
    """The Maven project that resolves `classpaths`: relative path -> POM text (a parent
    naming one module per classpath; each copies its closure into `${kafka.jars}/<name>`)."""
    modules = "".join(f"    <module>{escape(c.name)}</module>\n" for c in classpaths)
    files = {
        "pom.xml": _POM.format(
            artifact="kafka",
            parent="",
            packaging="pom",
            body=f"  <modules>\n{modules}  </modules>\n" + _BUILD.format(DEPENDENCY_PLUGIN),
            about="Real Apache Kafka for the sandbox (remediate/sandbox/real/releases.py)",
        )
    }
    for entry in classpaths:
        dependencies = "".join(
            f"    <dependency><groupId>{escape(a.group)}</groupId>"
            f"<artifactId>{escape(a.artifact)}</artifactId>"
            f"<version>{escape(a.version)}</version></dependency>\n"
            for a in entry.artifacts
        )
        files[f"{entry.name}/pom.xml"] = _POM.format(
            artifact=escape(entry.name),
            parent=_PARENT,
            packaging="pom",
            body=f"  <dependencies>\n{dependencies}  </dependencies>\n",
            about=escape(entry.about).replace("--", "- -"),
        )
    return files


_POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- {about}. Written by remediate sandbox fetch-kafka. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
{parent}  <groupId>remediate.lab</groupId>
  <artifactId>{artifact}</artifactId>
  <version>1</version>
  <packaging>{packaging}</packaging>
{body}</project>
"""
_PARENT = """  <parent>
    <groupId>remediate.lab</groupId>
    <artifactId>kafka</artifactId>
    <version>1</version>
  </parent>
"""
_BUILD = """  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>{}</version>
          <configuration>
            <includeScope>runtime</includeScope>
            <outputDirectory>${{kafka.jars}}/${{project.artifactId}}</outputDirectory>
          </configuration>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
"""


def fetch(classpaths: Sequence[Classpath] | None = None, *, mvn: str | None = None) -> list[str]:
    """Fetch every classpath of `classpaths` (by default `default_classpaths()`) not complete
    in the cache; return the names fetched. Nothing is fetched when all are complete. A
    failure leaves complete entries as they were and raises SandboxError naming the artifact
    Maven could not get."""
    cache = jars_dir()
    wanted = tuple(classpaths) if classpaths is not None else default_classpaths()
    todo = [c for c in wanted if problem(cache / c.name, verify=True) is not None]
    if not todo:
        return []
    maven = mvn or shutil.which("mvn")
    if maven is None:
        raise SandboxError("mvn is not installed: `make setup` installs Debian's maven")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as staging:
        pom_dir = Path(staging) / "project"
        for relative, text in project(todo).items():
            path = pom_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        result = subprocess.run(
            [
                maven,
                "-B",
                "-q",
                "-f",
                str(pom_dir / "pom.xml"),
                "dependency:copy-dependencies",
                f"-Dkafka.jars={staging}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            output = result.stdout + result.stderr
            missing = missing_artifacts(output)
            errors = [line for line in output.splitlines() if "[ERROR]" in line][:5]
            said = ", ".join(missing) if missing else "\n".join(errors) or output[-2000:]
            raise SandboxError(f"Maven could not fetch real Kafka's jars: {said}")
        for entry in todo:
            _write_manifest(Path(staging) / entry.name)
        for entry in todo:
            target = cache / entry.name
            if target.exists():
                shutil.rmtree(target)
            (Path(staging) / entry.name).rename(target)
    return [c.name for c in todo]
