"""`sandbox up --racks N`: broker.rack round-robin over rack-0 ... rack-(N-1) in broker id
order, in each broker's server.properties (emulated and real) and registration, kept in the
sandbox's state and across a restart."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from remediate.cli import cli
from remediate.collect.cluster_state import read_cluster_state
from remediate.errors import SandboxError
from remediate.formats.properties import load_properties
from remediate.formats.znodes import broker_path
from remediate.sandbox import admin, cluster
from remediate.sandbox.emulated.config import read_server_properties
from remediate.sandbox.real import jvm_broker, releases
from remediate.state import ClusterState
from remediate.zookeeper import ZkSettings, connect

FOUR_OVER_THREE = {1: "rack-0", 2: "rack-1", 3: "rack-2", 4: "rack-0"}


def _new_state(directory: Path, kafka: str) -> cluster.SandboxState:
    return cluster.SandboxState(
        directory=str(directory),
        zookeeper_host="127.0.0.1",
        zookeeper_port=2181,
        kafka_version="2.8",
        kafka=kafka,
        racks=3,
    )


def _properties(directory: Path, broker_id: int) -> dict[str, str]:
    path = cluster.broker_dir(directory, broker_id) / "server.properties"
    return load_properties(path.read_bytes(), source=str(path))


# -- which broker gets which rack --------------------------------------------------------------


def test_racks_go_round_robin_in_ascending_broker_id_order() -> None:
    assert cluster.broker_racks([4, 2, 3, 1], 3) == FOUR_OVER_THREE
    assert cluster.broker_racks([7, 5], 1) == {5: "rack-0", 7: "rack-0"}
    # More racks than brokers: the racks past the last broker's hold nobody.
    assert cluster.broker_racks([1, 2], 5) == {1: "rack-0", 2: "rack-1"}
    assert cluster.broker_racks([1, 2, 3], None) == {}


def test_a_count_of_racks_below_one_is_refused_naming_the_option() -> None:
    with pytest.raises(SandboxError, match=r"--racks: expected a number of racks of 1 or more"):
        cluster.broker_racks([1, 2, 3], 0)
    with pytest.raises(SandboxError, match="not -2"):
        cluster.BrokerLayout(brokers=3, racks=-2)


def test_racks_and_a_broker_rack_property_together_are_refused() -> None:
    with pytest.raises(SandboxError, match=r"--racks and --broker-property broker.rack=\.\.\."):
        cluster.BrokerLayout(brokers=3, racks=2, properties={"broker.rack": "a"})


def test_the_command_line_refuses_zero_racks_before_starting_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sandbox", "up", "--dir", str(tmp_path), "--racks", "0"])
    assert result.exit_code == 2
    assert "--racks" in result.output and "0 is not in the range x>=1" in result.output
    assert not (tmp_path / cluster.STATE_FILE).exists()


# -- the layout: server.properties and the state -----------------------------------------------


def test_real_brokers_server_properties_hold_their_rack(tmp_path: Path) -> None:
    real = releases.release("real-2.8.2")
    state = _new_state(tmp_path, real.name)
    cluster.lay_out_brokers(state, cluster.BrokerLayout(brokers=4, real=real, racks=3))
    for broker_id, rack in FOUR_OVER_THREE.items():
        properties = _properties(tmp_path, broker_id)
        assert properties["broker.rack"] == rack
        assert properties["broker.id"] == str(broker_id)
    assert {b.broker_id: b.rack for b in state.brokers} == FOUR_OVER_THREE
    # Without racks, no broker.rack: Kafka's default, no rack at all.
    plain = _new_state(tmp_path / "plain", real.name)
    cluster.lay_out_brokers(plain, cluster.BrokerLayout(brokers=2, real=real))
    assert "broker.rack" not in _properties(tmp_path / "plain", 1)
    assert [b.rack for b in plain.brokers] == [None, None]


def test_real_server_properties_render_the_rack_among_the_callers_settings() -> None:
    values = jvm_broker.server_properties(
        broker_id=2,
        host="127.0.0.12",
        port=9092,
        log_dirs=[Path("/d")],
        zookeeper_connect="127.0.0.1:2181",
        brokers=3,
        overrides=cluster.BrokerLayout(brokers=3, racks=3).properties_of(2),
    )
    assert values["broker.rack"] == "rack-1"


def test_emulated_brokers_read_their_rack_from_server_properties(tmp_path: Path) -> None:
    state = _new_state(tmp_path, jvm_broker.EMULATED)
    layout = cluster.BrokerLayout(brokers=4, racks=3, properties={"num.io.threads": "2"})
    cluster.lay_out_brokers(state, layout)
    for broker_id, rack in FOUR_OVER_THREE.items():
        settings = read_server_properties(
            cluster.broker_dir(tmp_path, broker_id) / "server.properties"
        )
        assert settings.rack == rack
        assert settings.properties["num.io.threads"] == "2"


def test_the_racks_are_kept_in_sandbox_json(tmp_path: Path) -> None:
    state = _new_state(tmp_path, jvm_broker.EMULATED)
    cluster.lay_out_brokers(state, cluster.BrokerLayout(brokers=4, racks=3))
    cluster.save_state(state)
    saved = json.loads((tmp_path / cluster.STATE_FILE).read_text())
    assert saved["racks"] == 3
    assert [b["rack"] for b in saved["brokers"]] == ["rack-0", "rack-1", "rack-2", "rack-0"]
    assert cluster.load_state(tmp_path) == state


def test_a_sandbox_json_written_before_racks_reads_as_no_racks(tmp_path: Path) -> None:
    state = _new_state(tmp_path, jvm_broker.EMULATED)
    cluster.lay_out_brokers(state, cluster.BrokerLayout(brokers=2))
    older = asdict(state)
    del older["racks"]
    for broker in older["brokers"]:
        del broker["rack"]
    (tmp_path / cluster.STATE_FILE).write_text(json.dumps(older))
    loaded = cluster.load_state(tmp_path)
    assert loaded.racks is None and [b.rack for b in loaded.brokers] == [None, None]


# -- on a running emulated sandbox -------------------------------------------------------------


def _remediate(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, check=False, timeout=120
    )


def _collected(state: cluster.SandboxState) -> ClusterState:
    zk = connect(ZkSettings(state.zk_connect))
    try:
        return read_cluster_state(zk)
    finally:
        zk.close()


@pytest.mark.slow
def test_emulated_brokers_register_their_racks_and_keep_them_across_a_restart(
    sandbox_dir: Path,
) -> None:
    where = ("--dir", str(sandbox_dir))
    started = _remediate("sandbox", "up", *where, "--brokers", "4", "--racks", "3", "--json")
    assert started.returncode == 0, started.stderr
    status = json.loads(started.stdout)
    assert status["racks"] == 3
    assert {b["id"]: b["rack"] for b in status["brokers"]} == FOUR_OVER_THREE
    state = cluster.load_state(sandbox_dir)

    before = _collected(state)
    assert {b: r.rack for b, r in before.brokers.items()} == FOUR_OVER_THREE
    # As BrokerIdZNode.encode writes it: a "rack" string in the registration's JSON.
    zk = cluster.zk_client(state)
    try:
        raw = {b: json.loads(zk.get(broker_path(b))[0]) for b in FOUR_OVER_THREE}
        # The sandbox's own topic creation places replicas as Kafka does with racks: each
        # partition on three racks (rack-unaware placement puts 1 and 4, both rack-0, together).
        placed = admin.create_topic(zk, "spread", 4, 3)
    finally:
        zk.stop()
        zk.close()
    assert {b: doc["rack"] for b, doc in raw.items()} == FOUR_OVER_THREE
    assert placed.partitions == admin.assign_replicas_rack_aware(FOUR_OVER_THREE, 4, 3)
    for replicas in placed.partitions.values():
        assert len({FOUR_OVER_THREE[b] for b in replicas}) == 3, placed.partitions

    # Broker 4 (rack-0 again, the wrap) registers anew after a restart, with its rack.
    stopped = _remediate("sandbox", "broker", "stop", "--id", "4", *where)
    assert stopped.returncode == 0, stopped.stderr
    again = _remediate("sandbox", "broker", "start", "--id", "4", "--wait", *where)
    assert again.returncode == 0, again.stderr
    after = _collected(state)
    assert after.brokers[4].epoch != before.brokers[4].epoch
    assert {b: r.rack for b, r in after.brokers.items()} == FOUR_OVER_THREE
    assert cluster.load_state(sandbox_dir).racks == 3
