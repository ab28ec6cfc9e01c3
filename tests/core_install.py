"""An operator's install of the project's wheel, made in seconds: a new venv holding the wheel
(installed by pip, without its dependencies) and, on a path of its own, exactly the
distributions the wheel's metadata requires without extras, taken from this environment as
symlinks (no download, no copy: pip installing them from an index takes a minute or more on
the suite's two cores). `pip check` in the new venv then holds them to the wheel's version
specifiers, and nothing of the dev, test or spark extras is there to import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = Path(__file__).resolve().parents[1]
# What the source archive holds (pyproject.toml, MANIFEST): the wheel is built from a copy
# of it, so that the checkout gets no build/ directory.
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "remediate")


def build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        if (PROJECT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(PROJECT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(PROJECT / name, source / name)
    wheels = tmp / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("kafka_topicid_remediate-*.whl")
    return wheel


def wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(archive.read(name).decode("utf-8"))
    return [Requirement(r) for r in message.get_all("Requires-Dist") or []]


def closure(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution the requirements need, without extras but those named
    (`kazoo[sasl]`), transitively."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(r, "") for r in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(requirement.name)
        dist = metadata.distribution(requirement.name)
        first = key not in found
        found[key] = dist
        extras = [""] if first else []
        extras += sorted(requirement.extras)
        for nested in extras:
            todo += [(Requirement(r), nested) for r in dist.requires or []]
    return found


def link_site(dists: dict[str, metadata.Distribution], site: Path) -> None:
    """Each distribution's top-level entries (packages, modules, its .dist-info), linked."""
    site.mkdir()
    for dist in dists.values():
        root = Path(str(dist.locate_file("")))
        parts = [Path(str(f)).parts for f in dist.files or []]
        tops = {p[0] for p in parts if ".." not in p and p[0] != "__pycache__"}
        for top in tops:
            link = site / top
            if not link.exists() and (root / top).exists():
                link.symlink_to(root / top)


def install(tmp: Path) -> Path:
    """The wheel built and installed in a new venv (tmp/venv) as described above; its bin."""
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = tmp / "core-site"
    link_site(closure(wheel_requirements(wheel)), site)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (Path(purelib) / "core-site.pth").write_text(f"{site}\n")
    checked = subprocess.run(
        [*pip, "check"], capture_output=True, text=True, check=False, timeout=120
    )
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    return venv / "bin"
