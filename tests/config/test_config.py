"""cluster.yaml: the validated model, its loader, and the messages every problem produces."""

from __future__ import annotations

import copy
import math
import os
import pickle
import re
import traceback
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError

from remediate.config import (
    MAX_FILE_BYTES,
    MAX_REPORTED_PROBLEMS,
    ClusterConfig,
    ClusterConfigError,
    ClusterTimeouts,
    ConfigProblem,
    SshTarget,
    load_cluster_config,
    parse_cluster_config,
)
from remediate.errors import ConfigError

SOURCE = "cluster.yaml"
BASE = Path("/srv/remediate")
SENTINEL = "s3cr3t-SENTINEL-do-not-print"
ENV = {"ZK_PASSWORD": SENTINEL + "-zk", "SSH_KEY_PASSPHRASE": SENTINEL + "-ssh"}
DELETE = object()
# One row of the fault table (docs/faults.md), proved by the field rules and by the fuzzed file.
MALFORMED_CLUSTER_YAML = pytest.mark.fault(
    "Bad input",
    "cluster.yaml that is malformed or hostile: not YAML, arbitrary bytes (fuzzed), an unknown"
    " key, a wrong type, a relative log dir on an ssh broker, shell metacharacters or a newline in"
    " a host or a service command",
    "Refused when loaded, before anything is contacted: one line per problem naming the file,"
    " the field and what was expected; never another exception",
)

QUICK = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

FULL: dict[str, Any] = {
    "cluster": "prod-eu-1",
    "zookeeper": {
        "connect": "zk1:2181,zk2.example.com:2181,[::1]:2182/kafka/prod",
        "session_timeout_s": 15,
        "auth": {"scheme": "digest", "username": "kafka", "password_env": "ZK_PASSWORD"},
        "tls": {
            "ca_file": "./ca.pem",
            "cert_file": "tls/client.pem",
            "key_file": "tls/client.key",
            "verify_hostname": False,
        },
    },
    "brokers": [
        {"id": 1, "host": "kafka1.example.com", "log_dirs": ["/var/lib/kafka/data"]},
        {
            "id": 2,
            "host": "kafka2.example.com",
            "transport": "ssh",
            "ssh_port": 2222,
            "ssh_user": "ops",
            "sudo": True,
            "log_dirs": ["/data/a", "/data/b"],
            "state_change_log": "/var/log/kafka/state-change.log",
        },
        {
            "id": 3,
            "host": "10.0.0.3",
            "transport": "local",
            "server_properties": "/etc/kafka/server.properties",
        },
    ],
    "ssh": {
        "user": "kafka",
        "port": 22,
        "key_file": "~/.ssh/id_ed25519",
        "key_passphrase_env": "SSH_KEY_PASSPHRASE",
        "known_hosts": "~/.ssh/known_hosts",
        "connect_timeout_s": 5,
        "sudo": False,
    },
    "service": {
        "stop": "systemctl stop kafka  # broker {broker_id} on {host}",
        "start": "systemctl start kafka",
        "status": "systemctl is-active kafka",
    },
    "min_insync_replicas_default": 2,
    "backup_dir": "/var/backups/remediate",
    "journal_dir": "./journal",
    "spark": {
        "master": "spark://m1:7077,m2:7077",
        "conf": {"spark.executor.memory": "2g", "spark.executor.cores": 2},
    },
}

RELATIVE_ON_SSH = "an absolute path (a relative one only on a broker with transport local)"
RELATIVE_WITH_SSH = "an absolute path (a relative one only when every broker has transport local)"

MINIMAL: dict[str, Any] = {
    "cluster": "c",
    "zookeeper": {"connect": "zk:2181"},
    "brokers": [{"id": 0, "host": "b0", "transport": "local", "log_dirs": ["/d"]}],
    "service": {"stop": "stop", "start": "start"},
}

# The shape `remediate sandbox up` writes (remediate/sandbox/cluster.py, write_cluster_yaml).
SANDBOX_LOCAL: dict[str, Any] = {
    "cluster": "sandbox-s1",
    "zookeeper": {"connect": "127.0.0.1:38027", "session_timeout_s": 10},
    "brokers": [
        {
            "id": 1,
            "host": "127.0.0.11",
            "transport": "local",
            "log_dirs": ["/tmp/sb1/broker-1/data-0", "/tmp/sb1/broker-1/data-1"],
        }
    ],
    "service": {
        "stop": "/x/.venv/bin/remediate sandbox broker stop --id {broker_id} --dir /tmp/sb1",
        "start": "/x/.venv/bin/remediate sandbox broker start --id {broker_id} --dir /tmp/sb1",
        "status": "/x/.venv/bin/remediate sandbox broker status --id {broker_id} --dir /tmp/sb1",
    },
    "min_insync_replicas_default": 1,
    "backup_dir": "/tmp/sb1/backups",
    "journal_dir": "/tmp/sb1/journal",
    "spark": {"master": "local[2]"},
}


def sandbox_ssh() -> dict[str, Any]:
    document = copy.deepcopy(SANDBOX_LOCAL)
    document["brokers"] = [
        {
            "id": broker_id,
            "host": f"127.0.0.{10 + broker_id}",
            "transport": "ssh",
            "log_dirs": [f"/tmp/sb1/broker-{broker_id}/data-0"],
            "ssh_port": 42000 + broker_id,
        }
        for broker_id in (1, 2, 3)
    ]
    document["ssh"] = {
        "user": "root",
        "key_file": "/tmp/sb1/ssh/id_ed25519",
        "known_hosts": "/tmp/sb1/ssh/known_hosts",
    }
    return document


def changed(document: Mapping[str, Any], path: tuple[str | int, ...], value: object) -> Any:
    """A deep copy of `document` with the value at `path` replaced (or removed: DELETE)."""
    result = copy.deepcopy(document)
    parent: Any = result
    for key in path[:-1]:
        if isinstance(parent, dict) and key not in parent:
            parent[key] = {}
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return result


def parse(document: object, environ: Mapping[str, str] = ENV) -> ClusterConfig:
    return parse_cluster_config(document, source=SOURCE, base_dir=BASE, environ=environ)


def problems_of(document: object, environ: Mapping[str, str] = ENV) -> ClusterConfigError:
    with pytest.raises(ClusterConfigError) as info:
        parse(document, environ)
    return info.value


def expect_problem(
    document: object, field: str, expected: str, environ: Mapping[str, str] = ENV
) -> ConfigProblem:
    """`document` has exactly one problem, at `field`, whose expectation contains `expected`."""
    error = problems_of(document, environ)
    assert [problem.field for problem in error.problems] == [field], str(error)
    problem = error.problems[0]
    assert expected in problem.expected, str(error)
    assert str(error) == f"{SOURCE}: {problem}"
    assert str(error).startswith(f"{SOURCE}: {field}: expected ")
    assert isinstance(error, ConfigError)
    return problem


def write(path: Path, document: object) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


# -- valid configurations ----------------------------------------------------------------------


def test_full_example_loads_from_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    config = load_cluster_config(write(tmp_path / "cluster.yaml", FULL))

    assert config.cluster == "prod-eu-1"
    assert config.source == str(tmp_path / "cluster.yaml")
    zookeeper = config.zookeeper
    assert zookeeper.connect_hosts == "zk1:2181,zk2.example.com:2181,[::1]:2182"
    assert zookeeper.chroot == "/kafka/prod"
    assert zookeeper.servers == (("zk1", 2181), ("zk2.example.com", 2181), ("::1", 2182))
    assert zookeeper.session_timeout_s == 15.0
    assert zookeeper.auth is not None
    assert zookeeper.auth.mechanism is None
    assert zookeeper.auth.resolved_password == SecretStr(ENV["ZK_PASSWORD"])
    assert zookeeper.tls is not None
    assert zookeeper.tls.ca_file == tmp_path / "ca.pem"
    assert zookeeper.tls.cert_file == tmp_path / "tls" / "client.pem"
    assert zookeeper.tls.key_file == tmp_path / "tls" / "client.key"
    assert zookeeper.tls.verify_hostname is False

    assert config.broker_ids == (1, 2, 3)
    assert config.broker(2).log_dirs == (PurePosixPath("/data/a"), PurePosixPath("/data/b"))
    assert config.broker(3).server_properties == PurePosixPath("/etc/kafka/server.properties")
    assert config.broker(3).log_dirs is None
    assert config.broker(2).state_change_log == PurePosixPath("/var/log/kafka/state-change.log")
    assert config.broker(1).state_change_log is None
    assert config.ssh is not None
    assert config.ssh.key_file == home / ".ssh" / "id_ed25519"
    assert config.ssh.known_hosts == home / ".ssh" / "known_hosts"
    assert config.ssh.key_passphrase == SecretStr(ENV["SSH_KEY_PASSPHRASE"])
    assert config.min_insync_replicas_default == 2
    assert config.backup_dir == PurePosixPath("/var/backups/remediate")
    assert config.journal_dir == tmp_path / "journal"
    assert config.spark.master == "spark://m1:7077,m2:7077"
    assert dict(config.spark.conf) == {"spark.executor.memory": "2g", "spark.executor.cores": "2"}


def test_minimal_example_gets_the_documented_defaults() -> None:
    config = parse(MINIMAL)
    assert config.zookeeper.session_timeout_s == 10.0
    assert config.zookeeper.chroot is None
    assert config.zookeeper.auth is None
    assert config.zookeeper.tls is None
    assert config.ssh is None
    assert config.service.status is None
    assert config.min_insync_replicas_default is None  # not stated: unknown brokers refuse
    assert config.backup_dir == PurePosixPath("/var/backups/remediate")
    assert config.journal_dir == BASE / "journal"
    assert config.spark.master == "local[*]"
    assert dict(config.spark.conf) == {}
    assert config.source == SOURCE
    assert parse(FULL).brokers[0].transport == "ssh"


@pytest.mark.parametrize(
    ("timeouts", "expected"),
    [
        pytest.param(DELETE, None, id="no-section"),
        pytest.param({}, ClusterTimeouts(), id="empty-section"),
        pytest.param({"start_s": 3600}, ClusterTimeouts(start_s=3600.0), id="start-only"),
        pytest.param(
            {"stop_s": 0.5, "start_s": 7200, "in_sync_s": 86400, "service_command_s": 45},
            ClusterTimeouts(stop_s=0.5, start_s=7200.0, in_sync_s=86400.0, service_command_s=45.0),
            id="all-four-at-their-bounds",
        ),
        pytest.param({"start_s": None}, ClusterTimeouts(), id="null-is-unset"),
    ],
)
def test_timeouts_are_kept_as_given_and_unset_ones_are_none(
    timeouts: object, expected: ClusterTimeouts | None
) -> None:
    document = FULL if timeouts is DELETE else changed(FULL, ("timeouts",), timeouts)
    assert parse(document).timeouts == expected


@pytest.mark.parametrize(
    ("broker", "expected"),
    [
        pytest.param({}, None, id="neither-log"),
        pytest.param(
            {"state_change_log": "/var/log/kafka/state-change.log"},
            PurePosixPath("/var/log/kafka/server.log"),
            id="beside-state-change-log",
        ),
        pytest.param(
            {"server_log": "/opt/kafka/logs/server.log"},
            PurePosixPath("/opt/kafka/logs/server.log"),
            id="given",
        ),
        pytest.param(
            {"state_change_log": "/a/state-change.log", "server_log": "/b/kafka.log"},
            PurePosixPath("/b/kafka.log"),
            id="given-wins-over-the-default",
        ),
        pytest.param(
            {"transport": "local", "state_change_log": "logs/state-change.log"},
            PurePosixPath(BASE / "logs" / "server.log"),
            id="local-relative-default",
        ),
        pytest.param(
            {"transport": "local", "server_log": "logs/server.log"},
            PurePosixPath(BASE / "logs" / "server.log"),
            id="local-relative-given",
        ),
    ],
)
def test_server_log_is_given_or_beside_the_state_change_log(
    broker: dict[str, Any], expected: PurePosixPath | None
) -> None:
    entry = {"id": 1, "host": "kafka1.example.com", "log_dirs": ["/var/lib/kafka/data"], **broker}
    config = parse(changed(FULL, ("brokers", 0), entry))
    assert config.broker(1).server_log == expected


def test_log_dirs_listed_beside_server_properties_win_and_the_file_stays_named() -> None:
    entry = {
        "id": 1,
        "host": "kafka1.example.com",
        "log_dirs": ["/var/lib/kafka/data"],
        "server_properties": "/etc/kafka/server.properties",
    }
    config = parse(changed(FULL, ("brokers", 0), entry))
    assert config.broker(1).log_dirs == (PurePosixPath("/var/lib/kafka/data"),)
    assert config.broker(1).server_properties == PurePosixPath("/etc/kafka/server.properties")


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(SANDBOX_LOCAL, id="sandbox-local"),
        pytest.param(sandbox_ssh(), id="sandbox-ssh"),
    ],
)
def test_the_sandbox_files_load(tmp_path: Path, document: dict[str, Any]) -> None:
    path = tmp_path / "cluster.yaml"
    header = "# Written by `remediate sandbox up`. See docs/configuration.md.\n"
    path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    config = load_cluster_config(path)
    assert config.cluster == "sandbox-s1"
    assert config.zookeeper.connect_hosts == "127.0.0.1:38027"
    assert config.journal_dir == Path("/tmp/sb1/journal")
    assert config.spark.master == "local[2]"
    command = config.service_command("stop", config.brokers[0])
    assert command == "/x/.venv/bin/remediate sandbox broker stop --id 1 --dir /tmp/sb1"


def test_sandbox_ssh_targets_merge_the_global_ssh_section() -> None:
    config = parse(sandbox_ssh())
    target = config.ssh_target(2)
    assert target == SshTarget(
        host="127.0.0.12",
        port=42002,
        user="root",
        key_file=Path("/tmp/sb1/ssh/id_ed25519"),
        known_hosts=Path("/tmp/sb1/ssh/known_hosts"),
        connect_timeout_s=10.0,
        sudo="none",
        key_passphrase=None,
    )


@pytest.mark.parametrize(
    ("broker_id", "host", "port", "user", "sudo"),
    [
        pytest.param(1, "kafka1.example.com", 22, "kafka", "none", id="global-defaults"),
        pytest.param(2, "kafka2.example.com", 2222, "ops", "all", id="broker-overrides"),
    ],
)
def test_ssh_target_merges_broker_overrides(
    broker_id: int, host: str, port: int, user: str, sudo: str
) -> None:
    config = parse(FULL)
    target = config.ssh_target(broker_id)
    assert (target.host, target.port, target.user, target.sudo) == (host, port, user, sudo)
    assert target.connect_timeout_s == 5.0
    assert target.key_file == Path("~/.ssh/id_ed25519").expanduser()
    assert target.key_passphrase == SecretStr(ENV["SSH_KEY_PASSPHRASE"])
    assert config.sudo_mode(broker_id) == sudo
    with pytest.raises(AttributeError):
        target.port = 1  # type: ignore[misc]


def test_ssh_target_of_a_local_broker_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse(FULL).ssh_target(3)
    assert str(info.value) == (
        "cluster.yaml: brokers[2].transport: expected ssh for broker 3, got 'local'"
    )


def test_sudo_mode_of_a_local_broker_falls_back_to_ssh_sudo_then_none() -> None:
    assert parse(FULL).sudo_mode(3) == "none"
    assert parse(changed(FULL, ("ssh", "sudo"), True)).sudo_mode(3) == "all"
    assert parse(changed(FULL, ("brokers", 2, "sudo"), True)).sudo_mode(3) == "all"
    assert parse(MINIMAL).sudo_mode(0) == "none"


SIMPLE_SERVICE = {
    "stop": "/usr/bin/systemctl stop kafka",
    "start": "/usr/bin/systemctl start kafka",
    "status": "/usr/bin/systemctl is-active kafka",
}


def test_sudo_services_keeps_its_mode_and_writes_back_as_given() -> None:
    document = changed(changed(FULL, ("service",), SIMPLE_SERVICE), ("ssh", "sudo"), "services")
    config = parse(document)
    assert [config.sudo_mode(b) for b in (1, 2, 3)] == ["services", "all", "services"]
    dumped = config.model_dump(mode="json")
    assert dumped["ssh"]["sudo"] == "services" and dumped["brokers"][1]["sudo"] is True


@pytest.mark.parametrize(
    ("kind", "template", "found"),
    [
        ("stop", "systemctl stop kafka", "without its absolute path"),
        ("start", "cd /opt/kafka && bin/kafka-server-start.sh", "shell syntax"),
        ("status", "/usr/bin/pgrep -f 'kafka\\.Kafka'", "shell syntax"),
        ("stop", "/usr/bin/systemctl stop kafka-$HOSTNAME", "shell syntax"),
        ("start", "/usr/bin/systemctl start kafka > /dev/null", "shell syntax"),
        ("stop", "/usr/bin/systemctl stop kafka@*", "shell syntax"),
    ],
)
def test_sudo_services_wants_each_service_command_as_one_program(
    kind: str, template: str, found: str
) -> None:
    """sudo runs the command without a shell, and a sudoers line names it by absolute path:
    what cannot be both is refused at load, naming the command and why."""
    service = {**SIMPLE_SERVICE, kind: template}
    document = changed(changed(FULL, ("service",), service), ("brokers", 0, "sudo"), "services")
    with pytest.raises(ConfigError) as info:
        parse(document)
    message = str(info.value)
    assert f"service.{kind}: expected one program by its absolute path" in message
    assert "broker(s) 1 (sudo: services)" in message and found in message, message
    # The same commands are fine where every command runs in a shell (sudo: true, or none).
    assert parse(changed(FULL, ("service",), service)).sudo_mode(1) == "none"


def test_hooks_are_optional_commands_with_a_timeout() -> None:
    assert parse(FULL).hooks is None
    document = changed(FULL, ("hooks",), {"before_batch": "/usr/local/bin/silence --for 30m"})
    hooks = parse(document).hooks
    assert hooks is not None
    assert (hooks.before_batch, hooks.after_batch, hooks.timeout_s) == (
        "/usr/local/bin/silence --for 30m",
        None,
        60.0,
    )


@pytest.mark.parametrize(
    ("hooks", "field", "expected"),
    [
        ({"before_batch": ""}, "hooks.before_batch", "a non-empty command"),
        ({"after_batch": "a\nb"}, "hooks.after_batch", "a single-line command"),
        ({"timeout_s": 0}, "hooks.timeout_s", "seconds"),
        ({"before": "x"}, "hooks.before", "did you mean 'before_batch'"),
    ],
)
def test_a_bad_hook_is_named(hooks: dict[str, Any], field: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(changed(FULL, ("hooks",), hooks))
    assert f"{field}:" in str(info.value) and expected.lower() in str(info.value).lower()


def test_sudo_services_takes_placeholders_in_the_arguments() -> None:
    service = {**SIMPLE_SERVICE, "stop": "/usr/local/bin/kafka-ctl stop {broker_id} {host}"}
    document = changed(changed(FULL, ("service",), service), ("ssh", "sudo"), "services")
    config = parse(document)
    assert config.service_command("stop", config.broker(1)) == (
        "/usr/local/bin/kafka-ctl stop 1 kafka1.example.com"
    )


def test_broker_lookup_of_an_unknown_id_names_the_id_and_the_file() -> None:
    config = parse(FULL)
    assert config.broker(3).host == "10.0.0.3"
    with pytest.raises(ConfigError) as info:
        config.broker(7)
    assert str(info.value) == "cluster.yaml: brokers: expected a broker with id 7, got ids 1, 2, 3"


@pytest.mark.parametrize(
    ("template", "rendered"),
    [
        pytest.param("systemctl stop kafka", "systemctl stop kafka", id="no-placeholder"),
        pytest.param("stop --id {broker_id}", "stop --id 2", id="broker-id"),
        pytest.param("ssh {host} stop", "ssh kafka2.example.com stop", id="host"),
        pytest.param(
            "x {host} {broker_id} {host}",
            "x kafka2.example.com 2 kafka2.example.com",
            id="repeated",
        ),
        pytest.param("awk '{{print $1}}' {broker_id}", "awk '{print $1}' 2", id="literal-braces"),
    ],
)
def test_service_command_renders_only_id_and_host(template: str, rendered: str) -> None:
    config = parse(changed(FULL, ("service", "start"), template))
    assert config.service_command("start", config.broker(2)) == rendered


def test_service_commands_of_each_kind() -> None:
    config = parse(FULL)
    broker = config.broker(1)
    assert config.service_command("stop", broker) == (
        "systemctl stop kafka  # broker 1 on kafka1.example.com"
    )
    assert config.service_command("start", broker) == "systemctl start kafka"
    assert config.service_command("status", broker) == "systemctl is-active kafka"


def test_service_status_that_is_not_configured_is_a_config_error() -> None:
    config = parse(MINIMAL)
    with pytest.raises(ConfigError) as info:
        config.service_command("status", config.brokers[0])
    assert (
        str(info.value)
        == "cluster.yaml: service.status: expected a status command to be configured"
    )


@pytest.mark.parametrize(
    ("connect", "hosts", "chroot", "servers"),
    [
        pytest.param("zk:2181", "zk:2181", None, (("zk", 2181),), id="one-host"),
        pytest.param("a:1,b:65535", "a:1,b:65535", None, (("a", 1), ("b", 65535)), id="ports"),
        pytest.param("zk:2181/kafka", "zk:2181", "/kafka", (("zk", 2181),), id="chroot"),
        pytest.param("zk:2181/a/b.c", "zk:2181", "/a/b.c", (("zk", 2181),), id="deep-chroot"),
        pytest.param("[::1]:2181", "[::1]:2181", None, (("::1", 2181),), id="ipv6"),
        pytest.param(
            "[fe80::1%eth0]:1/k",
            "[fe80::1%eth0]:1",
            "/k",
            (("fe80::1%eth0", 1),),
            id="ipv6-scope-and-chroot",
        ),
        pytest.param("10.0.0.1:2181", "10.0.0.1:2181", None, (("10.0.0.1", 2181),), id="ipv4"),
        pytest.param("zk_1:2181", "zk_1:2181", None, (("zk_1", 2181),), id="underscore"),
    ],
)
def test_connect_string_parts(
    connect: str, hosts: str, chroot: str | None, servers: tuple[tuple[str, int], ...]
) -> None:
    zookeeper = parse(changed(MINIMAL, ("zookeeper", "connect"), connect)).zookeeper
    assert (zookeeper.connect_hosts, zookeeper.chroot, zookeeper.servers) == (
        hosts,
        chroot,
        servers,
    )
    assert zookeeper.connect == connect


@pytest.mark.parametrize(
    "master",
    [
        pytest.param("local", id="local"),
        pytest.param("local[4]", id="local-n"),
        pytest.param("local[*]", id="local-star"),
        pytest.param("local[4,2]", id="local-n-failures"),
        pytest.param("spark://m:7077", id="standalone"),
        pytest.param("spark://m1:7077,m2:7077", id="standalone-ha"),
        pytest.param("yarn", id="yarn"),
        pytest.param("k8s://https://k8s.example.com:443", id="k8s"),
    ],
)
def test_spark_masters_accepted(master: str) -> None:
    assert parse(changed(MINIMAL, ("spark", "master"), master)).spark.master == master


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        pytest.param("2g", "2g", id="string"),
        pytest.param(4, "4", id="integer"),
        pytest.param(0.6, "0.6", id="float"),
        pytest.param(True, "true", id="boolean-as-spark-writes-it"),
    ],
)
def test_spark_conf_values_are_stored_as_strings(value: object, stored: str) -> None:
    document = changed(MINIMAL, ("spark", "conf"), {"spark.x": value})
    assert parse(document).spark.conf == {"spark.x": stored}


@pytest.mark.parametrize(
    ("auth", "mechanism"),
    [
        pytest.param({"username": "u", "password": "p"}, None, id="digest-by-default"),
        pytest.param(
            {"scheme": "sasl", "username": "u", "password": "p"},
            "DIGEST-MD5",
            id="sasl-digest-md5-by-default",
        ),
        pytest.param(
            {"scheme": "sasl", "username": "u", "sasl_mechanism": "GSSAPI"},
            "GSSAPI",
            id="sasl-gssapi-without-password",
        ),
    ],
)
def test_auth_mechanisms(auth: dict[str, Any], mechanism: str | None) -> None:
    config = parse(changed(MINIMAL, ("zookeeper", "auth"), auth))
    assert config.zookeeper.auth is not None
    assert config.zookeeper.auth.mechanism == mechanism
    expected = None if mechanism == "GSSAPI" else SecretStr("p")
    assert config.zookeeper.auth.resolved_password == expected


@pytest.mark.parametrize(
    ("content", "password"),
    [
        pytest.param(b"hunter2", "hunter2", id="bare"),
        pytest.param(b"hunter2\n", "hunter2", id="trailing-newline"),
        pytest.param(b"hunter2\r\n", "hunter2", id="trailing-crlf"),
        pytest.param(b" two words \n\n", " two words \n", id="only-one-line-end-stripped"),
    ],
)
def test_password_file_is_read_relative_to_cluster_yaml(
    tmp_path: Path, content: bytes, password: str
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "zk").write_bytes(content)
    auth = {"username": "u", "password_file": "secrets/zk"}
    path = write(tmp_path / "cluster.yaml", changed(MINIMAL, ("zookeeper", "auth"), auth))
    config = load_cluster_config(path)
    assert config.zookeeper.auth is not None
    assert config.zookeeper.auth.password_file == tmp_path / "secrets" / "zk"
    assert config.zookeeper.auth.resolved_password == SecretStr(password)


def test_password_env_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMEDIATE_TEST_ZK_PASSWORD", "from-env")
    auth = {"username": "u", "password_env": "REMEDIATE_TEST_ZK_PASSWORD"}
    config = parse_cluster_config(
        changed(MINIMAL, ("zookeeper", "auth"), auth), source=SOURCE, base_dir=BASE
    )
    assert config.zookeeper.auth is not None
    assert config.zookeeper.auth.resolved_password == SecretStr("from-env")


def test_relative_base_dir_and_tilde_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    document = changed(MINIMAL, ("journal_dir",), "~/j")
    assert parse(document).journal_dir == tmp_path / "j"
    config = parse_cluster_config(MINIMAL, source=SOURCE, base_dir=Path("conf"))
    assert config.journal_dir == tmp_path / "conf" / "journal"
    assert parse(changed(MINIMAL, ("journal_dir",), "/abs/j")).journal_dir == Path("/abs/j")


def test_config_is_frozen_and_hashable() -> None:
    config = parse(FULL)
    with pytest.raises(ValidationError):
        config.cluster = "other"
    with pytest.raises(ValidationError):
        config.brokers[0].host = "other"
    with pytest.raises(TypeError):
        config.spark.conf["spark.x"] = "y"  # type: ignore[index]
    assert isinstance(config.brokers, tuple)
    assert hash(config) == hash(parse(FULL))
    assert config == parse(FULL)
    assert pickle.loads(pickle.dumps(config)) == config
    assert copy.deepcopy(config) == config


# -- secrets never show ------------------------------------------------------------------------


def secret_config(tmp_path: Path) -> ClusterConfig:
    (tmp_path / "zk.secret").write_text(SENTINEL + "-file\n")
    document = changed(
        FULL, ("zookeeper", "auth"), {"username": "u", "password_file": "./zk.secret"}
    )
    return parse_cluster_config(document, source=SOURCE, base_dir=tmp_path, environ=ENV)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"username": "u", "password": SENTINEL + "-zk"}, id="password"),
        pytest.param({"username": "u", "password_env": "ZK_PASSWORD"}, id="password-env"),
        pytest.param(None, id="password-file"),
    ],
)
def test_secrets_never_appear_in_renderings(tmp_path: Path, source: dict[str, str] | None) -> None:
    if source is None:
        config = secret_config(tmp_path)
    else:
        config = parse(changed(FULL, ("zookeeper", "auth"), source))
    assert config.zookeeper.auth is not None
    password = config.zookeeper.auth.resolved_password
    assert password is not None
    assert password.get_secret_value().startswith(SENTINEL)
    assert config.ssh is not None
    assert config.ssh.key_passphrase == SecretStr(SENTINEL + "-ssh")
    renderings = [
        repr(config),
        str(config),
        repr(config.model_dump()),
        str(config.model_dump()),
        repr(config.model_dump(mode="json")),
        config.model_dump_json(),
        config.model_dump_json(indent=2),
        repr(config.zookeeper),
        repr(config.zookeeper.auth),
        repr(config.ssh),
        repr(config.ssh_target(1)),
        str(config.ssh_target(2)),
        repr(vars(config)),
    ]
    for rendering in renderings:
        assert SENTINEL not in rendering


NUMERIC_SECRET = 987654321987654321


@pytest.mark.parametrize(
    ("path", "value", "sentinel"),
    [
        pytest.param(("password",), NUMERIC_SECRET, str(NUMERIC_SECRET), id="password-number"),
        pytest.param(("password",), [SENTINEL], SENTINEL, id="password-as-list"),
        pytest.param(("passwrd",), SENTINEL, SENTINEL, id="misspelt-password-key"),
        pytest.param(("password_file",), "f", SENTINEL, id="two-sources"),
        pytest.param(("scheme",), {"x": SENTINEL}, SENTINEL, id="mapping-value"),
        pytest.param(("username",), 5, SENTINEL, id="other-field-wrong"),
    ],
)
def test_error_messages_never_quote_a_secret(
    path: tuple[str, ...], value: object, sentinel: str
) -> None:
    document = changed(FULL, ("zookeeper", "auth"), {"username": "u", "password": SENTINEL})
    document = changed(document, ("zookeeper", "auth", *path), value)
    error = problems_of(document)
    rendered = "".join(traceback.format_exception(error))
    assert sentinel not in rendered
    assert error.__context__ is None
    assert error.__cause__ is None
    # Pydantic's own error, for code that validates the model directly, hides input too.
    with pytest.raises(ValidationError) as raw:
        ClusterConfig.model_validate(document)
    assert sentinel not in str(raw.value)


def test_yaml_errors_never_quote_the_offending_line(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"cluster: c\nzookeeper:\n  auth: {{password: {SENTINEL}: x}}\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_config(path)
    assert SENTINEL not in "".join(traceback.format_exception(info.value))


def test_a_missing_secret_env_names_the_key_not_a_value() -> None:
    environ = {"ZK_PASSWORD": SENTINEL}
    problem = expect_problem(FULL, "ssh.key_passphrase_env", "SSH_KEY_PASSPHRASE", environ)
    assert problem.got is None


# -- one problem per rule ----------------------------------------------------------------------


def at(where: str) -> tuple[str | int, ...]:
    """'brokers[1].log_dirs[0]' -> ('brokers', 1, 'log_dirs', 0): a field path as messages print
    it, turned into the place in the document to change."""
    return tuple(
        int(index) if index else name
        for name, index in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]", where)
    )


def rule(
    rule_id: str, where: str | tuple[str | int, ...], value: object, expected: str, field: str = ""
) -> Any:
    """Set `value` at `where` in FULL: exactly one problem, at `field` (default: `where`)."""
    path = at(where) if isinstance(where, str) else where
    field = field or str(where)
    return pytest.param(path, value, field, expected, id=rule_id)


PLACEHOLDERS = "only placeholders are {broker_id} and {host}"
ONE_PASSWORD = "exactly one of password, password_env, password_file"
ONE_LOG_DIR_SOURCE = "log_dirs or server_properties (or both)"
GSSAPI_AUTH = {"scheme": "sasl", "username": "u", "sasl_mechanism": "GSSAPI"}

# Each rule: (id, where the value goes, the value, part of what is expected[, field reported]).
RULES = [
    rule("cluster-missing", "cluster", DELETE, "a value for this required key"),
    rule("cluster-empty", "cluster", "", "1 to 100 characters"),
    rule("cluster-too-long", "cluster", "c" * 101, "1 to 100 characters"),
    rule("cluster-bad-char", "cluster", "prod/eu", "1 to 100 characters"),
    rule("cluster-not-string", "cluster", 12, "1 to 100 characters"),
    rule("unknown-top-key", "clustr", "x", "did you mean 'cluster'?"),
    rule("unknown-key-no-match", "zzz", "x", "one of the keys cluster, zookeeper,"),
    rule("unknown-nested-key", "brokers[1].logdirs", ["/x"], "did you mean 'log_dirs'?"),
    rule("unknown-ssh-key", "ssh.passphrase_env", "X", "did you mean 'key_passphrase_env'?"),
    rule("zookeeper-missing", "zookeeper", DELETE, "a value for this required key"),
    rule("zookeeper-not-mapping", "zookeeper", "zk:2181", "a mapping"),
    rule("connect-missing", "zookeeper.connect", DELETE, "required"),
    rule("connect-empty", "zookeeper.connect", "", "connect string"),
    rule("connect-no-port", "zookeeper.connect", "zk1", "host:port"),
    rule("connect-port-zero", "zookeeper.connect", "zk:0", "ports from 1 to 65535"),
    rule("connect-port-too-big", "zookeeper.connect", "zk:65536", "ports from 1 to 65535"),
    rule("connect-port-not-digits", "zookeeper.connect", "zk:21x", "ports from 1 to 65535"),
    rule(
        "connect-empty-host-entry", "zookeeper.connect", "a:1,,b:2", "without an empty host entry"
    ),
    rule("connect-empty-host", "zookeeper.connect", ":2181", "host:port"),
    rule("connect-bare-ipv6", "zookeeper.connect", "::1:2181", "IPv6 as [::1]:2181"),
    rule("connect-bad-ipv6", "zookeeper.connect", "[zz::1]:2181", "IPv6 as [::1]:2181"),
    rule("connect-space", "zookeeper.connect", "a:1, b:2", "without white space"),
    rule("connect-only-chroot", "zookeeper.connect", "/kafka", "at least one host"),
    rule("chroot-trailing-slash", "zookeeper.connect", "zk:1/kafka/", "chroot"),
    rule("chroot-root-only", "zookeeper.connect", "zk:1/", "chroot"),
    rule("chroot-double-slash", "zookeeper.connect", "zk:1/a//b", "chroot"),
    rule("chroot-dot-dot", "zookeeper.connect", "zk:1/a/..", "chroot"),
    rule("session-timeout-low", "zookeeper.session_timeout_s", 0.5, "from 1 to 120"),
    rule("session-timeout-high", "zookeeper.session_timeout_s", 121, "from 1 to 120"),
    rule("session-timeout-string", "zookeeper.session_timeout_s", "10", "from 1 to 120"),
    rule("session-timeout-bool", "zookeeper.session_timeout_s", True, "from 1 to 120"),
    rule("session-timeout-nan", "zookeeper.session_timeout_s", math.nan, "from 1 to 120"),
    rule("auth-scheme", "zookeeper.auth.scheme", "plain", "'digest' or 'sasl'"),
    rule("auth-username-missing", "zookeeper.auth.username", DELETE, "required"),
    rule("auth-username-colon", "zookeeper.auth.username", "a:b", "without white space or ':'"),
    rule(
        "auth-no-password",
        "zookeeper.auth.password_env",
        DELETE,
        ONE_PASSWORD,
        field="zookeeper.auth",
    ),
    rule(
        "auth-two-passwords", "zookeeper.auth.password", "p", ONE_PASSWORD, field="zookeeper.auth"
    ),
    rule(
        "auth-empty-password",
        "zookeeper.auth",
        {"username": "u", "password": ""},
        "a non-empty password",
        field="zookeeper.auth.password",
    ),
    rule(
        "auth-env-bad-name",
        "zookeeper.auth.password_env",
        "ZK-PASSWORD",
        "environment variable name",
    ),
    rule(
        "auth-env-unset",
        "zookeeper.auth.password_env",
        "NOT_SET_ANYWHERE",
        "the environment variable NOT_SET_ANYWHERE to be set",
    ),
    rule(
        "auth-sasl-mechanism-with-digest",
        "zookeeper.auth.sasl_mechanism",
        "GSSAPI",
        "no sasl_mechanism unless scheme is sasl",
    ),
    rule(
        "auth-sasl-mechanism-unknown",
        "zookeeper.auth",
        {"scheme": "sasl", "username": "u", "password": "p", "sasl_mechanism": "PLAIN"},
        "'DIGEST-MD5' or 'GSSAPI'",
        field="zookeeper.auth.sasl_mechanism",
    ),
    rule(
        "auth-gssapi-with-password",
        "zookeeper.auth",
        {**GSSAPI_AUTH, "password_env": "ZK_PASSWORD"},
        "no password with sasl_mechanism GSSAPI",
        field="zookeeper.auth.password_env",
    ),
    rule("tls-ca-missing", "zookeeper.tls.ca_file", DELETE, "required"),
    rule("tls-cert-without-key", "zookeeper.tls.key_file", DELETE, "a key_file as well"),
    rule("tls-key-without-cert", "zookeeper.tls.cert_file", DELETE, "a cert_file as well"),
    rule("tls-verify-not-bool", "zookeeper.tls.verify_hostname", "yes", "true or false"),
    rule("tls-ca-empty", "zookeeper.tls.ca_file", "", "a path"),
    rule("brokers-missing", "brokers", DELETE, "required"),
    rule("brokers-empty", "brokers", [], "at least one broker"),
    rule("brokers-not-list", "brokers", {"id": 1}, "a list"),
    rule("broker-not-mapping", "brokers[0]", "kafka1", "a mapping"),
    rule("broker-id-missing", "brokers[0].id", DELETE, "required"),
    rule("broker-id-negative", "brokers[0].id", -1, "an integer from 0 to 2147483647"),
    rule("broker-id-too-big", "brokers[0].id", 2**31, "an integer from 0 to 2147483647"),
    rule("broker-id-bool", "brokers[0].id", True, "an integer"),
    rule("broker-id-string", "brokers[0].id", "1", "an integer"),
    rule("broker-id-duplicate", "brokers[1].id", 1, "a broker id no other broker has (brokers[0])"),
    rule("broker-host-missing", "brokers[0].host", DELETE, "required"),
    rule("broker-host-empty", "brokers[0].host", "", "a host name"),
    rule("broker-host-space", "brokers[0].host", "kafka 1", "without white space"),
    rule("broker-host-option", "brokers[0].host", "-oProxyCommand=x", "not starting with '-'"),
    rule("broker-host-shell", "brokers[0].host", "k1;reboot", "a host name"),
    rule("broker-host-ipv6-scope-shell", "brokers[0].host", "fe80::1%$(x)", "a host name"),
    rule("broker-transport", "brokers[0].transport", "rsh", "'ssh' or 'local'"),
    rule("log-dir-relative", "brokers[1].log_dirs[0]", "data", RELATIVE_ON_SSH),
    rule("log-dir-blank", "brokers[2].server_properties", " ", "an absolute path"),
    rule("log-dirs-empty", "brokers[1].log_dirs", [], "at least one log directory"),
    rule("log-dirs-string", "brokers[1].log_dirs", "/data/a", "a list"),
    rule(
        "log-dirs-duplicate",
        "brokers[1].log_dirs",
        ["/a", "/b", "/a/"],
        "not listed before (log_dirs[0])",
        field="brokers[1].log_dirs[2]",
    ),
    rule("log-dir-dot-dot", "brokers[1].log_dirs[0]", "/a/../b", "without '..'"),
    rule("log-dir-root", "brokers[1].log_dirs[0]", "/", "other than '/'"),
    rule("log-dir-newline", "brokers[1].log_dirs[0]", "/a\nb", "without control characters"),
    rule("log-dir-not-string", "brokers[1].log_dirs[0]", 7, "an absolute path"),
    rule("state-change-log-relative", "brokers[1].state_change_log", "sc.log", RELATIVE_ON_SSH),
    rule(
        "state-change-log-newline",
        "brokers[1].state_change_log",
        "/a\nb",
        "without control characters",
    ),
    rule(
        "neither-log-dirs-nor-properties",
        "brokers[0].log_dirs",
        DELETE,
        ONE_LOG_DIR_SOURCE,
        field="brokers[0]",
    ),
    rule(
        "ssh-port-on-local-broker",
        "brokers[2].ssh_port",
        22,
        "no ssh_port on a broker with transport local",
    ),
    rule(
        "ssh-user-on-local-broker",
        "brokers[2].ssh_user",
        "u",
        "no ssh_user on a broker with transport local",
    ),
    rule("broker-ssh-port-zero", "brokers[1].ssh_port", 0, "an integer from 1 to 65535"),
    rule("broker-ssh-user-bad", "brokers[1].ssh_user", "-l root", "a user name"),
    rule("broker-sudo-not-bool", "brokers[1].sudo", "yes", "true, false or services"),
    rule(
        "broker-same-host-and-port",
        "brokers[1]",
        {"id": 2, "host": "kafka1.example.com", "log_dirs": ["/d"]},
        "a host and ssh port no other broker has (brokers[0])",
        field="brokers[1].host",
    ),
    rule("ssh-missing", "ssh", DELETE, "an ssh section, because brokers[0] (id 1)"),
    rule("ssh-user-missing", "ssh.user", DELETE, "a user (or a config_file whose User applies)"),
    rule("ssh-port-too-big", "ssh.port", 70000, "an integer from 1 to 65535"),
    rule("ssh-key-file-missing", "ssh.key_file", DELETE, "a key_file, agent: true, or a config"),
    rule(
        "ssh-key-file-unknown-user",
        "ssh.key_file",
        "~no-such-user-here/k",
        "'~' names a known home directory",
    ),
    rule("ssh-known-hosts-missing", "ssh.known_hosts", DELETE, "required"),
    rule("ssh-known-hosts-nul", "ssh.known_hosts", "kh\x00", "without control characters"),
    rule(
        "ssh-passphrase-env-unset",
        "ssh.key_passphrase_env",
        "NOT_SET_ANYWHERE",
        "NOT_SET_ANYWHERE to be set",
    ),
    rule("ssh-timeout-zero", "ssh.connect_timeout_s", 0, "greater than 0 and at most 600"),
    rule("ssh-sudo-not-bool", "ssh.sudo", 1, "true, false or services"),
    rule("service-missing", "service", DELETE, "required"),
    rule("service-stop-missing", "service.stop", DELETE, "required"),
    rule("service-start-missing", "service.start", DELETE, "required"),
    rule("service-positional", "service.stop", "kill {}", PLACEHOLDERS),
    rule("service-numbered", "service.stop", "kill {0}", PLACEHOLDERS),
    rule("service-unknown-placeholder", "service.start", "start {hostname}", PLACEHOLDERS),
    rule("service-attribute", "service.start", "{host.__class__}", PLACEHOLDERS),
    rule("service-index", "service.start", "{host[0]}", PLACEHOLDERS),
    rule("service-unclosed-brace", "service.stop", "stop {broker_id", "balanced braces"),
    rule("service-lone-close-brace", "service.stop", "stop }", "balanced braces"),
    rule(
        "service-format-spec",
        "service.stop",
        "stop {broker_id:>5}",
        "without format spec or conversion",
    ),
    rule(
        "service-conversion", "service.stop", "stop {host!r}", "without format spec or conversion"
    ),
    rule("service-empty", "service.stop", "  ", "a non-empty command"),
    rule("service-two-lines", "service.stop", "stop\nreboot", "a single-line command"),
    rule("service-status-bad", "service.status", "{x}", PLACEHOLDERS),
    rule("service-not-string", "service.stop", ["systemctl", "stop"], "a command template"),
    rule("min-isr-zero", "min_insync_replicas_default", 0, "an integer from 1 to 2147483647"),
    rule("min-isr-string", "min_insync_replicas_default", "2", "an integer from 1"),
    rule("backup-dir-relative", "backup_dir", "backups", RELATIVE_WITH_SSH),
    rule("journal-dir-empty", "journal_dir", "", "a path"),
    rule("journal-dir-not-string", "journal_dir", None, "a path"),
    rule("spark-master-unknown", "spark.master", "mesos://m:5050", "a Spark master"),
    rule("spark-master-local-zero", "spark.master", "local[0]", "a Spark master"),
    rule("spark-master-no-port", "spark.master", "spark://m", "host:port"),
    rule("spark-master-empty-k8s", "spark.master", "k8s://", "a Spark master"),
    rule("spark-conf-not-mapping", "spark.conf", ["a=b"], "a mapping"),
    rule(
        "spark-conf-list-value",
        ("spark", "conf", "spark.jars"),
        ["a.jar"],
        "a string, number or boolean",
        field="spark.conf['spark.jars']",
    ),
    rule(
        "spark-conf-empty-key",
        ("spark", "conf", ""),
        "x",
        "setting names that are non-empty strings",
        field="spark.conf",
    ),
    rule("spark-unknown-key", "spark.confs", {}, "did you mean 'conf'?"),
    rule("timeouts-not-mapping", "timeouts", 300, "a mapping"),
    rule("timeouts-unknown-key", "timeouts.start", 600, "did you mean 'start_s'?"),
    rule("timeouts-start-zero", "timeouts.start_s", 0, "seconds greater than 0 and at most 7200"),
    rule("timeouts-start-too-long", "timeouts.start_s", 7201, "greater than 0 and at most 7200"),
    rule("timeouts-start-text", "timeouts.start_s", "10m", "a number of seconds"),
    rule("timeouts-stop-negative", "timeouts.stop_s", -1, "greater than 0 and at most 7200"),
    rule("timeouts-in-sync-too-long", "timeouts.in_sync_s", 86401, "and at most 86400"),
    rule("timeouts-in-sync-bool", "timeouts.in_sync_s", True, "a number of seconds"),
    rule("timeouts-service-nan", "timeouts.service_command_s", math.nan, "at most 7200"),
    rule("timeouts-service-inf", "timeouts.service_command_s", math.inf, "at most 7200"),
    rule("server-log-relative-on-ssh", "brokers[1].server_log", "logs/server.log", RELATIVE_ON_SSH),
    rule("server-log-not-string", "brokers[1].server_log", 5, "an absolute path"),
    rule("server-log-root", "brokers[1].server_log", "/", "an absolute path other than '/'"),
    rule("server-log-dot-dot", "brokers[1].server_log", "/var/../log", "without '..'"),
]


@MALFORMED_CLUSTER_YAML
@pytest.mark.parametrize(("path", "value", "field", "expected"), RULES)
def test_each_rule_names_its_field(
    path: tuple[str | int, ...], value: object, field: str, expected: str
) -> None:
    expect_problem(changed(FULL, path, value), field, expected)


def test_the_documented_message_for_a_relative_log_dir() -> None:
    error = problems_of(changed(FULL, ("brokers", 1, "log_dirs", 0), "data"))
    expected = f"cluster.yaml: brokers[1].log_dirs[0]: expected {RELATIVE_ON_SSH}, got 'data'"
    assert str(error) == expected
    assert error.source == SOURCE
    assert error.problems == (ConfigProblem("brokers[1].log_dirs[0]", RELATIVE_ON_SSH, "'data'"),)


def test_a_non_string_key_is_named() -> None:
    document = changed(FULL, ("zookeeper", 5), "x")
    expect_problem(document, "zookeeper", "keys that are strings")


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        pytest.param(lambda d: None, "an existing file", id="missing"),
        pytest.param(lambda d: (d / "zk").mkdir(), "a regular file", id="directory"),
        pytest.param(lambda d: (d / "zk").write_bytes(b""), "that is not empty", id="empty"),
        pytest.param(
            lambda d: (d / "zk").write_bytes(b"\n"), "that is not empty", id="only-newline"
        ),
        pytest.param(lambda d: (d / "zk").write_bytes(b"\xff\xfe\xfa"), "UTF-8", id="not-utf8"),
        pytest.param(lambda d: os.mkfifo(d / "zk"), "a regular file", id="fifo-does-not-hang"),
        pytest.param(
            lambda d: (d / "zk").write_bytes(b"x" * (64 << 10) + b"y"), "at most", id="too-large"
        ),
    ],
)
def test_password_file_problems(tmp_path: Path, setup: Any, expected: str) -> None:
    setup(tmp_path)
    document = changed(FULL, ("zookeeper", "auth"), {"username": "u", "password_file": "zk"})
    with pytest.raises(ClusterConfigError) as info:
        parse_cluster_config(document, source=SOURCE, base_dir=tmp_path, environ=ENV)
    assert [p.field for p in info.value.problems] == ["zookeeper.auth.password_file"]
    assert expected in info.value.problems[0].expected
    assert info.value.problems[0].got == repr(str(tmp_path / "zk"))


def test_password_env_that_is_empty() -> None:
    environ = {**ENV, "ZK_PASSWORD": ""}
    expect_problem(FULL, "zookeeper.auth.password_env", "ZK_PASSWORD to be non-empty", environ)


def test_password_file_that_is_not_a_directory_entry(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    auth = {"username": "u", "password_file": "file/zk"}
    document = changed(FULL, ("zookeeper", "auth"), auth)
    with pytest.raises(ClusterConfigError) as info:
        parse_cluster_config(document, source=SOURCE, base_dir=tmp_path, environ=ENV)
    assert info.value.problems[0].expected == "a readable file (Not a directory)"


def test_a_host_and_port_clash_counts_the_global_ssh_port() -> None:
    document = changed(FULL, ("brokers", 1, "host"), "KAFKA1.example.com")
    document = changed(document, ("brokers", 1, "ssh_port"), 22)
    expect_problem(document, "brokers[1].host", "a host and ssh port no other broker has")
    # The same host on another port is fine (the sandbox runs one sshd per broker that way).
    parse(changed(document, ("brokers", 1, "ssh_port"), 23))
    # A local broker on the same host does not clash.
    parse(changed(FULL, ("brokers", 2, "host"), "kafka1.example.com"))


def test_all_problems_are_reported_together_one_line_each() -> None:
    document = changed(FULL, ("cluster",), "")
    document = changed(document, ("brokers", 1, "log_dirs", 0), "data")
    document = changed(document, ("service", "stop"), "{x}")
    document = changed(document, ("colour",), "blue")
    error = problems_of(document)
    fields = [problem.field for problem in error.problems]
    assert fields == ["cluster", "brokers[1].log_dirs[0]", "service.stop", "colour"]
    lines = str(error).splitlines()
    assert len(lines) == 4
    assert all(line.startswith("cluster.yaml: ") for line in lines)


def test_many_problems_are_capped_in_the_message() -> None:
    count = MAX_REPORTED_PROBLEMS + 7
    document = changed(FULL, ("brokers", 1, "log_dirs"), [f"rel{n}" for n in range(count)])
    error = problems_of(document)
    assert len(error.problems) == count
    lines = str(error).splitlines()
    assert len(lines) == MAX_REPORTED_PROBLEMS + 1
    assert lines[-1] == "cluster.yaml: ... and 7 more problems"


# -- the file ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "field", "expected"),
    [
        pytest.param(b"cluster: c\n  bad: x\n", "line 2, column 6", "valid YAML", id="syntax"),
        pytest.param(b"a: [1, 2\n", "line 2, column 1", "valid YAML", id="unclosed-flow"),
        pytest.param(b"a: 'x\n", "line 2, column 1", "valid YAML", id="unclosed-quote"),
        pytest.param(
            b"a: !!python/object:os.system x\n",
            "line 1, column 4",
            "could not determine a constructor",
            id="python-tag-refused",
        ),
        pytest.param(b"? [a]\n: 1\n", "line 1, column 3", "unhashable key", id="list-as-key"),
        pytest.param(b"\xff\xfe\x00\xd8", "", "valid YAML in UTF-8 or UTF-16", id="bad-utf16"),
        pytest.param(b"a: \xff\n", "", "valid YAML in UTF-8 or UTF-16", id="bad-utf8"),
        pytest.param(b"a: \x00\n", "", "valid YAML in UTF-8 or UTF-16", id="nul"),
        pytest.param(
            b"cluster: 2024-13-01\n", "", "could not be built: ValueError", id="impossible-date"
        ),
        pytest.param(b"cluster: !!timestamp x\n", "", "could not be built", id="bad-timestamp"),
        pytest.param(
            b"a: " + b"[" * 800 + b"]" * 800, "", "not nested this deeply", id="deep-nesting"
        ),
        pytest.param(b"", "", "a mapping at the top level", id="empty-file"),
        pytest.param(b"# only a comment\n", "", "a mapping at the top level", id="only-comment"),
        pytest.param(b"- a\n- b\n", "", "a mapping at the top level", id="top-level-list"),
        pytest.param(b"just text\n", "", "a mapping at the top level", id="top-level-scalar"),
    ],
)
def test_file_level_problems(tmp_path: Path, content: bytes, field: str, expected: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(content)
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_config(path)
    error = info.value
    assert error.source == str(path)
    assert [problem.field for problem in error.problems] == [field]
    assert expected in error.problems[0].expected
    assert str(error).startswith(f"{path}: ")
    assert "cluster.yaml" in str(error)
    assert error.__context__ is None


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        pytest.param(lambda p: None, "an existing file", id="missing"),
        pytest.param(lambda p: p.mkdir(), "a regular file", id="directory"),
        pytest.param(lambda p: os.mkfifo(p), "a regular file", id="fifo"),
        pytest.param(
            lambda p: p.write_bytes(b"#" * (MAX_FILE_BYTES + 1)), "a file of at most", id="huge"
        ),
    ],
)
def test_unreadable_files(tmp_path: Path, setup: Any, expected: str) -> None:
    path = tmp_path / "cluster.yaml"
    setup(path)
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_config(path)
    assert str(info.value).startswith(f"{path}: expected {expected}")


def test_a_path_under_a_file_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "conf").write_text("")
    path = tmp_path / "conf" / "cluster.yaml"
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_config(path)
    assert str(info.value) == f"{path}: expected a readable file (Not a directory)"


def test_a_relative_path_is_named_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "cluster.yaml", changed(FULL, ("brokers", 1, "log_dirs", 0), "data"))
    with pytest.raises(ConfigError) as info:
        load_cluster_config(Path("cluster.yaml"), environ=ENV)
    assert (
        str(info.value)
        == f"cluster.yaml: brokers[1].log_dirs[0]: expected {RELATIVE_ON_SSH}, got 'data'"
    )


def test_relative_paths_on_local_brokers_are_taken_from_the_files_directory(
    tmp_path: Path,
) -> None:
    document = copy.deepcopy(MINIMAL)
    document["brokers"] = [
        {"id": 1, "host": "b1", "transport": "local", "log_dirs": ["data/kafka-1", "./x"]},
        {"id": 2, "host": "b2", "transport": "local", "server_properties": "etc/k.properties"},
    ]
    document["backup_dir"] = "backups"
    lab = tmp_path / "lab"
    lab.mkdir()
    write(lab / "cluster.yaml", document)
    config = load_cluster_config(lab / "cluster.yaml")
    assert config.brokers[0].log_dirs == (
        PurePosixPath(lab / "data/kafka-1"),
        PurePosixPath(lab / "x"),
    )
    assert config.brokers[1].server_properties == PurePosixPath(lab / "etc/k.properties")
    assert config.backup_dir == PurePosixPath(lab / "backups")
    assert config.base_dir == lab


def test_a_relative_and_an_absolute_log_dir_that_are_the_same_are_one_too_many(
    tmp_path: Path,
) -> None:
    document = copy.deepcopy(MINIMAL)
    document["brokers"][0]["log_dirs"] = ["d", str(tmp_path / "d")]
    write(tmp_path / "cluster.yaml", document)
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_config(tmp_path / "cluster.yaml")
    assert info.value.problems[0].field == "brokers[0].log_dirs[1]"
    assert "not listed before (log_dirs[0])" in info.value.problems[0].expected


def test_a_relative_server_properties_on_an_ssh_broker_is_refused() -> None:
    document = changed(FULL, ("brokers", 0, "log_dirs"), DELETE)
    document = changed(document, ("brokers", 0, "server_properties"), "etc/k.properties")
    expect_problem(document, "brokers[0].server_properties", RELATIVE_ON_SSH)


def test_a_relative_backup_dir_with_one_ssh_broker_is_refused() -> None:
    document = changed(SANDBOX_LOCAL, ("backup_dir",), "backups")
    assert parse(document).backup_dir.is_absolute()
    expect_problem(
        changed(sandbox_ssh(), ("backup_dir",), "backups"), "backup_dir", RELATIVE_WITH_SSH
    )


def test_a_self_referencing_yaml_document_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("cluster: c\nbrokers: &b [*b]\nspark: &s {conf: *s}\n")
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_config(path)
    fields = [problem.field for problem in info.value.problems]
    assert "brokers[0]" in fields
    assert "spark.conf.conf" in fields


def test_top_level_that_is_not_a_mapping_is_refused_by_parse() -> None:
    for data, got in [(None, "an empty document"), ([1], "a list"), ("x", "'x'")]:
        error = problems_of(data)
        assert error.problems == (ConfigProblem("", "a mapping at the top level", got),)
        assert str(error) == f"cluster.yaml: expected a mapping at the top level, got {got}"


# -- hostile input -----------------------------------------------------------------------------

KEYS = sorted(
    {
        "cluster",
        "zookeeper",
        "connect",
        "auth",
        "tls",
        "brokers",
        "id",
        "host",
        "transport",
        "log_dirs",
        "server_properties",
        "ssh",
        "user",
        "port",
        "key_file",
        "known_hosts",
        "service",
        "stop",
        "start",
        "status",
        "spark",
        "master",
        "conf",
        "password",
        "password_env",
        "password_file",
        "username",
        "scheme",
        "journal_dir",
        "backup_dir",
    }
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(["/a", "a:1", "{host}", "{}", "local[*]", "~", "~x/y", "..", "ssh"])
)
keys = st.sampled_from(KEYS) | st.text(max_size=12)
json_like = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)


def paths_of(value: object, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths_of(item, (*prefix, index))
    return found


FULL_PATHS = paths_of(FULL)


def load_or_config_error(path: Path) -> ClusterConfig | ConfigError:
    """A hostile file may be refused with a ConfigError naming it, never crash the loader."""
    try:
        return load_cluster_config(path)
    except ConfigError as caught:
        error = caught
    assert str(error).startswith(f"{path}: ")
    return error


def returns_or_config_error(data: object) -> ClusterConfig | ClusterConfigError:
    """Hostile input may be refused with a ClusterConfigError, never crash the parser."""
    try:
        return parse(data)
    except ClusterConfigError as caught:
        error = caught
    lines = str(error).splitlines()
    assert lines
    assert all(line.startswith(f"{SOURCE}: ") for line in lines)
    assert all(len(problem.got or "") <= 100 for problem in error.problems)
    return error


@QUICK
@given(json_like)
def test_arbitrary_values_parse_or_raise_config_error(data: object) -> None:
    returns_or_config_error(data)


@QUICK
@given(json_like)
def test_arbitrary_top_level_mappings_parse_or_raise_config_error(data: object) -> None:
    returns_or_config_error({"cluster": "c", **data} if isinstance(data, dict) else {"x": data})


@QUICK
@given(st.sampled_from(FULL_PATHS), json_like | st.just(DELETE))
def test_a_valid_document_with_one_hostile_value(
    path: tuple[str | int, ...], value: object
) -> None:
    result = returns_or_config_error(changed(FULL, path, value))
    if isinstance(result, ClusterConfigError):
        assert SENTINEL not in str(result)


@QUICK
@given(st.sampled_from([p for p in FULL_PATHS if isinstance(p[-1], str)]), st.text())
def test_hostile_strings_in_every_string_field(path: tuple[str | int, ...], text: str) -> None:
    result = returns_or_config_error(changed(FULL, path, text))
    if isinstance(result, ClusterConfig):
        for broker in result.brokers:
            result.service_command("stop", broker)
            result.service_command("start", broker)
            result.service_command("status", broker)


@MALFORMED_CLUSTER_YAML
@QUICK
@given(st.binary(max_size=300))
def test_arbitrary_bytes_in_the_file_raise_only_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(data)
    load_or_config_error(path)


@QUICK
@given(st.text(alphabet=st.sampled_from(list("ab:-[]{}!&*?|>'\"#%@,.\n 0123\t/~")), max_size=80))
def test_yaml_like_text_in_the_file_raises_only_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    load_or_config_error(path)


@QUICK
@given(
    st.lists(
        st.sampled_from(["{broker_id}", "{host}", "{{", "}}", " ", "x", "-", "/", "'", "$"]),
        max_size=12,
    )
)
def test_rendered_commands_hold_exactly_the_validated_values(parts: list[str]) -> None:
    config = parse(changed(FULL, ("service", "stop"), "cmd " + "".join(parts)))
    values = {"{broker_id}": "2", "{host}": "kafka2.example.com", "{{": "{", "}}": "}"}
    expected = "cmd " + "".join(values.get(part, part) for part in parts)
    assert config.service_command("stop", config.broker(2)) == expected
