"""`remediate sandbox ...`: the sandbox cluster (emulated brokers or real Kafka) of the demo and the
tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from remediate.cli.common import console
from remediate.errors import SandboxError
from remediate.sandbox import admin, clients, cluster, legacy_admin
from remediate.sandbox.migration import run as migration
from remediate.sandbox.real import class_archive, jvm_broker, kafka_jars, releases, security
from remediate.sandbox.reproduce import IncidentStep, reproduce

DEFAULT_DIR = ".sandbox"
out = console()
err = console(stderr=True)

dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DIR,
    show_default=True,
    envvar="REMEDIATE_SANDBOX_DIR",
    help="Sandbox directory.",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
)


def emit_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")


@click.group()
def sandbox() -> None:
    """A ZooKeeper-mode Kafka cluster on a real ZooKeeper: emulated brokers or real Kafka."""


def _key_values(items: tuple[str, ...], option: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        values[key.strip()] = value
    return values


@sandbox.command()
@dir_option
@click.option(
    "--brokers",
    default=3,
    show_default=True,
    type=click.IntRange(1, 9),
    help="How many brokers.",
)
@click.option(
    "--racks",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Spread the brokers over N racks (N >= 1): broker.rack is rack-0, rack-1, ..."
    " round-robin in broker id order (the first broker rack-0, the second rack-1, ...,"
    " wrapping), in each broker's server.properties and registration, and kept across"
    " restarts. A rack exists only through its brokers: with more racks than brokers, the"
    " extra racks are not created. Default: no broker.rack.",
)
@click.option("--ssh", is_flag=True, help="Also start one sshd per broker; cluster.yaml uses ssh.")
@click.option(
    "--kafka",
    "kafka",
    type=click.Choice(list(jvm_broker.KAFKA_KINDS)),
    default=jvm_broker.EMULATED,
    show_default=True,
    help="The brokers: the emulator, or a real Apache Kafka release from Maven Central's jars"
    " (`remediate sandbox fetch-kafka VERSION` fetches them; make setup fetches 2.8.2, 3.4.1,"
    " 3.6.2 and 3.9.2).",
)
@click.option(
    "--kafka-version",
    type=click.Choice(["2.8", "3.4"]),
    default=None,
    help="The Kafka line the emulator follows (default 2.8); real Kafka is its own.",
)
@click.option(
    "--log-dirs",
    "log_dirs",
    default=2,
    show_default=True,
    type=click.IntRange(1, 4),
    help="Log dirs per broker (two or more allow the repair without restarts on 2.8).",
)
@click.option(
    "--log-recovery-ms",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Emulated log recovery at every broker start, before it registers (real brokers take"
    " tens of seconds). The emulator only.",
)
@click.option(
    "--broker-property",
    "broker_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker setting (Kafka's key) for every broker's server.properties; repeatable.",
)
@click.option(
    "--tuning",
    type=click.Choice([t.value for t in jvm_broker.Tuning]),
    default=jvm_broker.Tuning.KAFKA.value,
    show_default=True,
    envvar=cluster.TUNING_ENV,
    help="Real brokers as Kafka ships them, or as the test suite runs them: shorter"
    " controlled-shutdown retries and ZooKeeper session, a leaner JVM (docs/sandbox.md). The"
    " emulator's timers are its own.",
)
@click.option(
    "--kafka-security",
    type=click.Choice([s.value for s in security.KafkaSecurity]),
    default=security.KafkaSecurity.PLAINTEXT.value,
    show_default=True,
    help="Real brokers' listeners, the brokers' own included: plaintext, ssl (mTLS: client"
    " certificates required) or sasl_ssl (SCRAM-SHA-512 over TLS). The sandbox makes the CA,"
    " the certificates and the SCRAM users (DIR/tls/) and cluster.yaml's kafka section.",
)
@click.option(
    "--zookeeper-acl",
    is_flag=True,
    help="ZooKeeper as production runs it: SASL logins, real brokers with"
    " zookeeper.set.acl=true logging in as kafka, the tool as remediate, an identity of its own"
    " (DIR/zk-auth/; cluster.yaml's zookeeper.auth).",
)
@json_option
def up(
    directory: Path,
    brokers: int,
    racks: int | None,
    ssh: bool,
    kafka: str,
    kafka_version: str | None,
    log_dirs: int,
    log_recovery_ms: int,
    broker_properties: tuple[str, ...],
    tuning: str,
    kafka_security: str,
    zookeeper_acl: bool,
    as_json: bool,
) -> None:
    """Start ZooKeeper and the brokers; write DIR/cluster.yaml. Safe to run twice."""
    real = jvm_broker.REAL_KAFKA.get(kafka)
    if real is not None and kafka_version not in (None, real.line):
        raise click.BadParameter(
            f"{kafka} is Kafka {real.line}, not {kafka_version}", param_hint="--kafka-version"
        )
    if real is not None and log_recovery_ms:
        raise click.BadParameter(
            "real brokers recover their logs themselves", param_hint="--log-recovery-ms"
        )
    properties = _key_values(broker_properties, "--broker-property")
    if log_recovery_ms:
        properties["sandbox.log.recovery.ms"] = str(log_recovery_ms)
    with err.status("starting ZooKeeper and brokers"):
        cluster.up(
            directory,
            brokers=brokers,
            kafka=kafka,
            kafka_version=kafka_version or "2.8",
            log_dirs_per_broker=log_dirs,
            ssh=ssh,
            properties=properties or None,
            tuning=jvm_broker.Tuning(tuning),
            kafka_security=security.KafkaSecurity(kafka_security),
            zookeeper_acl=zookeeper_acl,
            racks=racks,
        )
    _show_status(directory, as_json)


@sandbox.command(name="fetch-kafka")
@click.argument("versions", nargs=-1, metavar="[VERSION]...")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help=f"Every release the sandbox runs ({', '.join(releases.VERSIONS)}).",
)
@json_option
def fetch_kafka(versions: tuple[str, ...], every: bool, as_json: bool) -> None:
    """Fetch real Kafka's jars from Maven Central once: the brokers of VERSION... (by default
    the releases make test runs: 2.8.2, 3.4.1, 3.6.2 and 3.9.2) and Kafka 1.0.2's tools, and
    build each broker's class-data archive (its brokers start in half the time). Nothing is
    fetched or built while the cache holds it complete."""
    if every and versions:
        raise click.UsageError("give VERSION... or --all, not both")
    try:
        chosen = releases.VERSIONS if every else versions
        classpaths = kafka_jars.classpaths_for(chosen) if chosen else None
    except SandboxError as error:
        raise click.BadParameter(str(error), param_hint="VERSION") from None
    with err.status("fetching real Kafka's jars with Maven"):
        fetched = kafka_jars.fetch(classpaths)
    archives: dict[str, str] = {}
    for version in chosen or releases.TESTED:
        release = releases.release(version)
        if class_archive.usable(release) is None:
            with err.status(f"building {release.label}'s class-data archive"):
                class_archive.build(release, java=cluster.java_executable())
            archives[version] = str(class_archive.usable(release))
    if as_json:
        emit_json({"cache": str(kafka_jars.jars_dir()), "fetched": fetched, "archived": archives})
        return
    if fetched:
        out.print(f"fetched {', '.join(fetched)} into {kafka_jars.jars_dir()}")
    else:
        out.print(f"real Kafka's jars are in {kafka_jars.jars_dir()}")
    if archives:
        out.print(f"built the class-data archives of {', '.join(archives)}")


@sandbox.command()
@dir_option
@json_option
def down(directory: Path, as_json: bool) -> None:
    """Stop everything the sandbox started."""
    stopped = cluster.down(directory)
    if as_json:
        emit_json({"stopped": stopped})
    else:
        out.print("stopped: " + (", ".join(stopped) or "nothing was running"))


@sandbox.command()
@dir_option
@json_option
def status(directory: Path, as_json: bool) -> None:
    """Show ZooKeeper, the brokers and the controller."""
    _show_status(directory, as_json)


def _show_status(directory: Path, as_json: bool) -> None:
    document = cluster.status(directory)
    if as_json:
        emit_json(document)
        return
    zk = document["zookeeper"]
    out.print(f"ZooKeeper {zk['connect']}: {'running' if zk['running'] else 'stopped'}")
    real = jvm_broker.REAL_KAFKA.get(document["kafka"])
    brokers = real.label if real else f"Kafka {document['kafka_version']} emulation"
    out.print(f"{brokers}; controller: {document['controller']}")
    mixed = len({b["kafka"] for b in document["brokers"]}) > 1
    table = Table(
        "broker", "listener", *(["runs"] if mixed else []), "running", "registered", "log dirs"
    )
    for broker in document["brokers"]:
        runs = jvm_broker.REAL_KAFKA.get(broker["kafka"])
        table.add_row(
            str(broker["id"]),
            broker["listener"],
            *([runs.label if runs else broker["kafka"]] if mixed else []),
            "yes" if broker["running"] else "no",
            "yes" if broker["registered"] else "no",
            "\n".join(broker["log_dirs"]),
        )
    out.print(table)
    out.print(f"cluster.yaml: {Path(document['directory']) / 'cluster.yaml'}")


@sandbox.command(name="reproduce")
@dir_option
@click.option("--topic", default="orders", show_default=True, help="The topic the incident hits.")
@click.option(
    "--upgrade-to",
    type=click.Choice(list(jvm_broker.REAL_KAFKA)),
    default=None,
    help="Step 8's restart is a rolling upgrade's step: the broker comes back on this real"
    " release (`sandbox broker upgrade`). Real brokers only.",
)
@json_option
def reproduce_command(directory: Path, topic: str, upgrade_to: str | None, as_json: bool) -> None:
    """Reproduce the incident step by step (docs/sandbox.md lists the eight steps)."""

    def show(step: IncidentStep) -> None:
        if as_json:
            return
        facts = ", ".join(f"{k}={v}" for k, v in step.facts.items() if k != "example")
        out.print(f"[bold]({step.number})[/bold] {step.title}: {facts}")
        if "example" in step.facts:
            out.print(f"    {step.facts['example']}", markup=False, highlight=False)

    result = reproduce(directory, topic=topic, upgrade_to=upgrade_to, on_step=show)
    if as_json:
        emit_json(result.to_json())
    else:
        out.print(
            f"ZooKeeper now holds topic id {result.new_id}; the old partitions' replicas hold"
            f" {result.old_id}; broker {result.restarted_broker} is out of their ISR."
        )


@sandbox.command(name="migrate")
@dir_option
@click.option(
    "--until",
    type=click.Choice(migration.STAGES),
    default="done",
    show_default=True,
    help="Stop after this stage: controller (a KRaft controller in migration mode), hybrid"
    " (the brokers in migration mode, the metadata copied into KRaft), kraft (the brokers in"
    " KRaft mode), done (the controller out of migration mode).",
)
@click.option(
    "--wait-isr/--no-wait-isr",
    default=True,
    show_default=True,
    help="Wait for every partition's ISR to be whole before each broker's roll and after"
    " each stage; --no-wait-isr migrates a cluster that is not healthy, as an operator who"
    " does not look would.",
)
@json_option
def migrate_command(directory: Path, until: str, wait_isr: bool, as_json: bool) -> None:
    """Migrate a real-Kafka sandbox (3.5 or later) from ZooKeeper to KRaft, as Kafka's
    documentation describes it; each stage waits for its event."""
    reached = migration.migrate(
        directory,
        until=until,
        say=(lambda _m: None) if as_json else out.print,
        wait_isr=wait_isr,
    )
    if as_json:
        emit_json({"migration": reached})


# -- brokers -----------------------------------------------------------------------------------


@sandbox.group()
def broker() -> None:
    """Start, stop or check one broker (the sandbox's service commands)."""


id_option = click.option("--id", "broker_id", required=True, type=int, help="Broker id.")


@broker.command(name="start")
@id_option
@dir_option
@click.option("--wait/--no-wait", default=False, help="Wait until the broker is registered.")
def broker_start(broker_id: int, directory: Path, wait: bool) -> None:
    """Start a sandbox broker again."""
    pid = cluster.start_broker(directory.resolve(), broker_id, wait=wait)
    out.print(f"broker {broker_id} running (pid {pid})")


@broker.command(name="stop")
@id_option
@dir_option
def broker_stop(broker_id: int, directory: Path) -> None:
    """Controlled shutdown (SIGTERM); returns when the process has exited."""
    stopped = cluster.stop_broker(directory.resolve(), broker_id)
    out.print(f"broker {broker_id} {'stopped' if stopped else 'was not running'}")


@broker.command(name="kill")
@id_option
@dir_option
def broker_kill(broker_id: int, directory: Path) -> None:
    """SIGKILL, as a crash would."""
    killed = cluster.kill_broker(directory.resolve(), broker_id)
    out.print(f"broker {broker_id} {'killed' if killed else 'was not running'}")


@broker.command(name="upgrade")
@id_option
@dir_option
@click.option(
    "--kafka",
    "kafka",
    required=True,
    type=click.Choice(list(jvm_broker.REAL_KAFKA)),
    help="The real Kafka release the broker runs from now on (fetched first:"
    " `remediate sandbox fetch-kafka VERSION`).",
)
def broker_upgrade(broker_id: int, directory: Path, kafka: str) -> None:
    """A rolling upgrade's step on one real broker: controlled shutdown, its release swapped,
    started again and registered; inter.broker.protocol.version unchanged (pinned in its
    server.properties to the release it ran, unless the file says it already)."""
    with err.status(f"upgrading broker {broker_id}"):
        before = cluster.upgrade_broker(directory.resolve(), broker_id, kafka)
    after = jvm_broker.REAL_KAFKA[kafka]
    out.print(f"broker {broker_id} runs {after.label} (was {before.label})")


@broker.command(name="status")
@id_option
@dir_option
def broker_status(broker_id: int, directory: Path) -> int:
    """Exit 0 when the broker process runs, 3 when it does not (LSB status codes)."""
    directory = directory.resolve()
    cluster.load_state(directory).broker(broker_id)
    pid = cluster.broker_pid(directory, broker_id)
    out.print(f"broker {broker_id} {'running (pid ' + str(pid) + ')' if pid else 'not running'}")
    return 0 if pid else 3


# -- clients -----------------------------------------------------------------------------------


@sandbox.command(name="produce")
@dir_option
@click.option("--topic", required=True, help="The topic to write to.")
@click.option(
    "--count", default=100, show_default=True, type=click.IntRange(0), help="How many records."
)
@click.option(
    "--key-prefix", default="k", show_default=True, help="Record keys are PREFIX0, PREFIX1, ..."
)
@click.option(
    "--acks",
    type=click.Choice(["all", "1", "0"]),
    default="all",
    show_default=True,
    help="The producer's acks.",
)
@click.option(
    "--retries",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Retries per record before it counts as failed.",
)
@click.option(
    "--acked-log",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append acked records (JSON lines).",
)
@json_option
def produce_command(
    directory: Path,
    topic: str,
    count: int,
    key_prefix: str,
    acks: str,
    retries: int,
    acked_log: Path | None,
    as_json: bool,
) -> int:
    """Produce COUNT records; errors are reported per partition. Exit 1 if any failed."""
    state = cluster.load_state(directory.resolve())
    zk = cluster.zk_client(state)
    try:
        log_file = acked_log.open("a") if acked_log else None
        try:
            report = clients.for_sandbox(state, zk).produce(
                topic,
                count=count,
                key_prefix=key_prefix,
                acks=-1 if acks == "all" else int(acks),
                retries=retries,
                acked_log=log_file,
            )
        finally:
            if log_file is not None:
                log_file.close()
    finally:
        zk.stop()
        zk.close()
    document = report.to_json()
    if as_json:
        emit_json(document)
    else:
        out.print(f"acked {document['acked']} of {count}")
        for partition, errors in document["errors"].items():
            out.print(
                f"  partition {partition}: " + ", ".join(f"{k} x{v}" for k, v in errors.items())
            )
    return 0 if document["acked"] == count else 1


@sandbox.command(name="consume")
@dir_option
@click.option("--topic", required=True, help="The topic to read.")
@json_option
def consume_command(directory: Path, topic: str, as_json: bool) -> int:
    """Read every partition from the start to its high watermark. Exit 1 on any error."""
    state = cluster.load_state(directory.resolve())
    zk = cluster.zk_client(state)
    try:
        records, errors = clients.for_sandbox(state, zk).consume(topic)
    finally:
        zk.stop()
        zk.close()
    if as_json:
        emit_json(
            {
                "topic": topic,
                "records": [[r.partition, r.offset, r.key, r.value] for r in records],
                "errors": {str(p): e for p, e in errors.items()},
            }
        )
    else:
        out.print(f"consumed {len(records)} records")
        for partition, error in sorted(errors.items()):
            out.print(f"  partition {partition}: {error}")
    return 1 if errors else 0


# -- admin -------------------------------------------------------------------------------------


@sandbox.group(name="admin")
def admin_group() -> None:
    """Single admin steps, through ZooKeeper as Kafka's tools do. `--legacy` is the pre-2.8
    client: Kafka 1.0.2's own TopicCommand on real brokers, its byte-exact stand-in on the
    emulator."""


@admin_group.command(name="create-topic")
@dir_option
@click.option("--topic", required=True, help="The topic to create.")
@click.option("--partitions", required=True, type=click.IntRange(1), help="How many partitions.")
@click.option(
    "--replication-factor", required=True, type=click.IntRange(1), help="Replicas per partition."
)
@click.option("--config", "configs", multiple=True, help="KEY=VALUE topic config, repeatable.")
@click.option(
    "--legacy", is_flag=True, help="Write a version-1 znode without topic id (pre-2.8 tools)."
)
def create_topic_command(
    directory: Path,
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: tuple[str, ...],
    legacy: bool,
) -> None:
    """Create a topic as Kafka's TopicCommand does, through ZooKeeper."""
    config = _key_values(configs, "--config")
    with _zk(directory) as zk:
        if legacy:
            result = legacy_admin.create_topic(
                zk.state, zk.client, topic, partitions, replication_factor, config=config
            )
        else:
            result = admin.create_topic(
                zk.client, topic, partitions, replication_factor, config=config
            )
    out.print(f"created {topic}: {dict(result.partitions)} topic_id={result.topic_id}")


@admin_group.command(name="add-partitions")
@dir_option
@click.option("--topic", required=True, help="The topic to grow.")
@click.option(
    "--partitions", required=True, type=click.IntRange(1), help="New total partition count."
)
@click.option(
    "--legacy", is_flag=True, help="Rewrite the znode as version 1 and drop topic_id (pre-2.8)."
)
def add_partitions_command(directory: Path, topic: str, partitions: int, legacy: bool) -> None:
    """Add partitions to a topic; with --legacy, as a pre-2.8 client does (the incident)."""
    with _zk(directory) as zk:
        if legacy:
            result = legacy_admin.add_partitions(zk.state, zk.client, topic, partitions)
        else:
            result = admin.add_partitions(zk.client, topic, partitions)
    out.print(f"{topic} now has {len(result.partitions)} partitions; topic_id={result.topic_id}")


@admin_group.command(name="failover-controller")
@dir_option
def failover_command(directory: Path) -> None:
    """Delete /controller and wait for the next election."""
    with _zk(directory) as zk:
        before, after = admin.failover_controller(zk.client)
    out.print(
        f"controller moved from broker {before.broker_id} to {after.broker_id}"
        f" (epoch {after.epoch})"
    )


@admin_group.command(name="restart-broker")
@id_option
@dir_option
def restart_command(broker_id: int, directory: Path) -> None:
    """Controlled shutdown, then start and wait until registered."""
    directory = directory.resolve()
    cluster.stop_broker(directory, broker_id)
    pid = cluster.start_broker(directory, broker_id, wait=True)
    out.print(f"broker {broker_id} restarted (pid {pid})")


class _zk:
    """The sandbox's state and a ZooKeeper session to it, for one command."""

    def __init__(self, directory: Path) -> None:
        self.state = cluster.load_state(directory.resolve())

    def __enter__(self) -> _zk:
        self.client = cluster.zk_client(self.state)
        return self

    def __exit__(self, *_: object) -> None:
        self.client.stop()
        self.client.close()
