"""Starting and stopping the sandbox's daemons (ZooKeeper, brokers, sshd) by pid.

Daemons are started through a short-lived launcher so that they are never children of the
caller (a test process would otherwise collect zombies), and a pid is only ever signalled
after its command line has been checked, so a recycled pid is never killed by mistake.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from remediate.errors import SandboxError


def spawn_detached(
    argv: Sequence[str], *, log_path: Path, env: Mapping[str, str] | None = None
) -> int:
    """Start `argv` in its own session, output appended to `log_path`; return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launcher = subprocess.run(
        [sys.executable, "-m", "remediate.sandbox.plumbing.process", str(log_path), "--", *argv],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        check=False,
    )
    if launcher.returncode != 0 or not launcher.stdout.strip().isdigit():
        raise SandboxError(
            f"could not start {argv[0]}: {launcher.stderr.strip() or launcher.stdout.strip()}"
        )
    return int(launcher.stdout.strip())


def _launch(argv: list[str]) -> int:
    """The launcher: detach, start the daemon, print its pid, exit."""
    log_path, separator, *command = argv
    if separator != "--" or not command:
        print(
            "usage: python -m remediate.sandbox.plumbing.process LOG -- COMMAND...", file=sys.stderr
        )
        return 2
    with open(log_path, "ab") as log_file:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    print(child.pid)
    return 0


def is_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def command_line(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode("utf-8", "replace")
        )
    except OSError:
        return ""


def owns(pid: int, marker: str) -> bool:
    """The pid is alive and its command line contains `marker` (so it is ours)."""
    return is_alive(pid) and marker in command_line(pid)


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.05)
    return not is_alive(pid)


def terminate(pid: int, marker: str, *, timeout: float = 30.0) -> bool:
    """SIGTERM, wait up to `timeout`, then SIGKILL. False if the pid was not ours or alive."""
    if not owns(pid, marker):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if wait_gone(pid, timeout):
        return True
    kill(pid, marker)
    return True


def terminate_all(markers: Mapping[int, str], *, timeout: float) -> None:
    """SIGTERM every pid of `markers` (pid -> marker) that is ours, wait up to `timeout` for all
    of them together, then SIGKILL the ones still alive."""
    ours = [pid for pid, marker in markers.items() if owns(pid, marker)]
    for pid in ours:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in ours:
        wait_gone(pid, max(0.0, deadline - time.monotonic()))
    for pid in ours:
        kill(pid, markers[pid])


def kill(pid: int, marker: str) -> bool:
    """SIGKILL, as a crash would. False if the pid was not ours or alive."""
    if not owns(pid, marker):
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    wait_gone(pid, 10.0)
    return True


def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


if __name__ == "__main__":
    sys.exit(_launch(sys.argv[1:]))
