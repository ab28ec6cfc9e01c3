"""The migration's stages, run in order, each waiting for its event (the package's docstring
says which)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from remediate.collect.cluster_state import read_cluster_state
from remediate.errors import SandboxError
from remediate.formats.properties import load_properties
from remediate.formats.znodes import CLUSTER_ID, MIGRATION, decode_cluster_id, decode_migration
from remediate.sandbox import cluster
from remediate.sandbox.migration.settings import (
    CONTROLLER_HOST,
    CONTROLLER_ID,
    ControllerNode,
    controller_properties,
    hybrid_broker_properties,
    kraft_broker_properties,
)
from remediate.sandbox.plumbing import process, zkserver
from remediate.sandbox.real import class_archive, jvm_broker, releases
from remediate.state import ClusterState, TopicPartition
from remediate.zookeeper import KazooZooKeeper

STAGES = ("controller", "hybrid", "kraft", "done")
STORAGE_TOOL = "kafka.tools.StorageTool"
# The first release whose migration is meant for use (3.4 was early access and stalls on a
# topic without id); the sandbox migrates from 3.5 on.
FIRST_RELEASE = (3, 5)
STEP_TIMEOUT_S = 180.0

Say = Callable[[str], None]

# -- waiting on events -------------------------------------------------------------------------


def log_size(logs_dir: Path) -> int:
    try:
        return (logs_dir / "server.log").stat().st_size
    except OSError:
        return 0


def logged_since(logs_dir: Path, offset: int, text: str) -> bool:
    try:
        with (logs_dir / "server.log").open("rb") as log:
            log.seek(offset)
            return text.encode() in log.read()
    except OSError:
        return False


def wait_step(
    step: str,
    condition: Callable[[], bool],
    *,
    logs: list[Path],
    pids: Mapping[str, int] | None = None,
    timeout: float = STEP_TIMEOUT_S,
) -> None:
    """Wait for `condition`; SandboxError naming `step`, with the last lines of `logs`, when
    it does not come within `timeout` or a process of `pids` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        dead = [name for name, pid in (pids or {}).items() if not process.is_alive(pid)]
        if dead or time.monotonic() >= deadline:
            why = f"{', '.join(dead)} exited" if dead else f"not done within {timeout:.0f}s"
            raise SandboxError(
                f"migration step {step!r}: {why}:\n"
                + "\n".join(jvm_broker.last_lines(d, 30) for d in logs)
            )
        time.sleep(0.2)


def isr_whole(state: ClusterState) -> bool:
    """Every partition has a state, a leader, and its whole replica set in its ISR
    (ZooKeeper's view, which the KRaft controller keeps up to date in dual write)."""
    assigned = {
        TopicPartition(name, number)
        for name, topic in state.topics.items()
        for number in topic.assignment.partitions
    }
    return set(state.partitions) == assigned and all(
        p.leader >= 0 and set(p.isr) == set(state.replicas(*tp))
        for tp, p in state.partitions.items()
    )


class Migration:
    """One sandbox's migration, step by step (`run(until)`)."""

    def __init__(
        self, directory: Path, say: Say = lambda _m: None, *, wait_isr: bool = True
    ) -> None:
        self.directory = directory.resolve()
        # False: roll without waiting for every ISR to be whole, as a migration of a cluster
        # that is not healthy would (the ISR is then not waited for after a stage either).
        self.wait_isr = wait_isr
        self.state = cluster.load_state(self.directory)
        self.say = say
        real = self.state.real_kafka
        if real is None:
            raise SandboxError("a migration to KRaft needs real Kafka: sandbox up --kafka real-*")
        major, minor = (int(p) for p in real.line.split("."))
        if (major, minor) < FIRST_RELEASE:
            raise SandboxError(
                f"{real.label} has no migration to KRaft the sandbox runs (3.5 and later)"
            )
        self.release: releases.KafkaRelease = real
        self.node = self._node()
        # One session for every read of the run (closed when `run` ends).
        self.zk = KazooZooKeeper(cluster.zk_client(self.state))

    def _node(self) -> ControllerNode:
        saved = self.state.controllers
        if saved:
            return ControllerNode(**saved[0])
        node = ControllerNode(CONTROLLER_ID, CONTROLLER_HOST, zkserver.free_port(CONTROLLER_HOST))
        self.state.controllers = [{"node_id": node.node_id, "host": node.host, "port": node.port}]
        cluster.save_state(self.state)
        return node

    # -- the controller --

    @property
    def root(self) -> Path:
        return cluster.controller_dir(self.directory, self.node.node_id)

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def properties_path(self) -> Path:
        return self.root / "controller.properties"

    def controller_pid(self) -> int | None:
        pid = process.read_pid(self.root / "controller.pid")
        return pid if pid is not None and process.owns(pid, str(self.properties_path)) else None

    def _java(self, main: str, *args: str) -> list[str]:
        return jvm_broker.java_command(
            self.release,
            main,
            *args,
            java=cluster.java_executable(),
            logs_dir=self.logs,
            log4j=self.directory / cluster.LOG4J_FILE,
            tuning=jvm_broker.Tuning(self.state.tuning),
            archive=class_archive.usable(self.release),
        )

    def _write_controller(self, *, migrating: bool) -> None:
        jvm_broker.write_server_properties(
            self.properties_path,
            controller_properties(
                self.node,
                zookeeper_connect=self.state.zk_connect,
                data_dir=self.root / "data",
                migrating=migrating,
            ),
        )

    def _format(self) -> None:
        if (self.root / "data" / "meta.properties").exists():
            return
        read = self.zk.get_many([CLUSTER_ID]).get(CLUSTER_ID)
        if read is None:
            raise SandboxError(f"migration step 'controller': ZooKeeper has no {CLUSTER_ID}")
        cluster_id = decode_cluster_id(read[0])
        formatted = subprocess.run(
            self._java(STORAGE_TOOL, "format", "-t", cluster_id, "-c", str(self.properties_path)),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if formatted.returncode != 0:
            raise SandboxError(
                f"migration step 'controller': formatting the controller's storage failed:\n"
                f"{formatted.stdout[-2000:]}{formatted.stderr[-2000:]}"
            )

    def _start_controller(self, step: str) -> None:
        if self.controller_pid() is not None:
            return
        offset = log_size(self.logs)
        argv = self._java(jvm_broker.MAIN_CLASS, str(self.properties_path))
        pid = process.spawn_detached(argv, log_path=self.logs / "kafkaServer.out")
        (self.root / "controller.pid").write_text(f"{pid}\n")
        wait_step(
            step,
            lambda: logged_since(self.logs, offset, "Kafka Server started"),
            logs=[self.logs],
            pids={f"controller {self.node.node_id}": pid},
        )

    def stop_controller(self) -> bool:
        pid = self.controller_pid()
        if pid is None:
            return False
        return process.terminate(pid, str(self.properties_path), timeout=60)

    # -- reads of ZooKeeper --

    def _migration_copied(self) -> bool:
        read = self.zk.get_many([MIGRATION]).get(MIGRATION)
        return read is not None and decode_migration(read[0]).metadata_migrated

    def _isr_whole(self) -> bool:
        return isr_whole(read_cluster_state(self.zk))

    # -- the brokers --

    def _broker_properties(self, broker_id: int) -> dict[str, str]:
        path = cluster.broker_dir(self.directory, broker_id) / "server.properties"
        return load_properties(path.read_bytes(), source=str(path))

    def _roll(
        self,
        step: str,
        broker_id: int,
        values: Mapping[str, str],
        started: str,
    ) -> None:
        root = cluster.broker_dir(self.directory, broker_id)
        logs = root / "logs"
        if self.wait_isr:
            wait_step(
                f"{step}: ISR whole before broker {broker_id}",
                self._isr_whole,
                logs=[logs, self.logs],
            )
        self.say(f"{step}: broker {broker_id}")
        cluster.stop_broker(self.directory, broker_id)
        jvm_broker.write_server_properties(root / "server.properties", values)
        offset = log_size(logs)
        argv = jvm_broker.java_command(
            self.release,
            jvm_broker.MAIN_CLASS,
            str(root / "server.properties"),
            java=cluster.java_executable(),
            logs_dir=logs,
            log4j=self.directory / cluster.LOG4J_FILE,
            tuning=jvm_broker.Tuning(self.state.tuning),
            archive=class_archive.usable(self.release),
        )
        pid = process.spawn_detached(argv, log_path=logs / "kafkaServer.out")
        (root / "broker.pid").write_text(f"{pid}\n")
        wait_step(
            f"{step}: broker {broker_id} started",
            lambda: logged_since(logs, offset, started),
            logs=[logs, self.logs],
            pids={f"broker {broker_id}": pid},
        )

    # -- the steps --

    def controller(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._write_controller(migrating=True)
        self._format()
        self._start_controller("controller")
        self.say(f"controller {self.node.node_id}: started in migration mode")

    def _roll_all(
        self,
        step: str,
        rolled: Callable[[Mapping[str, str]], bool],
        settings: Callable[[Mapping[str, str]], dict[str, str]],
        started: str,
    ) -> None:
        """Roll each broker not yet `rolled` into `settings` of its current ones, in turn."""
        for broker in self.state.brokers:
            current = self._broker_properties(broker.broker_id)
            if not rolled(current):
                self._roll(step, broker.broker_id, settings(current), started)

    def hybrid(self) -> None:
        self._roll_all(
            "hybrid",
            lambda current: current.get("zookeeper.metadata.migration.enable") == "true",
            lambda current: hybrid_broker_properties(current, self.node, self.release.line),
            # KafkaServer's own "started" line (ZooKeeper mode).
            "started (kafka.server.KafkaServer)",
        )
        wait_step(
            "hybrid: the metadata copied into KRaft, dual write",
            lambda: self._migration_copied() and logged_since(self.logs, 0, "to DUAL_WRITE state"),
            logs=[self.logs],
        )
        if self.wait_isr:
            wait_step("hybrid: ISR whole", self._isr_whole, logs=[self.logs])
        self.say("hybrid: ZooKeeper's metadata is in KRaft; the controller writes both")

    def kraft(self) -> None:
        self._roll_all(
            "kraft",
            lambda current: current.get("process.roles") == "broker",
            lambda current: kraft_broker_properties(current, self.node),
            "Kafka Server started",
        )
        if self.wait_isr:
            wait_step("kraft: ISR whole", self._isr_whole, logs=[self.logs])
        self.say("kraft: every broker runs in KRaft mode")

    def done(self) -> None:
        self.stop_controller()
        self._write_controller(migrating=False)
        self._start_controller("done")
        self.say("done: the controller runs without ZooKeeper")

    def run(self, until: str = "done") -> None:
        if until not in STAGES:
            raise SandboxError(f"--until must be one of {', '.join(STAGES)}, not {until!r}")
        steps = {
            "controller": self.controller,
            "hybrid": self.hybrid,
            "kraft": self.kraft,
            "done": self.done,
        }
        try:
            for stage in STAGES:
                steps[stage]()
                self.state = cluster.load_state(self.directory)
                self.state.migration = stage
                cluster.save_state(self.state)
                if stage == until:
                    return
        finally:
            self.zk.close()


def migrate(
    directory: Path, *, until: str = "done", say: Say = lambda _m: None, wait_isr: bool = True
) -> str:
    """Run the migration on the sandbox in `directory` up to stage `until`; the stage reached."""
    Migration(directory, say, wait_isr=wait_isr).run(until)
    return until
