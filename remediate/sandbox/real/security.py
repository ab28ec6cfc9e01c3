"""Kafka's listener secured, for a sandbox of real brokers (`sandbox up --kafka-security`), made
as an operator makes it with Kafka's tools:

- `ssl`: every listener, the brokers' own included, is SSL with client certificates (mTLS,
  `ssl.client.auth=required`). A CA of the sandbox's signs each broker's certificate (its
  address as subject alternative name: hostname verification stays on) and one client
  certificate, which the tool and the sandbox's clients present.
- `sasl_ssl`: every listener is SASL_SSL with SCRAM-SHA-512 (TLS without client certificates,
  then a SCRAM login). The users' SCRAM credentials are written to ZooKeeper before any broker
  starts (`/config/users/<user>`, as `kafka-configs --zookeeper --alter --add-config
  SCRAM-SHA-512=[password=...]` writes them): `broker` for the brokers between themselves,
  `remediate` for the tool and the sandbox's clients.

Everything lives under the sandbox's `tls/`, the secrets in files only their owner reads
(the key store's password, each user's password); nothing secret is written to sandbox.json
or cluster.yaml, which names the files.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class KafkaSecurity(StrEnum):
    PLAINTEXT = "plaintext"
    SSL = "ssl"
    SASL_SSL = "sasl_ssl"

    @property
    def protocol(self) -> str:
        """Kafka's name of the listener's security protocol."""
        return self.value.upper()


SCRAM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096
BROKER_USER = "broker"
TOOL_USER = "remediate"
DIRECTORY = "tls"
VALID_DAYS = 365


@dataclass(frozen=True)
class SecurityFiles:
    """Where a sandbox's security material is (`directory`: the sandbox's `tls/`)."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def keystore(self, broker_id: int) -> Path:
        return self.directory / f"broker-{broker_id}.p12"

    @property
    def keystore_password(self) -> Path:
        return self.directory / "keystore.password"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.crt"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    def password(self, user: str) -> Path:
        return self.directory / f"{user}.password"


def _secret_file(path: Path, data: bytes) -> None:
    """Written for its owner's eyes only (mode 600 from the start)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def make_material(directory: Path, hosts: dict[int, str]) -> SecurityFiles:
    """The CA, each broker's key store (PKCS12: what every Kafka release reads), the client's
    certificate and key, and the passwords, under `directory`; made once."""
    files = SecurityFiles(directory)
    if files.ca.exists():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("remediate sandbox CA"))
        .issuer_name(_name("remediate sandbox CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        common_name: str, host: str | None
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if host is not None:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]),
                critical=False,
            )
        return key, builder.sign(ca_key, hashes.SHA256())

    files.ca.write_bytes(_pem(ca))
    store_password = secrets.token_urlsafe(18)
    _secret_file(files.keystore_password, store_password.encode())
    # Kafka reads PKCS12 key stores in every release; the legacy 3DES encryption is the one
    # every Java reads.
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(50_000)
        .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
        .hmac_hash(hashes.SHA1())  # noqa: S303 (the key store's MAC, as every Java reads it)
        .build(store_password.encode())
    )
    for broker_id, host in sorted(hosts.items()):
        key, certificate = leaf(f"broker-{broker_id}", host)
        _secret_file(
            files.keystore(broker_id),
            pkcs12.serialize_key_and_certificates(
                f"broker-{broker_id}".encode(), key, certificate, [ca], encryption
            ),
        )
    key, certificate = leaf(TOOL_USER, None)
    files.client_cert.write_bytes(_pem(certificate))
    _secret_file(
        files.client_key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    for user in (BROKER_USER, TOOL_USER):
        _secret_file(files.password(user), secrets.token_urlsafe(18).encode())
    return files


def scram_credential(password: str, *, salt: bytes, iterations: int = SCRAM_ITERATIONS) -> str:
    """A SCRAM-SHA-512 credential as Kafka stores it in ZooKeeper (ScramCredentialUtils:
    salt, stored key, server key, iterations; RFC 5802)."""
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    stored_key = hashlib.sha512(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha512).digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return (
        f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},"
        f"iterations={iterations}"
    )


def users_znodes(files: SecurityFiles) -> dict[str, bytes]:
    """/config/users/<user> for the brokers and the tool, as Kafka's tools write them."""
    found = {}
    for user in (BROKER_USER, TOOL_USER):
        password = files.password(user).read_text()
        config = {SCRAM: scram_credential(password, salt=secrets.token_bytes(16))}
        found[f"/config/users/{user}"] = json.dumps({"version": 1, "config": config}).encode()
    return found


def broker_properties(
    security: KafkaSecurity, files: SecurityFiles, *, broker_id: int, host: str, port: int
) -> dict[str, str]:
    """The broker's listener and its security: every listener, the brokers' own included."""
    if security is KafkaSecurity.PLAINTEXT:
        return {}
    name = security.protocol
    store_password = files.keystore_password.read_text()
    values = {
        "listeners": f"{name}://{host}:{port}",
        "security.inter.broker.protocol": name,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(files.keystore(broker_id)),
        "ssl.keystore.password": store_password,
        "ssl.key.password": store_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca),
        # Kafka's default: the peer's certificate must name the address it was reached at.
        "ssl.endpoint.identification.algorithm": "https",
    }
    if security is KafkaSecurity.SSL:
        return {**values, "ssl.client.auth": "required"}
    password = files.password(BROKER_USER).read_text()
    return {
        **values,
        "sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        f"listener.name.{name.lower()}.{SCRAM.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required"
            f' username="{BROKER_USER}" password="{password}";'
        ),
    }


def client_settings(security: KafkaSecurity, files: SecurityFiles) -> dict[str, str]:
    """librdkafka's settings for the sandbox's clients (confluent-kafka), as the tool."""
    if security is KafkaSecurity.PLAINTEXT:
        return {}
    values = {"security.protocol": security.protocol, "ssl.ca.location": str(files.ca)}
    if security is KafkaSecurity.SSL:
        return {
            **values,
            "ssl.certificate.location": str(files.client_cert),
            "ssl.key.location": str(files.client_key),
        }
    return {
        **values,
        "sasl.mechanism": SCRAM,
        "sasl.username": TOOL_USER,
        "sasl.password": files.password(TOOL_USER).read_text(),
    }


def cluster_yaml_kafka(security: KafkaSecurity, files: SecurityFiles) -> dict[str, object]:
    """cluster.yaml's kafka section for the tool (the files named, no secret in it)."""
    if security is KafkaSecurity.PLAINTEXT:
        return {}
    name = security.protocol
    if security is KafkaSecurity.SSL:
        tls = {
            "ca_file": str(files.ca),
            "cert_file": str(files.client_cert),
            "key_file": str(files.client_key),
        }
        return {"listener": name, "security_protocol": name, "tls": tls}
    return {
        "listener": name,
        "security_protocol": name,
        "tls": {"ca_file": str(files.ca)},
        "sasl": {
            "mechanism": SCRAM,
            "username": TOOL_USER,
            "password_file": str(files.password(TOOL_USER)),
        },
    }
