"""scan and check against the sandbox: real ZooKeeper, real broker disks, real sshd, real Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediate.collect.collector import collect
from remediate.config import load_cluster_config
from remediate.formats.logdir import PARTITION_METADATA
from remediate.sandbox import admin, cluster
from remediate.sandbox.plumbing import process
from remediate.sandbox.reproduce import Incident, replica_file_ids
from remediate.scan.findings import ScanReport
from remediate.scan.scanner import classify_on_duckdb, classify_snapshots
from tests import core_install
from tests.sandbox.helpers import replica_dirs
from tests.scan.test_engines import canonical
from tests.wait import wait_until

pytestmark = pytest.mark.slow

TOPIC = "orders"
MISMATCH = {"TOPIC_ID_MISMATCH", "TOPIC_ID_MISMATCH_OUT_OF_ISR"}


def scan_sandbox(spark: Any, directory: Path, tmp: Path) -> ScanReport:
    """The sandbox collected and classified on Spark; the embedded engine must agree on the
    same snapshot (the differential test on the sandbox's own snapshots)."""
    config = load_cluster_config(directory / "cluster.yaml")
    collected = collect(config, tmp / "snapshot")
    report, _ = classify_snapshots(spark, [collected.directory], include_ok=True)
    embedded, _ = classify_on_duckdb([collected.directory], include_ok=True)
    assert canonical(embedded) == canonical(report)
    return report


def defaults_env() -> dict[str, str]:
    """The environment without the suite's REMEDIATE_ENGINE: this module proves each
    command's own engine (tests/conftest.py)."""
    return {k: v for k, v in os.environ.items() if k != "REMEDIATE_ENGINE"}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=defaults_env(),
    )


def assert_findings_match_disk(report: ScanReport, incident: Incident) -> None:
    result = incident.result
    on_disk = replica_file_ids(incident.state, TOPIC)
    expected = {(b, p) for (b, p), file_id in on_disk.items() if file_id != result.new_id}
    found = {
        (f.broker, f.partition) for f in report.findings if f.kind in MISMATCH and f.topic == TOPIC
    }
    assert found == expected and expected, "one mismatch finding per mismatched replica on disk"
    out_of_isr = {
        (f.broker, f.partition) for f in report.findings if f.kind == "TOPIC_ID_MISMATCH_OUT_OF_ISR"
    }
    assert out_of_isr == {(result.restarted_broker, p) for p in result.old_partitions}
    for finding in report.findings:
        if finding.kind in MISMATCH:
            assert (finding.file_topic_id, finding.zk_topic_id) == (result.old_id, result.new_id)
    ok = {(f.broker, f.partition) for f in report.findings if f.kind == "OK"}
    assert ok == set(on_disk) - expected
    assert report.status == "CRITICAL"


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incident]:
    directory = tmp_path_factory.mktemp("scan") / "sandbox"
    cluster.up(directory)
    incident = Incident(directory, topic=TOPIC)
    incident.run()
    yield incident
    incident.close()
    cluster.down(directory)


def test_scan_finds_every_mismatched_replica_after_reproduce(
    spark: Any, reproduced: Incident, tmp_path: Path
) -> None:
    report = scan_sandbox(spark, reproduced.directory, tmp_path)
    assert_findings_match_disk(report, reproduced)
    summary = {b.id: b for b in report.brokers}
    assert all(summary[b].needs_fix for b in (1, 2, 3))
    controller = admin.current_controller(reproduced.zk)
    assert controller is not None
    assert [b.id for b in report.brokers if b.is_controller] == [controller.broker_id]


def test_check_exits_2_and_prints_the_json_contract(reproduced: Incident) -> None:
    result = run_cli("check", "-c", str(reproduced.directory / "cluster.yaml"), "--json")
    assert result.returncode == 2, result.stderr[-2000:]
    document = json.loads(result.stdout)
    assert document["status"] == "CRITICAL"
    assert document["cluster"] == f"sandbox-{reproduced.directory.name}"
    for finding in document["findings"]:
        assert {
            "kind",
            "broker",
            "topic",
            "partition",
            "file_topic_id",
            "zk_topic_id",
            "in_isr",
        } <= set(finding)
    for broker in document["brokers"]:
        assert {"id", "is_controller", "needs_fix", "counts"} <= set(broker)
    one_line = run_cli("check", "-c", str(reproduced.directory / "cluster.yaml"))
    assert one_line.returncode == 2
    assert one_line.stdout.startswith("CRITICAL: 18 replicas checked")
    assert one_line.stdout.count("\n") == 1


def test_scan_and_check_print_nothing_on_stderr_and_both_engines_agree(
    reproduced: Incident,
) -> None:
    """No console noise from Spark or its JVM (nothing the user did not ask for), and `check`
    gives the same document on DuckDB (its default) as on Spark."""
    config = str(reproduced.directory / "cluster.yaml")
    scanned = run_cli("scan", "-c", config, "--json")
    assert scanned.returncode == 2 and scanned.stderr == "", scanned.stderr[-2000:]
    on_duckdb = run_cli("check", "-c", config, "--json")
    on_spark = run_cli("check", "-c", config, "--json", "--engine", "spark")
    assert (on_duckdb.returncode, on_spark.returncode) == (2, 2)
    assert on_duckdb.stderr == on_spark.stderr == "", on_spark.stderr[-2000:]
    assert json.loads(on_duckdb.stdout) == json.loads(on_spark.stdout)
    mixed = run_cli("check", "-c", config, "--spark-master", "local[1]")
    assert "--spark-master needs --engine spark" in mixed.stderr


def test_the_wheel_alone_checks_the_sandbox_and_names_the_spark_extra(
    reproduced: Incident, tmp_path: Path
) -> None:
    """An operator's install: the project's wheel, built here, in a new venv with its core
    dependencies only (tests/core_install.py). `check` reads the sandbox with no Spark (nor
    pytest) there, and `scan`, `plan` and `fix`, which classify on Spark, say in one line what
    installs it."""
    bin_dir = core_install.install(tmp_path)
    present = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import importlib.util as u, sys; print(*[m for m in sys.argv[1:] if u.find_spec(m)])",
            *("pyspark", "py4j", "pytest", "hypothesis", "selenium", "mypy", "build"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert present.stdout.split() == [], "the core install has an extra's package"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        config = str(reproduced.directory / "cluster.yaml")
        return subprocess.run(
            [str(bin_dir / "remediate"), *args, "-c", config],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            cwd=tmp_path,
            env=defaults_env(),
        )

    checked = run("check")
    assert checked.returncode == 2, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert checked.stdout.startswith("CRITICAL: 18 replicas checked") and checked.stderr == ""
    for command in ("scan", "plan", "fix"):
        refused = run(command)
        assert refused.returncode == 3, refused.stdout[-2000:] + refused.stderr[-2000:]
        assert refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr[-3000:]
        assert "pip install 'kafka-topicid-remediate[spark]'" in refused.stderr
    # On the embedded engine the plan needs no PySpark either.
    planned = run("plan", "--engine", "duckdb", "--json")
    assert planned.returncode in (0, 6), planned.stdout[-2000:] + planned.stderr[-2000:]
    assert json.loads(planned.stdout)["steps"], planned.stdout[-2000:]


def test_spark_standalone_cluster_gives_the_same_result(
    spark: Any, reproduced: Incident, tmp_path: Path, spark_standalone: str
) -> None:
    config = load_cluster_config(reproduced.directory / "cluster.yaml")
    snapshot = collect(config, tmp_path / "snapshot").directory
    local, _ = classify_snapshots(spark, [snapshot], include_ok=True)
    # A driver of its own (this process already has a local session), on the standalone master.
    result = run_cli(
        "scan", "--snapshot", str(snapshot), "--spark-master", spark_standalone, "--all", "--json"
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert json.loads(result.stdout) == local.to_json(include_ok=True)


def test_spark_submit_scans_a_fleet(
    spark: Any, reproduced: Incident, tmp_path: Path, sandbox: cluster.SandboxState
) -> None:
    first = collect(
        load_cluster_config(reproduced.directory / "cluster.yaml"), tmp_path / "a"
    ).directory
    zk = cluster.zk_client(sandbox)
    try:
        admin.create_topic(zk, "payments", 3, 3)
        assert wait_until(
            lambda: all(len(replica_dirs(sandbox, "payments", p)) == 3 for p in range(3))
        )
    finally:
        zk.stop()
        zk.close()
    healthy_yaml = tmp_path / "healthy.yaml"
    document = yaml.safe_load((Path(sandbox.directory) / "cluster.yaml").read_text())
    document["cluster"] = "healthy-one"
    healthy_yaml.write_text(yaml.safe_dump(document))
    second = collect(load_cluster_config(healthy_yaml), tmp_path / "b").directory
    import remediate.scan.submit as submit  # noqa: PLC0415

    spark_submit = Path(sys.executable).parent.parent / "lib"
    candidates = list(spark_submit.glob("python3*/site-packages/pyspark/bin/spark-submit"))
    assert candidates, "pyspark's spark-submit not found"
    out = tmp_path / "fleet"
    result = subprocess.run(
        [
            str(candidates[0]),
            "--master",
            "local[2]",
            submit.__file__,
            "--out",
            str(out),
            str(first),
            str(second),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        },
    )
    assert result.returncode == 2, result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    clusters = {row["cluster"] for row in rows}
    assert clusters == {f"sandbox-{reproduced.directory.name}", "healthy-one"}
    healthy = {row["kind"] for row in rows if row["cluster"] == "healthy-one"}
    # A topic new on a 2.8 broker has no partition.metadata until its next LeaderAndIsr.
    assert healthy and healthy <= {"OK", "METADATA_MISSING"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "CRITICAL" and sorted(summary["cluster"]) == sorted(clusters)


def test_before_the_failover_check_warns_that_zookeeper_lost_the_id(
    spark: Any, sandbox: cluster.SandboxState, tmp_path: Path
) -> None:
    directory = Path(sandbox.directory)
    incident = Incident(directory, topic=TOPIC)
    try:
        healthy = scan_sandbox(spark, directory, tmp_path / "healthy")
        assert (healthy.status, healthy.exit_code) == ("OK", 0)
        incident.create_topic()
        incident.produce()
        incident.consume()
        incident.add_partitions_legacy()
        report = scan_sandbox(spark, directory, tmp_path / "after-step-4")
        assert (report.status, report.exit_code) == ("WARNING", 1)
        missing = [f for f in report.findings if f.kind == "ZK_TOPIC_ID_MISSING"]
        assert [(f.topic, f.broker, f.partition) for f in missing] == [(TOPIC, None, None)]
        assert not [f for f in report.findings if f.kind in MISMATCH]
    finally:
        incident.close()


def test_ssh_transport_gives_the_same_findings(
    spark: Any, sandbox_dir: Path, tmp_path: Path
) -> None:
    cluster.up(sandbox_dir, ssh=True)
    incident = Incident(sandbox_dir, topic=TOPIC)
    try:
        incident.run()
        config = load_cluster_config(sandbox_dir / "cluster.yaml")
        assert {b.transport for b in config.brokers} == {"ssh"}
        report = scan_sandbox(spark, sandbox_dir, tmp_path)
        assert_findings_match_disk(report, incident)
    finally:
        incident.close()


def test_hostile_and_broken_things_are_reported_and_never_executed(
    spark: Any, sandbox_dir: Path, tmp_path: Path
) -> None:
    state = cluster.up(sandbox_dir, ssh=True)
    zk = cluster.zk_client(state)
    marker = f"pwned-{uuid.uuid4().hex}"
    # A command in a name would run in the shell's working directory: home, or wherever.
    places = [Path.home(), Path.cwd(), Path("/"), Path("/tmp"), tmp_path]
    try:
        admin.create_topic(zk, "t", 4, 3)
        assert wait_until(lambda: all(len(replica_dirs(state, "t", p)) == 3 for p in range(4)))
    finally:
        zk.stop()
        zk.close()
    broker1 = Path(state.broker(1).log_dirs[0])
    hostile = [
        "lost+found",
        "with space-0",
        "quote'\"-0",
        f"$(touch {marker})-0",
        f"`touch {marker}`-1",
        "new\nline-0",
        "t-0.0123456789abcdef0123456789abcdef-delete",
    ]
    for name in hostile:
        (broker1 / name).mkdir()
    (replica_dirs(state, "t", 0)[1] / PARTITION_METADATA).write_bytes(
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA"
    )
    # Broker 2 lost a log dir (a disk that did not mount).
    broker2 = state.broker(2)
    gone = Path(broker2.log_dirs[1])
    lost = sorted(p for p in range(4) if replica_dirs(state, "t", p).get(2, Path()).parent == gone)
    gone.rename(gone.with_name("unmounted"))
    # Broker 3's host cannot be reached over ssh.
    sshd_pid = process.read_pid(sandbox_dir / "ssh" / "sshd-3.pid")
    assert sshd_pid is not None
    assert process.terminate(sshd_pid, str(sandbox_dir / "ssh" / "sshd-3.conf"), timeout=10)

    report = scan_sandbox(spark, sandbox_dir, tmp_path / "scan")
    assert not [p for p in places if (p / marker).exists()], "a directory name was executed"
    orphans = {f.dir for f in report.findings if f.kind == "ORPHAN_DIR"}
    expected_orphans = {
        "lost+found",
        "with space-0",
        "quote'\"-0",
        f"$(touch {marker})-0",
        f"`touch {marker}`-1",
        "new\\nline-0",
    }
    assert orphans == expected_orphans
    corrupt = [
        (f.broker, f.topic, f.partition) for f in report.findings if f.kind == "METADATA_CORRUPT"
    ]
    assert corrupt == [(1, "t", 0)]
    corrupt_detail = next(f.detail for f in report.findings if f.kind == "METADATA_CORRUPT")
    assert corrupt_detail is not None
    assert "non-zero topic id" in corrupt_detail
    missing: list[int] = []
    for f in report.findings:
        if f.kind == "REPLICA_DIR_MISSING":
            assert f.partition is not None  # a replica's finding names its partition
            missing.append(f.partition)
    missing.sort()
    assert lost and missing == lost
    assert all(
        "missing" in (f.detail or "") for f in report.findings if f.kind == "REPLICA_DIR_MISSING"
    )
    unreachable = [f for f in report.findings if f.kind == "BROKER_UNREACHABLE"]
    assert [f.broker for f in unreachable] == [3]
    assert not [f for f in report.findings if f.broker == 3 and f.kind != "BROKER_UNREACHABLE"]
    assert report.status == "CRITICAL"
    assert (
        yaml.safe_load((sandbox_dir / "cluster.yaml").read_text())["brokers"][2]["transport"]
        == "ssh"
    )
