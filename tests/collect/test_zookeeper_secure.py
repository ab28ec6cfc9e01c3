"""ZooKeeper with SASL DIGEST-MD5 and with mutual TLS, reached through cluster.yaml exactly as
every command reaches it: the settings the config yields connect and read; wrong credentials,
a missing client certificate and a foreign CA are refused with a ZooKeeperError."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kazoo.client import KazooClient

from remediate.collect.cluster_state import read_cluster_state
from remediate.collect.collector import zk_settings
from remediate.config import load_cluster_config
from remediate.errors import ZooKeeperError
from remediate.formats.topic_id import TopicId
from remediate.formats.znodes import TopicAssignment, encode_topic, topic_path
from remediate.sandbox.plumbing import process, zkserver
from remediate.zookeeper import connect

pytestmark = pytest.mark.slow

USER = "remediate"
PASSWORD = "sasl-secret-sentinel"
TOPIC_ID = TopicId(bytes(range(1, 17)))


def cluster_yaml(directory: Path, zookeeper: dict[str, Any]) -> Path:
    path = directory / "cluster.yaml"
    document = {
        "cluster": "secured",
        "zookeeper": {"session_timeout_s": 4, **zookeeper},
        "brokers": [{"id": 1, "host": "127.0.0.1", "transport": "local", "log_dirs": ["/d"]}],
        "service": {"stop": "true", "start": "true"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def read_topics(path: Path, environ: dict[str, str] | None = None) -> list[str]:
    """Load cluster.yaml, connect with what it says, and read the cluster."""
    settings = zk_settings(load_cluster_config(path, environ=environ or {}))
    zk = connect(settings, timeout=4)
    try:
        return sorted(read_cluster_state(zk).topics)
    finally:
        zk.close()


def create_topic(zk_connect: str, **client: Any) -> None:
    admin = KazooClient(zk_connect, **client)
    admin.start(timeout=15)
    try:
        admin.create(
            topic_path("orders"),
            encode_topic(TopicAssignment({0: (1,)}, topic_id=TOPIC_ID)),
            makepath=True,
        )
    finally:
        admin.stop()
        admin.close()


# SASL DIGEST-MD5, enforced: ZooKeeper 3.8 closes any session that did not log in with SASL.


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("zk-sasl")
    jaas = sasl_jaas(directory, USER, PASSWORD)
    port = zkserver.free_port()
    zkserver.write_config(
        directory,
        "127.0.0.1",
        port,
        extra={
            "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "enforce.auth.enabled": "true",
            "enforce.auth.schemes": "sasl",
        },
    )
    pid = zkserver.start(directory, "127.0.0.1", port, jvm_flags=(jaas,))
    connect_string = f"127.0.0.1:{port}"
    create_topic(
        connect_string,
        sasl_options={"mechanism": "DIGEST-MD5", "username": USER, "password": PASSWORD},
    )
    yield connect_string
    process.terminate(pid, "QuorumPeerMain", timeout=10)


def test_sasl_digest_md5_from_cluster_yaml_reads_the_cluster(
    sasl_zookeeper: str, tmp_path: Path
) -> None:
    path = cluster_yaml(
        tmp_path,
        {
            "connect": sasl_zookeeper,
            "auth": {"scheme": "sasl", "username": USER, "password_env": "ZK_PASSWORD"},
        },
    )
    assert read_topics(path, {"ZK_PASSWORD": PASSWORD}) == ["orders"]


# kazoo's connection thread dies of the server closing an unauthenticated session (it has no
# handler for SessionClosedRequireSaslError); what matters is that connect() reports it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        pytest.param(
            {"scheme": "sasl", "username": USER, "password": "wrong"},
            "check the SASL DIGEST-MD5 credentials of user 'remediate'",
            id="wrong-password",
        ),
        pytest.param(None, "set zookeeper.auth in cluster.yaml", id="no-auth"),
    ],
)
def test_a_refused_sasl_login_is_a_zookeeper_error_naming_what_to_check(
    sasl_zookeeper: str, tmp_path: Path, auth: dict[str, str] | None, expected: str
) -> None:
    zookeeper: dict[str, Any] = {"connect": sasl_zookeeper}
    if auth is not None:
        zookeeper["auth"] = auth
    with pytest.raises(ZooKeeperError, match="refused the session") as refused:
        read_topics(cluster_yaml(tmp_path, zookeeper))
    assert expected in str(refused.value)
    assert "wrong" not in str(refused.value)


# TLS with client authentication required, certificates made here.


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def make_ca(directory: Path, name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def issue(
    directory: Path, name: str, ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate]
) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by `ca`: (cert.pem, key.pem)."""
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, key_path)
    return cert_path, key_path


def tls_server_settings(directory: Path) -> tuple[dict[str, str], int]:
    """Certificates in `directory` (ca.pem; server's; client.pem and client.key) and the zoo.cfg
    settings of a TLS client port on 127.0.0.1 that requires a client certificate; returns
    (settings, that port). ZooKeeper needs `zkserver.NETTY_FOR_TLS` on its classpath."""
    ca = make_ca(directory, "ca")
    server_cert, server_key = issue(directory, "server", ca)
    keystore = directory / "server-keystore.pem"
    keystore.write_bytes(server_key.read_bytes() + server_cert.read_bytes())
    issue(directory, "client", ca)
    secure_port = zkserver.free_port()
    settings = {
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "secureClientPort": str(secure_port),
        "secureClientPortAddress": "127.0.0.1",
        "ssl.keyStore.location": str(keystore),
        "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": str(directory / "ca.pem"),
        "ssl.trustStore.type": "PEM",
        "ssl.clientAuth": "need",
    }
    return settings, secure_port


def sasl_jaas(directory: Path, user: str, password: str) -> str:
    """The JVM flag of a JAAS file in `directory` that lets ZooKeeper accept `user`'s
    DIGEST-MD5 login."""
    jaas = directory / "jaas.conf"
    jaas.write_text(
        "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  user_{user}="{password}";\n}};\n'
    )
    return f"-Djava.security.auth.login.config={jaas}"


@pytest.fixture(scope="module")
def tls_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(connect string of the TLS port, directory holding ca.pem, client.pem/.key, rogue-*)."""
    directory = tmp_path_factory.mktemp("zk-tls")
    tls, secure_port = tls_server_settings(directory)
    issue(directory, "rogue-client", make_ca(directory, "rogue-ca"))
    port = zkserver.free_port()
    zkserver.write_config(directory, "127.0.0.1", port, extra=tls)
    pid = zkserver.start(directory, "127.0.0.1", port, classpath=zkserver.NETTY_FOR_TLS)
    create_topic(f"127.0.0.1:{port}")
    yield f"127.0.0.1:{secure_port}", directory
    process.terminate(pid, "QuorumPeerMain", timeout=10)


def test_mutual_tls_from_cluster_yaml_reads_the_cluster(
    tls_zookeeper: tuple[str, Path], tmp_path: Path
) -> None:
    secure, certs = tls_zookeeper
    tls = {
        "ca_file": str(certs / "ca.pem"),
        "cert_file": str(certs / "client.pem"),
        "key_file": str(certs / "client.key"),
    }
    assert read_topics(cluster_yaml(tmp_path, {"connect": secure, "tls": tls})) == ["orders"]


@pytest.mark.parametrize(
    "tls",
    [
        pytest.param(None, id="plaintext-to-the-tls-port"),
        pytest.param({"ca_file": "ca.pem"}, id="no-client-certificate"),
        pytest.param(
            {"ca_file": "rogue-ca.pem", "cert_file": "client.pem", "key_file": "client.key"},
            id="server-not-signed-by-our-ca",
        ),
        pytest.param(
            {"ca_file": "ca.pem", "cert_file": "rogue-client.pem", "key_file": "rogue-client.key"},
            id="client-certificate-from-another-ca",
        ),
    ],
)
def test_tls_without_the_right_certificates_is_refused(
    tls_zookeeper: tuple[str, Path], tmp_path: Path, tls: dict[str, str] | None
) -> None:
    secure, certs = tls_zookeeper
    zookeeper: dict[str, Any] = {"connect": secure}
    if tls is not None:
        zookeeper["tls"] = {key: str(certs / name) for key, name in tls.items()}
    with pytest.raises(ZooKeeperError, match=secure):
        read_topics(cluster_yaml(tmp_path, zookeeper))
