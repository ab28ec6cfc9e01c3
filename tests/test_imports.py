"""The package's import graph: no cycle, no private name taken from another module, and the
layers of docs/development.md (collect -> scan -> plan -> gates -> execute -> cli; the
sandbox is the emulator and imports nothing of execute or cli)."""

from __future__ import annotations

import ast
from pathlib import Path

import remediate

ROOT = Path(remediate.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every `from module import name`, (module, None) for `import module`,
    within remediate; relative imports resolved."""
    found: list[tuple[str, str | None]] = []
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                found.append((base, alias.name))
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
    return [(m, n) for m, n in found if m == "remediate" or m.startswith("remediate.")]


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, imported in imports(path):
            target = f"{module}.{imported}" if f"{module}.{imported}" in MODULES else module
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def test_no_import_cycle() -> None:
    graph = edges()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_no_private_name_is_imported_from_another_module() -> None:
    private = [
        f"{name} imports {module}.{imported}"
        for name, path in MODULES.items()
        for module, imported in imports(path)
        if imported is not None
        and imported.startswith("_")
        and not imported.endswith("__")  # __version__ and its kind are public
        and module != name
    ]
    assert private == []


LOWER_MAY_NOT_IMPORT = {
    "remediate.collect": ("remediate.scan", "remediate.plan", "remediate.execute", "remediate.cli"),
    "remediate.scan": ("remediate.plan", "remediate.execute", "remediate.cli"),
    "remediate.plan": ("remediate.execute", "remediate.cli", "remediate.workflows"),
    "remediate.execute": ("remediate.cli", "remediate.workflows"),
    "remediate.sandbox": ("remediate.execute", "remediate.cli", "remediate.workflows"),
    "remediate.formats": (
        "remediate.collect",
        "remediate.scan",
        "remediate.plan",
        "remediate.execute",
    ),
}


def test_the_layers() -> None:
    wrong = [
        f"{name} imports {target}"
        for name, targets in edges().items()
        for layer, forbidden in LOWER_MAY_NOT_IMPORT.items()
        if name == layer or name.startswith(f"{layer}.")
        for target in targets
        if any(target == f or target.startswith(f"{f}.") for f in forbidden)
    ]
    assert wrong == []


# The sandbox's rooms (remediate/sandbox/__init__.py): each imports the plumbing and the
# client's records, never another room; the migration runs real Kafka.
SANDBOX = "remediate.sandbox"
ROOMS = {
    f"{SANDBOX}.plumbing": (),
    f"{SANDBOX}.emulated": (f"{SANDBOX}.plumbing", f"{SANDBOX}.records"),
    f"{SANDBOX}.real": (f"{SANDBOX}.plumbing", f"{SANDBOX}.records"),
    f"{SANDBOX}.migration": (f"{SANDBOX}.plumbing", f"{SANDBOX}.real", f"{SANDBOX}.cluster"),
}


def test_the_sandbox_rooms() -> None:
    wrong = [
        f"{name} imports {target}"
        for name, targets in edges().items()
        for room, allowed in ROOMS.items()
        if name == room or name.startswith(f"{room}.")
        for target in targets
        if target.startswith(f"{SANDBOX}.")
        and not (target == room or target.startswith(f"{room}."))
        and not any(target == a or target.startswith(f"{a}.") for a in allowed)
    ]
    assert wrong == []
    # Every room is a package of its own, and every module of the sandbox lives in one of
    # them or at the sandbox's top.
    assert {name for name in MODULES if name.count(".") == 2 and name.startswith(SANDBOX)} >= set(
        ROOMS
    )
