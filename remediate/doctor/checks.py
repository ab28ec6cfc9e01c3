"""What doctor looks at, and how: this host (the journal), ZooKeeper (the session, the reads,
the rights of the tool's identity), Kafka's listener (each broker's release, the Cluster
operations the moves need) and each broker over its transport (ssh and its host key, sudo as
cluster.yaml asks for it, the status command, the files a run reads, the log dirs, the backup
dir and its room). Nothing here changes anything."""

from __future__ import annotations

import os
from collections.abc import Iterator

from remediate.collect.cluster_state import read_cluster_state
from remediate.collect.collector import zk_settings
from remediate.config import ClusterConfig
from remediate.doctor.brokers import broker_findings
from remediate.doctor.model import Diagnosis, Finding, critical, ok, unknown, warning
from remediate.doctor.zk_rights import Identity, judge, needs
from remediate.errors import ConfigError, KafkaAdminError, RemediationError, ZooKeeperError
from remediate.execute.journal_mirror import cluster_path
from remediate.execute.lock import lock_path
from remediate.ports import KafkaAdmin
from remediate.state import ClusterState
from remediate.zookeeper import KazooZooKeeper, connect

THIS_HOST = "this host"
CLUSTER = "cluster"
# The Cluster operations the repairs without restarts need (configuration.md, kafka).
MOVE_OPERATIONS = ("DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")


def diagnose(config: ClusterConfig) -> Diagnosis:
    findings = [journal_dir(config)]
    zk_findings, state = zookeeper(config)
    findings += zk_findings
    findings += kafka(config, state)
    for broker in config.brokers:
        findings += list(broker_findings(config, broker))
    return Diagnosis.of(findings)


# -- this host ---------------------------------------------------------------------------------


def journal_dir(config: ClusterConfig) -> Finding:
    path = config.journal_dir
    existing = next(p for p in (path, *path.parents) if p.exists())
    writable = existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    if existing == path and writable:
        return ok("journal dir", THIS_HOST, f"{path} is writable")
    if writable:
        return ok("journal dir", THIS_HOST, f"{path} will be created in {existing}")
    return critical(
        "journal dir",
        THIS_HOST,
        f"{path} cannot be written here ({existing} is not a writable directory)",
        f"create {path} for the account that runs remediate (mode 0700)",
    )


# -- ZooKeeper ---------------------------------------------------------------------------------


def identity(config: ClusterConfig) -> Identity:
    auth = config.zookeeper.auth
    if auth is None:
        return Identity()
    if auth.scheme == "digest":
        password = auth.resolved_password
        return Identity.digest(auth.username, password.get_secret_value() if password else "")
    return Identity.sasl(auth.username)


def zookeeper(config: ClusterConfig) -> tuple[list[Finding], ClusterState | None]:
    settings = zk_settings(config)
    who = identity(config)
    try:
        zk = connect(settings)
    except ZooKeeperError as exc:
        return [
            critical(
                "zookeeper",
                CLUSTER,
                str(exc),
                "check zookeeper.connect, its auth and tls against the ensemble",
            ),
            unknown("zookeeper rights", CLUSTER, "not checked: no session"),
        ], None
    try:
        found = [ok("zookeeper", CLUSTER, f"session on {settings.connect} as {who}")]
        state: ClusterState | None
        try:
            state = read_cluster_state(zk)
        except RemediationError as exc:
            state = None
            found.append(
                critical(
                    "zookeeper reads",
                    CLUSTER,
                    f"the cluster's znodes could not be read: {exc}",
                    "give the identity READ on the paths docs/configuration.md lists",
                )
            )
        found += rights(zk, config, who, state)
        return found, state
    finally:
        zk.close()


def rights(
    zk: KazooZooKeeper, config: ClusterConfig, who: Identity, state: ClusterState | None
) -> list[Finding]:
    lock, journal = lock_path(config.cluster), cluster_path(config.cluster)
    ancestors = {p for path in (lock, journal) for p in _ancestors(path)}
    try:
        existing = {p: zk.exists(p) is not None for p in sorted(ancestors | {lock, journal})}
        wanted = needs(
            chroot_root="/",
            brokers=[str(b) for b in sorted(state.brokers)] if state else [],
            topics=sorted(state.topics) if state else [],
            existing=existing,
            lock=lock,
            journal=journal,
        )
        paths = {"/", *(p for need in wanted for p in need.paths)}
        acls = zk.acls_many(sorted(paths))
    except ZooKeeperError as exc:
        return [unknown("zookeeper rights", CLUSTER, f"the ACLs could not be read: {exc}")]
    return [judge(need, acls, who) for need in wanted]


def _ancestors(path: str) -> Iterator[str]:
    parts = path.strip("/").split("/")
    for end in range(1, len(parts)):
        yield "/" + "/".join(parts[:end])


# -- Kafka's listener ------------------------------------------------------------------------


def kafka(config: ClusterConfig, state: ClusterState | None) -> list[Finding]:
    if config.kafka is None:
        return [
            critical(
                "kafka listener",
                CLUSTER,
                "no kafka section: each broker's release cannot be read, so a plan with steps"
                " is refused",
                "add a kafka section for the brokers' listener (docs/configuration.md, kafka)",
            )
        ]
    if state is None:
        return [unknown("kafka listener", CLUSTER, "not checked: ZooKeeper could not be read")]
    from remediate.workflows import kafka_admin  # noqa: PLC0415 (the workflows import Spark's setup)

    try:
        admin = kafka_admin(config, state)
    except (KafkaAdminError, ConfigError) as exc:
        return [
            critical(
                "kafka listener",
                CLUSTER,
                f"Kafka's admin API cannot be reached: {exc}",
                "check kafka.listener, bootstrap, security_protocol, tls and sasl",
            )
        ]
    found: list[Finding] = []
    try:
        for broker in sorted(state.brokers):
            try:
                version = admin.kafka_version(broker)
            except KafkaAdminError as exc:
                found.append(critical("kafka release", f"broker {broker}", str(exc)))
                continue
            if version is None:
                found.append(critical("kafka release", f"broker {broker}", "no release told"))
            else:
                release = f"Kafka {version[0]}.{version[1]}, from its ApiVersions"
                found.append(ok("kafka release", f"broker {broker}", release))
        found.append(_operations(admin))
    finally:
        admin.close()
    return found


def _operations(admin: KafkaAdmin) -> Finding:
    try:
        granted = admin.cluster_operations()
    except KafkaAdminError as exc:
        return unknown("kafka ACLs", CLUSTER, f"DescribeCluster failed: {exc}")
    return operations_finding(granted)


def operations_finding(granted: frozenset[str] | None) -> Finding:
    """What the Cluster operations Kafka authorizes mean for the repairs (None: not told)."""
    if granted is None:
        return unknown("kafka ACLs", CLUSTER, "the brokers did not tell the authorized operations")
    missing = [op for op in MOVE_OPERATIONS if op not in granted]
    if missing:
        return warning(
            "kafka ACLs",
            CLUSTER,
            f"no {', '.join(missing)} on the Cluster resource: the repairs that move replicas"
            " (Kafka 2.8, two or more log dirs) fail without them",
            f"grant the principal {', '.join(missing)} on the Cluster resource",
        )
    return ok("kafka ACLs", CLUSTER, f"{', '.join(MOVE_OPERATIONS)} on the Cluster resource")
