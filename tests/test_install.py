"""The wheel as operators install it: under the project's distribution name, with the
`remediate` package and command, and its playbooks found however it is installed (a venv is
tests/scan/test_scan_sandbox.py's core install; here `pip install --prefix` and `--user`).
Each install holds the wheel alone; its dependencies come from this environment, linked
(tests/core_install.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import core_install

PLAYBOOKS = [
    "move-replicas",
    "restore-zk-topic-id",
    "rolling-restart",
    "topicid-mismatch",
    "topicid-mismatch-both-files",
]
PROBE = (
    "import remediate, remediate.playbook as p; print(remediate.__file__);"
    " print(' '.join(sorted(p.available())))"
)
PIP = ["-m", "pip", "--disable-pip-version-check", "-q"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return core_install.build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def dependencies(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("dependencies") / "site"
    core_install.link_site(core_install.closure(core_install.wheel_requirements(wheel)), site)
    return site


def run(command: list[str], cwd: Path, **env: str) -> str:
    """`command` in `cwd` (not the checkout, whose `remediate/` a `python -c` would import)."""
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_the_wheel_is_named_for_the_project_and_ships_its_playbooks(wheel: Path) -> None:
    assert wheel.name.startswith("kafka_topicid_remediate-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert {n for n in names if n.startswith("remediate/playbooks/")} == {
        f"remediate/playbooks/{name}.yaml" for name in PLAYBOOKS
    }
    assert not [n for n in names if ".data/data/" in n]  # nothing outside the package
    requirements = {
        r.name: str(r.specifier)
        for r in core_install.wheel_requirements(wheel)
        if r.marker is None  # the package's own, not an extra's
    }
    assert requirements["kafka-python"] == "<4,>=3.0"
    assert all("<" in spec for spec in requirements.values()), requirements


def test_an_install_with_prefix_finds_its_playbooks(
    wheel: Path, dependencies: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "prefix"
    # --ignore-installed: pip would otherwise uninstall this environment's own install of the
    # project (the checkout's) before installing it under the prefix.
    install = [
        *PIP,
        "install",
        "--no-deps",
        "--no-index",
        "--ignore-installed",
        "--prefix",
        str(prefix),
        str(wheel),
    ]
    run([sys.executable, *install], tmp_path)
    (site,) = prefix.glob("lib/python3*/site-packages")
    # -S: none of this environment's site-packages (the checkout's editable install).
    probe = [sys.executable, "-S", "-c", PROBE]
    where, found = run(probe, tmp_path, PYTHONPATH=f"{site}{os.pathsep}{dependencies}").split("\n")[
        :2
    ]
    assert where.startswith(str(site)) and found.split() == PLAYBOOKS


def test_a_user_install_finds_its_playbooks_and_runs_its_command(
    wheel: Path, dependencies: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"  # user installs are allowed only where the user site is seen
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    base = tmp_path / "user"
    env = {"PYTHONUSERBASE": str(base), "PYTHONPATH": str(dependencies)}
    install = [*PIP, "install", "--user", "--no-deps", "--no-index", str(wheel)]
    run([python, *install], tmp_path, **env)
    where, found = run([python, "-c", PROBE], tmp_path, **env).split("\n")[:2]
    assert where.startswith(str(base)) and found.split() == PLAYBOOKS
    command = str(base / "bin" / "remediate")
    assert run([command, "--version"], tmp_path, **env).startswith("remediate, ")
