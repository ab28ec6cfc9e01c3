"""The options reference in docs/commands.md and docs/sandbox.md, generated from the command
line itself: every command, every option, its help and its default, between marker lines.

`tests/cli/test_options_reference.py` fails when a document's reference is not the one the
commands give; `.venv/bin/python -m tests.cli.options_reference` writes them again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from remediate.cli import cli

DOCS = Path(__file__).resolve().parents[2] / "docs"
START = "<!-- options:start -->"
END = "<!-- options:end -->"
# The sandbox's commands are documented with the sandbox; every other command in commands.md.
PAGES = {
    "commands.md": lambda path: path[0] != "sandbox",
    "sandbox.md": lambda path: path[0] == "sandbox",
}


def commands(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under `group`, groups included, in the order `--help` lists them."""
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None:
            raise LookupError(f"{' '.join((*prefix, name))}: listed but not found")
        path = (*prefix, name)
        yield path, command
        if isinstance(command, click.Group):
            yield from commands(command, path)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option(parameter: click.Option) -> tuple[str, str, str]:
    names = ", ".join(f"`{n}`" for n in (*parameter.opts, *parameter.secondary_opts))
    if parameter.metavar:
        names += f" `{parameter.metavar}`"
    elif not parameter.is_flag and isinstance(parameter.type, click.Choice):
        names += " " + " or ".join(f"`{c}`" for c in parameter.type.choices)
    elif not parameter.is_flag:
        names += f" `{parameter.type.name.upper()}`"
    what = _cell(parameter.help or "")
    if parameter.required:
        what = f"Required. {what}".strip()
    if parameter.multiple and "repeat" not in what:
        what = f"{what} (repeatable)".strip()
    default = ""
    if parameter.show_default and parameter.default not in (None, False, ()):
        default = f"`{parameter.default}`"
    return names, what, default


def render(wanted: object) -> str:
    """The reference of the commands whose path `wanted` accepts."""
    lines: list[str] = []
    for path, command in commands(cli):
        if not wanted(path):  # type: ignore[operator]
            continue
        options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        usage = " ".join(["remediate", *path, *(a.human_readable_name for a in arguments)])
        lines += [f"#### `{usage}`", "", _cell((command.help or "").split("\n\n")[0]), ""]
        if isinstance(command, click.Group):
            continue
        if not options:
            lines += ["No options.", ""]
            continue
        lines += ["| option | what it does | default |", "|---|---|---|"]
        lines += ["| " + " | ".join(_option(o)) + " |" for o in options]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def replace_reference(document: str, reference: str) -> str:
    if document.count(START) != 1 or document.count(END) != 1:
        raise ValueError(f"the document must hold exactly one {START} and one {END} line")
    head, rest = document.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference}\n{END}{tail}"


def current(document: str) -> str:
    return document.split(START, 1)[1].split(END, 1)[0].strip("\n")


def main() -> None:
    for page, wanted in PAGES.items():
        path = DOCS / page
        path.write_text(replace_reference(path.read_text(encoding="utf-8"), render(wanted)))
        print(f"{path}: options reference written")


if __name__ == "__main__":
    main()
