"""A broker answers replica requests from the moment its listener is up.

Kafka starts the socket server before it registers in ZooKeeper, and the controller sends
LeaderAndIsr as soon as it sees the registration: a broker whose own controller component has
not started yet must still act on it, or the restarted broker never rejoins the ISR.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from remediate.sandbox.emulated import wire
from remediate.sandbox.emulated.broker import Broker
from remediate.sandbox.emulated.config import BrokerSettings
from remediate.sandbox.emulated.replica import Partition, ReplicaManager


def _replica_manager(
    send_alter_isr: Callable[[list[dict[str, Any]]], dict[str, Any] | None],
) -> ReplicaManager:
    """Broker 2's replica manager with no logs."""
    return ReplicaManager(
        broker_id=2,
        kafka_version="2.8",
        log_dirs=[],
        logs={},
        replica_lag_time_max_ms=30000,
        fetch_wait_max_ms=500,
        fetch_backoff_ms=200,
        min_isr_for=lambda _: 1,
        send_alter_isr=send_alter_isr,
    )


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
    broker.replicas = _replica_manager(lambda _: None)
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


def test_an_alter_isr_while_zookeeper_is_lost_is_retried_not_fatal(tmp_path: Path) -> None:
    """With its session expired or its connection closed, a broker cannot find the controller:
    the AlterIsr is retried later (the sender thread once died here, and that broker's ISRs
    never expanded again)."""
    broker = _broker_between_registration_and_controller(tmp_path)
    broker.zk = KazooClient("127.0.0.1:1")  # never connected: every call raises, like a lost one
    assert broker._send_alter_isr([{"topic": "t", "partition": 0}]) is None


def test_the_alter_isr_sender_outlives_an_error_in_sending(tmp_path: Path) -> None:
    calls: list[list[dict[str, Any]]] = []

    def failing_then_answering(partitions: list[dict[str, Any]]) -> dict[str, Any] | None:
        calls.append(partitions)
        if len(calls) == 1:
            raise RuntimeError("ZooKeeper went away mid-call")
        replicas.stopping.set()
        return {"partitions": []}

    replicas = _replica_manager(failing_then_answering)
    replicas.partitions[("t", 0)] = Partition(
        topic="t",
        partition=0,
        leader=2,
        leader_epoch=1,
        is_leader=True,
        isr=(2,),
        pending_isr=(1, 2),
        alter_isr_in_flight=True,
    )
    sender = threading.Thread(target=replicas.run_alter_isr, daemon=True)
    sender.start()
    sender.join(timeout=10)
    assert not sender.is_alive()
    assert len(calls) == 2  # sent again after the error, and the thread ended only when told
