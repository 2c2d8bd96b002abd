"""Throwaway TLS material for tests: a CA, a server certificate for 127.0.0.1, a client certificate.

Made with the ``cryptography`` package rather than the ``openssl``/``keytool`` binaries: no
subprocesses, no dependence on what a CI image happens to ship, and the same API on every OS.
Keys are EC P-256 (generated in microseconds, unlike RSA).

Everything is written as PEM, in the shapes both kinds of Kafka client accept:

- Python (aiokafka, ``ssl.SSLContext``) takes a CA file, a certificate chain file and a key file,
  the key optionally encrypted with a password.
- Java (the broker, and kafka-clients inside Spark) takes ``ssl.keystore.type=PEM`` with one file
  that holds the private key *and* the certificate chain, the key in PKCS#8 form ("BEGIN PRIVATE
  KEY"; Kafka does not read PKCS#1/SEC1 keys). ``server-keystore.pem`` is that combined file.

The client key is encrypted (PKCS#8, PBES2 with AES-256, what ``cryptography`` and ``openssl
pkcs8 -topk8`` write by default) so that tests exercise the password path (``ssl.password`` in
the sidecar). Java 17's Kafka clients cannot decrypt a PBES2 PEM key ("PBES2 SecretKeyFactory not
available"), so for Java the same key and chain also go into ``client.p12`` (PKCS#12, same
password), which Java reads. The server key is not encrypted, so the broker needs no password.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)
CLIENT_KEY_PASSWORD = "client-key-secret"


@dataclasses.dataclass(frozen=True, slots=True)
class TlsFiles:
    """Paths of the PEM files one :func:`make_tls_files` call wrote (all inside ``directory``)."""

    directory: Path
    ca_cert: Path  # the CA certificate: what clients and the broker trust
    server_cert: Path  # server leaf certificate followed by the CA certificate
    server_key: Path  # PKCS#8, unencrypted
    server_keystore: Path  # server key + chain in one file (Java's PEM keystore)
    client_cert: Path  # client leaf certificate followed by the CA certificate
    client_key: Path  # PKCS#8, encrypted with ``client_key_password``
    client_keystore_p12: Path  # client key + chain as PKCS#12, for Java clients; same password
    client_key_password: str


class CertificateAuthority:
    """A self-signed CA that issues leaf certificates; lives only as long as the test needs it."""

    def __init__(self, name: str = "timesync test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    def issue(
        self,
        common_name: str,
        *,
        server: bool,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        """A new key and a certificate for it, valid for TLS server or client authentication."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if names:
            # Hostname checks (Python's check_hostname, Java's endpoint identification) read the
            # subject alternative names only, never the common name.
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())

    def write_cert(self, path: Path) -> Path:
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password is not None
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _chain_pem(leaf: x509.Certificate, ca: CertificateAuthority) -> bytes:
    return leaf.public_bytes(serialization.Encoding.PEM) + ca.cert.public_bytes(serialization.Encoding.PEM)


def make_tls_files(
    directory: Path,
    *,
    ca: CertificateAuthority | None = None,
    client_key_password: str = CLIENT_KEY_PASSWORD,
) -> TlsFiles:
    """Write a CA, a server certificate for ``127.0.0.1``/``localhost`` and a client certificate.

    ``directory`` is created if missing. Pass ``ca`` to issue from an existing authority (a second
    call with a fresh CA gives material the first one's broker does not trust).
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = ca or CertificateAuthority()
    server_key, server_cert = ca.issue(
        "localhost", server=True, dns_names=("localhost",), ip_addresses=("127.0.0.1", "::1")
    )
    client_key, client_cert = ca.issue("timesync-client", server=False)

    files = TlsFiles(
        directory=directory,
        ca_cert=ca.write_cert(directory / "ca.pem"),
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        server_keystore=directory / "server-keystore.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        client_keystore_p12=directory / "client.p12",
        client_key_password=client_key_password,
    )
    server_chain, client_chain = _chain_pem(server_cert, ca), _chain_pem(client_cert, ca)
    server_key_pem, client_key_pem = _key_pem(server_key, None), _key_pem(client_key, client_key_password)
    files.server_cert.write_bytes(server_chain)
    files.server_key.write_bytes(server_key_pem)
    files.server_keystore.write_bytes(server_key_pem + server_chain)
    files.client_cert.write_bytes(client_chain)
    files.client_key.write_bytes(client_key_pem)
    files.client_keystore_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"timesync-client",
            client_key,
            client_cert,
            [ca.cert],
            serialization.BestAvailableEncryption(client_key_password.encode()),
        )
    )
    for secret in (files.server_key, files.server_keystore, files.client_key, files.client_keystore_p12):
        secret.chmod(0o600)
    return files
