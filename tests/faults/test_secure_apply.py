"""A repair through ZooKeeper's mutual-TLS port with a SASL DIGEST-MD5 login, the lock under a
SASL ACL: `fix --yes` on the sandbox whose ZooKeeper serves its brokers in plaintext and the
operator over TLS, as a hardened cluster is set up. The run's lock, reads and znode write all go
through the secured session; without the SASL login the lock is refused and nothing changes;
the password appears nowhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.security import make_acl

from remediate.sandbox import admin, cluster
from remediate.sandbox.plumbing import process, zkserver
from tests.collect.test_zookeeper_secure import sasl_jaas, tls_server_settings
from tests.execute.sandbox_tools import run_cli
from tests.execute.test_restore_sandbox import TOPIC, legacy_add, without_lock
from tests.plan.test_plan_sandbox import zookeeper_tree
from tests.wait import wait_until

pytestmark = pytest.mark.slow

USER = "remediate"
PASSWORD = "tls-sasl-secret-sentinel"


def secure_zookeeper(directory: Path, state: cluster.SandboxState) -> tuple[int, Path]:
    """Restart the sandbox's ZooKeeper (same data, same plain port for the brokers) with a
    mutual-TLS port and SASL logins accepted; returns (TLS port, certificate directory)."""
    certs = directory / "certs"
    certs.mkdir()
    tls, secure_port = tls_server_settings(certs)
    jaas = sasl_jaas(certs, USER, PASSWORD)
    zk_dir = directory / "zookeeper"
    pid = cluster.zookeeper_pid(directory)
    assert pid is not None
    process.terminate(pid, "QuorumPeerMain", timeout=10)
    zkserver.write_config(
        zk_dir,
        state.zookeeper_host,
        state.zookeeper_port,
        extra={
            **tls,
            "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        },
    )
    pid = zkserver.start(
        zk_dir,
        state.zookeeper_host,
        state.zookeeper_port,
        classpath=zkserver.NETTY_FOR_TLS,
        jvm_flags=(jaas,),
    )
    (zk_dir / "zookeeper.pid").write_text(f"{pid}\n")
    return secure_port, certs


def secured_yaml(directory: Path, secure_port: int, certs: Path, *, sasl: bool) -> Path:
    config = directory / "cluster.yaml"
    settings: dict[str, Any] = yaml.safe_load(config.read_text())
    settings["zookeeper"]["connect"] = f"127.0.0.1:{secure_port}"
    settings["zookeeper"]["tls"] = {
        "ca_file": str(certs / "ca.pem"),
        "cert_file": str(certs / "client.pem"),
        "key_file": str(certs / "client.key"),
    }
    if sasl:
        settings["zookeeper"]["auth"] = {
            "scheme": "sasl",
            "username": USER,
            "password_env": "REMEDIATE_ZK_PASSWORD",
        }
    path = directory / ("cluster-tls-sasl.yaml" if sasl else "cluster-tls.yaml")
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


@pytest.mark.fault(
    "Security",
    "ZooKeeper reached over mutual TLS with a SASL DIGEST-MD5 login, the run's lock under a"
    " SASL ACL",
    "`fix --yes` takes the lock, reads and writes through the secured session and restores the"
    " topic; without the SASL login the lock is refused and nothing changes; the password is in"
    " no output, journal or report",
)
def test_a_repair_through_tls_and_sasl_takes_the_lock_under_its_acl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "sandbox"
    state = cluster.up(directory, kafka_version="3.4")
    try:
        secure_port, certs = secure_zookeeper(directory, state)
        incident = legacy_add(directory)
        zk = incident.zk
        wait_until(lambda: len(zk.get_children("/brokers/ids")) == 3, "brokers registered")
        settings = yaml.safe_load((directory / "cluster.yaml").read_text())
        locks = f"/remediate/locks/{settings['cluster']}"
        zk.ensure_path(locks)
        # Anyone may look; only the SASL user may take a lock.
        zk.set_acls(
            locks, [make_acl("sasl", USER, all=True), make_acl("world", "anyone", read=True)]
        )
        monkeypatch.setenv("REMEDIATE_ZK_PASSWORD", PASSWORD)

        tls_only = secured_yaml(directory, secure_port, certs, sasl=False)
        before = without_lock(zookeeper_tree(zk))
        refused = run_cli("fix", "-c", str(tls_only), "--yes", "--json")
        assert refused.returncode != 0, refused.stdout[-2000:]
        assert f"cannot take the lock {locks}" in refused.stderr
        assert "NoAuth" in refused.stderr
        assert without_lock(zookeeper_tree(zk)) == before
        assert admin.read_topic(zk, TOPIC)[0].topic_id is None

        secured = secured_yaml(directory, secure_port, certs, sasl=True)
        fixed = run_cli("fix", "-c", str(secured), "--yes", "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
        document = json.loads(fixed.stdout)
        assert document["run"]["status"] == "completed"
        assert str(admin.read_topic(zk, TOPIC)[0].topic_id) == incident.result.old_id
        checked = run_cli("check", "-c", str(secured), "--json")
        assert checked.returncode == 0, checked.stdout[-2000:]

        outputs = [refused.stdout, refused.stderr, fixed.stdout, fixed.stderr, checked.stdout]
        assert not [o for o in outputs if PASSWORD in o]
        written = [
            p
            for p in (directory / "journal").rglob("*")
            if p.is_file() and PASSWORD.encode() in p.read_bytes()
        ]
        assert written == []
        incident.close()
    finally:
        cluster.down(directory)
