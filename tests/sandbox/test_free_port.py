"""free_port on a machine where several processes start servers at once (the suite's workers,
sandboxes side by side): no port handed out twice while its server may still be starting."""

from __future__ import annotations

import socket
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from remediate.sandbox.plumbing import zkserver


def ports(count: int) -> list[int]:
    return [zkserver.free_port() for _ in range(count)]


def test_processes_side_by_side_never_get_one_port_twice() -> None:
    with ProcessPoolExecutor(max_workers=4) as pool:
        handed = [port for batch in pool.map(ports, [50] * 4) for port in batch]
    assert len(handed) == 200 and len(set(handed)) == 200


def test_a_port_given_lately_is_not_given_again_even_when_the_kernel_offers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zkserver, "PORT_LEDGER", tmp_path / "ports.json")
    first = zkserver.free_port()
    offered = iter([first, first, first])  # the kernel's probe offers it again...
    real_bind = socket.socket.bind

    def bind(self: socket.socket, address: tuple[str, int]) -> None:
        host, port = address
        real_bind(self, (host, next(offered, port) if port == 0 else port))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "bind", bind)
        second = zkserver.free_port()
    assert second != first  # ...and another is taken
    assert zkserver.free_port() not in {first, second}


def test_a_ledger_cut_short_is_a_hint_lost_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ports.json"
    monkeypatch.setattr(zkserver, "PORT_LEDGER", ledger)
    ledger.write_text('{"4100": 17')
    port = zkserver.free_port()
    assert str(port) in ledger.read_text()
