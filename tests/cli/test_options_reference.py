"""Every option of every command is in the docs as `--help` gives it (options_reference.py)."""

from __future__ import annotations

import click
import pytest

from remediate.cli import cli
from tests.cli.options_reference import DOCS, PAGES, commands, current, render


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_options_reference_is_the_one_the_commands_give(page: str) -> None:
    document = (DOCS / page).read_text(encoding="utf-8")
    assert current(document) == render(PAGES[page]), (
        f"docs/{page}'s options reference is out of date with the commands:"
        " run `.venv/bin/python -m tests.cli.options_reference`"
    )


def test_every_command_and_option_says_what_it_does() -> None:
    silent = [
        " ".join((*path, *(p.opts if isinstance(p, click.Option) else ())))
        for path, command in commands(cli)
        for p in (None, *command.params)
        if (p is None and not command.help)
        or (isinstance(p, click.Option) and not p.hidden and not p.help)
    ]
    assert silent == [], f"no help text: {silent}"


def test_the_reference_covers_every_command_and_option() -> None:
    text = render(PAGES["commands.md"]) + render(PAGES["sandbox.md"])
    for path, command in commands(cli):
        assert f"`remediate {' '.join(path)}" in text
        for parameter in command.params:
            for name in parameter.opts:
                if name.startswith("-"):
                    assert f"`{name}`" in text, f"{' '.join(path)} {name}"
