"""ssh as operators configure it: an OpenSSH client config (Host aliases, HostName, User, Port,
IdentityFile, ProxyJump), ssh-agent, and a jump host, on real sshds.

The broker's sshd is on 127.0.0.31 and known to the jump host (127.0.0.30, an sshd that
forwards) by a name only the jump host can resolve: its /etc/hosts, in a private mount
namespace, says `broker-31.internal`; this machine's does not. So a connection that works went
through the jump host, as it does to brokers behind a bastion. Every host key, the jump host's
included, is verified against the configured known_hosts file.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediate.collect.collector import transports
from remediate.config import ClusterConfigError, parse_cluster_config
from remediate.errors import HostKeyError, TransportError
from remediate.ports import CommandKind
from remediate.sandbox.cluster import BrokerInfo
from remediate.sandbox.plumbing import sshd
from remediate.transport import SshTransport
from tests.execute.sudo_lab import docs_block, namespaced

KIND = CommandKind.INVENTORY
INTERNAL = "broker-31.internal"  # resolvable on the jump host only


@dataclass(frozen=True)
class Bastion:
    directory: Path
    broker: BrokerInfo
    jump: BrokerInfo

    @property
    def key(self) -> Path:
        return self.directory / "ssh" / "id_ed25519"

    def known_hosts(self, *, jump: bool = True, broker: bool = True) -> Path:
        """A known_hosts with the jump host's key and the broker's under its internal name,
        as an operator collects them (`ssh-keyscan` from the bastion); either left out."""
        generated = (self.directory / "ssh" / "known_hosts").read_text().splitlines()
        keys = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in generated if line}
        lines = []
        if jump:
            name = f"[{self.jump.host}]:{self.jump.ssh_port}"
            lines.append(f"{name} {keys[name]}")
        if broker:
            key = keys[f"[{self.broker.host}]:{self.broker.ssh_port}"]
            lines.append(f"[{INTERNAL}]:{self.broker.ssh_port} {key}")
        path = self.directory / f"known_hosts-{int(jump)}{int(broker)}"
        path.write_text("\n".join(lines) + "\n")
        return path

    def ssh_config(self, *, identity: bool = True) -> Path:
        path = self.directory / f"ssh_config-{int(identity)}"
        path.write_text(
            "\n".join(
                [
                    "Host broker-31",
                    f"    HostName {INTERNAL}",
                    f"    Port {self.broker.ssh_port}",
                    "    User root",
                    *([f"    IdentityFile {self.key}"] if identity else []),
                    "    ProxyJump bastion",
                    "Host bastion",
                    f"    HostName {self.jump.host}",
                    f"    Port {self.jump.ssh_port}",
                    "    User root",
                    "",
                ]
            )
        )
        return path


@pytest.fixture(scope="module")
def bastion(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bastion]:
    directory = tmp_path_factory.mktemp("bastion")
    broker = BrokerInfo(broker_id=31, host="127.0.0.31", port=0, log_dirs=[])
    jump = BrokerInfo(broker_id=30, host="127.0.0.30", port=0, log_dirs=[])
    hosts = directory / "jump-hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{broker.host} {INTERNAL}\n")
    sshd.up(directory, [broker])
    try:
        sshd.up(
            directory,
            [jump],
            launcher=namespaced({30: [(hosts, Path("/etc/hosts"))]}),
            forwarding=True,
        )
        try:
            yield Bastion(directory, broker, jump)
        finally:
            sshd.down(directory, [jump])
    finally:
        sshd.down(directory, [broker])


def cluster(tmp_path: Path, ssh: dict[str, Any], host: str = "broker-31") -> Any:
    document = {
        "cluster": "c",
        "zookeeper": {"connect": "127.0.0.1:2181"},
        "brokers": [{"id": 31, "host": host, "log_dirs": ["/var/lib/kafka/data"]}],
        "ssh": ssh,
        "service": {"stop": "true", "start": "true"},
    }
    return parse_cluster_config(document, source="cluster.yaml", base_dir=tmp_path)


def run(config: Any, command: str = 'echo "$SSH_CONNECTION"') -> str:
    transport = transports(config)(31)
    try:
        result = transport.run(command, timeout=20, kind=KIND)
    finally:
        transport.close()
    assert result.ok, result.stderr
    return result.stdout


def test_a_host_alias_from_the_ssh_config_is_reached_through_its_jump_host(
    bastion: Bastion, tmp_path: Path
) -> None:
    """cluster.yaml names the alias and the files only: HostName, Port, User, IdentityFile
    and ProxyJump come from the ssh config, and the broker is reached by the name only the
    jump host resolves."""
    config = cluster(
        tmp_path,
        {"config_file": str(bastion.ssh_config()), "known_hosts": str(bastion.known_hosts())},
    )
    transport = transports(config)(31)
    assert isinstance(transport, SshTransport)
    assert transport.description == (
        f"root@{INTERNAL}:{bastion.broker.ssh_port}"
        f" via root@{bastion.jump.host}:{bastion.jump.ssh_port}"
    )
    seen = run(config).split()
    # The broker's sshd saw the connection arrive at its own address and port.
    assert seen[2:] == [bastion.broker.host, str(bastion.broker.ssh_port)], seen
    # This machine cannot reach that name itself: without the jump host there is no way.
    alone = SshTransport(replace(transport.settings, jump=None))
    with pytest.raises(TransportError, match="cannot connect"):
        alone.run("true", timeout=20, kind=KIND)


def test_cluster_yaml_says_first_and_the_ssh_config_fills_in(
    bastion: Bastion, tmp_path: Path
) -> None:
    """A port or user cluster.yaml sets wins over the ssh config's, as ssh's command line
    does: a wrong port there fails, proving it was used."""
    config = cluster(
        tmp_path,
        {
            "config_file": str(bastion.ssh_config()),
            "known_hosts": str(bastion.known_hosts()),
            "port": bastion.jump.ssh_port,  # not the broker's
        },
    )
    transport = transports(config)(31)
    assert isinstance(transport, SshTransport)
    assert transport.settings.port == bastion.jump.ssh_port
    with pytest.raises(TransportError):
        transport.run("true", timeout=20, kind=KIND)


@pytest.mark.parametrize(
    ("jump", "broker", "named"),
    [
        pytest.param(False, True, "the jump host root@127.0.0.30", id="jump-host-unknown"),
        pytest.param(True, False, f"root@{INTERNAL}", id="broker-unknown"),
    ],
)
def test_every_host_key_on_the_way_is_verified(
    bastion: Bastion, tmp_path: Path, jump: bool, broker: bool, named: str
) -> None:
    known_hosts = bastion.known_hosts(jump=jump, broker=broker)
    before = known_hosts.read_text()
    config = cluster(
        tmp_path, {"config_file": str(bastion.ssh_config()), "known_hosts": str(known_hosts)}
    )
    with pytest.raises(HostKeyError) as info:
        run(config)
    assert named in str(info.value) and "is not in" in str(info.value), str(info.value)
    assert known_hosts.read_text() == before


@pytest.fixture
def agent(bastion: Bastion, tmp_path: Path) -> Iterator[str]:
    """A real ssh-agent holding the sandbox's key; its socket."""
    socket = tmp_path / "agent.sock"
    started = subprocess.run(
        ["ssh-agent", "-a", str(socket), "-s"], check=True, capture_output=True, text=True
    )
    pid = int(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        env = {**os.environ, "SSH_AUTH_SOCK": str(socket)}
        subprocess.run(["ssh-add", str(bastion.key)], check=True, capture_output=True, env=env)
        yield str(socket)
    finally:
        os.kill(pid, signal.SIGTERM)


def test_keys_from_ssh_agent(
    bastion: Bastion, tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key file anywhere: the agent's key logs in, through the jump host too."""
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    config = cluster(
        tmp_path,
        {
            "config_file": str(bastion.ssh_config(identity=False)),
            "known_hosts": str(bastion.known_hosts()),
            "agent": True,
        },
    )
    assert run(config)
    direct = cluster(
        tmp_path,
        {
            "user": "root",
            "port": bastion.broker.ssh_port,
            "known_hosts": str(bastion.directory / "ssh" / "known_hosts"),
            "agent": True,
        },
        host=bastion.broker.host,
    )
    assert run(direct)
    # Without the agent, nothing offers a key.
    monkeypatch.delenv("SSH_AUTH_SOCK")
    with pytest.raises(TransportError):
        run(direct)


@pytest.mark.parametrize(
    ("text", "ssh", "expected"),
    [
        pytest.param(
            "Host broker-31\n  HostName h\n  ProxyCommand nc %h %p\n",
            {"user": "u", "key_file": "/k"},
            "no ProxyCommand",
            id="proxy-command",
        ),
        pytest.param(
            "Host broker-31\n  HostName h\n  ProxyJump a,b\n",
            {"user": "u", "key_file": "/k"},
            "one jump host",
            id="jump-chain",
        ),
        pytest.param(
            "Host broker-31\n  ProxyJump a\nHost a\n  ProxyJump b\n",
            {"user": "u", "key_file": "/k"},
            "a jump host reached directly",
            id="jump-behind-a-jump",
        ),
        pytest.param("Host other\n  User u\n", {"key_file": "/k"}, "a user", id="no-user"),
        pytest.param("Host broker-31\n  User u\n", {}, "a key", id="no-key"),
    ],
)
def test_what_cannot_be_honoured_is_a_configuration_error_naming_the_broker(
    tmp_path: Path, text: str, ssh: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    config = cluster(tmp_path, {"config_file": str(path), "known_hosts": "/kh", **ssh})
    with pytest.raises(ClusterConfigError) as info:
        transports(config)(31)
    assert "for broker 31 (broker-31)" in str(info.value) and expected in str(info.value)


def test_without_a_config_file_cluster_yaml_must_say_who_and_which_key(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError, match=r"ssh\.user: expected a user"):
        cluster(tmp_path, {"key_file": "/k", "known_hosts": "/kh"})
    with pytest.raises(ClusterConfigError, match=r"ssh\.key_file: expected a key_file, agent"):
        cluster(tmp_path, {"user": "u", "known_hosts": "/kh"})
    assert cluster(tmp_path, {"user": "u", "agent": True, "known_hosts": "/kh"}).ssh.agent


def test_the_documented_ssh_section_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/configuration.md's `ssh` example in place of its full example's ssh section."""
    document = yaml.safe_load(docs_block("yaml"))
    document["ssh"] = yaml.safe_load(docs_block("yaml", containing="known_hosts_kafka"))["ssh"]
    document["service"] = {
        k: f"/usr/bin/systemctl {v}"
        for k, v in (
            ("stop", "stop kafka"),
            ("start", "start kafka"),
            ("status", "is-active kafka"),
        )
    }
    for name in ("ZK_PASSWORD", "KAFKA_PASSWORD"):
        monkeypatch.setenv(name, "unused")
    config = parse_cluster_config(document, source="cluster.yaml", base_dir=tmp_path)
    assert config.ssh is not None and config.ssh.agent and config.ssh.user is None
    assert config.ssh.config_file == Path("~/.ssh/config").expanduser()
    assert config.sudo_mode(1) == "services"


def test_known_hosts_collected_as_the_docs_say(bastion: Bastion, tmp_path: Path) -> None:
    """docs/configuration.md's `ssh-keyscan -t ed25519 -p PORT HOST`, run from the bastion's
    side of things (here: this machine, which reaches the broker's address), gives the line
    the broker's sshd was started with, and the tool connects with that file alone."""
    broker = bastion.broker
    scanned = subprocess.run(
        ["ssh-keyscan", "-t", "ed25519", "-p", str(broker.ssh_port), broker.host],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    known = tmp_path / "known_hosts_kafka"
    known.write_text(scanned)
    generated = (bastion.directory / "ssh" / "known_hosts").read_text().splitlines()
    (line,) = [g for g in generated if g.startswith(f"[{broker.host}]:{broker.ssh_port} ")]
    assert scanned.split() == line.split()
    fingerprint = subprocess.run(
        ["ssh-keygen", "-lf", str(known)], capture_output=True, text=True, check=True
    ).stdout
    assert "ED25519" in fingerprint
    config = cluster(
        tmp_path,
        {
            "user": "root",
            "key_file": str(bastion.key),
            "port": broker.ssh_port,
            "known_hosts": str(known),
        },
        host=broker.host,
    )
    assert run(config)
