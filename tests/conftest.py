"""Shared fixtures. Sandbox clusters are started and stopped by the tests themselves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from remediate.sandbox import cluster


@pytest.fixture
def sandbox_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for one sandbox; whatever was started in it is stopped afterwards."""
    directory = tmp_path / "sandbox"
    yield directory
    if (directory / cluster.STATE_FILE).exists():
        cluster.down(directory)


@pytest.fixture
def sandbox(sandbox_dir: Path) -> cluster.SandboxState:
    """A running three-broker sandbox (Kafka 2.8 emulation)."""
    return cluster.up(sandbox_dir)
