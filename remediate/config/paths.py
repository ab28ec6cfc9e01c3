"""Paths in cluster.yaml: on this machine (`LocalPath`) and on the brokers (`RemotePath`).

A local path (ssh key, known_hosts, TLS and password files, the journal) has `~` expanded and,
when relative, is taken from the directory that holds cluster.yaml. A path on a broker must be
absolute, except on a broker with transport local, which is this machine: there a relative one
is taken from cluster.yaml's directory too. Whether a broker is local is known only once the
whole broker is read, so `RemotePath` checks the text and `broker_paths` the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath, PurePosixPath
from typing import Annotated

from pydantic import BeforeValidator, ValidationInfo

from remediate.config.fields import CONTROL, context, text
from remediate.config.problems import Item, Loc, fail, problems, show

RELATIVE_ON_LOCAL = "an absolute path (a relative one only on a broker with transport local)"
RELATIVE_ALL_LOCAL = "an absolute path (a relative one only when every broker has transport local)"


def _remote_path(value: object) -> PurePosixPath:
    """A path on a broker: absolute, or relative for brokers this machine reaches with
    transport local (`broker_paths` resolves those against cluster.yaml's directory)."""
    if isinstance(value, PurePosixPath):  # a default
        return value
    expected = "an absolute path"
    given = text(value, expected)
    if given.strip() == "":
        fail(expected, show(given))
    if CONTROL.search(given):
        fail(expected + " without control characters", show(given))
    path = PurePosixPath(given)
    if ".." in path.parts:
        fail(expected + " without '..'", show(given))
    if path == PurePosixPath("/"):
        fail(expected + " other than '/'", show(given))
    return path


def broker_paths(
    located: Sequence[tuple[Loc, PurePosixPath]],
    local: bool,
    base_dir: Path,
    expected: str = RELATIVE_ON_LOCAL,
) -> tuple[PurePosixPath, ...]:
    """Each (location, path) made absolute: a relative path on a local broker is a path on this
    machine, taken from cluster.yaml's directory like every other local path; on an ssh broker
    it is an error, one problem per such path at its location."""
    if local:
        return tuple(PurePosixPath(base_dir / path) for _, path in located)
    found: list[Item] = [
        (at, expected, show(str(path))) for at, path in located if not path.is_absolute()
    ]
    if found:
        raise problems(found)
    return tuple(path for _, path in located)


def _local_path(value: object, info: ValidationInfo) -> Path:
    """A path on this machine; relative ones are taken from cluster.yaml's directory."""
    expected = "a path"
    if isinstance(value, PurePath):
        value = str(value)
    given = text(value, expected)
    if given == "":
        fail(expected, "an empty string")
    if CONTROL.search(given):
        fail(expected + " without control characters", show(given))
    try:
        path = Path(given).expanduser()
    except (RuntimeError, KeyError, ValueError, OSError):
        fail(expected + " whose '~' names a known home directory", show(given))
    if not path.is_absolute():
        path = context(info).base_dir / path
    return path


RemotePath = Annotated[PurePosixPath, BeforeValidator(_remote_path)]
LocalPath = Annotated[Path, BeforeValidator(_local_path)]
