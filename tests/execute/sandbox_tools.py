"""Observers that run beside a repair on the sandbox: ZooKeeper sampling and a consumer."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remediate.exit_codes import EXIT_NEEDS_ACCEPTANCE, EXIT_REFUSED
from remediate.formats.znodes import decode_partition_state
from remediate.plan import PlanVerdict, plan_from_json
from remediate.sandbox import clients, cluster
from tests.sandbox.helpers import Background


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "remediate"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, check=False, timeout=timeout
    )


def plan_exit_code(document: dict[str, Any]) -> int:
    """What `plan` exits with for the plan it wrote: 0 ready, 6 needs acceptance, 4 refused."""
    return {
        PlanVerdict.READY: 0,
        PlanVerdict.NEEDS_ACCEPTANCE: EXIT_NEEDS_ACCEPTANCE,
        PlanVerdict.REFUSED: EXIT_REFUSED,
    }[plan_from_json(document).verdict]


@dataclass
class HealthSampler(Background):
    """Every partition's state znode, every 100 ms, on its own ZooKeeper session."""

    state: cluster.SandboxState
    min_isr: int = 2
    below_min_isr: set[str] = field(default_factory=set)
    offline: set[str] = field(default_factory=set)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        zk = cluster.zk_client(self.state)
        try:
            while not self._stop.wait(0.1):
                for topic in zk.get_children("/brokers/topics"):
                    for number in zk.get_children(f"/brokers/topics/{topic}/partitions"):
                        path = f"/brokers/topics/{topic}/partitions/{number}/state"
                        data, stat = zk.get(path)
                        state = decode_partition_state(data, source=path, zk_version=stat.version)
                        name = f"{topic}-{number}"
                        if state.leader < 0:
                            self.offline.add(name)
                        if len(state.isr) < self.min_isr:
                            self.below_min_isr.add(name)
                self.samples += 1
        finally:
            zk.stop()
            zk.close()


@dataclass
class BackgroundConsumer(Background):
    """Reads the whole topic again and again until stopped; remembers what it saw."""

    state: cluster.SandboxState
    topic: str
    reads: int = 0
    most_records: int = 0
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        zk = cluster.zk_client(self.state)
        try:
            while not self._stop.is_set():
                records, errors = clients.for_sandbox(self.state, zk).consume(self.topic, timeout=5)
                self.reads += 1
                self.most_records = max(self.most_records, len(records))
                self.errors += [str(e) for e in errors]
                self._stop.wait(0.5)
        finally:
            zk.stop()
            zk.close()


def archive_members(archive: Path) -> dict[str, str]:
    """name -> sha256 of every member of a backup archive."""
    members = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            members[member.name] = hashlib.sha256(handle.read()).hexdigest()
    return members
