"""cluster.yaml: the tool's configuration for one cluster, validated, and its loader.

`load_cluster_config(path)` reads the file with yaml.safe_load and returns a frozen
`ClusterConfig`; `parse_cluster_config(data, source=..., base_dir=...)` does the same for data
that is already loaded. Every problem is reported as a `ClusterConfigError` (a `ConfigError`)
whose message has one line per problem, each naming the file, the dotted field path with list
indexes and what was expected there:

    cluster.yaml: brokers[1].log_dirs[0]: expected an absolute path, got 'data'

Local files (ssh keys, known_hosts, TLS files, password files, the journal) are resolved against
the directory that holds cluster.yaml, after `~` is expanded. Paths on the brokers (log dirs,
server.properties, the backup dir) must be absolute, except on brokers with transport local,
which are this machine: there a relative one is taken from cluster.yaml's directory too (for
`backup_dir`, when every broker is local). Secrets (the ZooKeeper password and the ssh
key passphrase) are read from the environment or a file at load time and kept as `SecretStr`:
neither repr(), str(), model_dump() nor model_dump_json() of the configuration shows them, and no
error message prints them.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
import stat
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Annotated, Any, Literal, NoReturn, get_args

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from remediate.errors import ConfigError

__all__ = [
    "BrokerConfig",
    "ClusterConfig",
    "ClusterConfigError",
    "ConfigProblem",
    "FrozenStrMap",
    "ServiceConfig",
    "SparkConfig",
    "SshConfig",
    "SshTarget",
    "ZooKeeperAuth",
    "ZooKeeperConfig",
    "ZooKeeperTls",
    "load_cluster_config",
    "parse_cluster_config",
]

INT32_MAX = 2**31 - 1
MAX_FILE_BYTES = 1 << 20  # cluster.yaml is a few hundred bytes; anything this big is a mistake
MAX_SECRET_BYTES = 64 << 10
MAX_REPORTED_PROBLEMS = 50
SERVICE_PLACEHOLDERS = ("broker_id", "host")

_GOT_LIMIT = 80
_PROBLEM_TYPE = "remediate_config"
_SECRET_KEYS = frozenset({"password"})  # fields whose input is never echoed in a message

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WHITESPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_HOST_CHARS = re.compile(r"[A-Za-z0-9._:%-]+")
_SSH_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_PORT = re.compile(r"[0-9]{1,5}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LOCAL_MASTER = re.compile(r"local(\[([1-9][0-9]{0,5}|\*)(,[1-9][0-9]{0,5})?\])?")


# -- problems and the error that carries them -------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a configuration: where (`field`), what was `expected`, and a short
    printable rendering of what was found (`got`, None when it is absent or must not be shown).

    `field` is a dotted path with list indexes (`brokers[1].log_dirs[0]`), a position in the
    file (`line 3, column 7`), or "" for the file as a whole.
    """

    field: str
    expected: str
    got: str | None = None

    def __str__(self) -> str:
        text = f"expected {self.expected}"
        if self.got is not None:
            text += f", got {self.got}"
        return f"{self.field}: {text}" if self.field else text


class ClusterConfigError(ConfigError):
    """cluster.yaml is not valid; `problems` lists every problem found, the message one a line."""

    def __init__(self, source: str, problems: Sequence[ConfigProblem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = [f"{source}: {problem}" for problem in self.problems[:MAX_REPORTED_PROBLEMS]]
        hidden = len(self.problems) - MAX_REPORTED_PROBLEMS
        if hidden > 0:
            lines.append(f"{source}: ... and {hidden} more problems")
        super().__init__("\n".join(lines))


Loc = tuple[str | int, ...]
_Item = tuple[Loc, str, str | None]


def _problems(items: Sequence[_Item]) -> PydanticCustomError:
    """A validation error carrying `items`, each (location relative to the value, expected, got)."""
    return PydanticCustomError(
        _PROBLEM_TYPE, "{summary}", {"summary": items[0][1], "problems": tuple(items)}
    )


def _fail(expected: str, got: str | None = None, *, at: Loc = ()) -> NoReturn:
    raise _problems([(at, expected, got)])


def _show(value: object) -> str:
    """A short rendering of untrusted input for a message (never its secrets: see callers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) >= 10**40:
            return "a very large integer"
        return repr(value)
    if isinstance(value, (str, float)):
        text = repr(value)
        if len(text) > _GOT_LIMIT:
            text = text[: _GOT_LIMIT - 3] + "..."
        return text
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a value of type {type(value).__name__}"


def _path(loc: Loc) -> str:
    parts: list[str] = []
    for segment in loc:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _IDENTIFIER.fullmatch(segment):
            parts.append(f".{segment}" if parts else segment)
        else:
            parts.append(f"[{_show(segment)}]")
    return "".join(parts)


# -- validation context ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    source: str
    base_dir: Path
    environ: Mapping[str, str]


def _context(info: ValidationInfo) -> _Context:
    context = info.context
    if isinstance(context, _Context):
        return context
    return _Context(source="cluster.yaml", base_dir=Path.cwd(), environ=os.environ)


# -- field types -------------------------------------------------------------------------------


def _int_between(low: int, high: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        expected = f"an integer from {low} to {high}"
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(expected, _show(value))
        if not low <= value <= high:
            _fail(expected, _show(value))
        return value

    return check


def _seconds(low: float, high: float, *, low_inclusive: bool = True) -> Callable[[object], float]:
    bound = "from" if low_inclusive else "greater than"
    expected = f"a number of seconds {bound} {low:g} {'to' if low_inclusive else 'and at most'}"
    expected += f" {high:g}"

    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(expected, _show(value))
        seconds = float(value) if abs(value) < 1e300 else math.inf
        above_low = seconds >= low if low_inclusive else seconds > low
        if not (math.isfinite(seconds) and above_low and seconds <= high):
            _fail(expected, _show(value))
        return seconds

    return check


def _string(value: object, expected: str) -> str:
    if not isinstance(value, str):
        _fail(expected, _show(value))
    return value


def _cluster_name(value: object) -> str:
    expected = "a name of 1 to 100 characters from A-Z, a-z, 0-9, '.', '_' and '-'"
    if not _CLUSTER_NAME.fullmatch(_string(value, expected)):
        _fail(expected, _show(value))
    return str(value)


def _host(value: object) -> str:
    expected = "a host name or IP address (letters, digits, '.', '-', '_'; not starting with '-')"
    text = _string(value, expected)
    if text == "":
        _fail(expected, "an empty string")
    if _WHITESPACE_OR_CONTROL.search(text):
        _fail(expected + " without white space", _show(text))
    if not _is_host(text, bracketed_ipv6=False):
        _fail(expected, _show(text))
    return text


def _is_host(text: str, *, bracketed_ipv6: bool) -> bool:
    if bracketed_ipv6 and text.startswith("[") and text.endswith("]"):
        return _is_ipv6(text[1:-1])
    if not _HOST_CHARS.fullmatch(text):
        return False
    if ":" in text or "%" in text:
        return not bracketed_ipv6 and _is_ipv6(text)
    return _HOST_NAME.fullmatch(text) is not None


def _is_ipv6(text: str) -> bool:
    if not _HOST_CHARS.fullmatch(text):  # also keeps a scope id ("%eth0") shell-safe
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _host_port(entry: str, *, what: str) -> tuple[str, int]:
    """`host:port` or `[ipv6]:port`, as in ZooKeeper connect strings and spark:// URLs."""
    if entry == "":
        _fail(f"{what} without an empty host entry", None)
    host, colon, port = entry.rpartition(":")
    if not colon or host == "":
        _fail(f"{what} whose entries are host:port", _show(entry))
    if not _is_host(host, bracketed_ipv6=True):
        _fail(f"{what} with valid host names (IPv6 as [::1]:2181)", _show(entry))
    if not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        _fail(f"{what} with ports from 1 to 65535", _show(entry))
    if host.startswith("["):
        host = host[1:-1]
    return host, int(port)


@dataclass(frozen=True)
class _Connect:
    hosts: str
    servers: tuple[tuple[str, int], ...]
    chroot: str | None


def _split_connect(text: str) -> _Connect:
    what = "a ZooKeeper connect string 'host:port[,host:port...][/chroot]'"
    if text == "":
        _fail(what, "an empty string")
    if _WHITESPACE_OR_CONTROL.search(text):
        _fail(what + " without white space", _show(text))
    hosts, slash, rest = text.partition("/")
    if hosts == "":
        _fail(what + " with at least one host", _show(text))
    servers = tuple(_host_port(entry, what=what) for entry in hosts.split(","))
    chroot = None
    if slash:
        chroot = "/" + rest
        parts = rest.split("/")
        if any(part in ("", ".", "..") for part in parts):
            _fail(
                "a chroot that is a ZooKeeper path like /kafka (no empty, '.' or '..' part, "
                "no trailing '/')",
                _show(chroot),
            )
    return _Connect(hosts=hosts, servers=servers, chroot=chroot)


def _zk_connect(value: object) -> str:
    text = _string(value, "a ZooKeeper connect string 'host:port[,host:port...][/chroot]'")
    _split_connect(text)
    return text


def _ssh_user(value: object) -> str:
    expected = "a user name (letters, digits, '.', '_', '@', '-'; not starting with '-')"
    if not _SSH_USER.fullmatch(_string(value, expected)):
        _fail(expected, _show(value))
    return str(value)


def _zk_username(value: object) -> str:
    expected = "a non-empty user name without white space or ':'"
    text = _string(value, expected)
    if text == "" or len(text) > 256 or ":" in text or _WHITESPACE_OR_CONTROL.search(text):
        _fail(expected, _show(text))
    return text


def _env_name(value: object) -> str:
    expected = "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
    if not _ENV_NAME.fullmatch(_string(value, expected)):
        _fail(expected, _show(value))
    return str(value)


def _remote_path(value: object) -> PurePosixPath:
    """A path on a broker: absolute, or relative for brokers this machine reaches with
    transport local (`_broker_path` resolves those against cluster.yaml's directory)."""
    if isinstance(value, PurePosixPath):  # a default
        return value
    expected = "an absolute path"
    text = _string(value, expected)
    if text.strip() == "":
        _fail(expected, _show(text))
    if _CONTROL.search(text):
        _fail(expected + " without control characters", _show(text))
    path = PurePosixPath(text)
    if ".." in path.parts:
        _fail(expected + " without '..'", _show(text))
    if path == PurePosixPath("/"):
        _fail(expected + " other than '/'", _show(text))
    return path


RELATIVE_ON_LOCAL = "an absolute path (a relative one only on a broker with transport local)"
RELATIVE_ALL_LOCAL = "an absolute path (a relative one only when every broker has transport local)"


def _broker_paths(
    located: Sequence[tuple[Loc, PurePosixPath]],
    local: bool,
    base_dir: Path,
    expected: str = RELATIVE_ON_LOCAL,
) -> tuple[PurePosixPath, ...]:
    """Each (location, path) made absolute: a relative path on a local broker is a path on this
    machine, taken from cluster.yaml's directory like every other local path; on an ssh broker
    it is an error, one problem per such path at its location."""
    if local:
        return tuple(PurePosixPath(base_dir / path) for _, path in located)
    problems: list[_Item] = [
        (at, expected, _show(str(path))) for at, path in located if not path.is_absolute()
    ]
    if problems:
        raise _problems(problems)
    return tuple(path for _, path in located)


def _local_path(value: object, info: ValidationInfo) -> Path:
    """A path on this machine; relative ones are taken from cluster.yaml's directory."""
    expected = "a path"
    if isinstance(value, PurePath):
        value = str(value)
    text = _string(value, expected)
    if text == "":
        _fail(expected, "an empty string")
    if _CONTROL.search(text):
        _fail(expected + " without control characters", _show(text))
    try:
        path = Path(text).expanduser()
    except (RuntimeError, KeyError, ValueError, OSError):
        _fail(expected + " whose '~' names a known home directory", _show(text))
    if not path.is_absolute():
        path = _context(info).base_dir / path
    return path


def _command_template(value: object) -> str:
    expected = "a command template whose only placeholders are {broker_id} and {host}"
    text = _string(value, expected)
    if text.strip() == "":
        _fail("a non-empty command", _show(text))
    if _CONTROL.search(text):
        _fail("a single-line command without control characters", _show(text))
    try:
        fields = [item[1:] for item in string.Formatter().parse(text)]
    except ValueError:
        _fail(expected + " and balanced braces ({{ and }} for literal ones)", _show(text))
    for name, spec, conversion in fields:
        if name is None:
            continue
        if name == "":
            _fail(expected, "a positional placeholder {}")
        if name not in SERVICE_PLACEHOLDERS:
            _fail(expected, f"unknown placeholder {_show('{' + name + '}')}")
        if spec or conversion:
            _fail(expected + ", without format spec or conversion", _show(text))
    return text


def _spark_master(value: object) -> str:
    expected = (
        "a Spark master: local, local[N], local[*], spark://host:port[,host:port...], yarn "
        "or k8s://..."
    )
    text = _string(value, expected)
    if text == "yarn" or _LOCAL_MASTER.fullmatch(text):
        return text
    if text.startswith("spark://") and not _WHITESPACE_OR_CONTROL.search(text):
        hosts = text.removeprefix("spark://")
        for entry in hosts.split(","):
            _host_port(entry, what=expected)
        return text
    if (
        text.startswith("k8s://")
        and len(text) > len("k8s://")
        and not _WHITESPACE_OR_CONTROL.search(text)
    ):
        return text
    _fail(expected, _show(text))


class FrozenStrMap(Mapping[str, str]):
    """An immutable str -> str mapping (spark.conf), hashable so the configuration is."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, str] = dict(items or {})

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenStrMap({self._items!r})"


def _spark_conf(value: object) -> FrozenStrMap:
    if isinstance(value, FrozenStrMap):
        return value
    if not isinstance(value, dict):
        _fail("a mapping of Spark settings to values", _show(value))
    problems: list[_Item] = []
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or key == "" or _WHITESPACE_OR_CONTROL.search(key):
            expected = "setting names that are non-empty strings without white space"
            problems.append(((), expected, _show(key)))
        elif isinstance(item, str):
            result[key] = item
        elif isinstance(item, bool):
            result[key] = "true" if item else "false"
        elif isinstance(item, int) and abs(item) < 10**40:
            result[key] = str(item)
        elif isinstance(item, float) and math.isfinite(item):
            result[key] = repr(item)
        else:
            problems.append(((key,), "a string, number or boolean", _show(item)))
    if problems:
        raise _problems(problems)
    return FrozenStrMap(result)


def _serialize_map(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


ClusterName = Annotated[str, BeforeValidator(_cluster_name)]
Host = Annotated[str, BeforeValidator(_host)]
Port = Annotated[int, BeforeValidator(_int_between(1, 65535))]
BrokerId = Annotated[int, BeforeValidator(_int_between(0, INT32_MAX))]
SshUser = Annotated[str, BeforeValidator(_ssh_user)]
EnvName = Annotated[str, BeforeValidator(_env_name)]
RemotePath = Annotated[PurePosixPath, BeforeValidator(_remote_path)]
LocalPath = Annotated[Path, BeforeValidator(_local_path)]
CommandTemplate = Annotated[str, BeforeValidator(_command_template)]
SparkConf = Annotated[
    Mapping[str, str],
    PlainValidator(_spark_conf),
    PlainSerializer(_serialize_map, return_type=dict[str, str]),
]


# -- secrets -----------------------------------------------------------------------------------


def _read_limited(path: Path, limit: int) -> bytes | str:
    """The first `limit` + 1 bytes of a regular file, or why it cannot be read.

    Opened non-blocking so that a FIFO or a device named by mistake cannot hang the load.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        return "an existing file"
    except (OSError, ValueError) as exc:
        return f"a readable file ({_reason(exc)})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "a regular file"
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        return f"a readable file ({_reason(exc)})"
    finally:
        os.close(fd)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


def _read_secret_file(path: Path, at: Loc) -> SecretStr | _Item:
    data = _read_limited(path, MAX_SECRET_BYTES)
    if isinstance(data, str):
        return (at, data, _show(str(path)))
    if len(data) > MAX_SECRET_BYTES:
        return (at, f"a secret file of at most {MAX_SECRET_BYTES} bytes", _show(str(path)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return (at, "a secret file holding UTF-8 text", _show(str(path)))
    text = text.removesuffix("\n").removesuffix("\r")
    if text == "":
        return (at, "a secret file that is not empty", _show(str(path)))
    return SecretStr(text)


def _read_secret_env(name: str, environ: Mapping[str, str], at: Loc) -> SecretStr | _Item:
    value = environ.get(name)
    if value is None:
        return (at, f"the environment variable {name} to be set", None)
    if value == "":
        return (at, f"the environment variable {name} to be non-empty", None)
    return SecretStr(value)


# -- the models --------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class ZooKeeperAuth(_Model):
    """ZooKeeper authentication: digest (username:password) or SASL (DIGEST-MD5 or GSSAPI).

    Exactly one of `password`, `password_env` and `password_file` gives the password, except
    for SASL GSSAPI, which takes none. `resolved_password` is the password, whichever source
    it came from, read at load time.
    """

    scheme: Literal["digest", "sasl"] = "digest"
    username: Annotated[str, BeforeValidator(_zk_username)]
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
            _fail("no sasl_mechanism unless scheme is sasl", at=("sasl_mechanism",))
        given = [
            name
            for name in ("password", "password_env", "password_file")
            if getattr(self, name) is not None
        ]
        if self.mechanism == "GSSAPI":
            if given:
                _fail("no password with sasl_mechanism GSSAPI (Kerberos)", at=(given[0],))
            return self
        if len(given) != 1:
            got = " and ".join(given) if given else "none of them"
            _fail("exactly one of password, password_env, password_file", got)
        resolved: SecretStr | _Item
        if self.password is not None:
            resolved = self.password
            if resolved.get_secret_value() == "":
                resolved = (("password",), "a non-empty password", None)
        elif self.password_env is not None:
            resolved = _read_secret_env(
                self.password_env, _context(info).environ, ("password_env",)
            )
        else:
            assert self.password_file is not None
            resolved = _read_secret_file(self.password_file, ("password_file",))
        if not isinstance(resolved, SecretStr):
            raise _problems([resolved])
        self._password = resolved
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
            _fail("a key_file as well, because cert_file is given", at=("key_file",))
        if self.key_file is not None and self.cert_file is None:
            _fail("a cert_file as well, because key_file is given", at=("cert_file",))
        return self


class ZooKeeperConfig(_Model):
    """How to reach ZooKeeper: a connect string with an optional chroot, auth and TLS."""

    connect: Annotated[str, BeforeValidator(_zk_connect)]
    session_timeout_s: Annotated[float, BeforeValidator(_seconds(1, 120))] = 10.0
    auth: ZooKeeperAuth | None = None
    tls: ZooKeeperTls | None = None

    @property
    def connect_hosts(self) -> str:
        """The connect string without its chroot: 'zk1:2181,zk2:2181'."""
        return _split_connect(self.connect).hosts

    @property
    def chroot(self) -> str | None:
        """The chroot ('/kafka'), or None."""
        return _split_connect(self.connect).chroot

    @property
    def servers(self) -> tuple[tuple[str, int], ...]:
        """(host, port) per server; IPv6 hosts without their brackets."""
        return _split_connect(self.connect).servers


def _distinct_log_dirs(value: tuple[PurePosixPath, ...], at: Loc = ()) -> tuple[PurePosixPath, ...]:
    if not value:
        _fail("at least one log directory", "an empty list", at=at)
    first: dict[PurePosixPath, int] = {}
    problems: list[_Item] = []
    for index, path in enumerate(value):
        if path in first:
            expected = f"a log directory not listed before (log_dirs[{first[path]}])"
            problems.append(((*at, index), expected, _show(str(path))))
        first.setdefault(path, index)
    if problems:
        raise _problems(problems)
    return value


class BrokerConfig(_Model):
    """One broker: how to reach it, and where its log dirs are (listed, or read from its
    server.properties). ssh_port, ssh_user and sudo override the ssh section's defaults."""

    id: BrokerId
    host: Host
    transport: Literal["ssh", "local"] = "ssh"
    ssh_port: Port | None = None
    ssh_user: SshUser | None = None
    sudo: StrictBool | None = None
    log_dirs: tuple[RemotePath, ...] | None = None
    server_properties: RemotePath | None = None

    @field_validator("log_dirs")
    @classmethod
    def _distinct_log_dirs(
        cls, value: tuple[PurePosixPath, ...] | None
    ) -> tuple[PurePosixPath, ...] | None:
        return None if value is None else _distinct_log_dirs(value)

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> BrokerConfig:
        if (self.log_dirs is None) == (self.server_properties is None):
            got = "neither" if self.log_dirs is None else "both"
            _fail("exactly one of log_dirs, server_properties", got)
        local = self.transport == "local"
        if local:
            for name in ("ssh_port", "ssh_user"):
                if getattr(self, name) is not None:
                    _fail(f"no {name} on a broker with transport local", at=(name,))
        base_dir = _context(info).base_dir
        if self.log_dirs is not None:
            located = [(("log_dirs", i), path) for i, path in enumerate(self.log_dirs)]
            resolved = _broker_paths(located, local, base_dir)
            # Again once absolute: 'data' and '<cluster.yaml's dir>/data' are one directory.
            object.__setattr__(self, "log_dirs", _distinct_log_dirs(resolved, at=("log_dirs",)))
        if self.server_properties is not None:
            (path,) = _broker_paths(
                [(("server_properties",), self.server_properties)], local, base_dir
            )
            object.__setattr__(self, "server_properties", path)
        return self


class SshConfig(_Model):
    """How to reach brokers with transport ssh. Host keys must be in `known_hosts`."""

    user: SshUser
    port: Port = 22
    key_file: LocalPath
    key_passphrase_env: EnvName | None = None
    known_hosts: LocalPath
    connect_timeout_s: Annotated[float, BeforeValidator(_seconds(0, 600, low_inclusive=False))] = (
        10.0
    )
    sudo: StrictBool = False

    _key_passphrase: SecretStr | None = PrivateAttr(default=None)

    @property
    def key_passphrase(self) -> SecretStr | None:
        """The key's passphrase, read from `key_passphrase_env` at load time."""
        return self._key_passphrase

    @model_validator(mode="after")
    def _resolve(self, info: ValidationInfo) -> SshConfig:
        if self.key_passphrase_env is not None:
            resolved = _read_secret_env(
                self.key_passphrase_env, _context(info).environ, ("key_passphrase_env",)
            )
            if not isinstance(resolved, SecretStr):
                raise _problems([resolved])
            self._key_passphrase = resolved
        return self


class ServiceConfig(_Model):
    """Service command templates; {broker_id} and {host} are the only placeholders."""

    stop: CommandTemplate
    start: CommandTemplate
    status: CommandTemplate | None = None


class SparkConfig(_Model):
    """Where the scan job runs (a Spark master URL) and extra Spark settings."""

    master: Annotated[str, BeforeValidator(_spark_master)] = "local[*]"
    conf: SparkConf = Field(default_factory=FrozenStrMap)


@dataclass(frozen=True)
class SshTarget:
    """Everything needed to open an ssh connection to one broker, defaults merged in."""

    host: str
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    connect_timeout_s: float
    sudo: bool
    key_passphrase: SecretStr | None

    @property
    def ssh_user(self) -> str:
        return self.user

    @property
    def ssh_port(self) -> int:
        return self.port

    @property
    def use_sudo(self) -> bool:
        return self.sudo


ServiceKind = Literal["stop", "start", "status"]


class ClusterConfig(_Model):
    """The validated contents of cluster.yaml (see the module docstring and README)."""

    cluster: ClusterName
    zookeeper: ZooKeeperConfig
    brokers: tuple[BrokerConfig, ...]
    ssh: SshConfig | None = None
    service: ServiceConfig
    min_insync_replicas_default: Annotated[int, BeforeValidator(_int_between(1, INT32_MAX))] = 1
    backup_dir: RemotePath = PurePosixPath("/var/backups/remediate")
    journal_dir: LocalPath = Field(default=Path("journal"), validate_default=True)
    spark: SparkConfig = Field(default_factory=SparkConfig)

    _source: str = PrivateAttr(default="cluster.yaml")
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("brokers")
    @classmethod
    def _distinct_ids(cls, value: tuple[BrokerConfig, ...]) -> tuple[BrokerConfig, ...]:
        if not value:
            _fail("at least one broker", "an empty list")
        first: dict[int, int] = {}
        problems: list[_Item] = []
        for index, broker in enumerate(value):
            if broker.id in first:
                expected = f"a broker id no other broker has (brokers[{first[broker.id]}])"
                problems.append(((index, "id"), expected, _show(broker.id)))
            first.setdefault(broker.id, index)
        if problems:
            raise _problems(problems)
        return value

    @model_validator(mode="after")
    def _local_paths(self, info: ValidationInfo) -> ClusterConfig:
        self._base_dir = _context(info).base_dir
        local = all(broker.transport == "local" for broker in self.brokers)
        (path,) = _broker_paths(
            [(("backup_dir",), self.backup_dir)], local, self._base_dir, RELATIVE_ALL_LOCAL
        )
        object.__setattr__(self, "backup_dir", path)
        return self

    @model_validator(mode="after")
    def _ssh_rules(self, info: ValidationInfo) -> ClusterConfig:
        self._source = _context(info).source
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
            _fail(expected, at=("ssh",))
        first: dict[tuple[str, int], int] = {}
        problems: list[_Item] = []
        for index, broker in ssh_brokers:
            key = (broker.host.lower(), broker.ssh_port or self.ssh.port)
            if key in first:
                expected = f"a host and ssh port no other broker has (brokers[{first[key]}])"
                problems.append((("brokers", index, "host"), expected, f"{broker.host}:{key[1]}"))
            first.setdefault(key, index)
        if problems:
            raise _problems(problems)
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

    def use_sudo(self, broker_id: int) -> bool:
        """Whether commands on this broker run under sudo: its own setting, else ssh.sudo."""
        broker = self.broker(broker_id)
        if broker.sudo is not None:
            return broker.sudo
        return self.ssh.sudo if self.ssh is not None else False

    def ssh_target(self, broker_id: int) -> SshTarget:
        broker = self.broker(broker_id)
        index = self.brokers.index(broker)
        if broker.transport != "ssh" or self.ssh is None:
            raise self._error(
                f"brokers[{index}].transport",
                f"ssh for broker {broker_id}",
                _show(broker.transport),
            )
        return SshTarget(
            host=broker.host,
            port=broker.ssh_port if broker.ssh_port is not None else self.ssh.port,
            user=broker.ssh_user if broker.ssh_user is not None else self.ssh.user,
            key_file=self.ssh.key_file,
            known_hosts=self.ssh.known_hosts,
            connect_timeout_s=self.ssh.connect_timeout_s,
            sudo=self.use_sudo(broker_id),
            key_passphrase=self.ssh.key_passphrase,
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


# -- turning pydantic's errors into problems ---------------------------------------------------


_TYPE_EXPECTATIONS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "tuple_type": "a list",
    "list_type": "a list",
    "recursion_loop": "a value that does not contain itself",
}


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The model class inside an annotation such as `X | None` or `tuple[X, ...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _known_keys(loc: Loc) -> tuple[str, ...]:
    model: type[BaseModel] = ClusterConfig
    for segment in loc:
        if isinstance(segment, int):
            continue
        info = model.model_fields.get(segment)
        found = _model_in(info.annotation) if info is not None else None
        if found is None:
            return ()
        model = found
    return tuple(model.model_fields)


def _unknown_key(loc: Loc) -> ConfigProblem:
    key = loc[-1]
    known = _known_keys(loc[:-1])
    close = difflib.get_close_matches(str(key), known, n=1)
    if close:
        expected = f"a known key (did you mean {close[0]!r}?)"
    else:
        expected = "one of the keys " + ", ".join(known) if known else "no key here"
    return ConfigProblem(_path(loc), expected, f"unknown key {_show(key)}")


def _convert(error: dict[str, Any]) -> Iterator[ConfigProblem]:
    loc: Loc = tuple(error["loc"])
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind == _PROBLEM_TYPE:
        for relative, expected, got in context["problems"]:
            yield ConfigProblem(_path(loc + tuple(relative)), expected, got)
        return
    if kind == "extra_forbidden":
        yield _unknown_key(loc)
        return
    if kind == "invalid_key":
        yield ConfigProblem(
            _path(loc[:-1]), "keys that are strings", f"key {_show(error['input'])}"
        )
        return
    if kind == "missing":
        yield ConfigProblem(_path(loc), "a value for this required key")
        return
    if kind == "literal_error":
        expected = str(context.get("expected", "one of the allowed values"))
    elif kind in _TYPE_EXPECTATIONS:
        expected = _TYPE_EXPECTATIONS[kind]
    else:
        message = str(error["msg"])
        expected = message.removeprefix("Input should be ") if message else kind
    secret = any(segment in _SECRET_KEYS for segment in loc)
    yield ConfigProblem(_path(loc), expected, None if secret else _show(error["input"]))


def _problems_of(error: ValidationError) -> list[ConfigProblem]:
    return [problem for item in error.errors(include_url=False) for problem in _convert(dict(item))]


# -- loading -----------------------------------------------------------------------------------


def parse_cluster_config(
    data: object,
    *,
    source: str,
    base_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> ClusterConfig:
    """Validate already-loaded cluster.yaml data.

    `source` names the file in messages; relative local paths are resolved against `base_dir`;
    secrets named by *_env keys are looked up in `environ` (default: os.environ).
    """
    if not isinstance(data, dict):
        got = "an empty document" if data is None else _show(data)
        raise ClusterConfigError(source, [ConfigProblem("", "a mapping at the top level", got)])
    context = _Context(
        source=source,
        base_dir=base_dir.expanduser().absolute(),
        environ=os.environ if environ is None else environ,
    )
    try:
        config = ClusterConfig.model_validate(data, context=context)
    except ValidationError as exc:
        problems = _problems_of(exc)
    else:
        return config
    # Raised outside the except block: the ValidationError, whose text may quote input
    # (secrets included), must not ride along as __context__.
    raise ClusterConfigError(source, problems)


def load_cluster_config(path: Path, *, environ: Mapping[str, str] | None = None) -> ClusterConfig:
    """Read, parse and validate cluster.yaml. Every problem raises ClusterConfigError."""
    source = str(path)
    data = _read_yaml(path, source)
    return parse_cluster_config(
        data, source=source, base_dir=Path(path).absolute().parent, environ=environ
    )


def _read_yaml(path: Path, source: str) -> object:
    raw = _read_limited(Path(path), MAX_FILE_BYTES)
    if isinstance(raw, str):
        raise ClusterConfigError(source, [ConfigProblem("", raw)])
    if len(raw) > MAX_FILE_BYTES:
        expected = f"a file of at most {MAX_FILE_BYTES} bytes"
        raise ClusterConfigError(source, [ConfigProblem("", expected)])
    problem = None
    try:
        data = yaml.safe_load(raw)
    except yaml.MarkedYAMLError as exc:
        problem = _yaml_problem(exc)
    except yaml.YAMLError as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        problem = ConfigProblem("", f"valid YAML in UTF-8 or UTF-16 ({reason})")
    except RecursionError:
        problem = ConfigProblem("", "YAML that is not nested this deeply")
    except Exception as exc:
        # safe_load's tag constructors (!!int, !!timestamp, ...) raise whatever they meet. The
        # exception's text can quote the document, so only its type is shown.
        problem = ConfigProblem(
            "", f"valid YAML (a value could not be built: {type(exc).__name__})"
        )
    if problem is not None:
        raise ClusterConfigError(source, [problem])
    return data


def _yaml_problem(exc: yaml.MarkedYAMLError) -> ConfigProblem:
    """Position and reason only: the snippet YAML errors carry may show a secret."""
    mark = exc.problem_mark or exc.context_mark
    field = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    reason = exc.problem or exc.context or "syntax error"
    return ConfigProblem(field, f"valid YAML ({reason})")
