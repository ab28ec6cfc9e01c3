"""Secrets named by cluster.yaml: the ZooKeeper password and the ssh key's passphrase.

Each is read at load time, from the file itself, an environment variable or a file, and kept as
a `SecretStr`, so that repr(), str() and model_dump() of the configuration do not show it. The
problems raised here name the key and the variable or file, never the secret. `read_limited`
is also how the loader reads cluster.yaml: a bounded read of a regular file that cannot hang.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from pydantic import SecretStr

from remediate.config.problems import Loc, fail, show

MAX_SECRET_BYTES = 64 << 10


def read_limited(path: Path, limit: int) -> bytes | str:
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


def secret_from_file(path: Path, at: Loc) -> SecretStr:
    """The file's text without one trailing line break; a problem at `at` names the file."""
    data = read_limited(path, MAX_SECRET_BYTES)
    if isinstance(data, str):
        fail(data, show(str(path)), at=at)
    if len(data) > MAX_SECRET_BYTES:
        fail(f"a secret file of at most {MAX_SECRET_BYTES} bytes", show(str(path)), at=at)
    try:
        secret = data.decode("utf-8")
    except UnicodeDecodeError:
        fail("a secret file holding UTF-8 text", show(str(path)), at=at)
    secret = secret.removesuffix("\n").removesuffix("\r")
    if secret == "":
        fail("a secret file that is not empty", show(str(path)), at=at)
    return SecretStr(secret)


def secret_from_env(name: str, environ: Mapping[str, str], at: Loc) -> SecretStr:
    """The variable's value; a problem at `at` names the variable."""
    value = environ.get(name)
    if value is None:
        fail(f"the environment variable {name} to be set", at=at)
    if value == "":
        fail(f"the environment variable {name} to be non-empty", at=at)
    return SecretStr(value)


def resolve_password(
    *,
    password: SecretStr | None,
    password_env: str | None,
    password_file: Path | None,
    environ: Mapping[str, str],
) -> SecretStr:
    """The password from the one source given (the caller has checked there is exactly one)."""
    if password is not None:
        if password.get_secret_value() == "":
            fail("a non-empty password", at=("password",))
        return password
    if password_env is not None:
        return secret_from_env(password_env, environ, ("password_env",))
    assert password_file is not None
    return secret_from_file(password_file, ("password_file",))
