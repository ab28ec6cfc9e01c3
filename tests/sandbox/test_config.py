"""server.properties for sandbox brokers: writing, reading back, and refusing bad files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from remediate.errors import ConfigError
from remediate.formats.properties import load_properties
from remediate.sandbox.emulated.config import (
    SANDBOX_DEFAULTS,
    BrokerSettings,
    read_server_properties,
    write_server_properties,
)

EXTRA = {
    "inter.broker.protocol.version": "2.7",  # overrides the sandbox default
    "num.partitions": "4",
    "log.message.format.version": "2.7",
    "sandbox.note": "value with = and : and # and a trailing space ",
}


def _settings(tmp_path: Path, **overrides: object) -> BrokerSettings:
    values: dict[str, object] = {
        "broker_id": 3,
        "host": "127.0.0.3",
        "port": 19093,
        "log_dirs": (tmp_path / "data-0", tmp_path / "data 1"),
        "zookeeper_connect": "127.0.0.1:2181,127.0.0.2:2181/kafka",
        "kafka_version": "3.4",
        "properties": EXTRA,
    }
    values.update(overrides)
    return BrokerSettings(**values)  # type: ignore[arg-type]


def test_write_then_read_round_trips_every_setting(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    written = _settings(tmp_path)
    write_server_properties(path, written)
    read = read_server_properties(path)
    assert read.broker_id == 3
    assert read.host == "127.0.0.3"
    assert read.port == 19093
    assert read.log_dirs == (tmp_path / "data-0", tmp_path / "data 1")
    assert read.zookeeper_connect == "127.0.0.1:2181,127.0.0.2:2181/kafka"
    assert read.kafka_version == "3.4"
    for key, value in EXTRA.items():
        assert read.properties[key] == value
        assert read.get(key) == value
    # Sandbox defaults are written out too, unless overridden.
    for key, value in SANDBOX_DEFAULTS.items():
        assert read.get(key) == EXTRA.get(key, value)
    assert read.get("inter.broker.protocol.version") == "2.7"
    assert not read.uses_topic_ids
    # Writing what was read gives the same file contents, key for key.
    again = tmp_path / "again.properties"
    write_server_properties(again, read)
    assert load_properties(again.read_bytes(), source="again") == load_properties(
        path.read_bytes(), source="path"
    )


def test_changed_fields_win_over_the_keys_read_back_into_properties(tmp_path: Path) -> None:
    # read_server_properties keeps every key in `properties`, broker.id and listeners too;
    # a changed field must still be what the next write puts in the file.
    path = tmp_path / "server.properties"
    write_server_properties(path, _settings(tmp_path))
    read = read_server_properties(path)
    assert read.properties["broker.id"] == "3"
    changed = replace(
        read,
        broker_id=7,
        port=29092,
        log_dirs=(tmp_path / "moved",),
        zookeeper_connect="zk:2181",
        kafka_version="2.8",
    )
    write_server_properties(path, changed)
    again = read_server_properties(path)
    assert (again.broker_id, again.host, again.port) == (7, "127.0.0.3", 29092)
    assert again.log_dirs == (tmp_path / "moved",)
    assert (again.zookeeper_connect, again.kafka_version) == ("zk:2181", "2.8")
    assert again.properties["num.partitions"] == "4"
    # The identifying keys stay at the top of the file, as before.
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    assert lines[0] == "broker.id=7"


def test_the_file_uses_kafkas_keys(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    write_server_properties(path, _settings(tmp_path, properties={}))
    props = load_properties(path.read_bytes(), source=str(path))
    assert props["broker.id"] == "3"
    assert props["listeners"] == "PLAINTEXT://127.0.0.3:19093"
    assert props["log.dirs"] == f"{tmp_path / 'data-0'},{tmp_path / 'data 1'}"
    assert props["zookeeper.connect"] == "127.0.0.1:2181,127.0.0.2:2181/kafka"
    assert props["sandbox.kafka.version"] == "3.4"
    assert props["inter.broker.protocol.version"] == "2.8"


def test_defaults_apply_when_a_key_is_absent(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=1\nlisteners=PLAINTEXT://localhost:9092\nlog.dirs=/var/lib/kafka\n",
        encoding="utf-8",
    )
    read = read_server_properties(path)
    assert read.kafka_version == "2.8"
    assert read.zookeeper_connect == ""
    assert read.log_dirs == (Path("/var/lib/kafka"),)
    assert read.get_int("replica.lag.time.max.ms") == 3000
    assert read.get_bool("controlled.shutdown.enable") is True
    assert read.get_bool("auto.leader.rebalance.enable") is False
    assert read.get("no.such.key") == ""
    assert read.uses_topic_ids  # the default IBP is 2.8


def test_get_int_refuses_a_non_integer(tmp_path: Path) -> None:
    settings = _settings(tmp_path, properties={"replica.lag.time.max.ms": "3s"})
    with pytest.raises(ConfigError, match=r"replica\.lag\.time\.max\.ms.*'3s'"):
        settings.get_int("replica.lag.time.max.ms")


@pytest.mark.parametrize(
    ("ibp", "expected"),
    [
        ("0.10.2", False),
        ("0.10.2-IV0", False),
        ("0.11.0", False),
        ("1.1", False),
        ("2.7", False),
        ("2.7-IV2", False),
        ("2.7.1", False),
        ("2.8", True),
        ("2.8-IV0", True),
        ("2.8-IV1", True),
        ("2.8.2", True),
        ("3.0-IV1", True),
        ("3.4", True),
        ("3.4-IV0", True),
        ("10.0", True),
    ],
)
def test_uses_topic_ids_from_the_inter_broker_protocol(
    tmp_path: Path, ibp: str, expected: bool
) -> None:
    settings = _settings(tmp_path, properties={"inter.broker.protocol.version": ibp})
    assert settings.uses_topic_ids is expected
    path = tmp_path / "server.properties"
    write_server_properties(path, settings)
    assert read_server_properties(path).uses_topic_ids is expected


# -- errors ---------------------------------------------------------------------------------------

VALID = {
    "broker.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "/tmp/kafka-logs",
    "zookeeper.connect": "127.0.0.1:2181",
    "sandbox.kafka.version": "2.8",
}


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"broker.id": None}, "broker.id"),
        ({"broker.id": "one"}, "broker.id"),
        ({"broker.id": "1.5"}, "broker.id"),
        ({"listeners": None}, "listeners"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        ({"listeners": "PLAINTEXT://127.0.0.1"}, "listeners"),
        ({"listeners": "PLAINTEXT://127.0.0.1:port"}, "listeners"),
        ({"listeners": "PLAINTEXT://:9092"}, "listeners"),
        ({"log.dirs": None}, "log.dirs"),
        ({"log.dirs": ""}, "log.dirs"),
        ({"log.dirs": " , ,"}, "log.dirs"),
        ({"sandbox.kafka.version": "3.5"}, "sandbox.kafka.version"),
        ({"sandbox.kafka.version": ""}, "sandbox.kafka.version"),
    ],
)
def test_read_errors_name_the_file_and_the_key(
    tmp_path: Path, changes: dict[str, str | None], key: str
) -> None:
    values = {**VALID, **changes}
    path = tmp_path / "broker-1" / "server.properties"
    path.parent.mkdir()
    path.write_text(
        "".join(f"{k}={v}\n" for k, v in values.items() if v is not None), encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        read_server_properties(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {key}: expected")


def test_the_valid_base_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in VALID.items()), encoding="utf-8")
    read = read_server_properties(path)
    assert (read.broker_id, read.host, read.port) == (1, "127.0.0.1", 9092)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "server.properties"
    with pytest.raises(ConfigError, match=f"{path}: cannot read"):
        read_server_properties(path)
