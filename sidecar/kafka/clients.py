"""Connection settings shared by every aiokafka client the sidecar creates, and starting them.

aiokafka's ``start()`` raises only ``KafkaConnectionError("Unable to bootstrap from [...]")``
when no bootstrap server lets it in; the reason (``SaslAuthenticationFailed``,
``CERTIFICATE_VERIFY_FAILED``, connection refused) goes to its ERROR/WARNING log.
:func:`start_client` catches those log records while a client starts and puts the reason, with
what to check, into the error the user sees.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context

from sidecar.config import SidecarConfig

#: Substrings of aiokafka's reasons, and which settings to check for them.
_HINTS = (
    ("SaslAuthenticationFailed", "check sasl.username, sasl.password and sasl.mechanism"),
    ("UnsupportedSaslMechanism", "check sasl.mechanism against the broker's listener"),
    ("CERTIFICATE_VERIFY_FAILED", "check ssl.cafile (and ssl.check.hostname)"),
    ("WRONG_VERSION_NUMBER", "check security.protocol: the listener does not speak TLS"),
)


def client_options(config: SidecarConfig) -> dict[str, Any]:
    """bootstrap, security protocol, TLS context and SASL credentials as aiokafka keyword arguments."""
    options: dict[str, Any] = {
        "bootstrap_servers": config.bootstrap_servers,
        "security_protocol": config.security_protocol,
        "client_id": f"timesync-{config.output_topic}",
    }
    if config.security_protocol in {"SSL", "SASL_SSL"}:
        context = create_ssl_context(
            cafile=config.ssl_cafile or None,
            certfile=config.ssl_certfile or None,
            keyfile=config.ssl_keyfile or None,
            password=config.ssl_password.get_secret_value() or None,
        )
        context.check_hostname = config.ssl_check_hostname
        options["ssl_context"] = context
    if config.security_protocol.startswith("SASL"):
        options["sasl_mechanism"] = config.sasl_mechanism
        options["sasl_plain_username"] = config.sasl_username
        options["sasl_plain_password"] = config.sasl_password.get_secret_value()
    return options


async def start_client(starting: Awaitable[None]) -> None:
    """Await a client's ``start()``; if it cannot bootstrap, raise ``KafkaConnectionError`` saying why.

    The message is one line: each reason aiokafka logged while starting (``Unable connect to
    "127.0.0.1:9093": [Error 58] SaslAuthenticationFailed: ...``) and what to check. Without a
    logged reason the original error is raised unchanged.
    """
    reasons = _Reasons()
    logger = logging.getLogger("aiokafka")
    logger.addHandler(reasons)
    try:
        await starting
    except KafkaConnectionError as e:
        if not reasons.seen:
            raise
        text = "; ".join(dict.fromkeys(reasons.seen))
        hints = [hint for marker, hint in _HINTS if marker in text]
        raise KafkaConnectionError(text + (f" ({'; '.join(hints)})" if hints else "")) from e
    finally:
        logger.removeHandler(reasons)


class _Reasons(logging.Handler):
    """Collects aiokafka's log lines that carry an exception (why a connection failed)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if any(isinstance(a, BaseException) for a in args):
            self.seen.append(" ".join(record.getMessage().split()))
