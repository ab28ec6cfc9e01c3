"""Kafka's listener secured as production clusters run it, on real brokers: every listener, the
brokers' own included, is SSL with client certificates (mTLS) on real 2.8.2 with two log dirs
(the repair that moves replicas: every admin request goes through it), and SASL_SSL with
SCRAM-SHA-512 on real 3.9.2 (the restore). `sandbox up --kafka-security` makes the CA, the
certificates and the SCRAM users and writes cluster.yaml's kafka section; the sandbox's own
clients produce and consume through the same listener.

`fix --yes` heals each with hostname verification on, and nothing acknowledged is lost; the
tool's password and its private key appear in no output, log, journal (local or ZooKeeper's
copy), plan, report or backup. Hostname verification is honoured: a broker reached at an
address its certificate does not name is refused, unless cluster.yaml turns it off.

Slow: real Kafka's incident on each (about 20 s), a plan, a fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediate.config import load_cluster_config
from remediate.errors import KafkaAdminError, SandboxError
from remediate.execute.journal_mirror import read_run
from remediate.sandbox import cluster
from remediate.sandbox.real.security import KafkaSecurity, SecurityFiles
from remediate.state import ClusterState
from remediate.workflows import kafka_admin
from remediate.zookeeper import ZkSettings, connect
from tests.acceptance.repair_lab import (
    BYSTANDER,
    TOPIC,
    Reproduced,
    lost,
    metadata_files,
    reproduce_and_plan,
    unconverged,
)
from tests.execute.sandbox_tools import run_cli
from tests.faults.kafka_proxy import KafkaProxy

pytestmark = pytest.mark.slow

LABS = [
    pytest.param(
        ("real-2.8.2", KafkaSecurity.SSL),
        id="real-2.8.2-mtls",
        marks=pytest.mark.real_kafka("2.8.2"),
    ),
    pytest.param(
        ("real-3.9.2", KafkaSecurity.SASL_SSL),
        id="real-3.9.2-scram",
        marks=pytest.mark.real_kafka("3.9.2"),
    ),
]
STEPS = {KafkaSecurity.SSL: {"move"}, KafkaSecurity.SASL_SSL: {"restore"}}


@pytest.fixture(scope="module", params=LABS)
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Reproduced, KafkaSecurity]]:
    kafka, security = request.param
    lab = reproduce_and_plan(
        tmp_path_factory.mktemp(f"secured-{security}") / "sandbox",
        kafka=kafka,
        kafka_security=security,
    )
    yield lab, security
    lab.close()


def secrets_of(lab: Reproduced, security: KafkaSecurity) -> dict[str, bytes]:
    """What must appear nowhere but in the files that hold it: the tool's password (SCRAM) or
    its private key (mTLS; its PEM body, the part a log would show)."""
    files = SecurityFiles(lab.directory / "tls")
    if security is KafkaSecurity.SASL_SSL:
        return {"the tool's password": files.password("remediate").read_bytes()}
    body = b"".join(files.client_key.read_bytes().splitlines()[1:-1])
    return {"the tool's private key": body[16:64]}


def test_the_sandbox_writes_the_tools_kafka_section_and_no_secret_in_it(
    secured: tuple[Reproduced, KafkaSecurity],
) -> None:
    lab, security = secured
    kafka = lab.settings["kafka"]
    assert kafka["security_protocol"] == kafka["listener"] == security.protocol
    assert "password" not in kafka.get("sasl", {})  # a file, never the secret itself
    assert lab.plan["kafka"]["unknown"] == {}  # each broker's release read through it
    for name, secret in secrets_of(lab, security).items():
        assert secret not in lab.config.read_bytes(), name
        assert secret not in (lab.directory / "sandbox.json").read_bytes(), name


@pytest.mark.timeout(600)
def test_fix_heals_it_through_the_secured_listener(
    secured: tuple[Reproduced, KafkaSecurity],
) -> None:
    lab, security = secured
    fixed = run_cli("fix", "-c", str(lab.config), "--yes", "--json", "--log-json", timeout=600)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    document: dict[str, Any] = json.loads(fixed.stdout)
    assert document["applied"] is True and document["check"]["status"] == "OK"
    # 2.8: the replicas move (and the old id may be written back: move-restore-id); 3.9: the
    # restore. Every step that asks Kafka goes through the secured listener.
    assert STEPS[security] <= {s["kind"] for s in document["plan"]["steps"]}
    assert unconverged(lab) == []
    assert lost(lab, TOPIC, lab.acked) == []
    assert metadata_files(lab.state, BYSTANDER) == lab.bystander_files
    run_id = document["run"]["run_id"]
    report = run_cli("report", "-c", str(lab.config), "--run", run_id, "--json")
    assert report.returncode == 0, report.stderr
    # Every output, the local journal and log, the backups, the plans, the report, and the
    # journal's copy in ZooKeeper.
    written = [fixed.stdout.encode(), fixed.stderr.encode(), report.stdout.encode()]
    for root in (lab.journal_dir, lab.backup_dir, lab.directory / "plan.json"):
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        written += [p.read_bytes() for p in paths]
    zk = connect(ZkSettings(lab.state.zk_connect))
    try:
        stored = read_run(zk, lab.settings["cluster"], run_id)
    finally:
        zk.close()
    assert stored is not None and stored.lines
    written += [*stored.lines, stored.plan or b""]
    for name, secret in secrets_of(lab, security).items():
        assert not [w for w in written if secret in w], f"{name} was written"


def test_doctor_finds_everything_in_place_through_the_secured_listener(
    secured: tuple[Reproduced, KafkaSecurity],
) -> None:
    """Each broker's release read over mTLS or SCRAM, the Cluster operations the moves need
    granted (no authorizer: all), and no secret in what doctor prints."""
    lab, security = secured
    done = run_cli("doctor", "-c", str(lab.config), "--json")
    document: dict[str, Any] = json.loads(done.stdout)
    problems = [f for f in document["findings"] if f["status"] != "OK"]
    assert (done.returncode, problems) == (0, []), document
    releases = {f["where"] for f in document["findings"] if f["item"] == "kafka release"}
    assert releases == {f"broker {b.broker_id}" for b in lab.state.brokers}
    for name, secret in secrets_of(lab, security).items():
        assert secret not in done.stdout.encode() + done.stderr.encode(), name


def test_hostname_verification_is_on_by_default_and_honoured(
    secured: tuple[Reproduced, KafkaSecurity], tmp_path: Path
) -> None:
    """A proxy on 127.0.0.1 in front of a broker: an address the broker's certificate does not
    name. Bootstrapping there is refused while verification is on (the default), and taken
    once cluster.yaml says `verify_hostname: false`."""
    lab, _ = secured
    broker = lab.state.brokers[0]
    proxy = KafkaProxy("127.0.0.1", (broker.host, broker.port), frames=False)
    try:
        settings = lab.settings
        settings["kafka"]["bootstrap"] = [proxy.address]
        settings["kafka"]["request_timeout_s"] = 5  # a refused bootstrap gives up after it
        state = ClusterState(None, None, None, brokers={}, topics={}, partitions={})
        verified = tmp_path / "verified.yaml"
        verified.write_text(yaml.safe_dump(settings))
        with pytest.raises(KafkaAdminError, match=r"(?i)certificate|hostname|IP address mismatch"):
            kafka_admin(load_cluster_config(verified), state).close()
        settings["kafka"]["tls"]["verify_hostname"] = False
        unverified = tmp_path / "unverified.yaml"
        unverified.write_text(yaml.safe_dump(settings))
        kafka_admin(load_cluster_config(unverified), state).close()
    finally:
        proxy.close()


def test_the_sandbox_refuses_a_secured_listener_on_emulated_brokers(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="needs real brokers"):
        cluster.up(tmp_path / "s", kafka_security=KafkaSecurity.SSL)
    assert not (tmp_path / "s" / "sandbox.json").exists()
