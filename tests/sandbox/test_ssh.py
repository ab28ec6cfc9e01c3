"""`sandbox up --ssh`: one real sshd per broker, reachable only with known host keys."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import paramiko
import pytest
import yaml

from remediate.sandbox import cluster
from tests.wait import wait_until

pytestmark = pytest.mark.slow


def connect(config: dict[str, Any], broker: dict[str, Any], known_hosts: str) -> paramiko.SSHClient:
    ssh = paramiko.SSHClient()
    if Path(known_hosts).exists():
        ssh.load_host_keys(known_hosts)
    ssh.set_missing_host_key_policy(paramiko.RejectPolicy())
    ssh.connect(
        broker["host"],
        port=broker["ssh_port"],
        username=config["ssh"]["user"],
        key_filename=config["ssh"]["key_file"],
        look_for_keys=False,
        allow_agent=False,
        timeout=10,
    )
    return ssh


def run(ssh: paramiko.SSHClient, command: str) -> tuple[int, str]:
    _, stdout, _ = ssh.exec_command(command, timeout=60)
    status = stdout.channel.recv_exit_status()
    return status, stdout.read().decode()


def test_ssh_sandbox_runs_service_commands_over_verified_ssh(
    sandbox_dir: Path, tmp_path: Path
) -> None:
    state = cluster.up(sandbox_dir, ssh=True)
    config = yaml.safe_load((sandbox_dir / "cluster.yaml").read_text())
    assert {b["transport"] for b in config["brokers"]} == {"ssh"}
    for broker in config["brokers"]:
        assert broker["host"] == f"127.0.0.{10 + broker['id']}"
        ssh = connect(config, broker, config["ssh"]["known_hosts"])
        try:
            status, out = run(ssh, f"ls {shlex.quote(broker['log_dirs'][0])}")
            assert status == 0 and "meta.properties" in out.split()
        finally:
            ssh.close()

    broker = config["brokers"][1]
    ssh = connect(config, broker, config["ssh"]["known_hosts"])
    try:
        assert run(ssh, config["service"]["stop"].format(broker_id=broker["id"]))[0] == 0
        assert cluster.broker_pid(sandbox_dir, broker["id"]) is None
        assert run(ssh, config["service"]["status"].format(broker_id=broker["id"]))[0] == 3
        assert run(ssh, config["service"]["start"].format(broker_id=broker["id"]))[0] == 0
    finally:
        ssh.close()
    # The broker started over ssh outlives the ssh session.
    assert wait_until(lambda: cluster.status(sandbox_dir)["brokers"][1]["registered"], timeout=30)
    assert cluster.broker_pid(sandbox_dir, broker["id"]) is not None

    # An unknown host key is refused, and so is a changed one.
    with pytest.raises(paramiko.SSHException):
        connect(config, broker, str(tmp_path / "empty_known_hosts"))
    wrong = tmp_path / "wrong_known_hosts"
    other_key = (sandbox_dir / "ssh" / "host-1_ed25519.pub").read_text().split()
    wrong.write_text(f"[{broker['host']}]:{broker['ssh_port']} {other_key[0]} {other_key[1]}\n")
    with pytest.raises(paramiko.BadHostKeyException):
        connect(config, broker, str(wrong))
    assert state.ssh
