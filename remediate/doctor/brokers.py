"""Doctor on one broker, over its transport as a run reaches it: ssh and the host key, sudo as
cluster.yaml asks for it (asked with `sudo -n -l`, which runs nothing), the status command,
server.properties, state-change.log and server.log readable, the log dirs, and the backup
dir with the room a run's backups take. Every path is quoted: directory names are data."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

from remediate.collect.collector import read_log_dirs, transport_for
from remediate.collect.disks import parse_df
from remediate.config import BrokerConfig, ClusterConfig
from remediate.doctor.model import Finding, critical, ok, unknown, warning
from remediate.errors import ConfigError, HostKeyError, RemediationError, SudoError
from remediate.ports import SERVICE_COMMANDS, CommandKind, Transport
from remediate.transport import ServiceSudoTransport, sudoers_lines

# A run's backup of one partition.metadata: the file (under 100 bytes) as a tar member, and
# its manifest line, rounded up; and room to spare for the archives' own blocks.
BACKUP_BYTES_PER_FILE = 2048
BACKUP_SLACK_BYTES = 1 << 20
PROBE_TIMEOUT_S = 60.0


def broker_findings(config: ClusterConfig, broker: BrokerConfig) -> Iterator[Finding]:
    where = f"broker {broker.id}"
    try:
        transport = transport_for(config, broker)
    except ConfigError as exc:
        yield critical("ssh", where, str(exc), "fix the ssh settings it names")
        return
    try:
        reached = _reach(transport, config, broker)
        yield from reached
        if any(f.status.value != "OK" for f in reached):
            yield unknown("files and dirs", where, "not checked: the broker was not reached")
            return
        yield from _sudo(transport, config, broker)
        yield _status(transport, config, broker)
        yield from _files(transport, config, broker)
    finally:
        transport.close()


def _probe(transport: Transport, script: str) -> tuple[int, str, str]:
    result = transport.run(script, timeout=PROBE_TIMEOUT_S, kind=CommandKind.PROBE)
    return result.exit_code, result.stdout, result.stderr.strip()


def _reach(transport: Transport, config: ClusterConfig, broker: BrokerConfig) -> list[Finding]:
    where = f"broker {broker.id}"
    item = "ssh" if broker.transport == "ssh" else "local commands"
    mode = config.sudo_mode(broker.id)
    try:
        code, _out, err = _probe(transport, "true")
    except HostKeyError as exc:
        known = config.ssh.known_hosts if config.ssh else "known_hosts"
        fix = f"add the host's key to {known} once you have checked it (configuration.md, ssh)"
        return [critical(item, where, str(exc), fix)]
    except SudoError as exc:  # sudo: true, whose probe itself went through sudo
        return [
            ok(item, where, f"reached {transport.description}"),
            critical("sudo", where, str(exc), "add the sudoers rule it names"),
        ]
    except RemediationError as exc:
        return [critical(item, where, str(exc), "check the host, its port and the ssh user")]
    if code != 0:
        return [critical(item, where, f"`true` exited {code} there: {err[-300:]}")]
    reached = f"reached {transport.description}"
    if broker.transport == "ssh":
        reached += " (host key verified)"
    found = [ok(item, where, reached)]
    if mode == "all":
        found.append(ok("sudo", where, "`sudo -n` runs the tool's commands as root"))
    return found


def _sudo(transport: Transport, config: ClusterConfig, broker: BrokerConfig) -> Iterator[Finding]:
    where = f"broker {broker.id}"
    mode = config.sudo_mode(broker.id)
    if mode == "none":
        yield ok("sudo", where, "not used: the ssh user runs every command itself")
        return
    if mode == "all":
        return  # proven by the probe itself (_reach)
    user = transport.user if isinstance(transport, ServiceSudoTransport) else "USER"
    for kind in ("stop", "start", "status"):
        if kind == "status" and config.service.status is None:
            continue
        command = config.service_command(kind, broker)
        argv = " ".join(shlex.quote(word) for word in shlex.split(command))
        code, _out, err = _probe(transport, f"sudo -n -l -- {argv}")
        if code == 0:
            yield ok(f"sudo: {kind}", where, f"sudo would run `{command}`")
        else:
            (line,) = sudoers_lines(user, [command])
            said = f" ({err[-200:]})" if err else ""
            yield critical(
                f"sudo: {kind}",
                where,
                f"sudo would not run `{command}` without a password{said}",
                f"add `{line}` to that host's sudoers (visudo -f /etc/sudoers.d/remediate)",
            )


def _status(transport: Transport, config: ClusterConfig, broker: BrokerConfig) -> Finding:
    where = f"broker {broker.id}"
    if config.service.status is None:
        return critical(
            "status command",
            where,
            "no service.status: a run that changes files on a broker is refused",
            "set service.status (configuration.md: the status command proves a broker stopped)",
        )
    command = config.service_command("status", broker)
    try:
        result = transport.run(command, timeout=PROBE_TIMEOUT_S, kind=SERVICE_COMMANDS["status"])
    except SudoError as exc:
        return critical("status command", where, str(exc), "add the sudoers line it names")
    except RemediationError as exc:
        return critical("status command", where, str(exc))
    if result.ok:
        return ok("status command", where, "says the broker runs (exit 0)")
    return warning(
        "status command",
        where,
        f"exited {result.exit_code}: the broker is not running, or the command does not work"
        f" ({command})",
        "a run restarts only running brokers: check the broker and the command",
    )


def _readable(transport: Transport, path: str) -> bool:
    code, _out, _err = _probe(transport, f"test -r {shlex.quote(path)}")
    return code == 0


def _files(transport: Transport, config: ClusterConfig, broker: BrokerConfig) -> Iterator[Finding]:
    where = f"broker {broker.id}"
    who = transport.description
    if broker.server_properties is not None:
        path = str(broker.server_properties)
        if _readable(transport, path):
            yield ok("server.properties", where, f"{path} is readable")
        else:
            yield critical(
                "server.properties",
                where,
                f"{path} cannot be read as {who}",
                "make it readable by the ssh user, or use sudo (configuration.md, sudo)",
            )
    logs = (("state-change.log", broker.state_change_log), ("server.log", broker.server_log))
    for item, given in logs:
        if given is None:
            yield warning(
                item,
                where,
                "not set: a broker still loading its logs is not told from a stuck one (the"
                " start waits start_s only)",
                "set state_change_log (server_log defaults beside it)",
            )
        elif _readable(transport, str(given)):
            yield ok(item, where, f"{given} is readable")
        else:
            yield critical(item, where, f"{given} cannot be read as {who}")
    try:
        log_dirs = read_log_dirs(config, broker, transport)
    except RemediationError as exc:
        yield critical("log dirs", where, str(exc))
        yield unknown("backup dir", where, "not checked: the log dirs are not known")
        return
    files = 0
    # Under sudo: true every command runs as root; otherwise as the ssh user, who must be able
    # to delete and put back partition.metadata in the partition dirs.
    writes = config.sudo_mode(broker.id) != "all"
    for log_dir in log_dirs:
        found = _log_dir(transport, log_dir, where, writable=writes)
        if isinstance(found, Finding):
            yield found
            continue
        files += found
        yield ok("log dir", where, f"{log_dir}: {found} partition.metadata file(s)")
    yield _backup_dir(transport, str(config.backup_dir), files, where)


# Prints one word (ok, unwritable, missing, unreadable) and the count of partition.metadata
# files: $1 is the log dir.
_LOG_DIR_SCRIPT = """
d=$1
[ -d "$d" ] || { echo missing 0; exit 0; }
{ [ -r "$d" ] && [ -x "$d" ]; } || { echo unreadable 0; exit 0; }
n=$(find "$d" -mindepth 2 -maxdepth 2 -name partition.metadata | wc -l)
f=$(find "$d" -mindepth 2 -maxdepth 2 -name partition.metadata | head -n 1)
if [ -n "$f" ] && ! [ -w "$(dirname -- "$f")" ]; then echo unwritable $n; else echo ok $n; fi
"""
_OWNER_OR_SUDO = "log in as the account that owns the log dirs (sudo: services), or use sudo: true"


def _run_script(transport: Transport, script: str, *args: str) -> tuple[int, str, str]:
    quoted = " ".join(shlex.quote(a) for a in args)
    return _probe(transport, f"sh -c {shlex.quote(script)} sh {quoted}")


def _log_dir(transport: Transport, log_dir: str, where: str, *, writable: bool) -> int | Finding:
    """How many partition.metadata files the log dir holds, or why a run cannot use it."""
    code, out, err = _run_script(transport, _LOG_DIR_SCRIPT, log_dir)
    who = transport.description
    word, _, count = out.strip().partition(" ")
    if code != 0 or word not in ("ok", "unwritable", "missing", "unreadable"):
        return critical("log dir", where, f"{log_dir} could not be looked at: {err[-200:]}")
    if word == "missing":
        return critical("log dir", where, f"{log_dir} does not exist")
    if word == "unreadable":
        return critical("log dir", where, f"{log_dir} cannot be read as {who}", _OWNER_OR_SUDO)
    if word == "unwritable" and writable:
        return critical(
            "log dir",
            where,
            f"{log_dir}: its partition dirs cannot be written as {who}, so a repair cannot"
            " delete partition.metadata there",
            _OWNER_OR_SUDO,
        )
    return int(count or 0)


# Prints whether the nearest existing directory of $1 is writable (yes/no), that directory,
# and df -Pk's lines for it.
_BACKUP_SCRIPT = """
d=$1
while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done
if [ -d "$d" ] && [ -w "$d" ] && [ -x "$d" ]; then w=yes; else w=no; fi
printf '%s\\n%s\\n' "$w" "$d"
df -Pk -- "$d"
"""


def _backup_dir(transport: Transport, backup_dir: str, files: int, where: str) -> Finding:
    code, out, err = _run_script(transport, _BACKUP_SCRIPT, backup_dir)
    lines = out.splitlines()
    if code != 0 or len(lines) < 3:
        return critical("backup dir", where, f"{backup_dir} could not be looked at: {err[-200:]}")
    writable, existing = lines[0] == "yes", lines[1]
    who = transport.description
    if not writable:
        return critical(
            "backup dir",
            where,
            f"{backup_dir} cannot be written as {who} ({existing} is not writable)",
            f"create it for that account once: install -d -o USER -m 0700 {backup_dir}",
        )
    need = files * BACKUP_BYTES_PER_FILE + BACKUP_SLACK_BYTES
    free = parse_df("\n".join(lines[2:]), [existing]).get(existing)
    if free is None:
        return warning("backup dir", where, f"the free space of {existing} could not be read")
    if free < need:
        return critical(
            "backup dir",
            where,
            f"{free // 1024} KiB free in {existing}; backing up the {files} partition.metadata"
            f" file(s) there takes about {need // 1024} KiB",
            "free some space there, or point backup_dir at a larger disk",
        )
    made = "" if existing == backup_dir else f" (to be created in {existing})"
    return ok(
        "backup dir",
        where,
        f"{backup_dir}{made} is writable, {free // (1 << 20)} MiB free for about"
        f" {max(1, need // (1 << 20))} MiB of backups",
    )
