"""A controller whose ZooKeeper session expires, on a real ZooKeeper.

When the controller's session expires, its /controller znode goes with it. On the new session
the /controller watch fires (a ControllerChange) and the broker re-registers and asks for a new
election (a Reelect), in either order. Whichever comes first may win the seat again; the other
must keep it. A controller that gave up a seat /controller still names it would leave the
cluster with no controller for good: no broker elects while /controller exists, and every
partition whose leader failed stays offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from remediate.formats.znodes import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    decode_controller,
    decode_controller_epoch,
)
from remediate.sandbox.emulated.broker import PERSISTENT_PATHS
from remediate.sandbox.emulated.controller import Controller, Event
from remediate.sandbox.plumbing import process, zkserver
from tests.wait import wait_until

# The controller's events go through its own thread and kazoo's: a second here, but on a CI
# machine whose two cores are starting real Kafka JVMs side by side, 10 s was once not enough.
EVENTS_S = 60


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[KazooClient]:
    port = zkserver.free_port()
    zkserver.write_config(tmp_path, "127.0.0.1", port)
    pid = zkserver.start(tmp_path, "127.0.0.1", port)
    client = KazooClient(f"127.0.0.1:{port}")
    client.start()
    for path in PERSISTENT_PATHS:
        client.ensure_path(path)
    try:
        yield client
    finally:
        client.stop()
        client.close()
        process.terminate(pid, "QuorumPeerMain", timeout=EVENTS_S)


@pytest.fixture
def controller(zk: KazooClient) -> Iterator[Controller]:
    controller = Controller(
        zk=zk,
        broker_id=1,
        uses_topic_ids=True,
        unclean_leader_election=False,
        broker_epoch=lambda: 1,
    )
    # The event thread never marks its events done; mark each one when its handling ends, so
    # that `settled` can tell "every queued event handled" from "none queued right now".
    handle = controller._handle

    def handle_and_mark_done(event: Event) -> None:
        try:
            handle(event)
        finally:
            controller.events.task_done()

    controller._handle = handle_and_mark_done  # type: ignore[method-assign]
    controller.start()
    assert wait_until(lambda: controller.active, timeout=EVENTS_S)
    yield controller
    controller.shutdown()


def seat(zk: KazooClient) -> int:
    data, _ = zk.get(CONTROLLER)
    return decode_controller(data).broker_id


def settled(controller: Controller) -> bool:
    """Every event queued so far has been handled to its end."""
    return controller.events.unfinished_tasks == 0


def zk_epoch(zk: KazooClient) -> int:
    data, _ = zk.get(CONTROLLER_EPOCH)
    return decode_controller_epoch(data)


def test_a_seat_won_again_before_the_reelect_is_kept(
    zk: KazooClient, controller: Controller
) -> None:
    epoch = controller.context.epoch
    controller.expire()
    assert wait_until(lambda: not controller.active, timeout=EVENTS_S)
    zk.delete(CONTROLLER)  # the expired session's ephemeral znode, gone with it
    # The watch's ControllerChange comes first and wins the seat in the new session ...
    assert wait_until(
        lambda: controller.active and controller.context.epoch > epoch, timeout=EVENTS_S
    )
    # ... then the broker's Reelect arrives.
    controller.reelect()
    assert wait_until(lambda: settled(controller), timeout=EVENTS_S)
    assert controller.active
    assert seat(zk) == 1
    assert zk_epoch(zk) == controller.context.epoch  # the seat it holds is the last one won


def test_a_reelect_first_wins_the_seat_and_the_watch_keeps_it(
    zk: KazooClient, controller: Controller
) -> None:
    epoch = controller.context.epoch
    controller.expire()
    controller.reelect()  # queued before the watch learns that /controller is gone
    zk.delete(CONTROLLER)
    assert wait_until(
        lambda: controller.active and controller.context.epoch > epoch, timeout=EVENTS_S
    )
    assert wait_until(lambda: settled(controller), timeout=EVENTS_S)
    assert controller.active
    assert seat(zk) == 1
    assert zk_epoch(zk) == controller.context.epoch  # the seat it holds is the last one won


def test_an_expired_session_stops_the_controller_at_once(
    zk: KazooClient, controller: Controller
) -> None:
    controller.expire()
    assert wait_until(lambda: not controller.active, timeout=EVENTS_S)
    assert controller.active_controller_id == -1
    assert controller.channels == {}
