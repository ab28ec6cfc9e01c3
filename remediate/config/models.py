"""The models of cluster.yaml: one frozen pydantic model per section, and `SshTarget`.

Field types come from fields.py and paths.py; the rules that span fields (exactly one password
source, distinct broker ids, an ssh section when a broker uses ssh...) are model validators
here. `ClusterConfig` also answers the questions the rest of the tool asks of the configuration:
a broker by id, whether it runs commands under sudo, how to reach it over ssh, its service
commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from remediate.config.fields import (
    BrokerId,
    ClusterName,
    CommandTemplate,
    ConnectTimeout,
    EnvName,
    FrozenStrMap,
    HookCommand,
    HookTimeout,
    Host,
    InSyncTimeout,
    JumpHost,
    KafkaServer,
    Port,
    PositiveInt32,
    ServiceCommandTimeout,
    SessionTimeout,
    SparkConf,
    SparkMaster,
    SshUser,
    StartTimeout,
    StopTimeout,
    Sudo,
    SudoMode,
    ZooKeeperConnect,
    ZooKeeperIdentity,
    ZooKeeperUser,
    context,
    simple_command_problem,
    split_connect,
)
from remediate.config.paths import RELATIVE_ALL_LOCAL, LocalPath, RemotePath, broker_paths
from remediate.config.problems import (
    ClusterConfigError,
    ConfigProblem,
    Item,
    Loc,
    fail,
    problems,
    show,
)
from remediate.config.secrets import resolve_password, secret_from_env

# The file Kafka's log4j.properties writes beside state-change.log (in ${kafka.logs.dir}).
SERVER_LOG = "server.log"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class ZooKeeperAuth(_Model):
    """ZooKeeper authentication: digest (username:password) or SASL (DIGEST-MD5 or GSSAPI).

    Exactly one of `password`, `password_env` and `password_file` gives the password, except
    for SASL GSSAPI, which takes none. `resolved_password` is the password, whichever source
    it came from, read at load time.
    """

    scheme: Literal["digest", "sasl"] = "digest"
    username: ZooKeeperUser
    password: SecretStr | None = None
    password_env: EnvName | None = None
    password_file: LocalPath | None = None
    sasl_mechanism: Literal["DIGEST-MD5", "GSSAPI"] | None = None

    _password: SecretStr | None = PrivateAttr(default=None)

    @property
    def mechanism(self) -> str | None:
        """The SASL mechanism in effect (None for digest)."""
        if self.scheme != "sasl":
            return None
        return self.sasl_mechanism or "DIGEST-MD5"

    @property
    def resolved_password(self) -> SecretStr | None:
        return self._password

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> ZooKeeperAuth:
        if self.sasl_mechanism is not None and self.scheme != "sasl":
            fail("no sasl_mechanism unless scheme is sasl", at=("sasl_mechanism",))
        given = [
            name
            for name in ("password", "password_env", "password_file")
            if getattr(self, name) is not None
        ]
        if self.mechanism == "GSSAPI":
            if given:
                fail("no password with sasl_mechanism GSSAPI (Kerberos)", at=(given[0],))
            return self
        if len(given) != 1:
            got = " and ".join(given) if given else "none of them"
            fail("exactly one of password, password_env, password_file", got)
        self._password = resolve_password(
            password=self.password,
            password_env=self.password_env,
            password_file=self.password_file,
            environ=context(info).environ,
        )
        return self


class ZooKeeperTls(_Model):
    """TLS to ZooKeeper: a CA, and optionally a client certificate with its key."""

    ca_file: LocalPath
    cert_file: LocalPath | None = None
    key_file: LocalPath | None = None
    verify_hostname: StrictBool = True

    @model_validator(mode="after")
    def _pairs(self) -> ZooKeeperTls:
        if self.cert_file is not None and self.key_file is None:
            fail("a key_file as well, because cert_file is given", at=("key_file",))
        if self.key_file is not None and self.cert_file is None:
            fail("a cert_file as well, because key_file is given", at=("cert_file",))
        return self


class ZooKeeperConfig(_Model):
    """How to reach ZooKeeper: a connect string with an optional chroot, auth and TLS."""

    connect: ZooKeeperConnect
    session_timeout_s: SessionTimeout = 10.0
    # How long to wait for a session to be set up (its first answer included); by default the
    # session timeout: ZooKeeper out of reach is an error after it, never a hang.
    connect_timeout_s: ConnectTimeout | None = None
    auth: ZooKeeperAuth | None = None
    # Who else gets all rights to the znodes the tool creates (its lock, its journal's copy),
    # as ZooKeeper names identities: "sasl:kafka", "digest:kafka:<base64 sha1>". The tool's
    # own identity (auth) always has them; nobody else any.
    acl_also: tuple[ZooKeeperIdentity, ...] = ()
    tls: ZooKeeperTls | None = None

    @property
    def connect_hosts(self) -> str:
        """The connect string without its chroot: 'zk1:2181,zk2:2181'."""
        return split_connect(self.connect).hosts

    @property
    def chroot(self) -> str | None:
        """The chroot ('/kafka'), or None."""
        return split_connect(self.connect).chroot

    @property
    def servers(self) -> tuple[tuple[str, int], ...]:
        """(host, port) per server; IPv6 hosts without their brackets."""
        return split_connect(self.connect).servers


def _distinct_log_dirs(value: tuple[PurePosixPath, ...], at: Loc = ()) -> tuple[PurePosixPath, ...]:
    if not value:
        fail("at least one log directory", "an empty list", at=at)
    first: dict[PurePosixPath, int] = {}
    found: list[Item] = []
    for index, path in enumerate(value):
        if path in first:
            expected = f"a log directory not listed before (log_dirs[{first[path]}])"
            found.append(((*at, index), expected, show(str(path))))
        first.setdefault(path, index)
    if found:
        raise problems(found)
    return value


class BrokerConfig(_Model):
    """One broker: how to reach it, and where its log dirs are (listed, or read from its
    server.properties). ssh_port, ssh_user and sudo override the ssh section's defaults."""

    id: BrokerId
    host: Host
    transport: Literal["ssh", "local"] = "ssh"
    ssh_port: Port | None = None
    ssh_user: SshUser | None = None
    sudo: Sudo | None = None
    log_dirs: tuple[RemotePath, ...] | None = None
    server_properties: RemotePath | None = None
    # Kafka's state-change.log on the broker: its tail is read for topic-id mismatch lines.
    state_change_log: RemotePath | None = None
    # Kafka's server.log on the broker: its tail is read while the broker starts, for Kafka's
    # log-loading lines. Default: server.log beside state_change_log, where Kafka's own
    # log4j.properties writes it (both go to ${kafka.logs.dir}); without either, none.
    server_log: RemotePath | None = None

    @field_validator("log_dirs")
    @classmethod
    def _distinct_log_dirs(
        cls, value: tuple[PurePosixPath, ...] | None
    ) -> tuple[PurePosixPath, ...] | None:
        return None if value is None else _distinct_log_dirs(value)

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> BrokerConfig:
        if self.log_dirs is None and self.server_properties is None:
            # Listed log_dirs win over the file's; the file is read for its settings too.
            fail("log_dirs or server_properties (or both)", "neither")
        local = self.transport == "local"
        if local:
            for name in ("ssh_port", "ssh_user"):
                if getattr(self, name) is not None:
                    fail(f"no {name} on a broker with transport local", at=(name,))
        base_dir = context(info).base_dir
        if self.log_dirs is not None:
            located = [(("log_dirs", i), path) for i, path in enumerate(self.log_dirs)]
            resolved = broker_paths(located, local, base_dir)
            # Again once absolute: 'data' and '<cluster.yaml's dir>/data' are one directory.
            object.__setattr__(self, "log_dirs", _distinct_log_dirs(resolved, at=("log_dirs",)))
        if self.server_properties is not None:
            (path,) = broker_paths(
                [(("server_properties",), self.server_properties)], local, base_dir
            )
            object.__setattr__(self, "server_properties", path)
        for name in ("state_change_log", "server_log"):
            given = getattr(self, name)
            if given is not None:
                (path,) = broker_paths([((name,), given)], local, base_dir)
                object.__setattr__(self, name, path)
        if self.server_log is None and self.state_change_log is not None:
            object.__setattr__(self, "server_log", self.state_change_log.parent / SERVER_LOG)
        return self


class ClusterTimeouts(_Model):
    """How long a run waits on this cluster (the `timeouts` section): for a broker to stop,
    to register after its start (longer while its server.log shows its logs loading), to be
    back in sync, and for each service command to finish. Each one set overrides the value
    of every playbook the plan uses; the plan records the values in effect."""

    stop_s: StopTimeout | None = None
    start_s: StartTimeout | None = None
    in_sync_s: InSyncTimeout | None = None
    service_command_s: ServiceCommandTimeout | None = None


class SshConfig(_Model):
    """How to reach brokers with transport ssh. Host keys must be in `known_hosts`.

    `config_file` (an OpenSSH client config, such as ~/.ssh/config) is read for each broker's
    host: its HostName, User, Port, IdentityFile and ProxyJump apply where cluster.yaml does
    not say. `agent`: keys held by ssh-agent (SSH_AUTH_SOCK) are offered too. `proxy_jump`:
    every broker is reached through that jump host (a bastion), unless its own config says."""

    user: SshUser | None = None
    port: Port = 22
    key_file: LocalPath | None = None
    key_passphrase_env: EnvName | None = None
    known_hosts: LocalPath
    connect_timeout_s: ConnectTimeout = 10.0
    sudo: Sudo = "none"
    config_file: LocalPath | None = None
    agent: StrictBool = False
    proxy_jump: JumpHost | None = None

    @model_validator(mode="after")
    def _who(self) -> SshConfig:
        # Without a config file, cluster.yaml must say who logs in and with which key.
        if self.config_file is None:
            if self.user is None:
                fail("a user (or a config_file whose User applies)", at=("user",))
            if self.key_file is None and not self.agent:
                fail(
                    "a key_file, agent: true, or a config_file with IdentityFile", at=("key_file",)
                )
        return self

    @property
    def port_given(self) -> int | None:
        """`port` when cluster.yaml sets it (else the config file's Port, else 22, applies)."""
        return self.port if "port" in self.model_fields_set else None

    _key_passphrase: SecretStr | None = PrivateAttr(default=None)

    @property
    def key_passphrase(self) -> SecretStr | None:
        """The key's passphrase, read from `key_passphrase_env` at load time."""
        return self._key_passphrase

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> SshConfig:
        if self.key_passphrase_env is not None:
            self._key_passphrase = secret_from_env(
                self.key_passphrase_env, context(info).environ, ("key_passphrase_env",)
            )
        return self


class HooksConfig(_Model):
    """Commands on this host around each batch of broker restarts (docs/commands.md, "Hooks"):
    `before_batch` once the gate has passed and before the first broker of the batch stops,
    `after_batch` once every broker of the batch is back in sync. Each runs with /bin/sh in
    cluster.yaml's directory, with the run id, the batch's broker ids and hosts in its
    environment, and must end within `timeout_s`; a failing hook halts the run."""

    before_batch: HookCommand | None = None
    after_batch: HookCommand | None = None
    timeout_s: HookTimeout = 60.0


class ServiceConfig(_Model):
    """Service command templates; {broker_id} and {host} are the only placeholders."""

    stop: CommandTemplate
    start: CommandTemplate
    status: CommandTemplate | None = None


class KafkaSasl(_Model):
    """SASL to the brokers' listener: PLAIN or SCRAM, with exactly one password source."""

    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    username: ZooKeeperUser
    password: SecretStr | None = None
    password_env: EnvName | None = None
    password_file: LocalPath | None = None

    _password: SecretStr | None = PrivateAttr(default=None)

    @property
    def resolved_password(self) -> SecretStr | None:
        return self._password

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> KafkaSasl:
        given = [
            name
            for name in ("password", "password_env", "password_file")
            if getattr(self, name) is not None
        ]
        if len(given) != 1:
            got = " and ".join(given) if given else "none of them"
            fail("exactly one of password, password_env, password_file", got)
        self._password = resolve_password(
            password=self.password,
            password_env=self.password_env,
            password_file=self.password_file,
            environ=context(info).environ,
        )
        return self


class KafkaConfig(_Model):
    """How to reach the brokers' own listener for Kafka's admin requests (the repairs
    without restarts move replicas between log dirs through it). Without `bootstrap`, the
    endpoints the brokers registered in ZooKeeper under `listener` are used. `admin: sandbox`
    is the sandbox's emulated brokers, which speak their own protocol."""

    admin: Literal["kafka", "sandbox"] = "kafka"
    bootstrap: tuple[KafkaServer, ...] = ()
    listener: str = "PLAINTEXT"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    tls: ZooKeeperTls | None = None
    sasl: KafkaSasl | None = None
    # The copy's throttle while replicas move between log dirs: Kafka's dynamic broker
    # setting replica.alter.log.dirs.io.max.bytes.per.second, set on each broker that moves
    # replicas for the moves only, then put back as it was. None: no throttle.
    move_throttle_bytes_per_s: int | None = Field(default=None, ge=1024)
    # How long one admin request waits for its answer (and the client for its bootstrap):
    # past it the request fails, and a run halts naming it.
    request_timeout_s: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _security(self) -> KafkaConfig:
        if self.security_protocol in ("SSL", "SASL_SSL") and self.tls is None:
            fail(f"a tls section, because security_protocol is {self.security_protocol}")
        if self.security_protocol.startswith("SASL") and self.sasl is None:
            fail(f"a sasl section, because security_protocol is {self.security_protocol}")
        return self


class SparkConfig(_Model):
    """Where the scan job runs (a Spark master URL) and extra Spark settings."""

    master: SparkMaster = "local[*]"
    conf: SparkConf = Field(default_factory=FrozenStrMap)


@dataclass(frozen=True)
class SshTarget:
    """Everything needed to open an ssh connection to one broker, defaults merged in."""

    host: str
    port: int | None  # None: the config file's Port, else 22
    user: str | None  # None: the config file's User
    key_file: Path | None  # None: the config file's IdentityFile, or the agent's keys
    known_hosts: Path
    connect_timeout_s: float
    sudo: SudoMode
    key_passphrase: SecretStr | None
    agent: bool = False
    config_file: Path | None = None
    proxy_jump: str | None = None  # None: the config file's ProxyJump, if any


ServiceKind = Literal["stop", "start", "status"]


class ClusterConfig(_Model):
    """The validated contents of cluster.yaml (see the docstring of remediate.config)."""

    cluster: ClusterName
    zookeeper: ZooKeeperConfig
    brokers: tuple[BrokerConfig, ...]
    ssh: SshConfig | None = None
    service: ServiceConfig
    # The value the brokers run with, stated on purpose: used only for a broker whose own
    # setting cannot be read; without it such a broker refuses the plan (remediate/minisr.py).
    min_insync_replicas_default: PositiveInt32 | None = None
    backup_dir: RemotePath = PurePosixPath("/var/backups/remediate")
    journal_dir: LocalPath = Field(default=Path("journal"), validate_default=True)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    kafka: KafkaConfig | None = None
    timeouts: ClusterTimeouts | None = None
    hooks: HooksConfig | None = None

    _source: str = PrivateAttr(default="cluster.yaml")
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("brokers")
    @classmethod
    def _distinct_ids(cls, value: tuple[BrokerConfig, ...]) -> tuple[BrokerConfig, ...]:
        if not value:
            fail("at least one broker", "an empty list")
        first: dict[int, int] = {}
        found: list[Item] = []
        for index, broker in enumerate(value):
            if broker.id in first:
                expected = f"a broker id no other broker has (brokers[{first[broker.id]}])"
                found.append(((index, "id"), expected, show(broker.id)))
            first.setdefault(broker.id, index)
        if found:
            raise problems(found)
        return value

    @model_validator(mode="after")
    def _local_paths(self, info: ValidationInfo) -> ClusterConfig:
        self._base_dir = context(info).base_dir
        local = all(broker.transport == "local" for broker in self.brokers)
        (path,) = broker_paths(
            [(("backup_dir",), self.backup_dir)], local, self._base_dir, RELATIVE_ALL_LOCAL
        )
        object.__setattr__(self, "backup_dir", path)
        return self

    @model_validator(mode="after")
    def _ssh_rules(self, info: ValidationInfo) -> ClusterConfig:
        self._source = context(info).source
        ssh_brokers = [
            (index, broker)
            for index, broker in enumerate(self.brokers)
            if broker.transport == "ssh"
        ]
        if not ssh_brokers:
            return self
        if self.ssh is None:
            index, broker = ssh_brokers[0]
            expected = f"an ssh section, because brokers[{index}] (id {broker.id}) uses ssh"
            fail(expected, at=("ssh",))
        first: dict[tuple[str, int], int] = {}
        found: list[Item] = []
        for index, broker in ssh_brokers:
            key = (broker.host.lower(), broker.ssh_port or self.ssh.port)
            if key in first:
                expected = f"a host and ssh port no other broker has (brokers[{first[key]}])"
                found.append((("brokers", index, "host"), expected, f"{broker.host}:{key[1]}"))
            first.setdefault(key, index)
        if found:
            raise problems(found)
        return self

    @model_validator(mode="after")
    def _services_sudo(self) -> ClusterConfig:
        # sudo runs each service command as one program, and a sudoers line names it so.
        users = [b.id for b in self.brokers if self.sudo_mode(b.id) == "services"]
        if not users:
            return self
        found: list[Item] = []
        for kind in ("stop", "start", "status"):
            template = getattr(self.service, kind)
            problem = None if template is None else simple_command_problem(template)
            if problem is not None:
                brokers = ", ".join(map(str, users))
                expected = (
                    "one program by its absolute path and its arguments, because sudo runs it"
                    f" without a shell for broker(s) {brokers} (sudo: services); found {problem}"
                )
                found.append((("service", kind), expected, show(template)))
        if found:
            raise problems(found)
        return self

    @property
    def source(self) -> str:
        """The file this configuration was read from (as given to the loader)."""
        return self._source

    @property
    def base_dir(self) -> Path:
        """The directory relative local paths were taken from (cluster.yaml's); commands on
        brokers with transport local run there."""
        return self._base_dir

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(broker.id for broker in self.brokers)

    def _error(self, field: str, expected: str, got: str | None = None) -> ClusterConfigError:
        return ClusterConfigError(self._source, [ConfigProblem(field, expected, got)])

    def broker(self, broker_id: int) -> BrokerConfig:
        for broker in self.brokers:
            if broker.id == broker_id:
                return broker
        ids = ", ".join(str(known) for known in self.broker_ids)
        raise self._error("brokers", f"a broker with id {broker_id}", f"ids {ids}")

    def sudo_mode(self, broker_id: int) -> SudoMode:
        """How commands on this broker use sudo: its own setting, else ssh.sudo: none, all
        (`true`: every command as root) or services (the service commands only)."""
        broker = self.broker(broker_id)
        if broker.sudo is not None:
            return broker.sudo
        return self.ssh.sudo if self.ssh is not None else "none"

    def ssh_target(self, broker_id: int) -> SshTarget:
        broker = self.broker(broker_id)
        index = self.brokers.index(broker)
        if broker.transport != "ssh" or self.ssh is None:
            raise self._error(
                f"brokers[{index}].transport",
                f"ssh for broker {broker_id}",
                show(broker.transport),
            )
        return SshTarget(
            host=broker.host,
            port=broker.ssh_port if broker.ssh_port is not None else self.ssh.port_given,
            user=broker.ssh_user if broker.ssh_user is not None else self.ssh.user,
            key_file=self.ssh.key_file,
            known_hosts=self.ssh.known_hosts,
            connect_timeout_s=self.ssh.connect_timeout_s,
            sudo=self.sudo_mode(broker_id),
            key_passphrase=self.ssh.key_passphrase,
            agent=self.ssh.agent,
            config_file=self.ssh.config_file,
            proxy_jump=self.ssh.proxy_jump,
        )

    def service_command(self, kind: ServiceKind, broker: BrokerConfig) -> str:
        """The service command of `kind` for `broker`, its placeholders filled in.

        Only the broker's id and host are substituted; both were validated (an integer, and a
        host name or IP address of shell-safe characters).
        """
        templates: dict[str, str | None] = {
            "stop": self.service.stop,
            "start": self.service.start,
            "status": self.service.status,
        }
        if kind not in templates:
            raise ValueError(f"unknown service command kind {kind!r}")
        template = templates[kind]
        if template is None:
            raise self._error("service.status", "a status command to be configured")
        return template.format(broker_id=broker.id, host=broker.host)
