"""ZooKeeper as production runs it for Kafka, for a sandbox of real brokers (`sandbox up
--zookeeper-acl`): ZooKeeper takes SASL DIGEST-MD5 logins, every broker logs in as `kafka`
(a JAAS `Client` section, as Kafka's docs set it up) with `zookeeper.set.acl=true`, so that
what Kafka creates is all Kafka's and, but for its sensitive paths (`/config/brokers`,
`/config/users`), readable by anyone. The tool logs in as `remediate`, an identity of its own
that starts with no right beyond what anyone has; the sandbox's own tools (the legacy admin
that reproduces the incident, its ZooKeeper reads) log in as `kafka`, as Kafka's own tools do
with Kafka's JAAS file.

Everything lives under the sandbox's `zk-auth/`; the passwords are in files only their owner
reads, named (never held) by sandbox.json and cluster.yaml.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

DIRECTORY = "zk-auth"
KAFKA_USER = "kafka"
TOOL_USER = "remediate"
USERS = (KAFKA_USER, TOOL_USER)
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


@dataclass(frozen=True)
class ZkAuthFiles:
    directory: Path

    def password(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    @property
    def server_jaas(self) -> Path:
        return self.directory / "zookeeper-jaas.conf"

    @property
    def kafka_jaas(self) -> Path:
        return self.directory / "kafka-jaas.conf"


def _private(path: Path, text: str) -> None:
    path.touch(mode=0o600, exist_ok=True)
    os.chmod(path, 0o600)
    path.write_text(text)


def make_material(files: ZkAuthFiles) -> None:
    """A password per user and the two JAAS files; kept where they exist already."""
    files.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for user in USERS:
        if not files.password(user).exists():
            _private(files.password(user), secrets.token_urlsafe(24))
    users = "\n".join(f'  user_{user}="{files.password(user).read_text()}"' for user in USERS)
    _private(files.server_jaas, f"Server {{\n  {DIGEST_MODULE} required\n{users};\n}};\n")
    _private(
        files.kafka_jaas,
        f'Client {{\n  {DIGEST_MODULE} required\n  username="{KAFKA_USER}"\n'
        f'  password="{files.password(KAFKA_USER).read_text()}";\n}};\n',
    )


def server_settings() -> dict[str, str]:
    """zoo.cfg's lines: SASL logins taken (not enforced: Kafka's world-readable znodes stay
    readable by a client that does not log in, as on a production ensemble)."""
    return {"authProvider.sasl": SASL_PROVIDER}


def server_jvm_flags(files: ZkAuthFiles) -> tuple[str, ...]:
    return (f"-Djava.security.auth.login.config={files.server_jaas}",)


def broker_jvm_flags(files: ZkAuthFiles) -> tuple[str, ...]:
    return (f"-Djava.security.auth.login.config={files.kafka_jaas}",)


def broker_properties() -> dict[str, str]:
    return {"zookeeper.set.acl": "true"}


def sasl_options(files: ZkAuthFiles, user: str = KAFKA_USER) -> dict[str, str]:
    """kazoo's SASL login as `user`."""
    return {
        "mechanism": "DIGEST-MD5",
        "username": user,
        "password": files.password(user).read_text(),
    }
