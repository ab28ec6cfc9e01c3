"""collect: ZooKeeper (pipelined) plus every broker's disk (one command each, in parallel),
written as a snapshot directory. Read-only from start to end.
"""

from __future__ import annotations

import getpass
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remediate.collect.cluster_state import read_cluster_state
from remediate.collect.inventory import StateChangeTail, inventory_command, inventory_rows
from remediate.collect.snapshot import BrokerReport, write_snapshot, write_state_tables
from remediate.config import BrokerConfig, ClusterConfig
from remediate.errors import ConfigError, FormatError, TransportError
from remediate.formats.properties import load_properties
from remediate.formats.statechange import parse_rejections
from remediate.gcpause import gc_paused
from remediate.ports import CommandKind, Transport
from remediate.ssh_options import ssh_settings
from remediate.state import ClusterState
from remediate.transport import (
    LocalTransport,
    ServiceSudoTransport,
    SshTransport,
    SudoTransport,
)
from remediate.zookeeper import ZkAuth, ZkSettings, ZkTls, session

INVENTORY_TIMEOUT_S = 300.0
Progress = Callable[[str], None]
# A new transport to one broker's host, by broker id; whoever asks for one closes it.
TransportFactory = Callable[[int], Transport]


def zk_settings(config: ClusterConfig) -> ZkSettings:
    zk = config.zookeeper
    auth = None
    if zk.auth is not None:
        password = zk.auth.resolved_password
        auth = ZkAuth(
            scheme=zk.auth.scheme,
            username=zk.auth.username,
            password=password.get_secret_value() if password is not None else None,
            sasl_mechanism=zk.auth.mechanism or "DIGEST-MD5",
        )
    tls = None
    if zk.tls is not None:
        tls = ZkTls(
            ca_file=zk.tls.ca_file,
            cert_file=zk.tls.cert_file,
            key_file=zk.tls.key_file,
            verify_hostname=zk.tls.verify_hostname,
        )
    return ZkSettings(
        connect=zk.connect,
        session_timeout_s=zk.session_timeout_s,
        auth=auth,
        tls=tls,
        connect_timeout_s=zk.connect_timeout_s,
        acl_also=zk.acl_also,
    )


def transport_for(config: ClusterConfig, broker: BrokerConfig) -> Transport:
    """The transport to `broker`'s host: every command through `sudo -n` when its `sudo` (or
    ssh.sudo) is true, whatever the command is (the inventory, the service commands, the
    backups); only the service commands when it is `services`: the one place sudo is
    applied."""
    transport: Transport
    if broker.transport == "local":
        transport = LocalTransport(f"local (broker {broker.id})", cwd=config.base_dir)
        user = None  # this process's, asked only when sudo refuses
    else:
        target = config.ssh_target(broker.id)
        settings = ssh_settings(target, broker=broker.id, source=config.source)
        transport = SshTransport(settings)
        user = settings.user
    mode = config.sudo_mode(broker.id)
    if mode == "none":
        return transport
    if mode == "services":
        return ServiceSudoTransport(transport, broker=broker.id, user=user or _local_user())
    return SudoTransport(transport, broker=broker.id, user=user or _local_user())


def _local_user() -> str:
    """Who runs this process, for the sudoers rule a refusal asks for."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid: the rule's placeholder
        return "USER"


def transports(config: ClusterConfig) -> TransportFactory:
    """The real transports of `config`'s brokers (ssh, or local for a sandbox)."""

    def factory(broker: int) -> Transport:
        return transport_for(config, config.broker(broker))

    return factory


def read_log_dirs(config: ClusterConfig, broker: BrokerConfig, transport: Transport) -> list[str]:
    """The broker's log dirs: configured, or read from its server.properties (Kafka's
    `log.dirs`, falling back to `log.dir`, then Kafka's default)."""
    if broker.log_dirs:
        return [str(d) for d in broker.log_dirs]
    path = str(broker.server_properties)
    props = read_server_properties(config, broker, transport)
    # Kafka's own default when neither key is set.
    value = props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs"  # noqa: S108
    dirs = [d.strip() for d in value.split(",") if d.strip()]
    if not dirs or not all(d.startswith("/") for d in dirs):
        raise ConfigError(
            f"broker {broker.id}:{path}: log.dirs: expected absolute paths, got {value!r}"
        )
    return dirs


def read_server_properties(
    config: ClusterConfig, broker: BrokerConfig, transport: Transport
) -> dict[str, str]:
    """The broker's server.properties, read through its transport (the broker's config must
    name the file)."""
    path = str(broker.server_properties)
    result = transport.run(
        inventory_file_command(path), timeout=60, kind=CommandKind.SERVER_PROPERTIES
    )
    if not result.ok:
        reason = result.stderr.strip() or f"exit {result.exit_code}"
        raise TransportError(f"broker {broker.id}: cannot read {path}: {reason}")
    return load_properties(
        bytes.fromhex(result.stdout.strip()), source=f"broker {broker.id}:{path}"
    )


def inventory_file_command(path: str) -> str:
    """Print a small file as hex (od is POSIX), so its bytes survive any transport; exits
    non-zero when the file cannot be read (the pipeline's status is tr's, so it is tested
    first: a missing server.properties is never read as an empty one)."""
    script = (
        '[ -r "$1" ] || { echo "no readable file $1" >&2; exit 1; }; '
        'od -An -v -tx1 -- "$1" | tr -d " \\n"'
    )
    return f"sh -c {shlex.quote(script)} sh {shlex.quote(path)}"


# The last `$2` bytes of file `$1` as hex; the exit status is tail's (a missing or unreadable
# file fails), not the pipeline's last command's (POSIX sh has no pipefail).
_TAIL_SCRIPT = """\
exec 4>&1
status=$( { { tail -c "$2" -- "$1"; echo $? >&3; } | od -An -v -tx1 | tr -d ' \\n' >&4; } 3>&1 )
exit "$status"
"""


def file_tail_command(path: str, tail_bytes: int) -> str:
    """Print the last `tail_bytes` bytes of the file at `path` as hex; exits non-zero, saying
    why on stderr, when the file cannot be read."""
    if isinstance(tail_bytes, bool) or tail_bytes < 1:
        raise ValueError(f"tail_bytes must be at least 1, not {tail_bytes!r}")
    words = ["sh", "-c", _TAIL_SCRIPT, "sh", path, str(int(tail_bytes))]
    return " ".join(shlex.quote(word) for word in words)


def read_file_tail(transport: Transport, path: str, tail_bytes: int, *, kind: CommandKind) -> bytes:
    """The last `tail_bytes` bytes of the file at `path` on the transport's host, whole lines
    only (a first line cut by the tail is left out). TransportError when it cannot be read."""
    result = transport.run(file_tail_command(path, tail_bytes), timeout=60, kind=kind)
    if not result.ok:
        reason = result.stderr.strip()[-300:] or f"exit {result.exit_code}"
        raise TransportError(f"{transport.description}: cannot read {path}: {reason}")
    try:
        data = bytes.fromhex(result.stdout.strip())
    except ValueError:
        raise TransportError(
            f"{transport.description}: the read of {path} printed something other than hex"
        ) from None
    if len(data) >= tail_bytes:
        _, _, data = data.partition(b"\n")
    return data


def inspect_broker(
    config: ClusterConfig, broker: BrokerConfig, transport_for: TransportFactory
) -> BrokerReport:
    """Inventory one broker's log dirs; an unreachable broker is a report, never a crash."""
    transport = transport_for(broker.id)
    try:
        log_dirs = read_log_dirs(config, broker, transport)
        state_change_log = broker.state_change_log
        command = inventory_command(
            log_dirs,
            epoch_tail_lines=1,
            state_change_log=str(state_change_log) if state_change_log is not None else None,
        )
        result = transport.run(command, timeout=INVENTORY_TIMEOUT_S, kind=CommandKind.INVENTORY)
        if not result.ok:
            raise TransportError(
                f"inventory command exited {result.exit_code}: {result.stderr.strip()[:300]}"
            )
        dirs, replicas, state_change = inventory_rows(
            result.stdout, source=f"broker {broker.id} ({transport.description})"
        )
    except (TransportError, FormatError, ConfigError) as exc:
        return BrokerReport(
            broker.id, broker.host, configured=True, reachable=False, error=str(exc)
        )
    finally:
        transport.close()
    evidence, rejections = rejection_rows(state_change)
    return BrokerReport(
        broker.id,
        broker.host,
        configured=True,
        reachable=True,
        error=None,
        log_dirs=tuple(dirs),
        replicas=tuple(replicas),
        state_change_log=evidence,
        rejections=tuple(rejections),
    )


def rejection_rows(tail: StateChangeTail | None) -> tuple[str, list[dict[str, Any]]]:
    """(what became of the state-change log, rejection rows) for the snapshot: "not_configured",
    "missing", "unreadable", "partial" (tail failed part way) or "read"."""
    if tail is None:
        return "not_configured", []
    if tail.state != "present":
        return tail.state, []
    rows = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "memory_topic_id": r.memory_topic_id,
            "request_topic_id": r.request_topic_id,
            "logged_at": r.logged_at,
            "wording": r.wording,
        }
        for r in parse_rejections(tail.lines)
    ]
    return ("read" if tail.tail_status == 0 else "partial"), rows


@dataclass(frozen=True)
class Collected:
    directory: Path
    state: ClusterState
    brokers: tuple[BrokerReport, ...]


def collect_brokers(
    config: ClusterConfig,
    broker_ids: Sequence[int] | None = None,
    *,
    transport_for: TransportFactory,
    progress: Progress | None = None,
) -> tuple[BrokerReport, ...]:
    """Inventory `broker_ids` (every configured broker by default) in parallel, each through
    a transport from `transport_for`."""
    brokers = [b for b in config.brokers if broker_ids is None or b.id in broker_ids]
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(brokers)))) as pool:
        futures = {b.id: pool.submit(inspect_broker, config, b, transport_for) for b in brokers}
        reports = []
        for broker_id, future in futures.items():
            report = future.result()
            if progress is not None:
                progress(
                    f"broker {broker_id}: "
                    + ("ok" if report.reachable else f"UNREACHABLE ({report.error})")
                )
            reports.append(report)
    return tuple(reports)


def collect(
    config: ClusterConfig, directory: Path, *, progress: Progress | None = None
) -> Collected:
    """Read ZooKeeper and every broker, write the snapshot to `directory`.

    The brokers' inventories run while ZooKeeper is read: their commands run on the brokers
    (or in shells of their own) while this process spends its time in kazoo.
    """
    with (
        gc_paused(),
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="inventories") as pool,
    ):
        inventories = pool.submit(
            collect_brokers, config, transport_for=transports(config), progress=progress
        )
        with session(zk_settings(config)) as zk:
            if progress is not None:
                progress(f"reading ZooKeeper {config.zookeeper.connect}")
            state = read_cluster_state(zk)
        if progress is not None:
            progress(f"ZooKeeper: {len(state.topics)} topics, {len(state.partitions)} partitions")
        # ZooKeeper's tables are written while the inventories still run.
        counts = write_state_tables(directory, cluster=config.cluster, state=state)
        reports = inventories.result()
        write_snapshot(
            directory, cluster=config.cluster, state=state, brokers=reports, state_tables=counts
        )
    return Collected(directory, state, reports)
