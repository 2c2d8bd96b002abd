"""The broker's secure listeners: SCRAM users on ``SASL_PLAINTEXT``, PEM stores for ``SSL`` and
``MTLS``.

SCRAM users are written into the KRaft metadata log when storage is first formatted, so a kept
data dir keeps the users it was formatted with (recorded beside it, ``SCRAM_FILE_NAME``); asking it
for another is an error, not a silent no-op.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

from .install import LauncherError

SCRAM_FILE_NAME = "timesync-scram-users.json"  # inside a data dir: the users formatted into it
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclasses.dataclass(frozen=True)
class SslFiles:
    """PEM files for the broker's ``SSL`` and ``MTLS`` listeners.

    ``keyfile`` must be PKCS#8 ("BEGIN PRIVATE KEY", or "BEGIN ENCRYPTED PRIVATE KEY" with
    ``key_password``): Kafka reads no other key format. Java 17 cannot decrypt PBES2-encrypted
    keys (the default of ``openssl pkcs8 -topk8``); leave the key unencrypted, or encrypt it with
    ``openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES``. ``certfile`` is the chain, leaf first; its subject
    alternative names must include ``IP:127.0.0.1`` for clients that check the host name.
    ``cafile`` holds the certificates trusted to sign client certificates.
    """

    cafile: str | Path
    certfile: str | Path
    keyfile: str | Path
    key_password: str | None = None


def scram_format_args(users: Mapping[str, str]) -> list[str]:
    """The storage tool's ``--add-scram`` arguments: each user, for each SCRAM mechanism.

    The tool splits the bracketed list on commas before it looks at quotes, so a name or password
    cannot contain one; values are always quoted (the tool strips one pair), so '=' and ']' are
    safe.
    """
    args: list[str] = []
    for name, password in users.items():
        if not name or "," in name or "," in password:
            raise LauncherError(
                f"SCRAM user {name!r}: the name must be non-empty, and neither the name nor the "
                "password may contain ',' (Kafka's storage tool splits on it)"
            )
        for mechanism in SCRAM_MECHANISMS:
            args += ["--add-scram", f'{mechanism}=[name="{name}",password="{password}"]']
    return args


def sasl_properties() -> dict[str, str]:
    """SCRAM on the SASL_PLAINTEXT listener; the credentials live in the KRaft metadata log."""
    props = {"sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS)}
    for mechanism in SCRAM_MECHANISMS:
        props[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = SCRAM_LOGIN
    return props


def ssl_properties(files: SslFiles, data_dir: Path) -> dict[str, str]:
    """PEM key and trust stores for the SSL and MTLS listeners.

    Kafka's file-based PEM keystore is one file holding the key and then the chain; it is
    assembled from ``keyfile`` and ``certfile`` into the data dir at every start.
    """
    paths = {}
    for what in ("cafile", "certfile", "keyfile"):
        path = Path(getattr(files, what)).resolve()
        if not path.is_file():
            raise LauncherError(f"SSL {what} {path} does not exist; give a PEM file")
        paths[what] = path
    key = paths["keyfile"].read_text()
    for legacy in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY"):
        if f"BEGIN {legacy}" in key:
            raise LauncherError(
                f"SSL keyfile {paths['keyfile']} is a '{legacy}' (PKCS#1/SEC1) key, which Kafka "
                "cannot read; convert it to PKCS#8 with 'openssl pkcs8 -topk8 -nocrypt'"
            )
    if "PRIVATE KEY" not in key:
        raise LauncherError(f"SSL keyfile {paths['keyfile']} holds no PEM private key")
    keystore = data_dir / "ssl-keystore.pem"
    keystore.touch(mode=0o600)
    keystore.write_text(key.rstrip("\n") + "\n" + paths["certfile"].read_text())
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(paths["cafile"]),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
    }
    if files.key_password is not None:
        props["ssl.key.password"] = files.key_password
    return props


def check_scram_users_formatted(data_dir: Path, users: Mapping[str, str]) -> None:
    """SCRAM users are added only when storage is formatted: refuse users a kept dir lacks."""
    try:
        formatted = set(json.loads((data_dir / SCRAM_FILE_NAME).read_text()))
    except (OSError, ValueError):
        formatted = set()
    missing = sorted(set(users) - formatted)
    if missing:
        raise LauncherError(
            f"data dir {data_dir} was formatted without SCRAM user(s) {', '.join(missing)} "
            f"(it has: {', '.join(sorted(formatted)) or 'none'}); users are added only when "
            "storage is first formatted: use a new --data-dir"
        )


def record_scram_users(data_dir: Path, users: Mapping[str, str]) -> None:
    """Note the users a freshly formatted data dir holds (see :func:`check_scram_users_formatted`)."""
    (data_dir / SCRAM_FILE_NAME).write_text(json.dumps(sorted(users)))
