"""How to reach one broker over ssh, as an operator's ssh would: cluster.yaml's ssh settings,
and where it leaves something unsaid, the OpenSSH client config it names (`ssh.config_file`):
HostName, User, Port, IdentityFile and ProxyJump, looked up for the broker's host as ssh
looks them up (first match wins, `Host` patterns, `Match` not supported by paramiko's parser
beyond what it reads). One jump host (ProxyJump, or `ssh.proxy_jump`), whose host key is
verified against the same known_hosts file as the brokers'. ProxyCommand and chains of jump
hosts are refused, naming the setting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import paramiko

from remediate.config import ClusterConfigError, ConfigProblem, SshTarget
from remediate.transport import SshSettings

DEFAULT_PORT = 22
_JUMP = re.compile(r"(?:(?P<user>[^@]+)@)?(?P<host>[^:@]+)(?::(?P<port>[0-9]{1,5}))?")


def read_ssh_config(path: Path, *, source: str) -> paramiko.SSHConfig:
    """The OpenSSH client config at `path`, parsed (a file that cannot be read or parsed is a
    configuration error naming it)."""
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except (OSError, UnicodeDecodeError, paramiko.ssh_exception.ConfigParseError) as exc:
        raise ClusterConfigError(
            source,
            [
                ConfigProblem(
                    "ssh.config_file", "an OpenSSH client config to read", f"{path}: {exc}"
                )
            ],
        ) from exc


def ssh_settings(target: SshTarget, *, broker: int, source: str = "cluster.yaml") -> SshSettings:
    """The connection to one broker: cluster.yaml's values first, then its ssh config's."""
    config = (
        read_ssh_config(target.config_file, source=source)
        if target.config_file is not None
        else None
    )

    def problem(expected: str, got: str | None = None) -> ClusterConfigError:
        where = f"{target.config_file}" if target.config_file else "cluster.yaml"
        return ClusterConfigError(
            source,
            [
                ConfigProblem(
                    "ssh", f"for broker {broker} ({target.host}): {expected}", got or where
                )
            ],
        )

    found = _lookup(config, target.host)
    if "proxycommand" in found:
        raise problem("no ProxyCommand (not supported: use ProxyJump)", found["proxycommand"])
    user = target.user or found.get("user")
    if not user:
        raise problem("a user: ssh.user, a broker's ssh_user, or User in ssh.config_file")
    keys = (target.key_file,) if target.key_file else _identity_files(found)
    if not keys and not target.agent:
        raise problem("a key: ssh.key_file, agent: true, or IdentityFile in ssh.config_file")
    jump_spec = target.proxy_jump or found.get("proxyjump")
    jump = None
    if jump_spec and jump_spec.lower() != "none":
        jump = _jump_settings(jump_spec, config, target, user=user, keys=keys, problem=problem)
    return SshSettings(
        host=str(found.get("hostname", target.host)),
        port=target.port or int(found.get("port", DEFAULT_PORT)),
        user=user,
        key_files=keys,
        known_hosts=target.known_hosts,
        connect_timeout_s=target.connect_timeout_s,
        key_passphrase=target.key_passphrase.get_secret_value() if target.key_passphrase else None,
        agent=target.agent,
        jump=jump,
    )


def _lookup(config: paramiko.SSHConfig | None, host: str) -> Mapping[str, Any]:
    if config is None:
        return {}
    found: dict[str, Any] = dict(config.lookup(host))
    # paramiko answers a HostName for every host (the name itself when none is set).
    return found


def _identity_files(found: Mapping[str, Any]) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser() for p in found.get("identityfile", []))


def _jump_settings(
    spec: str,
    config: paramiko.SSHConfig | None,
    target: SshTarget,
    *,
    user: str,
    keys: tuple[Path, ...],
    problem: Any,
) -> SshSettings:
    if "," in spec:
        raise problem("one jump host (a chain of jump hosts is not supported)", spec)
    match = _JUMP.fullmatch(spec.strip())
    if match is None:
        raise problem("a jump host [user@]host[:port]", spec)
    alias = match["host"]
    found = _lookup(config, alias)
    if "proxycommand" in found or (found.get("proxyjump") or "none").lower() != "none":
        raise problem(
            f"a jump host reached directly (the config reaches {alias} through another hop)",
            spec,
        )
    jump_keys = _identity_files(found) or keys
    return SshSettings(
        host=str(found.get("hostname", alias)),
        port=int(match["port"] or found.get("port", DEFAULT_PORT)),
        user=match["user"] or found.get("user") or user,
        key_files=jump_keys,
        known_hosts=target.known_hosts,
        connect_timeout_s=target.connect_timeout_s,
        key_passphrase=target.key_passphrase.get_secret_value() if target.key_passphrase else None,
        agent=target.agent,
        jump=None,
    )
