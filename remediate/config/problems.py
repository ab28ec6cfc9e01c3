"""How cluster.yaml's problems are recorded and reported.

Validators raise `problems(...)` (or call `fail(...)`): a pydantic error that carries one or more
(location, expected, got) items. `problems_of` turns the `ValidationError` pydantic then raises
into `ConfigProblem`s, converting pydantic's own errors (wrong type, missing or unknown key) into
the same wording. `ClusterConfigError` prints them one a line, each naming the file and the
dotted field path:

    cluster.yaml: brokers[1].log_dirs[0]: expected an absolute path, got 'data'

Input is shown only through `show`, which keeps it short and printable; values under a secret
key are never shown.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from remediate.errors import ConfigError

MAX_REPORTED_PROBLEMS = 50

_GOT_LIMIT = 80
_PROBLEM_TYPE = "remediate_config"
_SECRET_KEYS = frozenset({"password"})  # fields whose input is never echoed in a message
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Loc = tuple[str | int, ...]
# One problem as a validator raises it: (location relative to the value, expected, got).
Item = tuple[Loc, str, str | None]


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a configuration: where (`field`), what was `expected`, and a short
    printable rendering of what was found (`got`, None when it is absent or must not be shown).

    `field` is a dotted path with list indexes (`brokers[1].log_dirs[0]`), a position in the
    file (`line 3, column 7`), or "" for the file as a whole.
    """

    field: str
    expected: str
    got: str | None = None

    def __str__(self) -> str:
        text = f"expected {self.expected}"
        if self.got is not None:
            text += f", got {self.got}"
        return f"{self.field}: {text}" if self.field else text


class ClusterConfigError(ConfigError):
    """cluster.yaml is not valid; `problems` lists every problem found, the message one a line."""

    def __init__(self, source: str, problems: Sequence[ConfigProblem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = [f"{source}: {problem}" for problem in self.problems[:MAX_REPORTED_PROBLEMS]]
        hidden = len(self.problems) - MAX_REPORTED_PROBLEMS
        if hidden > 0:
            lines.append(f"{source}: ... and {hidden} more problems")
        super().__init__("\n".join(lines))


def problems(items: Sequence[Item]) -> PydanticCustomError:
    """A validation error carrying `items`, each (location relative to the value, expected, got)."""
    return PydanticCustomError(
        _PROBLEM_TYPE, "{summary}", {"summary": items[0][1], "problems": tuple(items)}
    )


def fail(expected: str, got: str | None = None, *, at: Loc = ()) -> NoReturn:
    raise problems([(at, expected, got)])


def show(value: object) -> str:
    """A short rendering of untrusted input for a message (never its secrets: see callers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) >= 10**40:
            return "a very large integer"
        return repr(value)
    if isinstance(value, (str, float)):
        text = repr(value)
        if len(text) > _GOT_LIMIT:
            text = text[: _GOT_LIMIT - 3] + "..."
        return text
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a value of type {type(value).__name__}"


def field_path(loc: Loc) -> str:
    """`brokers[1].log_dirs[0]`; a key that is not an identifier is shown quoted in brackets."""
    parts: list[str] = []
    for segment in loc:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _IDENTIFIER.fullmatch(segment):
            parts.append(f".{segment}" if parts else segment)
        else:
            parts.append(f"[{show(segment)}]")
    return "".join(parts)


# -- turning pydantic's errors into problems ---------------------------------------------------


_TYPE_EXPECTATIONS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "tuple_type": "a list",
    "list_type": "a list",
    "recursion_loop": "a value that does not contain itself",
}


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The model class inside an annotation such as `X | None` or `tuple[X, ...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _known_keys(root: type[BaseModel], loc: Loc) -> tuple[str, ...]:
    model = root
    for segment in loc:
        if isinstance(segment, int):
            continue
        info = model.model_fields.get(segment)
        found = _model_in(info.annotation) if info is not None else None
        if found is None:
            return ()
        model = found
    return tuple(model.model_fields)


def _unknown_key(root: type[BaseModel], loc: Loc) -> ConfigProblem:
    key = loc[-1]
    known = _known_keys(root, loc[:-1])
    close = difflib.get_close_matches(str(key), known, n=1)
    if close:
        expected = f"a known key (did you mean {close[0]!r}?)"
    else:
        expected = "one of the keys " + ", ".join(known) if known else "no key here"
    return ConfigProblem(field_path(loc), expected, f"unknown key {show(key)}")


def _convert(root: type[BaseModel], error: dict[str, Any]) -> Iterator[ConfigProblem]:
    loc: Loc = tuple(error["loc"])
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind == _PROBLEM_TYPE:
        for relative, expected, got in context["problems"]:
            yield ConfigProblem(field_path(loc + tuple(relative)), expected, got)
        return
    if kind == "extra_forbidden":
        yield _unknown_key(root, loc)
        return
    if kind == "invalid_key":
        yield ConfigProblem(
            field_path(loc[:-1]), "keys that are strings", f"key {show(error['input'])}"
        )
        return
    if kind == "missing":
        yield ConfigProblem(field_path(loc), "a value for this required key")
        return
    if kind == "literal_error":
        expected = str(context.get("expected", "one of the allowed values"))
    elif kind in _TYPE_EXPECTATIONS:
        expected = _TYPE_EXPECTATIONS[kind]
    else:
        message = str(error["msg"])
        expected = message.removeprefix("Input should be ") if message else kind
    secret = any(segment in _SECRET_KEYS for segment in loc)
    yield ConfigProblem(field_path(loc), expected, None if secret else show(error["input"]))


def problems_of(error: ValidationError, root: type[BaseModel]) -> list[ConfigProblem]:
    """Every problem in `error`, raised validating `root`; `root`'s fields are what an unknown
    key is compared with to suggest the key that was meant."""
    return [
        problem
        for item in error.errors(include_url=False)
        for problem in _convert(root, dict(item))
    ]
