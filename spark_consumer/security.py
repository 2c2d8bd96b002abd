"""Kafka security for the Spark job: the sidecar's ``security.protocol``/``sasl.*``/``ssl.*`` settings,
as options of Spark's Kafka source and sink (the Java client's names, prefixed ``kafka.``).

The Java client differs from the sidecar's Python one in three ways that matter here:

- SASL credentials go in a JAAS line, ``...ScramLoginModule required username="U" password="P";``,
  with ``\\`` and ``"`` escaped inside the quotes.
- A PEM CA file is a trust store of type ``PEM``; skipping the host-name check is an *empty*
  ``ssl.endpoint.identification.algorithm``.
- A client certificate comes from a key store. Java 17 cannot decrypt a PEM key encrypted with
  PBES2 (what ``openssl pkcs8 -topk8`` and most tools write), so an encrypted key should come as
  PKCS#12 (``.p12``/``.pfx``, same password); ``.jks`` and PEM key stores work too.

Passwords are read from the environment (``TIMESYNC_SPARK_SASL_PASSWORD``,
``TIMESYNC_SPARK_SSL_PASSWORD``), never from the command line, where ``ps`` would show them; they
never appear in a usage error or in this module's ``repr``.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spark_consumer.options import UsageError

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PROTOCOLS: tuple[Protocol, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: tuple[Mechanism, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_PASSWORD_ENV = "TIMESYNC_SPARK_SASL_PASSWORD"
SSL_PASSWORD_ENV = "TIMESYNC_SPARK_SSL_PASSWORD"

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_KEYSTORE_TYPES = {".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS", ".pem": "PEM"}


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """How the job reaches a secured cluster; the default is PLAINTEXT (no options at all)."""

    protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_check_hostname: bool = True
    ssl_keystore: str | None = None
    ssl_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        sasl = self.protocol.startswith("SASL")
        tls = self.protocol in ("SSL", "SASL_SSL")
        if sasl and not self.sasl_username:
            raise UsageError(f"--sasl-username: required with --security-protocol {self.protocol}")
        if sasl and not self.sasl_password:
            raise UsageError(
                f"{SASL_PASSWORD_ENV}: set it to the SASL password (required with --security-protocol "
                f"{self.protocol})"
            )
        if not sasl and self.sasl_username:
            raise UsageError("--sasl-username: needs --security-protocol SASL_PLAINTEXT or SASL_SSL")
        if not tls and (self.ssl_cafile or self.ssl_keystore or not self.ssl_check_hostname):
            raise UsageError("--ssl-*: needs --security-protocol SSL or SASL_SSL")
        if self.ssl_keystore is not None:
            kind = self.keystore_type
            if kind is None:
                raise UsageError(
                    f"--ssl-keystore: {self.ssl_keystore!r} should end in .p12, .pfx, .jks or .pem "
                    "(PKCS#12 for an encrypted key: Java cannot read PBES2-encrypted PEM keys)"
                )
            if kind != "PEM" and not self.ssl_password:
                raise UsageError(f"{SSL_PASSWORD_ENV}: set it to the password of the {kind} key store")
        for option, path in (("--ssl-cafile", self.ssl_cafile), ("--ssl-keystore", self.ssl_keystore)):
            if path is not None and not Path(path).is_file():
                raise UsageError(f"{option}: {path!r} is not a readable file")

    @classmethod
    def from_args(
        cls,
        protocol: str | None,
        sasl_mechanism: str | None,
        sasl_username: str | None,
        ssl_cafile: str | None,
        ssl_check_hostname: bool,
        ssl_keystore: str | None,
        environ: Mapping[str, str] | None = None,
    ) -> KafkaSecurity:
        """From the CLI options; the passwords from ``environ`` (``os.environ`` by default)."""
        env = os.environ if environ is None else environ
        return cls(
            protocol=(protocol or "PLAINTEXT"),  # type: ignore[arg-type]  # argparse choices
            sasl_mechanism=(sasl_mechanism or "PLAIN"),  # type: ignore[arg-type]
            sasl_username=sasl_username,
            sasl_password=env.get(SASL_PASSWORD_ENV) or None,
            ssl_cafile=ssl_cafile,
            ssl_check_hostname=ssl_check_hostname,
            ssl_keystore=ssl_keystore,
            ssl_password=env.get(SSL_PASSWORD_ENV) or None,
        )

    @property
    def keystore_type(self) -> str | None:
        if self.ssl_keystore is None:
            return None
        return _KEYSTORE_TYPES.get(Path(self.ssl_keystore).suffix.lower())

    def kafka_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source and sink (``kafka.`` + the Java client's config names)."""
        if self.protocol == "PLAINTEXT":
            return {}
        options: dict[str, str] = {"kafka.security.protocol": self.protocol}
        if self.protocol.startswith("SASL"):
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            options["kafka.sasl.jaas.config"] = (
                f"{_LOGIN_MODULES[self.sasl_mechanism]} required "
                f'username="{_jaas_quote(self.sasl_username or "")}" '
                f'password="{_jaas_quote(self.sasl_password or "")}";'
            )
        if self.protocol in ("SSL", "SASL_SSL"):
            if self.ssl_cafile:
                options["kafka.ssl.truststore.type"] = "PEM"
                options["kafka.ssl.truststore.location"] = self.ssl_cafile
            if not self.ssl_check_hostname:
                options["kafka.ssl.endpoint.identification.algorithm"] = ""
            if self.ssl_keystore:
                kind = self.keystore_type or "PKCS12"
                options["kafka.ssl.keystore.type"] = kind
                options["kafka.ssl.keystore.location"] = self.ssl_keystore
                if self.ssl_password:
                    key = "kafka.ssl.key.password" if kind == "PEM" else "kafka.ssl.keystore.password"
                    options[key] = self.ssl_password
        return options

    def aiokafka_options(self) -> dict[str, Any]:
        """The same settings for aiokafka (the job's topic check); a key store is not readable there."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.protocol.startswith("SASL"):
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": self.sasl_password,
            }
        if self.protocol in ("SSL", "SASL_SSL"):
            context = ssl.create_default_context(cafile=self.ssl_cafile)
            context.check_hostname = self.ssl_check_hostname
            options["ssl_context"] = context
        return options


def _jaas_quote(text: str) -> str:
    """Inside a JAAS quoted string (Java's StreamTokenizer) a backslash escapes the next character,
    ``\\n`` is a newline, and a bare line break would end the string."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
