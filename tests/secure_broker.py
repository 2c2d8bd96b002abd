"""A local broker with SASL/SCRAM and TLS listeners, and the client settings that reach it.

The session fixture ``secure_broker`` (``tests/conftest.py``) starts one :class:`SecureBroker`
the first time a test asks for it. Its client-setting helpers return keyword arguments for
aiokafka's producer, consumer and admin client (and so for ``testkit.kafka_io``), so a test reads
``produce(broker.sasl_bootstrap, events, **broker.sasl_client())``.
"""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path
from typing import Any

from aiokafka.helpers import create_ssl_context

from testkit.local_broker import load_launcher
from tests.security_certs import TlsFiles, make_tls_files

SCRAM_USER = "timesync"
# "=", "]" and a quote exercise the quoting of the storage tool's --add-scram argument.
SCRAM_PASSWORD = 'timesync=s3cret]"'
SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclasses.dataclass(frozen=True)
class SecureBroker:
    """A running broker (``deploy/local/kafka.py``'s ``Broker``) and the secrets it was made with."""

    broker: Any  # the launcher's Broker: the launcher is a script, not an importable package
    tls: TlsFiles
    username: str = SCRAM_USER
    password: str = SCRAM_PASSWORD

    @property
    def bootstrap(self) -> str:
        """PLAINTEXT, for setting things up without credentials."""
        return str(self.broker.bootstrap)

    @property
    def sasl_bootstrap(self) -> str:
        return str(self.broker.sasl_bootstrap)

    @property
    def ssl_bootstrap(self) -> str:
        """TLS; a client certificate is optional here (verified when sent)."""
        return str(self.broker.ssl_bootstrap)

    @property
    def mtls_bootstrap(self) -> str:
        """TLS with a required client certificate."""
        return str(self.broker.mtls_bootstrap)

    def sasl_client(self, *, password: str | None = None, mechanism: str = SCRAM_MECHANISM) -> dict[str, Any]:
        """aiokafka settings for the SASL_PLAINTEXT listener, as the broker's SCRAM user."""
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": self.username,
            "sasl_plain_password": self.password if password is None else password,
        }

    def ssl_client(self, *, cafile: Path | None = None, client_cert: bool = False) -> dict[str, Any]:
        """aiokafka settings for the TLS listeners; ``client_cert`` presents the client certificate."""
        context: ssl.SSLContext = create_ssl_context(
            cafile=str(cafile or self.tls.ca_cert),
            certfile=str(self.tls.client_cert) if client_cert else None,
            keyfile=str(self.tls.client_key) if client_cert else None,
            password=self.tls.client_key_password if client_cert else None,
        )
        return {"security_protocol": "SSL", "ssl_context": context}


def start_secure_broker(directory: Path) -> SecureBroker:
    """Make TLS material in ``directory`` and start a broker with every secure listener.

    The caller stops it with ``.broker.stop()``; the broker also dies with this process.
    """
    launcher = load_launcher()
    tls = make_tls_files(directory)
    broker = launcher.start_broker(
        launcher.BrokerSettings(
            scram_users={SCRAM_USER: SCRAM_PASSWORD},
            ssl=launcher.SslFiles(tls.ca_cert, tls.server_cert, tls.server_key),
        ),
        die_with_parent=True,
    )
    return SecureBroker(broker, tls)
