"""Real Apache Kafka's jars, from Maven Central, cached once for the sandbox.

`lab/kafka/pom.xml` names three classpaths that must never share a JVM (their kafka-clients,
ZooKeeper and Scala versions conflict): the 2.8.2 and 3.4.1 brokers, and Kafka 1.0.2's tools,
the pre-2.8 client whose `TopicCommand --zookeeper --alter` drops the topic id. `fetch`
resolves them with Maven into `<jars>/<name>/` and writes a manifest (each jar's size and
sha256) once everything arrived; a directory without a matching manifest is incomplete and
is fetched again, anything complete is never fetched again.

Where: `$REMEDIATE_KAFKA_JARS`, else `lab/kafka/jars/` in the source tree (ignored by git);
the POMs: `$REMEDIATE_KAFKA_LAB`, else `lab/kafka/`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from remediate.errors import SandboxError

BROKER_2_8 = "broker-2.8.2"
BROKER_3_4 = "broker-3.4.1"
LEGACY_CLIENT = "legacy-client-1.0.2"
CLASSPATHS = (BROKER_2_8, BROKER_3_4, LEGACY_CLIENT)
MANIFEST = "MANIFEST.json"
_SOURCE_TREE = Path(__file__).resolve().parents[2]


def lab_dir() -> Path:
    """The Maven project (`lab/kafka/pom.xml` and one module per classpath)."""
    configured = os.environ.get("REMEDIATE_KAFKA_LAB")
    return Path(configured) if configured else _SOURCE_TREE / "lab" / "kafka"


def jars_dir() -> Path:
    configured = os.environ.get("REMEDIATE_KAFKA_JARS")
    return Path(configured) if configured else lab_dir() / "jars"


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
        raise SandboxError(
            f"real Kafka's jars ({name}) are not fetched: {reason}; run"
            " `remediate sandbox fetch-kafka` (make setup does)"
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


def fetch(*, mvn: str | None = None) -> list[str]:
    """Fetch every classpath not complete in the cache; return the names fetched. Nothing is
    fetched when all are complete. A failure leaves complete entries as they were and raises
    SandboxError naming the artifact Maven could not get."""
    cache = jars_dir()
    todo = [name for name in CLASSPATHS if problem(cache / name, verify=True) is not None]
    if not todo:
        return []
    maven = mvn or shutil.which("mvn")
    if maven is None:
        raise SandboxError("mvn is not installed: `make setup` installs Debian's maven")
    pom = lab_dir() / "pom.xml"
    if not pom.exists():
        raise SandboxError(f"{pom}: missing (the Maven project of real Kafka's jars)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as staging:
        result = subprocess.run(
            [
                maven,
                "-B",
                "-q",
                "-f",
                str(pom),
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
        for name in todo:
            _write_manifest(Path(staging) / name)
        for name in todo:
            target = cache / name
            if target.exists():
                shutil.rmtree(target)
            (Path(staging) / name).rename(target)
    return todo
