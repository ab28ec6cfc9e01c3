"""Fixtures of the collect tests: the toolsets (sh, find and awk) an inventory runs with, and a
real ZooKeeper."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from remediate.sandbox.plumbing import process, zkserver


@dataclass(frozen=True)
class Toolset:
    """Which sh/find/awk the command runs with: links put first on PATH."""

    name: str
    links: dict[str, str] = field(default_factory=dict)


def _toolsets() -> list[Toolset]:
    found = [Toolset("system")]
    for awk in ("mawk", "gawk", "original-awk"):
        path = shutil.which(awk)
        if path:
            found.append(Toolset(awk, {"awk": path}))
    busybox = shutil.which("busybox")
    if busybox:
        found.append(Toolset("busybox-awk", {"awk": busybox}))
        found.append(
            Toolset("busybox-sh-find-awk", {"sh": busybox, "find": busybox, "awk": busybox})
        )
    return found


TOOLSETS = _toolsets()


def _env(toolset: Toolset, bin_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    if toolset.links:
        bin_dir = bin_root / toolset.name
        bin_dir.mkdir(parents=True, exist_ok=True)
        for tool, target in toolset.links.items():
            link = bin_dir / tool
            if not link.exists():
                link.symlink_to(target)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    # The command prefers mawk when there is one; pin the awk under test.
    env["REMEDIATE_AWK"] = "awk"
    return env


@pytest.fixture(scope="module", params=TOOLSETS, ids=[t.name for t in TOOLSETS])
def tool_env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    return _env(request.param, tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A ZooKeeper of the module's own: its connect string and its pid."""
    directory = tmp_path_factory.mktemp("zk")
    port = zkserver.free_port()
    zkserver.write_config(directory, "127.0.0.1", port)
    pid = zkserver.start(directory, "127.0.0.1", port)
    yield f"127.0.0.1:{port}", pid
    process.terminate(pid, "QuorumPeerMain", timeout=10)
