"""The command line's layout: command modules share cli.common and never import one another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import remediate.cli

CLI = Path(remediate.cli.__file__).parent
COMMAND_MODULES = sorted(
    path.stem for path in CLI.glob("*.py") if path.stem not in ("__init__", "common")
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_a_command_module_imports_no_other_command_module(module: str) -> None:
    others = {f"remediate.cli.{name}" for name in COMMAND_MODULES if name != module}
    imported = imported_modules(CLI / f"{module}.py")
    forbidden = imported & (others | {"remediate.cli"})
    assert not forbidden, sorted(forbidden)


def test_common_imports_no_command_module() -> None:
    imported = imported_modules(CLI / "common.py")
    assert not {m for m in imported if m.startswith("remediate.cli")}
