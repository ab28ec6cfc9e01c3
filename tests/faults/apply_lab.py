"""A sandbox to break repairs on: an armed mismatch planted on demand, plans, runs, checks.

The mismatch is the armed kind (TOPIC_ID_MISMATCH): a foreign id is written into the replicas'
partition.metadata while the broker runs, so the broker stays in every ISR until it restarts.
The same foreign id every time, so one plan per broker set stays valid from test to test
(the fingerprint holds the file ids, the broker set, the controller epoch and the topic znode
versions, none of which a healed run changes). The plans use a playbook with short timers.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from remediate.execute.failpoints import ENV as FAILPOINTS
from remediate.formats.logdir import PARTITION_METADATA, encode_partition_metadata
from remediate.formats.topic_id import TopicId
from remediate.sandbox import admin, cluster
from remediate.sandbox.cluster import broker_pid
from remediate.sandbox.emulated import client
from remediate.sandbox.reproduce import partition_states, replica_file_ids
from tests.execute.sandbox_tools import run_cli
from tests.wait import process_stopped, steady, wait_until

TOPIC = "ledger"
PARTITIONS = 3
FOREIGN = TopicId.random()
AREA = "Faults during apply"

QUICK_PLAYBOOK = """\
name: quick-repair
version: 1
description: topicid-mismatch with short timers, for the fault suite
brokers: needing-fix
applies_to: [TOPIC_ID_MISMATCH, TOPIC_ID_MISMATCH_OUT_OF_ISR, METADATA_CORRUPT]
files: [partition.metadata, leader-epoch-checkpoint]
scope: affected
exclude_topics: [__consumer_offsets, __transaction_state]
steps:
  - gate: restart-safety
  - stop
  - backup
  - delete
  - start
  - wait: registered
  - wait: in-sync
  - verify: topic-ids
gates:
  stability_window_s: 1
  stop_timeout_s: 60
  start_timeout_s: 12
  in_sync_timeout_s: 15
  max_brokers_per_run: 0
  expected_restart_s: 10
"""

QUICK_ROLLING = """\
name: quick-rolling
version: 1
description: rolling-restart with short timers, for the fault suite
brokers: all
applies_to: []
files: []
scope: affected
exclude_topics: [__consumer_offsets, __transaction_state]
steps:
  - gate: restart-safety
  - stop
  - start
  - wait: registered
  - wait: in-sync
gates:
  stability_window_s: 1
  stop_timeout_s: 60
  start_timeout_s: 12
  in_sync_timeout_s: 15
  max_brokers_per_run: 0
  expected_restart_s: 10
"""


@dataclass
class Run:
    """One operator process and what it left behind."""

    exit_code: int | None
    stdout: str
    stderr: str
    run_id: str
    records: list[dict[str, Any]]

    def events(self, event: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["event"] == event]

    def finished_steps(self) -> list[str]:
        return [str(r["step"]) for r in self.events("step-finished")]


@dataclass
class ApplyLab:
    directory: Path
    state: cluster.SandboxState
    zk: KazooClient
    playbook: Path
    plans: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.directory / "cluster.yaml"

    @property
    def settings(self) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load(self.config.read_text())
        return loaded

    @property
    def journal_dir(self) -> Path:
        return Path(self.settings["journal_dir"])

    @property
    def backup_dir(self) -> Path:
        return Path(self.settings["backup_dir"])

    # -- the cluster ------------------------------------------------------------------------

    def controller(self) -> int:
        info = admin.current_controller(self.zk)
        assert info is not None
        return info.broker_id

    def controller_epoch(self) -> int:
        data, _ = self.zk.get("/controller_epoch")
        return int(data)

    def zk_id(self) -> str:
        assignment, _ = admin.read_topic(self.zk, TOPIC)
        return str(assignment.topic_id)

    def metadata_files(self, broker: int) -> list[Path]:
        return sorted(
            path
            for log_dir in self.state.broker(broker).log_dirs
            for path in Path(log_dir).glob(f"{TOPIC}-*/{PARTITION_METADATA}")
        )

    def plant(self, brokers: Iterable[int]) -> None:
        """Arm the mismatch: the foreign id on disk, the running broker none the wiser."""
        assignment, _ = admin.read_topic(self.zk, TOPIC)
        for broker in brokers:
            files = self.metadata_files(broker)
            hosted = [p for p, replicas in assignment.partitions.items() if broker in replicas]
            assert len(files) == len(hosted), files
            for path in files:
                path.write_bytes(encode_partition_metadata(FOREIGN))

    def reset(self) -> None:
        """After a failed test: brokers whose files hold the wrong id get them removed and are
        restarted, so that one failure does not cascade into the next test."""
        zk_id = self.zk_id()
        for broker in sorted(b.broker_id for b in self.state.brokers):
            wrong = [p for p in self.metadata_files(broker) if zk_id.encode() not in p.read_bytes()]
            if broker_pid(self.directory, broker) is not None and not wrong:
                continue
            cluster.stop_broker(self.directory, broker)
            for path in wrong:
                path.unlink()
            cluster.start_broker(self.directory, broker, wait=True)
        self.wait_healthy(timeout=90)

    def healthy(self) -> str | None:
        """Why the topic is not healthy (every replica in ISR with ZooKeeper's id), or None."""
        try:
            return self._unhealthy()
        except KazooException as exc:  # the test's own session, reconnecting after a fault
            return f"ZooKeeper could not be read ({type(exc).__name__})"

    def _unhealthy(self) -> str | None:
        registered = sorted(int(b) for b in self.zk.get_children("/brokers/ids"))
        if registered != sorted(b.broker_id for b in self.state.brokers):
            return f"registered brokers {registered}"
        assignment, _ = admin.read_topic(self.zk, TOPIC)
        for number, s in partition_states(self.zk, TOPIC, list(range(PARTITIONS))).items():
            if sorted(s.isr) != sorted(assignment.partitions[number]) or s.leader < 0:
                return f"{TOPIC}-{number}: leader {s.leader} isr {s.isr}"
        zk_id = self.zk_id()
        wrong = {k: v for k, v in replica_file_ids(self.state, TOPIC).items() if v != zk_id}
        return f"files without ZooKeeper's id {zk_id}: {wrong}" if wrong else None

    def wait_healthy(self, timeout: float = 60.0) -> None:
        try:
            wait_until(lambda: self.healthy() is None, "the topic to be healthy", timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; now: {self.healthy()}") from None

    def wait_settled(self, quiet_s: float, timeout: float = 120.0) -> None:
        """Wait until the controller epoch and every broker's registration (its session) have
        not changed for `quiet_s`, then until the topic is healthy. After ZooKeeper comes back
        from an outage, a broker whose session outlived the outage on the server but not its
        reconnect finds it expired seconds later and re-registers (a controller re-elects):
        the next test must not plan on the cluster before that."""

        def registration(child: str) -> int:
            stat = self.zk.exists(f"/brokers/ids/{child}")
            return -1 if stat is None else int(stat.czxid)

        def view() -> tuple[int, tuple[tuple[str, int], ...]]:
            children = sorted(self.zk.get_children("/brokers/ids"))
            return self.controller_epoch(), tuple((c, registration(c)) for c in children)

        def read() -> tuple[int, tuple[tuple[str, int], ...]]:
            try:
                return view()
            except KazooException:
                return (-1, ())

        wait_until(
            steady(read, quiet_s),
            f"the cluster to settle for {quiet_s:.0f}s",
            timeout,
            interval=0.2,
        )
        self.wait_healthy(timeout=timeout)

    def produce(self, count: int = 9) -> None:
        report = client.produce(self.zk, TOPIC, count=count, key_prefix="fault", retries=20)
        assert len(report.acked) == count, report.errors

    # -- plans and runs ---------------------------------------------------------------------

    def plan(
        self,
        brokers: Iterable[int],
        *,
        playbook: Path | None = None,
        options: Sequence[str] = (),
    ) -> tuple[Path, dict[str, Any]]:
        """The plan for a mismatch planted on `brokers` (made once per planting, epoch and
        `options` of plan's)."""
        wanted = tuple(sorted(brokers))
        chosen = playbook or self.playbook
        key = (wanted, self.controller_epoch(), chosen, tuple(options))
        if key not in self.plans:
            path = self.directory / f"plan-{len(self.plans)}.json"
            planned = run_cli(
                "plan", "-c", str(self.config), "--playbook", str(chosen), "-o", str(path), *options
            )
            assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-3000:]
            plan = json.loads(path.read_text())
            assert sorted(s["broker"] for s in plan["steps"]) == list(wanted), plan["steps"]
            self.plans[key] = (path, plan)
        return self.plans[key]

    def start_apply(
        self,
        plan: tuple[Path, dict[str, Any]],
        *,
        failpoints: str = "",
        config: Path | None = None,
        own_group: bool = False,
    ) -> subprocess.Popen[str]:
        """`apply` of `plan`, started; with `own_group`, in a process group of its own, as a
        terminal starts a command (so that the test can signal the group, as Ctrl-C does)."""
        path, document = plan
        return subprocess.Popen(
            [
                str(Path(sys.executable).parent / "remediate"),
                "apply",
                "-c",
                str(config or self.config),
                "--plan",
                str(path),
                "--approve",
                document["digest"],
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(failpoints),
            start_new_session=own_group,
        )

    def start_rollback(self, run_id: str, *, failpoints: str = "") -> subprocess.Popen[str]:
        return self._start_on_run("rollback", run_id, failpoints)

    def start_resume(self, run_id: str, *, failpoints: str = "") -> subprocess.Popen[str]:
        return self._start_on_run("resume", run_id, failpoints)

    def _start_on_run(self, command: str, run_id: str, failpoints: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                str(Path(sys.executable).parent / "remediate"),
                *(command, "-c", str(self.config), "--run", run_id, "--json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(failpoints),
        )

    def await_journal(
        self,
        process: subprocess.Popen[str],
        before: set[Path],
        event: str,
        step_suffix: str,
        what: str,
        timeout: float = 120.0,
    ) -> None:
        """Wait until the run started by `process` journals `event` for a step ending in
        `step_suffix`; an operator that exits first fails the test with what it printed."""
        wait_until(
            lambda: journal_has(self, before, event, step_suffix) or process.poll() is not None,
            what,
            timeout,
        )
        if not journal_has(self, before, event, step_suffix):
            stdout, stderr = process.communicate(timeout=10)
            raise AssertionError(
                f"the operator exited ({process.returncode}) before {what}:\n"
                f"{stdout[-2000:]}\n{stderr[-3000:]}"
            )

    def pause(self, name: str) -> Pause:
        """A failpoint action that holds the operator at its point until released (a new one
        each time: a module's tests share the lab)."""
        return Pause(self.directory / "pauses" / f"{name}-{uuid.uuid4().hex[:8]}")

    def finish(self, process: subprocess.Popen[str], timeout: float = 240.0) -> Run:
        stdout, stderr = process.communicate(timeout=timeout)
        return self.latest(process.returncode, stdout, stderr)

    def latest(self, exit_code: int | None, stdout: str = "", stderr: str = "") -> Run:
        runs = sorted(p for p in self.journal_dir.iterdir() if (p / "journal.jsonl").exists())
        run = runs[-1]
        records = []
        for line in (run / "journal.jsonl").read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a torn last line: the crash came in the middle of a write
        return Run(exit_code, stdout, stderr, run.name, records)

    def resume(self, run_id: str, *, failpoints: str = "") -> Run:
        resumed = subprocess.run(
            [
                str(Path(sys.executable).parent / "remediate"),
                *("resume", "-c", str(self.config), "--run", run_id, "--json"),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            env=_environment(failpoints),
        )
        return self.latest(resumed.returncode, resumed.stdout, resumed.stderr)

    def killed_at_each(
        self,
        plan: tuple[Path, dict[str, Any]],
        points: Sequence[str],
        *,
        then: Callable[[int, str, Run], None] | None = None,
        timeout: float = 240.0,
    ) -> Run:
        """Apply `plan` with the operator SIGKILLed at the first failpoint of `points`, then
        `resume` it killed at each of the others in turn. After every kill the run is neither
        completed nor halted, `status` says running, and `then(number, point, run)` checks
        what it must. Returns the last killed run."""
        run = self.finish(self.start_apply(plan, failpoints=f"{points[0]}=kill"), timeout)
        for number, point in enumerate(points):
            if number > 0:
                run = self.resume(run.run_id, failpoints=f"{point}=kill")
            assert run.exit_code == -signal.SIGKILL, (point, run.stdout[-2000:], run.stderr[-3000:])
            assert not run.events("run-completed") and not run.events("run-halted"), point
            assert self.status(run.run_id)["status"] == "running", point
            if then is not None:
                then(number, point, run)
        return run

    def status(self, run_id: str) -> dict[str, Any]:
        shown = run_cli("status", "-c", str(self.config), "--run", run_id, "--json")
        assert shown.returncode == 0, shown.stderr[-2000:]
        loaded: dict[str, Any] = json.loads(shown.stdout)
        return loaded

    def patient_config(self, session_timeout_s: float = 15) -> Path:
        """A copy of cluster.yaml whose ZooKeeper session outlives a pause of the operator
        (the lab's own is short, so that a killed operator's lock is soon free)."""
        settings = self.settings
        settings["zookeeper"]["session_timeout_s"] = session_timeout_s
        path = self.directory / "cluster-patient.yaml"
        path.write_text(yaml.safe_dump(settings, sort_keys=False))
        return path

    def with_zookeeper(self, connect: str) -> Path:
        """A copy of cluster.yaml that reaches ZooKeeper at `connect` (a proxy, say)."""
        settings = self.settings
        settings["zookeeper"]["connect"] = connect
        path = self.directory / "cluster-proxied.yaml"
        path.write_text(yaml.safe_dump(settings, sort_keys=False))
        return path

    def zookeeper_address(self) -> tuple[str, int]:
        host, _, port = str(self.settings["zookeeper"]["connect"]).split(",")[0].rpartition(":")
        return host, int(port.split("/")[0])

    def with_service(self, **commands: str) -> Path:
        """A copy of cluster.yaml whose service commands are replaced (a broken unit file)."""
        settings = self.settings
        settings["service"] = {**settings["service"], **commands}
        path = self.directory / f"cluster-{'-'.join(sorted(commands))}.yaml"
        path.write_text(yaml.safe_dump(settings, sort_keys=False))
        return path

    @contextmanager
    def foreign_log_dir(self, broker: int) -> Iterator[None]:
        """While inside, `broker`'s first log dir looks written by another broker (its
        meta.properties names broker.id 99): Kafka refuses to start on it ("doesn't match
        stored broker.id") and exits at once. Put back on the way out, as an operator's fix."""
        meta = Path(self.state.broker(broker).log_dirs[0]) / "meta.properties"
        original = meta.read_bytes()
        meta.write_bytes(original.replace(f"broker.id={broker}".encode(), b"broker.id=99"))
        assert meta.read_bytes() != original
        try:
            yield
        finally:
            meta.write_bytes(original)

    # -- what the safety rules promise ------------------------------------------------------

    def backed_up(self, run_id: str) -> dict[str, str]:
        """'/path' -> sha256 of every file in the run's archives whose manifest verifies."""
        members: dict[str, str] = {}
        for archive in sorted((self.backup_dir / run_id).rglob("*.tar.gz")):
            manifest = archive.with_name(archive.name.removesuffix(".tar.gz") + ".sha256")
            # Each line is "<sha256> <path>": by path.
            expected = {
                path: digest
                for digest, path in (
                    line.split(None, 1) for line in manifest.read_text().splitlines()
                )
            }
            assert oct(archive.stat().st_mode & 0o777) == "0o600", archive
            with tarfile.open(archive, "r:gz") as tar:
                for member in tar.getmembers():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    digest = hashlib.sha256(handle.read()).hexdigest()
                    assert expected.get(member.name) == digest, (archive, member.name)
                    members["/" + member.name] = digest
        return members

    def assert_nothing_deleted_without_backup(
        self, plan: Mapping[str, Any], run_id: str, planted: Mapping[str, bytes]
    ) -> None:
        """Every planned file that is gone, or no longer holds what was planted, is in a
        verified archive of the run with the planted bytes."""
        archived = self.backed_up(run_id)
        for step in plan["steps"]:
            for name in step["files"]:
                path = Path(name)
                before = planted.get(name)
                if before is None:
                    continue
                now = path.read_bytes() if path.exists() else None
                if now != before:
                    assert archived.get(name) == hashlib.sha256(before).hexdigest(), (
                        f"{name} changed without a verified backup of it"
                    )

    def snapshot_files(self, plan: Mapping[str, Any]) -> dict[str, bytes]:
        """The planned files' bytes as they are now (just planted)."""
        return {
            name: Path(name).read_bytes()
            for step in plan["steps"]
            for name in step["files"]
            if Path(name).exists()
        }


@dataclass(frozen=True)
class Pause:
    """`pause:<path>` (remediate/execute/failpoints.py): the operator holds at the failpoint
    until the test releases it."""

    path: Path

    @property
    def action(self) -> str:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return f"pause:{self.path}"

    def reached(self) -> bool:
        return self.path.with_name(self.path.name + ".reached").exists()

    def wait(self, process: subprocess.Popen[str], timeout: float = 120.0) -> None:
        """Until the operator holds at the point; one that exits first fails the test."""
        wait_until(
            lambda: self.reached() or process.poll() is not None,
            f"the operator to reach {self.path.name}",
            timeout,
        )
        if not self.reached():
            stdout, stderr = process.communicate(timeout=10)
            raise AssertionError(
                f"the operator exited ({process.returncode}) before {self.path.name}:\n"
                f"{stdout[-2000:]}\n{stderr[-3000:]}"
            )

    def release(self) -> None:
        self.path.with_name(self.path.name + ".release").touch()


def wait_stopped(pid: int, timeout: float = 120.0) -> None:
    wait_until(lambda: process_stopped(pid), f"process {pid} to stop itself", timeout=timeout)


def journal_has(lab: ApplyLab, before: set[Path], event: str, step_suffix: str) -> bool:
    """A new run's journal holds `event` for a step whose key ends in `step_suffix`."""
    if not lab.journal_dir.exists():
        return False
    for run in set(lab.journal_dir.iterdir()) - before:
        path = run / "journal.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == event and str(record.get("step", "")).endswith(step_suffix):
                return True
    return False


def runs(lab: ApplyLab) -> set[Path]:
    return set(lab.journal_dir.iterdir()) if lab.journal_dir.exists() else set()


def start_lab(
    directory: Path, *, ssh: bool = False, brokers: int = 3, min_isr: int = 2
) -> ApplyLab:
    """The lab: `brokers` emulated brokers (3.4) and the topic, replication 3, with its
    min.insync.replicas."""
    state = cluster.up(directory, kafka_version="3.4", ssh=ssh, brokers=brokers)
    zk = cluster.zk_client(state)
    admin.create_topic(zk, TOPIC, PARTITIONS, 3, config={"min.insync.replicas": str(min_isr)})
    # A killed operator's lock is free again once its session expires: a short session keeps
    # the resumes quick.
    config = directory / "cluster.yaml"
    settings = yaml.safe_load(config.read_text())
    settings["zookeeper"]["session_timeout_s"] = 4
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    playbook = directory / "quick-repair.yaml"
    playbook.write_text(QUICK_PLAYBOOK)
    (directory / "quick-rolling.yaml").write_text(QUICK_ROLLING)
    lab = ApplyLab(directory, state, zk, playbook)
    wait_until(
        lambda: (
            all(v is not None for v in replica_file_ids(state, TOPIC).values())
            and len(replica_file_ids(state, TOPIC)) == 3 * PARTITIONS
        ),
        "every replica to write partition.metadata",
    )
    lab.produce(30)
    lab.wait_healthy()
    return lab


def stop_lab(lab: ApplyLab) -> None:
    lab.zk.stop()
    lab.zk.close()
    cluster.down(lab.directory)


def _environment(failpoints: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != FAILPOINTS}
    if failpoints:
        env[FAILPOINTS] = failpoints
    return env
