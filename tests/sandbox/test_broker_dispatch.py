"""A broker answers replica requests from the moment its listener is up.

Kafka starts the socket server before it registers in ZooKeeper, and the controller sends
LeaderAndIsr as soon as it sees the registration: a broker whose own controller component has
not started yet must still act on it, or the restarted broker never rejoins the ISR.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remediate.sandbox import wire
from remediate.sandbox.broker import Broker
from remediate.sandbox.config import BrokerSettings
from remediate.sandbox.replica import ReplicaManager


def _broker_between_registration_and_controller(tmp_path: Path) -> Broker:
    settings = BrokerSettings(
        broker_id=2,
        host="127.0.0.12",
        port=19092,
        log_dirs=(tmp_path / "data-0",),
        zookeeper_connect="127.0.0.1:2181",
        kafka_version="2.8",
        properties={},
    )
    broker = Broker(settings)

    def no_alter_isr(_: list[dict[str, Any]]) -> dict[str, Any] | None:
        return None

    broker.replicas = ReplicaManager(
        broker_id=2,
        kafka_version="2.8",
        log_dirs=[],
        logs={},
        replica_lag_time_max_ms=30000,
        fetch_wait_max_ms=500,
        min_isr_for=lambda _: 1,
        send_alter_isr=no_alter_isr,
    )
    broker.replicas.broker_epoch = 73
    assert broker.controller is None
    return broker


def test_leader_and_isr_is_served_before_the_controller_component_starts(
    tmp_path: Path,
) -> None:
    broker = _broker_between_registration_and_controller(tmp_path)
    response = broker._dispatch(
        {
            "api": "LeaderAndIsr",
            "controller_id": 3,
            "controller_epoch": 2,
            "broker_epoch": 73,
            "topic_ids": {},
            "partitions": [],
            "live_leaders": {},
        }
    )
    assert response["error"] == wire.NONE


def test_controller_requests_before_the_controller_component_starts_are_not_controller(
    tmp_path: Path,
) -> None:
    broker = _broker_between_registration_and_controller(tmp_path)
    for api in ("AlterIsr", "ControlledShutdown"):
        assert broker._dispatch({"api": api, "broker_id": 1})["error"] == wire.NOT_CONTROLLER
