"""The field types of cluster.yaml: what each scalar accepts, and what a message says it expected.

Each type is an `Annotated` type whose validator runs before pydantic's own, so that a wrong
value is reported in this project's words (see problems.py) rather than pydantic's. Strings that
are checked against a pattern all come from one factory, `matching`; numbers from `int_between`
and `seconds`. Host names, ZooKeeper connect strings, Spark masters and service command
templates are parsed rather than matched, because their messages say which part is wrong.
Paths are in paths.py.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, PlainSerializer, PlainValidator, ValidationInfo

from remediate.config.problems import Item, fail, problems, show

INT32_MAX = 2**31 - 1
SERVICE_PLACEHOLDERS = ("broker_id", "host")

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
WHITESPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_HOST_CHARS = re.compile(r"[A-Za-z0-9._:%-]+")
_PORT = re.compile(r"[0-9]{1,5}")
_LOCAL_MASTER = re.compile(r"local(\[([1-9][0-9]{0,5}|\*)(,[1-9][0-9]{0,5})?\])?")
_CONNECT = "a ZooKeeper connect string 'host:port[,host:port...][/chroot]'"


# -- what validators may read besides the value ------------------------------------------------


@dataclass(frozen=True)
class ValidationContext:
    """Passed to pydantic by the loader: the file's name, its directory and the environment."""

    source: str
    base_dir: Path
    environ: Mapping[str, str]


def context(info: ValidationInfo) -> ValidationContext:
    """The loader's context, or defaults when a model is validated directly."""
    given = info.context
    if isinstance(given, ValidationContext):
        return given
    return ValidationContext(source="cluster.yaml", base_dir=Path.cwd(), environ=os.environ)


# -- factories ---------------------------------------------------------------------------------


def text(value: object, expected: str) -> str:
    """`value` if it is a string; otherwise a problem saying `expected`."""
    if not isinstance(value, str):
        fail(expected, show(value))
    return value


def matching(pattern: str, expected: str) -> Callable[[object], str]:
    """A validator accepting a string that matches `pattern` as a whole; anything else is a
    problem saying `expected` and showing what was found."""
    compiled = re.compile(pattern)

    def check(value: object) -> str:
        if not isinstance(value, str) or not compiled.fullmatch(value):
            fail(expected, show(value))
        return value

    return check


def int_between(low: int, high: int) -> Callable[[object], int]:
    """A validator accepting an integer (not a boolean) from `low` to `high`."""
    expected = f"an integer from {low} to {high}"

    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            fail(expected, show(value))
        return value

    return check


def seconds(low: float, high: float, *, low_inclusive: bool = True) -> Callable[[object], float]:
    """A validator accepting a finite number of seconds up to `high` and from (or, when not
    `low_inclusive`, above) `low`; it returns a float."""
    bound = "from" if low_inclusive else "greater than"
    expected = f"a number of seconds {bound} {low:g} {'to' if low_inclusive else 'and at most'}"
    expected += f" {high:g}"

    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(expected, show(value))
        number = float(value) if abs(value) < 1e300 else math.inf
        above_low = number >= low if low_inclusive else number > low
        if not (math.isfinite(number) and above_low and number <= high):
            fail(expected, show(value))
        return number

    return check


# -- hosts and ZooKeeper connect strings -------------------------------------------------------


def _host(value: object) -> str:
    expected = "a host name or IP address (letters, digits, '.', '-', '_'; not starting with '-')"
    host = text(value, expected)
    if host == "":
        fail(expected, "an empty string")
    if WHITESPACE_OR_CONTROL.search(host):
        fail(expected + " without white space", show(host))
    if not _is_host(host, bracketed_ipv6=False):
        fail(expected, show(host))
    return host


def _is_host(host: str, *, bracketed_ipv6: bool) -> bool:
    if bracketed_ipv6 and host.startswith("[") and host.endswith("]"):
        return _is_ipv6(host[1:-1])
    if not _HOST_CHARS.fullmatch(host):
        return False
    if ":" in host or "%" in host:
        return not bracketed_ipv6 and _is_ipv6(host)
    return _HOST_NAME.fullmatch(host) is not None


def _is_ipv6(host: str) -> bool:
    if not _HOST_CHARS.fullmatch(host):  # also keeps a scope id ("%eth0") shell-safe
        return False
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


def _host_port(entry: str, *, what: str) -> tuple[str, int]:
    """`host:port` or `[ipv6]:port`, as in ZooKeeper connect strings and spark:// URLs."""
    if entry == "":
        fail(f"{what} without an empty host entry", None)
    host, colon, port = entry.rpartition(":")
    if not colon or host == "":
        fail(f"{what} whose entries are host:port", show(entry))
    if not _is_host(host, bracketed_ipv6=True):
        fail(f"{what} with valid host names (IPv6 as [::1]:2181)", show(entry))
    if not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        fail(f"{what} with ports from 1 to 65535", show(entry))
    if host.startswith("["):
        host = host[1:-1]
    return host, int(port)


@dataclass(frozen=True)
class Connect:
    """A ZooKeeper connect string taken apart."""

    hosts: str
    servers: tuple[tuple[str, int], ...]
    chroot: str | None


def split_connect(connect: str) -> Connect:
    if connect == "":
        fail(_CONNECT, "an empty string")
    if WHITESPACE_OR_CONTROL.search(connect):
        fail(_CONNECT + " without white space", show(connect))
    hosts, slash, rest = connect.partition("/")
    if hosts == "":
        fail(_CONNECT + " with at least one host", show(connect))
    servers = tuple(_host_port(entry, what=_CONNECT) for entry in hosts.split(","))
    chroot = None
    if slash:
        chroot = "/" + rest
        parts = rest.split("/")
        if any(part in ("", ".", "..") for part in parts):
            fail(
                "a chroot that is a ZooKeeper path like /kafka (no empty, '.' or '..' part, "
                "no trailing '/')",
                show(chroot),
            )
    return Connect(hosts=hosts, servers=servers, chroot=chroot)


def _zk_connect(value: object) -> str:
    connect = text(value, _CONNECT)
    split_connect(connect)
    return connect


# -- service commands and Spark ----------------------------------------------------------------


def _command_template(value: object) -> str:
    expected = "a command template whose only placeholders are {broker_id} and {host}"
    command = text(value, expected)
    if command.strip() == "":
        fail("a non-empty command", show(command))
    if CONTROL.search(command):
        fail("a single-line command without control characters", show(command))
    try:
        fields = [item[1:] for item in string.Formatter().parse(command)]
    except ValueError:
        fail(expected + " and balanced braces ({{ and }} for literal ones)", show(command))
    for name, spec, conversion in fields:
        if name is None:
            continue
        if name == "":
            fail(expected, "a positional placeholder {}")
        if name not in SERVICE_PLACEHOLDERS:
            fail(expected, f"unknown placeholder {show('{' + name + '}')}")
        if spec or conversion:
            fail(expected + ", without format spec or conversion", show(command))
    return command


def _hook_command(value: object) -> str:
    command = text(value, "a command")
    if command.strip() == "":
        fail("a non-empty command", show(command))
    if CONTROL.search(command):
        fail("a single-line command without control characters", show(command))
    return command


# How commands on a broker run: as the ssh user ("none"), every one as root through sudo
# ("all", `sudo: true`), or only the service commands, each as its own program ("services").
SudoMode = Literal["none", "all", "services"]
_SUDO_MODES: dict[object, SudoMode] = {False: "none", True: "all", "services": "services"}


def _sudo(value: object) -> SudoMode:
    # Booleans only: 1 and 0 are not true and false here.
    if not (isinstance(value, bool) or value == "services"):
        fail("true, false or services", show(value))
    return _SUDO_MODES[value]


def _sudo_out(mode: SudoMode) -> bool | str:
    return {"none": False, "all": True}.get(mode, mode)


# Shell syntax a command run as one program (sudo's argv, no shell) cannot hold.
SHELL_SYNTAX = re.compile(r"[;&|<>()$`\\\n*?\[\]~#]")


def simple_command_problem(template: str) -> str | None:
    """Why a service command template cannot run as one program with its arguments (as sudo
    runs it under `sudo: services`, and as a sudoers line names it), or None."""
    bare = template.replace("{broker_id}", "0").replace("{host}", "h")
    if SHELL_SYNTAX.search(bare) or "'" in bare or '"' in bare:
        return "shell syntax (operators, quotes, redirections, variables, globs)"
    program = bare.split()[0]
    if not program.startswith("/"):
        return "a program named without its absolute path (sudoers names programs by path)"
    return None


def _spark_master(value: object) -> str:
    expected = (
        "a Spark master: local, local[N], local[*], spark://host:port[,host:port...], yarn "
        "or k8s://..."
    )
    master = text(value, expected)
    if master == "yarn" or _LOCAL_MASTER.fullmatch(master):
        return master
    if master.startswith("spark://") and not WHITESPACE_OR_CONTROL.search(master):
        for entry in master.removeprefix("spark://").split(","):
            _host_port(entry, what=expected)
        return master
    k8s = master.startswith("k8s://") and len(master) > len("k8s://")
    if not k8s or WHITESPACE_OR_CONTROL.search(master):
        fail(expected, show(master))
    return master


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
        fail("a mapping of Spark settings to values", show(value))
    found: list[Item] = []
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or key == "" or WHITESPACE_OR_CONTROL.search(key):
            expected = "setting names that are non-empty strings without white space"
            found.append(((), expected, show(key)))
        elif isinstance(item, str):
            result[key] = item
        elif isinstance(item, bool):
            result[key] = "true" if item else "false"
        elif isinstance(item, int) and abs(item) < 10**40:
            result[key] = str(item)
        elif isinstance(item, float) and math.isfinite(item):
            result[key] = repr(item)
        else:
            found.append(((key,), "a string, number or boolean", show(item)))
    if found:
        raise problems(found)
    return FrozenStrMap(result)


def _serialize_map(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


# -- the types the models use ------------------------------------------------------------------


ClusterName = Annotated[
    str,
    BeforeValidator(
        matching(
            r"[A-Za-z0-9._-]{1,100}",
            "a name of 1 to 100 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
        )
    ),
]
SshUser = Annotated[
    str,
    BeforeValidator(
        matching(
            r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}",
            "a user name (letters, digits, '.', '_', '@', '-'; not starting with '-')",
        )
    ),
]
JumpHost = Annotated[
    str,
    BeforeValidator(
        matching(
            r"([A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}@)?[A-Za-z0-9_.][A-Za-z0-9_.-]{0,252}(:[0-9]{1,5})?",
            "one jump host, [user@]host[:port] (a host name or IPv4 address; as ssh's ProxyJump)",
        )
    ),
]
ZooKeeperUser = Annotated[
    str,
    BeforeValidator(
        matching(r"[^\s\x00-\x1f\x7f:]{1,256}", "a non-empty user name without white space or ':'")
    ),
]
ZooKeeperIdentity = Annotated[
    str,
    BeforeValidator(
        matching(
            r"(sasl|digest|x509|ip):[^\s\x00-\x1f\x7f]{1,512}",
            "a ZooKeeper identity, scheme:id (sasl:kafka, digest:kafka:<base64 sha1>, x509:<DN>,"
            " ip:<address>)",
        )
    ),
]
EnvName = Annotated[
    str,
    BeforeValidator(
        matching(
            r"[A-Za-z_][A-Za-z0-9_]{0,254}",
            "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
        )
    ),
]


def _kafka_server(value: object) -> str:
    entry = text(value, "host:port")
    _host_port(entry, what="a Kafka listener address")
    return entry


Host = Annotated[str, BeforeValidator(_host)]
KafkaServer = Annotated[str, BeforeValidator(_kafka_server)]
ZooKeeperConnect = Annotated[str, BeforeValidator(_zk_connect)]
Port = Annotated[int, BeforeValidator(int_between(1, 65535))]
BrokerId = Annotated[int, BeforeValidator(int_between(0, INT32_MAX))]
PositiveInt32 = Annotated[int, BeforeValidator(int_between(1, INT32_MAX))]
SessionTimeout = Annotated[float, BeforeValidator(seconds(1, 120))]
# The timeouts' bounds, in cluster.yaml's `timeouts` section and in a playbook's `gates`
# (remediate/playbook.py), whose values the section overrides.
MAX_STOP_S = 7200.0
MAX_START_S = 7200.0
MAX_IN_SYNC_S = 86400.0
MAX_SERVICE_COMMAND_S = 7200.0
StopTimeout = Annotated[float, BeforeValidator(seconds(0, MAX_STOP_S, low_inclusive=False))]
StartTimeout = Annotated[float, BeforeValidator(seconds(0, MAX_START_S, low_inclusive=False))]
InSyncTimeout = Annotated[float, BeforeValidator(seconds(0, MAX_IN_SYNC_S, low_inclusive=False))]
ServiceCommandTimeout = Annotated[
    float, BeforeValidator(seconds(0, MAX_SERVICE_COMMAND_S, low_inclusive=False))
]
ConnectTimeout = Annotated[float, BeforeValidator(seconds(0, 600, low_inclusive=False))]
CommandTemplate = Annotated[str, BeforeValidator(_command_template)]
HookCommand = Annotated[str, BeforeValidator(_hook_command)]
HookTimeout = Annotated[float, BeforeValidator(seconds(0, 3600, low_inclusive=False))]
Sudo = Annotated[SudoMode, BeforeValidator(_sudo), PlainSerializer(_sudo_out)]
SparkMaster = Annotated[str, BeforeValidator(_spark_master)]
SparkConf = Annotated[
    Mapping[str, str],
    PlainValidator(_spark_conf),
    PlainSerializer(_serialize_map, return_type=dict[str, str]),
]
