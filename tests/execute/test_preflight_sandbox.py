"""`check --before kraft-migration` on the sandbox: the incident at each of its stages, as the
preflight names it, and the preflight passing once `fix --yes` has repaired it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remediate.sandbox import cluster
from remediate.sandbox.reproduce import replica_file_ids
from tests.execute.sandbox_tools import run_cli
from tests.execute.test_restore_sandbox import TOPIC, legacy_add

pytestmark = pytest.mark.slow


def preflight(config: str) -> tuple[int, dict[str, Any]]:
    checked = run_cli("check", "-c", config, "--before", "kraft-migration", "--json")
    assert checked.returncode in (0, 2), checked.stdout[-2000:] + checked.stderr[-2000:]
    return checked.returncode, json.loads(checked.stdout)


def test_the_preflight_names_each_hazard_until_the_fix_and_then_passes(tmp_path: Path) -> None:
    directory = tmp_path / "sandbox"
    cluster.up(directory, kafka_version="3.4")
    incident = None
    try:
        incident = legacy_add(directory)
        config = str(directory / "cluster.yaml")

        # The id is gone from ZooKeeper: the migration would stop on the topic.
        code, found = preflight(config)
        assert code == 2 and found["safe"] is False
        assert [(h["kind"], h.get("topic")) for h in found["hazards"]] == [
            ("TOPIC_WITHOUT_ID", TOPIC)
        ]
        text = run_cli("check", "-c", config, "--before", "kraft-migration")
        assert text.returncode == 2
        assert text.stdout.startswith("NOT SAFE to migrate to KRaft: 1 hazard(s)\n")
        assert f"TOPIC_WITHOUT_ID: topic {TOPIC} has no topic_id" in text.stdout

        # After a failover every replica holds the id ZooKeeper no longer has: the migration
        # would set every one aside, and no partition's data would be served.
        incident.failover()
        code, found = preflight(config)
        assert code == 2
        strays = [h for h in found["hazards"] if h["kind"] == "STRAY_REPLICAS"]
        files = replica_file_ids(incident.state, TOPIC)
        assert {(h["topic"], h["partition"]) for h in strays} == {(TOPIC, p) for _, p in files}
        for hazard in strays:
            assert hazard["stray"] == [1, 2, 3]
            assert hazard["holding_zk_id"] == []
            assert hazard["data_survives"] is False
            assert isinstance(hazard["bytes_at_risk"], int) and hazard["bytes_at_risk"] >= 0
            assert f"holds {incident.result.old_id}" in hazard["detail"]
        assert sum(h["bytes_at_risk"] for h in strays) > 0  # the records produced before

        fixed = run_cli("fix", "-c", config, "--yes", "--json")
        assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-1000:]
        code, found = preflight(config)
        assert (code, found["safe"], found["hazards"]) == (0, True, []), found
    finally:
        if incident is not None:
            incident.close()
        cluster.down(directory)
