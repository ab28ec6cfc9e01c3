"""A standalone ZooKeeper server from Debian's `zookeeper` package, on a loopback port."""

from __future__ import annotations

import fcntl
import json
import shutil
import socket
import tempfile
import time
from pathlib import Path

from remediate.errors import SandboxError
from remediate.sandbox.plumbing.process import spawn_detached

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CONF_DIR = Path("/etc/zookeeper/conf")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Logging binding shipped with Debian's slf4j; without it ZooKeeper logs nothing.
SLF4J_SIMPLE = Path("/usr/share/java/slf4j-simple.jar")
# TLS needs ZooKeeper's Netty connection factory; Debian's zookeeper.jar manifest lists only
# part of Netty, these two complete it (Debian's libnetty-java).
NETTY_FOR_TLS = (
    Path("/usr/share/java/netty-codec.jar"),
    Path("/usr/share/java/netty-resolver.jar"),
)


# Ports handed out on this machine, by any process, in the last PORT_HOLD_S: a port is free
# from when `free_port` closes its probe until its server binds it (a JVM start, seconds),
# and the kernel may give it to another process's probe meanwhile. Processes side by side
# (the test suite's workers, sandboxes started together) would then start two servers on one
# port, and a client of one talk to the other.
PORT_LEDGER = Path(tempfile.gettempdir()) / "remediate-ports.json"
PORT_HOLD_S = 600.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on and no other caller on this machine was given lately."""
    with PORT_LEDGER.open("a+") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)  # released when the file closes
        ledger.seek(0)
        try:
            given = {int(k): float(v) for k, v in json.loads(ledger.read() or "{}").items()}
        except (ValueError, AttributeError):
            given = {}  # a ledger cut short is only a hint lost
        now = time.time()
        given = {port: at for port, at in given.items() if now - at < PORT_HOLD_S}
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in given:
                break
        given[port] = now
        ledger.seek(0)
        ledger.truncate()
        ledger.write(json.dumps(given))
    return port


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def is_serving(host: str, port: int) -> bool:
    try:
        return "Mode:" in four_letter_word(host, port, "srvr")
    except OSError:
        return False


def write_config(
    directory: Path,
    host: str,
    port: int,
    *,
    tick_ms: int = 500,
    extra: dict[str, str] | None = None,
) -> Path:
    data_dir = directory / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "tickTime": str(tick_ms),
        "dataDir": str(data_dir),
        "clientPort": str(port),
        "clientPortAddress": host,
        "admin.enableServer": "false",
        "minSessionTimeout": str(2 * tick_ms),
        "maxSessionTimeout": "60000",
        "4lw.commands.whitelist": "srvr,stat,ruok,mntr",
        "maxClientCnxns": "0",
        **(extra or {}),
    }
    config = directory / "zoo.cfg"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return config


def start(
    directory: Path,
    host: str,
    port: int,
    *,
    jvm_flags: tuple[str, ...] = (),
    classpath: tuple[Path, ...] = (),
) -> int:
    """Start ZooKeeper with `directory/zoo.cfg`; return its pid once it answers `srvr` on the
    plain `port`. `classpath` adds jars (NETTY_FOR_TLS for a TLS client port)."""
    if not ZOOKEEPER_JAR.exists():
        raise SandboxError(
            f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): run `make setup`"
            " or `apt-get install zookeeper`"
        )
    java = shutil.which("java")
    if java is None:
        raise SandboxError(
            "no Java runtime on PATH: run `make setup` or `apt-get install default-jre-headless`"
        )
    jars = [str(CONF_DIR), str(ZOOKEEPER_JAR), *map(str, classpath)]
    if SLF4J_SIMPLE.exists():
        jars.append(str(SLF4J_SIMPLE))
    argv = [
        java,
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-Dzookeeper.admin.enableServer=false",
        f"-Dzookeeper.log.dir={directory}",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        *jvm_flags,
        "-cp",
        ":".join(jars),
        MAIN_CLASS,
        str(directory / "zoo.cfg"),
    ]
    pid = spawn_detached(argv, log_path=directory / "zookeeper.log")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if is_serving(host, port):
            return pid
        time.sleep(0.1)
    raise SandboxError(
        f"ZooKeeper did not start on {host}:{port}; see {directory / 'zookeeper.log'}"
    )
