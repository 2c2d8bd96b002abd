"""Connection settings shared by every aiokafka client the sidecar creates."""

from __future__ import annotations

from typing import Any

from aiokafka.helpers import create_ssl_context

from sidecar.config import SidecarConfig


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
