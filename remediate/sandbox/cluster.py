"""The sandbox cluster on disk: ZooKeeper and N brokers under one directory.

Layout of a sandbox directory D:

    D/sandbox.json                      what `up` started (ports, pids, settings)
    D/cluster.yaml                      the tool's configuration for this cluster
    D/zookeeper/                        zoo.cfg, data/, zookeeper.log
    D/broker-<id>/server.properties     the broker's configuration (Kafka's keys)
    D/broker-<id>/data-<n>/             its log dirs
    D/broker-<id>/logs/                 server.log, state-change.log, kafkaServer.out
    D/broker-<id>/broker.pid
    D/kafka-log4j.properties            real Kafka's logging (with --kafka real-*)
    D/controller-<id>/                  a KRaft controller (`sandbox migrate`: migration/)
    D/ssh/                              keys, known_hosts and sshd configs (with --ssh)

A broker is either the emulator (`remediate.sandbox.emulated.broker`, `--kafka emulated`) or
real Apache Kafka from Maven Central's jars (`--kafka real-<version>`, real/releases.py and
real/jvm_broker.py); both are started, stopped and found by pid the same way.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kazoo.client import KazooClient

from remediate.errors import FormatError, SandboxError
from remediate.formats.properties import load_properties
from remediate.formats.znodes import BROKER_IDS, CONTROLLER, decode_controller
from remediate.sandbox.emulated.config import (
    KAFKA_VERSIONS,
    BrokerSettings,
    read_server_properties,
    write_server_properties,
)
from remediate.sandbox.plumbing import process, sshd, zkserver
from remediate.sandbox.real import (
    class_archive,
    jvm_broker,
    kafka_jars,
    releases,
    security,
    zk_auth,
)

BROKER_MARKER = "remediate.sandbox.emulated.broker"
ZOOKEEPER_MARKER = "QuorumPeerMain"
STATE_FILE = "sandbox.json"
RACK_PROPERTY = "broker.rack"
LOG4J_FILE = "kafka-log4j.properties"
# A real broker loads its logs and registers in seconds here, but a loaded machine, or a
# session of a killed predecessor still to expire (18 s by default), can take longer. Its
# controlled shutdown retries 3 times, 5 s apart, by default, each try bounded by
# controller.socket.timeout.ms (30 s).
REAL_START_TIMEOUT_S = 120.0
REAL_STOP_TIMEOUT_S = 180.0
# How real brokers are tuned when `up` is not told (`sandbox up --tuning`): as Kafka ships
# them, unless this says `test` (the test suite sets it: tests/conftest.py).
TUNING_ENV = "REMEDIATE_SANDBOX_TUNING"


def default_tuning() -> jvm_broker.Tuning:
    value = os.environ.get(TUNING_ENV, jvm_broker.Tuning.KAFKA)
    try:
        return jvm_broker.Tuning(value)
    except ValueError:
        choices = ", ".join(t.value for t in jvm_broker.Tuning)
        raise SandboxError(f"{TUNING_ENV}={value!r}: expected one of {choices}") from None


@dataclass
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    log_dirs: list[str]
    ssh_port: int | None = None
    # The real release this broker runs when a rolling upgrade's step changed it (`sandbox
    # broker upgrade`); None: the sandbox's (`SandboxState.kafka`).
    kafka: str | None = None
    # Its broker.rack (in its server.properties, so a restart keeps it); None: no rack.
    rack: str | None = None


@dataclass
class SandboxState:
    directory: str
    zookeeper_host: str
    zookeeper_port: int
    kafka_version: str
    brokers: list[BrokerInfo] = field(default_factory=list)
    ssh: bool = False
    # "emulated", or a real Kafka release (jvm_broker.REAL_KAFKA)
    kafka: str = jvm_broker.EMULATED
    # KRaft controllers started by `sandbox migrate` (node_id, host, port each), and the
    # migration's last stage reached (remediate/sandbox/migration/), None before any.
    controllers: list[dict[str, Any]] = field(default_factory=list)
    migration: str | None = None
    # How real brokers are tuned (jvm_broker.Tuning); the emulator keeps its own timers.
    tuning: str = jvm_broker.Tuning.KAFKA
    # Kafka's listener: plaintext, or secured (real/security.py: mTLS, SASL_SSL with SCRAM).
    kafka_security: str = security.KafkaSecurity.PLAINTEXT
    # ZooKeeper with SASL logins and brokers with zookeeper.set.acl=true (real/zk_auth.py).
    zookeeper_acl: bool = False
    # How many racks `up --racks` spread the brokers over (broker_racks); None: no racks.
    racks: int | None = None

    @property
    def zk_auth_files(self) -> zk_auth.ZkAuthFiles:
        return zk_auth.ZkAuthFiles(Path(self.directory) / zk_auth.DIRECTORY)

    @property
    def listener_security(self) -> security.KafkaSecurity:
        return security.KafkaSecurity(self.kafka_security)

    @property
    def security_files(self) -> security.SecurityFiles:
        return security.SecurityFiles(Path(self.directory) / security.DIRECTORY)

    def client_settings(self) -> dict[str, str]:
        """librdkafka's settings for the sandbox's clients on its secured listener."""
        return security.client_settings(self.listener_security, self.security_files)

    @property
    def real_kafka(self) -> releases.KafkaRelease | None:
        return jvm_broker.REAL_KAFKA.get(self.kafka)

    def release_of(self, broker_id: int) -> releases.KafkaRelease | None:
        """The real release broker `broker_id` runs (its own after an upgrade, else the
        sandbox's), or None for an emulated broker."""
        own = self.broker(broker_id).kafka
        return jvm_broker.REAL_KAFKA.get(own) if own is not None else self.real_kafka

    @property
    def fetches_by_id(self) -> bool:
        """Consumers fetch by topic id (Fetch v13): Kafka 3.1 and later, and the emulated 3.x
        rules; not 2.8 or 3.0, whose Fetch stops at v12."""
        real = self.real_kafka
        if real is not None:
            major, minor = real.line.split(".")
            return (int(major), int(minor)) >= (3, 1)
        return self.kafka_version != "2.8"

    @property
    def brokers_label(self) -> str:
        """What the brokers run: `Apache Kafka 3.9.2`, or `the Kafka 2.8 emulation`."""
        real = self.real_kafka
        return real.label if real is not None else f"the Kafka {self.kafka_version} emulation"

    @property
    def zk_connect(self) -> str:
        return f"{self.zookeeper_host}:{self.zookeeper_port}"

    def broker(self, broker_id: int) -> BrokerInfo:
        for broker in self.brokers:
            if broker.broker_id == broker_id:
                return broker
        raise SandboxError(f"the sandbox in {self.directory} has no broker {broker_id}")


def broker_host(broker_id: int) -> str:
    """Broker N lives on 127.0.0.(10+N), its own loopback address."""
    if not 0 <= broker_id <= 244:
        raise SandboxError(f"sandbox broker ids go from 0 to 244, not {broker_id}")
    return f"127.0.0.{10 + broker_id}"


def load_state(directory: Path) -> SandboxState:
    path = directory / STATE_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise SandboxError(
            f"no sandbox in {directory} (no {STATE_FILE}); run `remediate sandbox up`"
        ) from None
    except (OSError, ValueError) as exc:
        raise SandboxError(f"{path}: cannot read: {exc}") from exc
    brokers = [BrokerInfo(**b) for b in raw.pop("brokers")]
    return SandboxState(brokers=brokers, **raw)


def save_state(state: SandboxState) -> None:
    path = Path(state.directory) / STATE_FILE
    path.write_text(json.dumps(asdict(state), indent=2) + "\n")


# -- process control ---------------------------------------------------------------------------


def zookeeper_pid(directory: Path) -> int | None:
    pid = process.read_pid(directory / "zookeeper" / "zookeeper.pid")
    return pid if pid is not None and process.owns(pid, ZOOKEEPER_MARKER) else None


def broker_dir(directory: Path, broker_id: int) -> Path:
    return directory / f"broker-{broker_id}"


def broker_pid(directory: Path, broker_id: int) -> int | None:
    pid = process.read_pid(broker_dir(directory, broker_id) / "broker.pid")
    marker = str(broker_dir(directory, broker_id) / "server.properties")
    return pid if pid is not None and process.owns(pid, marker) else None


def start_zookeeper(directory: Path, state: SandboxState) -> int:
    pid = zookeeper_pid(directory)
    if pid is not None:
        return pid
    zk_dir = directory / "zookeeper"
    acl = state.zookeeper_acl
    zkserver.write_config(
        zk_dir,
        state.zookeeper_host,
        state.zookeeper_port,
        extra=zk_auth.server_settings() if acl else None,
    )
    pid = zkserver.start(
        zk_dir,
        state.zookeeper_host,
        state.zookeeper_port,
        jvm_flags=zk_auth.server_jvm_flags(state.zk_auth_files) if acl else (),
    )
    (zk_dir / "zookeeper.pid").write_text(f"{pid}\n")
    return pid


def start_broker(
    directory: Path, broker_id: int, *, wait: bool = False, timeout: float | None = None
) -> int:
    """Start a broker process (no-op if it runs); optionally wait until it is registered."""
    state = load_state(directory)
    state.broker(broker_id)
    pid = broker_pid(directory, broker_id)
    real = state.release_of(broker_id)
    if timeout is None:
        timeout = REAL_START_TIMEOUT_S if real else 60.0
    if pid is None:
        root = broker_dir(directory, broker_id)
        properties = root / "server.properties"
        if real is None:
            command = [sys.executable, "-m", BROKER_MARKER, str(properties)]
        else:
            # A killed broker's registration lives until its session expires, and a broker
            # that finds it there refuses to start (NODEEXISTS): wait it out, as an operator
            # restarting a crashed broker would.
            wait_unregistered(state, broker_id, timeout=timeout)
            command = jvm_broker.java_command(
                real,
                jvm_broker.MAIN_CLASS,
                str(properties),
                java=java_executable(),
                logs_dir=root / "logs",
                log4j=directory / LOG4J_FILE,
                tuning=jvm_broker.Tuning(state.tuning),
                archive=class_archive.usable(real),
                extra_flags=(
                    zk_auth.broker_jvm_flags(state.zk_auth_files) if state.zookeeper_acl else ()
                ),
            )
        pid = process.spawn_detached(command, log_path=root / "logs" / "kafkaServer.out")
        (root / "broker.pid").write_text(f"{pid}\n")
    if wait:
        wait_registered(state, [broker_id], timeout=timeout, pids={broker_id: pid})
    return pid


# The key a rolling upgrade pins before the first broker runs the new release (Kafka's
# upgrade notes): brokers keep speaking the old protocol to each other until every one runs
# the new release and the operator raises it.
IBP = "inter.broker.protocol.version"


def upgrade_broker(directory: Path, broker_id: int, kafka: str) -> releases.KafkaRelease:
    """A rolling upgrade's step on one real broker: controlled shutdown, the broker's release
    swapped for `kafka` (`real-<version>`), started again and registered. Its
    inter.broker.protocol.version stays what it ran: pinned in its server.properties to the
    line of the release it ran when the file does not already say it, as Kafka's upgrade notes
    ask before the first broker is upgraded. Returns the release it ran before."""
    directory = directory.resolve()
    state = load_state(directory)
    broker = state.broker(broker_id)
    before = state.release_of(broker_id)
    if before is None:
        raise SandboxError(
            f"broker {broker_id} runs the emulator: a rolling upgrade swaps one real Kafka"
            " release for another (`sandbox up --kafka real-<version>`)"
        )
    after = releases.release(kafka)
    if after.version == before.version:
        raise SandboxError(f"broker {broker_id} already runs {after.label}")
    kafka_jars.classpath(after.classpath.name)  # fetched, or say how to fetch it
    properties = broker_dir(directory, broker_id) / "server.properties"
    pinned = IBP in read_properties(properties)
    stop_broker(directory, broker_id)
    if not pinned:
        with properties.open("a") as file:
            file.write(f"\n# Pinned before the upgrade to {after.label}.\n{IBP}={before.line}\n")
    broker.kafka = after.name
    save_state(state)
    start_broker(directory, broker_id, wait=True)
    return before


def read_properties(path: Path) -> dict[str, str]:
    try:
        return load_properties(path.read_bytes(), source=str(path))
    except (OSError, FormatError) as exc:
        raise SandboxError(f"{path}: cannot read: {exc}") from exc


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        raise SandboxError(
            "no Java runtime on PATH: run `make setup` or `apt-get install default-jre-headless`"
        )
    return java


def stop_broker(directory: Path, broker_id: int, *, timeout: float | None = None) -> bool:
    """SIGTERM (controlled shutdown) and wait for the process to exit; True if it was running.
    A broker still there after `timeout` is killed."""
    state = load_state(directory)
    state.broker(broker_id)
    pid = broker_pid(directory, broker_id)
    if pid is None:
        return False
    if timeout is None:
        timeout = REAL_STOP_TIMEOUT_S if state.real_kafka else 60.0
    marker = str(broker_dir(directory, broker_id) / "server.properties")
    return process.terminate(pid, marker, timeout=timeout)


def kill_broker(directory: Path, broker_id: int) -> bool:
    """SIGKILL: no controlled shutdown, no checkpoints, the session expires on its own."""
    pid = broker_pid(directory, broker_id)
    if pid is None:
        return False
    return process.kill(pid, str(broker_dir(directory, broker_id) / "server.properties"))


def zk_client(state: SandboxState, timeout: float = 10.0) -> KazooClient:
    """A session for the sandbox's own tools: where ZooKeeper takes logins, as Kafka (whose
    znodes only Kafka may change), as Kafka's own tools log in with Kafka's JAAS file."""
    options: dict[str, Any] = {}
    if state.zookeeper_acl:
        options["sasl_options"] = zk_auth.sasl_options(state.zk_auth_files)
    client = KazooClient(hosts=state.zk_connect, timeout=timeout, **options)
    client.start(timeout=timeout)
    return client


def registered_brokers(zk: KazooClient) -> set[int]:
    return {int(c) for c in zk.get_children(BROKER_IDS)} if zk.exists(BROKER_IDS) else set()


def wait_registered(
    state: SandboxState,
    broker_ids: list[int],
    *,
    timeout: float = 60.0,
    pids: dict[int, int] | None = None,
) -> None:
    """Wait until every broker of `broker_ids` is registered and a controller is elected (and
    a real broker's startup is over: it registers before); a broker whose process exits
    meanwhile is an error naming it, with the end of its log."""
    directory = Path(state.directory)

    def started(broker_id: int) -> bool:
        return jvm_broker.started(broker_dir(directory, broker_id) / "logs")

    zk = zk_client(state)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (
                set(broker_ids) <= registered_brokers(zk)
                and zk.exists(CONTROLLER)
                and (state.real_kafka is None or all(started(b) for b in broker_ids))
            ):
                return
            for broker_id, pid in (pids or {}).items():
                if not process.is_alive(pid):
                    logs = broker_dir(Path(state.directory), broker_id) / "logs"
                    raise SandboxError(
                        f"broker {broker_id} ({state.brokers_label}) exited during startup:\n"
                        + jvm_broker.last_lines(logs)
                    )
            time.sleep(0.1)
    finally:
        zk.stop()
        zk.close()
    missing = sorted(set(broker_ids) - registered_brokers_now(state))
    details = "\n".join(
        jvm_broker.last_lines(broker_dir(Path(state.directory), b) / "logs") for b in missing
    )
    raise SandboxError(
        f"brokers {missing or broker_ids} ({state.brokers_label}) did not register within"
        f" {timeout:.0f}s" + (f":\n{details}" if details else "")
    )


def registered_brokers_now(state: SandboxState) -> set[int]:
    zk = zk_client(state)
    try:
        return registered_brokers(zk)
    finally:
        zk.stop()
        zk.close()


def wait_unregistered(state: SandboxState, broker_id: int, *, timeout: float) -> None:
    """Wait until /brokers/ids/<id> is gone (the session of a killed broker expired)."""
    zk = zk_client(state)
    try:
        deadline = time.monotonic() + timeout
        while broker_id in registered_brokers(zk):
            if time.monotonic() >= deadline:
                raise SandboxError(
                    f"broker {broker_id} is still registered in ZooKeeper {timeout:.0f}s after"
                    " its process ended (a session that does not expire?)"
                )
            time.sleep(0.2)
    finally:
        zk.stop()
        zk.close()


# -- up / down / status ------------------------------------------------------------------------


def up(
    directory: Path,
    *,
    brokers: int = 3,
    kafka_version: str = "2.8",
    kafka: str = jvm_broker.EMULATED,
    log_dirs_per_broker: int = 2,
    ssh: bool = False,
    properties: dict[str, str] | None = None,
    tuning: jvm_broker.Tuning | None = None,
    kafka_security: security.KafkaSecurity = security.KafkaSecurity.PLAINTEXT,
    zookeeper_acl: bool = False,
    racks: int | None = None,
) -> SandboxState:
    """Start ZooKeeper and the brokers; safe to run again on a sandbox that is (partly) up.

    `kafka` picks the brokers: the emulator of Kafka `kafka_version`, or a real Kafka release
    (`real-<version>`, remediate/sandbox/real/releases.py). `properties` are broker settings
    written into every broker's server.properties (Kafka's keys; the emulator reads the ones
    it models). `tuning`: real brokers as Kafka ships them or as the test suite runs them
    (jvm_broker.Tuning; by default `default_tuning()`); the emulator's timers are its own,
    short, either way. `racks`: each broker's broker.rack, round-robin (broker_racks). The
    layout (`brokers` to `racks`) is a new sandbox's: one already there keeps its own."""
    directory = directory.resolve()
    real, kafka_version = _brokers_asked(kafka, kafka_version, kafka_security)
    layout = BrokerLayout(
        brokers=brokers,
        log_dirs_per_broker=log_dirs_per_broker,
        properties=properties or {},
        real=real,
        racks=racks,
    )
    if zookeeper_acl and real is None:
        raise SandboxError(
            "--zookeeper-acl needs real brokers (--kafka real-<version>): the emulator does not"
            " log in to ZooKeeper"
        )
    fresh = not (directory / STATE_FILE).exists()
    if not fresh:
        state = load_state(directory)
    else:
        if not 1 <= brokers <= 9:
            raise SandboxError("a sandbox has between 1 and 9 brokers")
        directory.mkdir(parents=True, exist_ok=True)
        state = SandboxState(
            directory=str(directory),
            zookeeper_host="127.0.0.1",
            zookeeper_port=zkserver.free_port("127.0.0.1"),
            kafka_version=kafka_version,
            ssh=ssh,
            kafka=kafka,
            tuning=tuning or default_tuning(),
            kafka_security=kafka_security,
            zookeeper_acl=zookeeper_acl,
            racks=racks,
        )
        if real is not None:
            jvm_broker.write_log4j(directory / LOG4J_FILE)
        if zookeeper_acl:
            zk_auth.make_material(state.zk_auth_files)
        if kafka_security is not security.KafkaSecurity.PLAINTEXT:
            hosts = {b: broker_host(b) for b in layout.broker_ids}
            security.make_material(state.security_files.directory, hosts)
        lay_out_brokers(state, layout)
        save_state(state)
    try:
        start_zookeeper(directory, state)
        if state.listener_security is security.KafkaSecurity.SASL_SSL:
            write_scram_users(state)
        pids = {b.broker_id: start_broker(directory, b.broker_id) for b in state.brokers}
        wait_registered(
            state,
            list(pids),
            pids=pids,
            timeout=REAL_START_TIMEOUT_S if state.real_kafka else 60.0,
        )
        if ssh or state.ssh:
            state.ssh = True
            sshd.up(directory, state.brokers)
            save_state(state)
        write_cluster_yaml(directory, state)
    except BaseException:
        # A sandbox this call created is not left half up: what it started is stopped.
        if fresh:
            down(directory)
        raise
    return state


def write_scram_users(state: SandboxState) -> None:
    """The SCRAM credentials of the brokers and the tool, in ZooKeeper before any broker
    starts (a broker reads them all as it starts); kept if there already."""
    zk = zk_client(state)
    try:
        for path, data in security.users_znodes(state.security_files).items():
            if not zk.exists(path):
                zk.create(path, data, makepath=True)
    finally:
        zk.stop()
        zk.close()


def _brokers_asked(
    kafka: str, kafka_version: str, kafka_security: security.KafkaSecurity
) -> tuple[releases.KafkaRelease | None, str]:
    """The real release `kafka` names (None: the emulator) and the rules its sandbox follows,
    or SandboxError saying what is wrong with the request."""
    real = releases.release(kafka) if kafka.startswith("real-") else None
    if real is None and kafka != jvm_broker.EMULATED:
        raise SandboxError(
            f"--kafka must be {jvm_broker.EMULATED} or real-<version>, one of"
            f" {', '.join(releases.VERSIONS)}; not {kafka!r}"
        )
    if real is not None:
        kafka_jars.classpath(real.classpath.name)  # fetched, or say how to fetch it
        kafka_version = real.rules
    elif kafka_security is not security.KafkaSecurity.PLAINTEXT:
        raise SandboxError(
            f"--kafka-security {kafka_security} needs real brokers (--kafka real-<version>):"
            " the emulator speaks its own protocol"
        )
    if kafka_version not in KAFKA_VERSIONS:
        raise SandboxError(f"--kafka-version must be one of {', '.join(KAFKA_VERSIONS)}")
    return real, kafka_version


def broker_racks(broker_ids: Iterable[int], racks: int | None) -> dict[int, str]:
    """Each broker's broker.rack: `racks` racks named rack-0, rack-1, ..., round-robin in
    ascending broker id order (the first broker rack-0, the second rack-1, ..., wrapping);
    none without racks. A rack exists only as its brokers' setting: with more racks than
    brokers, the racks past the last broker's are not made."""
    if racks is None:
        return {}
    if racks < 1:
        raise SandboxError(f"--racks: expected a number of racks of 1 or more, not {racks}")
    return {broker_id: f"rack-{n % racks}" for n, broker_id in enumerate(sorted(broker_ids))}


@dataclass(frozen=True)
class BrokerLayout:
    """What a new sandbox's brokers are laid out with: how many (real brokers size their
    internal topics by it), their log dirs each, the caller's broker settings (Kafka's keys),
    the real release (None: the emulator) and the racks (broker_racks; None: no rack unless
    `properties` sets broker.rack for every broker)."""

    brokers: int
    log_dirs_per_broker: int = 2
    properties: Mapping[str, str] = field(default_factory=dict)
    real: releases.KafkaRelease | None = None
    racks: int | None = None

    def __post_init__(self) -> None:
        broker_racks(self.broker_ids, self.racks)  # a count of racks that makes sense
        if self.racks is not None and RACK_PROPERTY in self.properties:
            raise SandboxError(
                f"--racks and --broker-property {RACK_PROPERTY}=... both set every broker's"
                f" {RACK_PROPERTY}: give one of them"
            )

    @property
    def broker_ids(self) -> range:
        return range(1, self.brokers + 1)

    def rack_of(self, broker_id: int) -> str | None:
        own = broker_racks(self.broker_ids, self.racks).get(broker_id)
        return own if own is not None else self.properties.get(RACK_PROPERTY)

    def properties_of(self, broker_id: int) -> dict[str, str]:
        """The settings of broker `broker_id`: the caller's, with its broker.rack."""
        rack = self.rack_of(broker_id)
        return {**self.properties, **({RACK_PROPERTY: rack} if rack is not None else {})}


def lay_out_brokers(state: SandboxState, layout: BrokerLayout) -> None:
    """Every broker of a new sandbox: its directory, log dirs and server.properties, and its
    place in `state` (nothing started)."""
    for broker_id in layout.broker_ids:
        _lay_out_broker(state, broker_id, layout)


def _lay_out_broker(state: SandboxState, broker_id: int, layout: BrokerLayout) -> None:
    """A new broker's directory, log dirs and server.properties, and its place in `state`."""
    directory = Path(state.directory)
    host = broker_host(broker_id)
    root = broker_dir(directory, broker_id)
    log_dirs = [str(root / f"data-{n}") for n in range(layout.log_dirs_per_broker)]
    port = zkserver.free_port(host)
    rack = layout.rack_of(broker_id)
    state.brokers.append(BrokerInfo(broker_id, host, port, log_dirs, rack=rack))
    root.mkdir(parents=True, exist_ok=True)
    properties = layout.properties_of(broker_id)
    if layout.real is None:
        settings = BrokerSettings(
            broker_id=broker_id,
            host=host,
            port=port,
            log_dirs=tuple(Path(d) for d in log_dirs),
            zookeeper_connect=state.zk_connect,
            kafka_version=state.kafka_version,
            properties=properties,
        )
        write_server_properties(root / "server.properties", settings)
        return
    secured = security.broker_properties(
        state.listener_security, state.security_files, broker_id=broker_id, host=host, port=port
    )
    if state.zookeeper_acl:
        secured = {**secured, **zk_auth.broker_properties()}
    jvm_broker.write_server_properties(
        root / "server.properties",
        jvm_broker.server_properties(
            broker_id=broker_id,
            host=host,
            port=port,
            log_dirs=[Path(d) for d in log_dirs],
            zookeeper_connect=state.zk_connect,
            brokers=layout.brokers,
            tuning=jvm_broker.Tuning(state.tuning),
            overrides={**secured, **properties},
        ),
    )


def down(directory: Path) -> list[str]:
    """Stop everything the sandbox started, by pid; return what was stopped. The brokers get
    SIGTERM together (a controlled shutdown where one can still happen) and SIGKILL after
    20 s: nothing of a sandbox being taken down needs to survive."""
    directory = directory.resolve()
    state = load_state(directory)
    stopped: list[str] = []
    if state.ssh:
        stopped += sshd.down(directory, state.brokers)
    running = {
        broker.broker_id: pid
        for broker in state.brokers
        if (pid := broker_pid(directory, broker.broker_id)) is not None
    }
    process.terminate_all(
        {
            pid: str(broker_dir(directory, broker_id) / "server.properties")
            for broker_id, pid in running.items()
        },
        timeout=20,
    )
    stopped += [f"broker {broker_id}" for broker_id in sorted(running)]
    stopped += stop_controllers(directory, state)
    pid = zookeeper_pid(directory)
    if pid is not None and process.terminate(pid, ZOOKEEPER_MARKER, timeout=10):
        stopped.append("zookeeper")
    return stopped


def controller_dir(directory: Path, node_id: int) -> Path:
    return directory / f"controller-{node_id}"


def stop_controllers(directory: Path, state: SandboxState) -> list[str]:
    """Stop the KRaft controllers `sandbox migrate` started, by pid."""
    stopped = []
    for saved in state.controllers:
        root = controller_dir(directory, int(saved["node_id"]))
        pid = process.read_pid(root / "controller.pid")
        marker = str(root / "controller.properties")
        if (
            pid is not None
            and process.owns(pid, marker)
            and process.terminate(pid, marker, timeout=30)
        ):
            stopped.append(f"controller {saved['node_id']}")
    return stopped


def status(directory: Path) -> dict[str, Any]:
    directory = directory.resolve()
    state = load_state(directory)
    result: dict[str, Any] = {
        "directory": str(directory),
        "zookeeper": {"connect": state.zk_connect, "running": zookeeper_pid(directory) is not None},
        "kafka_version": state.kafka_version,
        "kafka": state.kafka,
        "tuning": state.tuning,
        "racks": state.racks,
        "controller": None,
        "brokers": [],
    }
    registered: set[int] = set()
    if result["zookeeper"]["running"]:
        zk = zk_client(state)
        try:
            registered = (
                {int(c) for c in zk.get_children(BROKER_IDS)} if zk.exists(BROKER_IDS) else set()
            )
            if zk.exists(CONTROLLER):
                result["controller"] = decode_controller(zk.get(CONTROLLER)[0]).broker_id
        finally:
            zk.stop()
            zk.close()
    for broker in state.brokers:
        result["brokers"].append(
            {
                "id": broker.broker_id,
                "listener": f"{broker.host}:{broker.port}",
                "kafka": broker.kafka or state.kafka,
                "running": broker_pid(directory, broker.broker_id) is not None,
                "registered": broker.broker_id in registered,
                "log_dirs": broker.log_dirs,
                "rack": broker.rack,
                **({"ssh": f"{broker.host}:{broker.ssh_port}"} if broker.ssh_port else {}),
            }
        )
    return result


# -- cluster.yaml ------------------------------------------------------------------------------


def remediate_executable() -> str:
    """The `remediate` script next to this interpreter (the project's virtualenv)."""
    candidate = Path(sys.executable).parent / "remediate"
    return str(candidate) if candidate.exists() else "remediate"


def write_cluster_yaml(directory: Path, state: SandboxState) -> Path:
    base = f"{shlex.quote(remediate_executable())} sandbox broker"
    where = f"--dir {shlex.quote(str(directory))}"
    brokers: list[dict[str, Any]] = []
    for broker in state.brokers:
        entry: dict[str, Any] = {
            "id": broker.broker_id,
            "host": broker.host,
            "transport": "ssh" if state.ssh else "local",
            "log_dirs": broker.log_dirs,
            "state_change_log": str(
                broker_dir(directory, broker.broker_id) / "logs" / "state-change.log"
            ),
        }
        # The broker's file, as on a production broker: the tool reads min.insync.replicas
        # from it, and a real broker's log dirs and controlled-shutdown settings too.
        entry["server_properties"] = str(
            broker_dir(directory, broker.broker_id) / "server.properties"
        )
        if state.real_kafka is not None:
            del entry["log_dirs"]
        if state.ssh and broker.ssh_port:
            entry["ssh_port"] = broker.ssh_port
        brokers.append(entry)
    document: dict[str, Any] = {
        "cluster": f"sandbox-{directory.name}",
        "zookeeper": {
            "connect": state.zk_connect,
            "session_timeout_s": 10,
            # The tool's own identity; the znodes it creates are Kafka's to manage too.
            **(
                {
                    "auth": {
                        "scheme": "sasl",
                        "username": zk_auth.TOOL_USER,
                        "password_file": str(state.zk_auth_files.password(zk_auth.TOOL_USER)),
                    },
                    "acl_also": [f"sasl:{zk_auth.KAFKA_USER}"],
                }
                if state.zookeeper_acl
                else {}
            ),
        },
        "brokers": brokers,
        "service": {
            "stop": f"{base} stop --id {{broker_id}} {where}",
            "start": f"{base} start --id {{broker_id}} {where}",
            # The same test as `sandbox broker status`, in sh: fast, as systemctl is; 3 (LSB's
            # "not running") when it is down.
            "status": (
                f"d={shlex.quote(str(directory))}/broker-{{broker_id}};"
                ' pid=$(cat "$d/broker.pid" 2>/dev/null) && [ -n "$pid" ]'
                """ && tr '\\0' '\\n' < "/proc/$pid/cmdline" 2>/dev/null"""
                ' | grep -qF -- "$d/server.properties" || exit 3'
            ),
        },
        "backup_dir": str(directory / "backups"),
        "journal_dir": str(directory / "journal"),
        "spark": {"master": "local[2]"},
        # Kafka's admin requests (the repairs that move replicas between log dirs): real
        # brokers at the endpoints they registered, emulated ones over the sandbox's wire.
        "kafka": (
            security.cluster_yaml_kafka(state.listener_security, state.security_files)
            if state.real_kafka is not None
            else {"admin": "sandbox"}
        ),
    }
    if state.ssh:
        ssh_dir = directory / "ssh"
        document["ssh"] = {
            "user": "root",
            "key_file": str(ssh_dir / "id_ed25519"),
            "known_hosts": str(ssh_dir / "known_hosts"),
        }
    path = directory / "cluster.yaml"
    header = "# Written by `remediate sandbox up`. See docs/configuration.md.\n"
    path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    return path


def broker_settings(directory: Path, broker_id: int) -> BrokerSettings:
    return read_server_properties(broker_dir(directory, broker_id) / "server.properties")
