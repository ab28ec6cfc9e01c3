"""One emulated Kafka broker: `python -m remediate.sandbox.emulated.broker <server.properties>`.

Startup follows KafkaServer.startup: lock and load the log dirs (a malformed
partition.metadata is fatal on 2.8), connect to ZooKeeper, check meta.properties against
`/cluster/id`, serve requests, register `/brokers/ids/<id>` and take part in controller
election. SIGTERM runs a controlled shutdown (retried, then shutdown anyway), writes the
checkpoints and `.kafka_cleanshutdown`, and closes the ZooKeeper session.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from remediate.errors import FormatError
from remediate.formats.logdir import (
    CLEAN_SHUTDOWN,
    LOCK_FILE,
    META_PROPERTIES,
    MetaProperties,
    encode_meta_properties,
    parse_meta_properties,
)
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONTROLLER,
    BrokerRegistration,
    Endpoint,
    broker_path,
    decode_broker,
    decode_cluster_id,
    decode_controller,
    decode_topic_config,
    encode_broker,
    encode_cluster_id,
    topic_config_path,
)
from remediate.sandbox.emulated import kafkalog, wire
from remediate.sandbox.emulated.config import BrokerSettings, read_server_properties
from remediate.sandbox.emulated.controller import Controller
from remediate.sandbox.emulated.replica import (
    FatalStartupError,
    LogDir,
    ReplicaManager,
    load_future_logs,
    load_log_dirs,
)
from remediate.sandbox.emulated.storage import PartitionLog

log = logging.getLogger("kafka.server.KafkaServer")
manager = logging.getLogger("kafka.log.LogManager")

PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    "/config/changes",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/admin/delete_topics",
    "/brokers/seqid",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
)


class Broker:
    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.shutdown_requested = threading.Event()
        self._lock_handles: list[Any] = []
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._watched_configs: set[str] = set()
        self._session_events: threading.Event = threading.Event()
        self._lost_session = False
        self.zk: KazooClient | None = None
        self.replicas: ReplicaManager | None = None
        self.controller: Controller | None = None
        self.server: Any = None
        self.broker_epoch = -1

    # -- startup ------------------------------------------------------------------------------

    def startup(self) -> None:
        settings = self.settings
        log.info("starting")
        for log_dir in settings.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            handle = open(log_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held for the process lifetime
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                raise FatalStartupError(
                    f"Failed to acquire lock on file .lock in {log_dir}. A Kafka instance in"
                    " another process or thread is using this directory."
                ) from exc
            self._lock_handles.append(handle)
        log_dirs, logs = self._load_logs()

        session_timeout = settings.get_int("zookeeper.session.timeout.ms") / 1000.0
        self.zk = KazooClient(hosts=settings.zookeeper_connect, timeout=session_timeout)
        self.zk.add_listener(self._on_zk_state)
        self.zk.start(timeout=30)
        for path in PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        cluster_id = self._cluster_id()
        self._check_meta_properties(cluster_id, [d.path for d in log_dirs if not d.offline])

        self.replicas = ReplicaManager(
            broker_id=self.broker_id,
            kafka_version=settings.kafka_version,
            log_dirs=log_dirs,
            logs=logs,
            replica_lag_time_max_ms=settings.get_int("replica.lag.time.max.ms"),
            fetch_wait_max_ms=settings.get_int("replica.fetch.wait.max.ms"),
            fetch_backoff_ms=settings.get_int("replica.fetch.backoff.ms"),
            min_isr_for=self._min_isr_for,
            send_alter_isr=self._send_alter_isr,
            future_logs=load_future_logs(log_dirs),
            file_delete_delay_ms=settings.get_int("file.delete.delay.ms"),
        )
        self.server = wire.serve(settings.host, settings.port, self._dispatch)
        self._register()
        self.controller = Controller(
            zk=self.zk,
            broker_id=self.broker_id,
            uses_topic_ids=settings.uses_topic_ids,
            unclean_leader_election=settings.get_bool("unclean.leader.election.enable"),
            broker_epoch=lambda: self.broker_epoch,
        )
        self.controller.start()
        for target, name in (
            (self.replicas.run_alter_isr, "alter-isr-sender"),
            (self._run_scheduler, "kafka-scheduler"),
            (self._run_session_watcher, "zk-session-watcher"),
        ):
            threading.Thread(target=target, name=name, daemon=True).start()
        log.info("[KafkaServer id=%d] started", self.broker_id)

    def _load_logs(self) -> tuple[list[LogDir], dict[tuple[str, int], PartitionLog]]:
        """LogManager.loadLogs, with Kafka's own lines (log/LogManager.scala at 2.8.2 and
        3.4.1): each log dir's clean shutdown file taken away (its recovery skipped) or found
        missing (its logs recovered), then one line per log loaded. The logs are read at once;
        `sandbox.log.recovery.ms` is the time the loading takes, spread evenly over the logs
        (a line after each), as a real broker's recovery of large logs."""
        settings = self.settings
        dirs = settings.log_dirs
        manager.info("Loading logs from log dirs ArraySeq(%s)", ", ".join(map(str, dirs)))
        for path in dirs:
            marker = path / CLEAN_SHUTDOWN
            if marker.exists():
                manager.info(
                    "Skipping recovery for all logs in %s since clean shutdown file was found",
                    path,
                )
                marker.unlink()
            else:
                manager.info(
                    "Attempting recovery for all logs in %s since no clean shutdown file was found",
                    path,
                )
        began = time.monotonic()
        log_dirs, logs = load_log_dirs(dirs, settings.kafka_version)
        recovery_s = settings.get_int("sandbox.log.recovery.ms") / 1000.0
        per_log = recovery_s / len(logs) if logs else recovery_s
        if not logs and per_log > 0 and self.shutdown_requested.wait(per_log):
            raise FatalStartupError("shut down while loading logs")
        word = "loaded" if settings.kafka_version == "2.8" else "completed"
        for log_dir in log_dirs:
            loaded = [(tp, p) for tp, p in sorted(logs.items()) if p.dir.parent == log_dir.path]
            for number, ((topic, partition), partition_log) in enumerate(loaded, 1):
                started = time.monotonic()
                if per_log > 0 and self.shutdown_requested.wait(per_log):
                    raise FatalStartupError("shut down while loading logs")
                topic_id = partition_log.topic_id
                manager.info(
                    "Completed load of Log(dir=%s, %stopic=%s, partition=%d, highWatermark=0,"
                    " lastStableOffset=0, logStartOffset=0, logEndOffset=%d) with 1 segments in"
                    " %dms (%d/%d %s in %s)",
                    partition_log.dir,
                    f"topicId={topic_id}, " if topic_id and settings.kafka_version != "2.8" else "",
                    topic,
                    partition,
                    partition_log.log_end_offset,
                    (time.monotonic() - started) * 1000,
                    number,
                    len(loaded),
                    word,
                    log_dir.path,
                )
        manager.info("Loaded %d logs in %dms.", len(logs), (time.monotonic() - began) * 1000)
        return log_dirs, logs

    def _cluster_id(self) -> str:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(CLUSTER_ID)
            return decode_cluster_id(data)
        except NoNodeError:
            proposed = str(TopicId.random())
            with contextlib.suppress(NodeExistsError):
                self.zk.create(CLUSTER_ID, encode_cluster_id(proposed), makepath=True)
            data, _ = self.zk.get(CLUSTER_ID)
            return decode_cluster_id(data)

    def _check_meta_properties(self, cluster_id: str, log_dirs: list[Path]) -> None:
        for log_dir in log_dirs:
            path = log_dir / META_PROPERTIES
            if path.exists():
                try:
                    meta = parse_meta_properties(path.read_bytes(), source=str(path))
                except FormatError as exc:
                    raise FatalStartupError(str(exc)) from exc
                if meta.broker_id != self.broker_id:
                    raise FatalStartupError(
                        f"Configured broker.id {self.broker_id} doesn't match stored broker.id"
                        f" {meta.broker_id} in meta.properties."
                    )
                if meta.cluster_id is not None and meta.cluster_id != cluster_id:
                    raise FatalStartupError(
                        f"The Cluster ID {cluster_id} doesn't match stored clusterId"
                        f" Some({meta.cluster_id}) in meta.properties. The broker is trying to join"
                        " the wrong cluster. Configured zookeeper.connect may be wrong."
                    )
            else:
                path.write_bytes(encode_meta_properties(MetaProperties(self.broker_id, cluster_id)))

    def _register(self) -> None:
        """Create /brokers/ids/<id>; wait out a znode left by our own previous session."""
        assert self.zk is not None and self.replicas is not None
        registration = BrokerRegistration(
            broker_id=self.broker_id,
            endpoints=(Endpoint("PLAINTEXT", self.settings.host, self.settings.port),),
            host=self.settings.host,
            port=self.settings.port,
            timestamp_ms=int(time.time() * 1000),
            rack=self.settings.rack,
            security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        )
        deadline = (
            time.monotonic() + 2 * self.settings.get_int("zookeeper.session.timeout.ms") / 1000 + 10
        )
        while True:
            try:
                path = self.zk.create(
                    broker_path(self.broker_id), encode_broker(registration), ephemeral=True
                )
                break
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise FatalStartupError(
                        f"Error while creating ephemeral at {broker_path(self.broker_id)}, node"
                        " already exists and owner does not match current session"
                    ) from None
                time.sleep(0.5)
        _, stat = self.zk.get(path)
        self.broker_epoch = stat.czxid
        self.replicas.broker_epoch = stat.czxid
        log.info(
            "Registered broker %d at path %s with addresses: PLAINTEXT://%s:%d,"
            " czxid (broker epoch): %d",
            self.broker_id,
            path,
            self.settings.host,
            self.settings.port,
            stat.czxid,
        )

    # -- ZooKeeper session --------------------------------------------------------------------

    def _on_zk_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost_session = True
            if self.controller is not None:
                self.controller.expire()  # queued ahead of anything the new session brings
            self._session_events.set()
        elif state == KazooState.CONNECTED and self._lost_session:
            self._session_events.set()

    def _run_session_watcher(self) -> None:
        """After a session expiry: register again (new broker epoch) and re-run election."""
        while not self.shutdown_requested.is_set():
            self._session_events.wait(1.0)
            self._session_events.clear()
            if not self._lost_session or self.zk is None or not self.zk.connected:
                continue
            self._lost_session = False
            log.info("ZooKeeper session expired; re-registering broker %d", self.broker_id)
            try:
                self._register()
                if self.controller is not None:
                    self.controller.reelect()
            except Exception:
                log.exception("Failed to re-register after session expiry")
                self._lost_session = True

    # -- services for the replica manager -----------------------------------------------------

    def _min_isr_for(self, topic: str) -> int:
        assert self.zk is not None
        if topic not in self._watched_configs:
            self._watched_configs.add(topic)

            def on_change(data: bytes | None, _stat: ZnodeStat | None) -> None:
                try:
                    self._topic_configs[topic] = (
                        decode_topic_config(data, source=topic_config_path(topic)) if data else {}
                    )
                except FormatError:
                    self._topic_configs[topic] = {}

            self.zk.DataWatch(topic_config_path(topic), on_change)
        value = self._topic_configs.get(topic, {}).get("min.insync.replicas")
        return int(value) if value is not None and value.isdigit() else self._broker_min_isr()

    def _broker_min_isr(self) -> int:
        """Kafka's order for a broker's own setting: its dynamic one (/config/brokers/<id>),
        the cluster's dynamic default (/config/brokers/<default>), its server.properties."""
        assert self.zk is not None
        entities = (str(self.broker_id), "<default>")
        for entity in entities:
            key = f"/config/brokers/{entity}"
            if key not in self._watched_configs:
                self._watched_configs.add(key)
                self.zk.DataWatch(key, self._config_watcher(key))
        for entity in entities:
            value = self._topic_configs.get(f"/config/brokers/{entity}", {}).get(
                "min.insync.replicas"
            )
            if value is not None and value.isdigit():
                return int(value)
        return self.settings.get_int("min.insync.replicas")

    def _config_watcher(self, key: str) -> Callable[[bytes | None, ZnodeStat | None], None]:
        def on_change(data: bytes | None, _stat: ZnodeStat | None) -> None:
            try:
                self._topic_configs[key] = decode_topic_config(data, source=key) if data else {}
            except FormatError:
                self._topic_configs[key] = {}

        return on_change

    def _controller_endpoint(self) -> tuple[int, str, int] | None:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(CONTROLLER)
            controller_id = decode_controller(data).broker_id
            data, _ = self.zk.get(broker_path(controller_id))
        except (KazooException, FormatError):  # no controller, or ZooKeeper unreachable: retry
            return None
        endpoint = decode_broker(controller_id, data, source=broker_path(controller_id)).endpoint()
        return (controller_id, endpoint.host, endpoint.port) if endpoint else None

    def _send_to_controller(
        self, request: dict[str, Any], timeout: float = 30.0
    ) -> dict[str, Any] | None:
        target = self._controller_endpoint()
        if target is None:
            return None
        try:
            response = wire.call_once(target[1], target[2], request, timeout=timeout)
        except wire.WireError:
            return None
        return None if response.get("error") == wire.NOT_CONTROLLER else response

    def _send_alter_isr(self, partitions: list[dict[str, Any]]) -> dict[str, Any] | None:
        return self._send_to_controller(
            {
                "api": "AlterIsr",
                "broker_id": self.broker_id,
                "broker_epoch": self.broker_epoch,
                "partitions": partitions,
            }
        )

    def _run_scheduler(self) -> None:
        assert self.replicas is not None
        shrink_every = self.settings.get_int("replica.lag.time.max.ms") / 2000.0
        checkpoint_every = (
            self.settings.get_int("replica.high.watermark.checkpoint.interval.ms") / 1000.0
        )
        next_shrink = next_checkpoint = time.monotonic()
        while not self.shutdown_requested.wait(0.1):
            current = time.monotonic()
            if current >= next_shrink:
                self.replicas.shrink_isr_if_needed()
                next_shrink = current + shrink_every
            if current >= next_checkpoint:
                try:
                    self.replicas.checkpoint()
                except OSError:
                    log.exception("Error while writing checkpoints")
                next_checkpoint = current + checkpoint_every

    # -- requests -----------------------------------------------------------------------------

    def _dispatch(self, request: dict[str, Any]) -> dict[str, Any]:
        # The listener is up before registration (as Kafka's SocketServer), and the controller
        # may send LeaderAndIsr as soon as the registration appears: replica requests must not
        # wait for this broker's own controller component, which starts just after.
        assert self.replicas is not None
        api = request.get("api")
        if api == "LeaderAndIsr":
            return self.replicas.handle_leader_and_isr(request)
        if api == "StopReplica":
            return self.replicas.handle_stop_replica(request)
        if api == "Fetch":
            return self.replicas.handle_fetch(request)
        if api == "Produce":
            return self.replicas.handle_produce(request)
        if api == "OffsetsForLeaderEpoch":
            return self.replicas.handle_offsets_for_leader_epoch(request)
        if api == "AlterReplicaLogDirs":
            return self.replicas.handle_alter_replica_log_dirs(request)
        if api == "DescribeLogDirs":
            return self.replicas.handle_describe_log_dirs(request)
        if api == "PauseFetchers":  # fault injection, not Kafka's (replica.FetcherManager)
            if request.get("pause"):
                idle = self.replicas.fetchers.pause(timeout=float(request.get("timeout_s", 10)))
                return {"error": wire.NONE, "idle": idle}
            self.replicas.fetchers.resume()
            return {"error": wire.NONE}
        if api in (
            "ControlledShutdown",
            "AlterIsr",
            "AlterPartitionReassignments",
            "ListPartitionReassignments",
        ):
            if self.controller is None:
                return {"error": wire.NOT_CONTROLLER}
            return self.controller.request(api, request)
        if api == "ApiVersions":
            return {
                "error": wire.NONE,
                "broker_id": self.broker_id,
                "kafka_version": self.settings.kafka_version,
            }
        return {"error": wire.UNKNOWN_SERVER_ERROR, "message": f"unknown api {api!r}"}

    # -- shutdown -----------------------------------------------------------------------------

    def controlled_shutdown(self) -> None:
        retries = self.settings.get_int("controlled.shutdown.max.retries")
        backoff = self.settings.get_int("controlled.shutdown.retry.backoff.ms") / 1000.0
        # server/KafkaServer.scala controlledShutdown (2.8.2): announced once, then a warning
        # after each failed attempt.
        log.info("[KafkaServer id=%d] Starting controlled shutdown", self.broker_id)
        for _attempt in range(retries):
            response = self._send_to_controller(
                {
                    "api": "ControlledShutdown",
                    "broker_id": self.broker_id,
                    "broker_epoch": self.broker_epoch,
                }
            )
            if (
                response is not None
                and response.get("error") == wire.NONE
                and not response.get("remaining_partitions")
            ):
                log.info("[KafkaServer id=%d] Controlled shutdown succeeded", self.broker_id)
                return
            remaining = response.get("remaining_partitions") if response else None
            log.warning(
                "[KafkaServer id=%d] Retrying controlled shutdown after the previous attempt failed"
                " (remaining partitions: %s)",
                self.broker_id,
                ", ".join(f"{t}-{p}" for t, p in remaining or []),
            )
            time.sleep(backoff)
        log.warning(
            "[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the controlled"
            " shutdown attempts failed",
            self.broker_id,
        )

    def shutdown(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        if (
            self.settings.get_bool("controlled.shutdown.enable")
            and self.zk is not None
            and self.zk.connected
        ):
            self.controlled_shutdown()
        self.shutdown_requested.set()
        if self.replicas is not None:
            self.replicas.shutdown()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.controller is not None:
            self.controller.shutdown()
        if self.replicas is not None:
            self.replicas.checkpoint(clean=True)
            for log_dir in self.replicas.log_dirs:
                if not log_dir.offline:
                    (log_dir.path / CLEAN_SHUTDOWN).touch()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            "usage: python -m remediate.sandbox.emulated.broker <server.properties>",
            file=sys.stderr,
        )
        return 2
    properties = Path(args[0])
    settings = read_server_properties(properties)
    kafkalog.configure(Path(settings.get("sandbox.logs.dir") or properties.parent / "logs"))
    broker = Broker(settings)
    signal.signal(signal.SIGTERM, lambda *_: broker.shutdown_requested.set())
    signal.signal(signal.SIGINT, lambda *_: broker.shutdown_requested.set())
    try:
        broker.startup()
    except (FatalStartupError, FormatError) as exc:
        log.error("Fatal error during KafkaServer startup. Prepare to shutdown: %s", exc)
        broker.shutdown_requested.set()
        if broker.zk is not None:
            broker.zk.stop()
        return 1
    while not broker.shutdown_requested.wait(0.5):
        pass
    broker.shutdown_requested.clear()
    broker.shutdown()
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
