"""LEADER_FENCED_BY_STALE_ID against the sandbox (2.8 emulation): none after step 7 of the
incident, every old partition whose leader epoch the step-8 restart moved after it, with its
evidence, in `scan` and in `check --json`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remediate.sandbox import cluster
from remediate.sandbox.reproduce import Incident, partition_states, replica_file_ids
from remediate.scan.findings import Finding
from remediate.scan.kinds import FindingKind
from tests.scan.test_scan_sandbox import run_cli, scan_sandbox

pytestmark = pytest.mark.slow

TOPIC = "orders"
FENCED = FindingKind.LEADER_FENCED_BY_STALE_ID


class Run:
    def __init__(self, incident: Incident) -> None:
        self.incident = incident
        self.before_restart: list[Finding] = []
        self.epochs_before: dict[int, int] = {}


@pytest.fixture(scope="module")
def reproduced(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("fenced")
    directory = root / "sandbox"
    cluster.up(directory)
    incident = Incident(directory, topic=TOPIC)
    run = Run(incident)
    try:
        for step in (
            incident.create_topic,
            incident.produce,
            incident.consume,
            incident.add_partitions_legacy,
            incident.produce_and_consume_all,
            incident.failover,
            incident.still_works,
        ):
            step()
        old = incident.result.old_partitions
        run.epochs_before = {
            p: s.leader_epoch for p, s in partition_states(incident.zk, TOPIC, old).items()
        }
        run.before_restart = list(scan_sandbox(spark, directory, root / "step7").findings)
        incident.restart_one_broker()
        yield run
    finally:
        incident.close()
        cluster.down(directory)


def test_no_leader_is_fenced_before_the_restart(reproduced: Run) -> None:
    assert [f for f in reproduced.before_restart if f.kind == FENCED] == []


def test_the_restart_fences_the_old_partitions_it_moved(
    spark: Any, reproduced: Run, tmp_path: Path
) -> None:
    incident = reproduced.incident
    result = incident.result
    states = partition_states(incident.zk, TOPIC, result.old_partitions)
    on_disk = replica_file_ids(incident.state, TOPIC)
    expected = {
        (state.leader, p)
        for p, state in states.items()
        if state.leader >= 0
        and state.leader_epoch > reproduced.epochs_before[p]
        and on_disk.get((state.leader, p)) == result.old_id
    }
    assert expected, "the restart moved the leader or ISR of an old partition"
    report = scan_sandbox(spark, incident.directory, tmp_path)
    fenced = [f for f in report.findings if f.kind == FENCED]
    assert {(f.broker, f.partition) for f in fenced} == expected
    assert report.status == "CRITICAL"
    for finding in fenced:
        evidence = finding.evidence
        assert evidence is not None
        assert (finding.topic, finding.severity) == (TOPIC, "CRITICAL")
        assert (evidence["leader_file_topic_id"], evidence["zk_topic_id"]) == (
            result.old_id,
            result.new_id,
        )
        assert evidence["zk_leader_epoch"] == states[finding.partition or 0].leader_epoch
        assert evidence["zk_leader_epoch"] > evidence["leader_epoch_latest"]
        assert evidence["state_changed_since_topic_write"] is True
        if finding.broker != result.restarted_broker:
            assert evidence["restarted_since_topic_write"] is False
        assert evidence["state_change_log"] == "read"
        assert evidence["rejection_lines"] >= 1
        assert evidence["rejection_memory_topic_id"] == result.old_id


def test_check_json_shows_the_fenced_leaders(reproduced: Run) -> None:
    outcome = run_cli("check", "-c", str(reproduced.incident.directory / "cluster.yaml"), "--json")
    assert outcome.returncode == 2, outcome.stderr[-2000:]
    document = json.loads(outcome.stdout)
    fenced = [f for f in document["findings"] if f["kind"] == FENCED]
    assert fenced
    for finding in fenced:
        assert finding["severity"] == "CRITICAL"
        assert finding["evidence"]["zk_topic_id"] == reproduced.incident.result.new_id
