"""``start_client``: a client that cannot bootstrap fails with the reason aiokafka only logged."""

from __future__ import annotations

import logging
import socket

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed

from sidecar.kafka.clients import start_client

AIOKAFKA = logging.getLogger("aiokafka")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_refused_connection_names_the_address_and_the_reason() -> None:
    port = closed_port()
    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=2000)
    handlers = list(AIOKAFKA.handlers)
    try:
        with pytest.raises(KafkaConnectionError) as failed:
            await start_client(admin.start())
    finally:
        await admin.close()

    message = str(failed.value)
    assert message.startswith(f'KafkaConnectionError: Unable connect to "127.0.0.1:{port}": ')
    assert "refused" in message.lower() or "connect call failed" in message.lower()
    assert "\n" not in message
    assert AIOKAFKA.handlers == handlers, "the capturing handler is gone afterwards"


async def test_the_reason_comes_with_what_to_check() -> None:
    async def refused() -> None:
        reason = SaslAuthenticationFailed("invalid credentials with SASL mechanism SCRAM-SHA-512")
        AIOKAFKA.error('Unable connect to "%s:%s": %s', "127.0.0.1", 9093, reason)
        raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 9093, 0)]")

    with pytest.raises(KafkaConnectionError) as failed:
        await start_client(refused())

    assert str(failed.value) == (
        'KafkaConnectionError: Unable connect to "127.0.0.1:9093": [Error 58] SaslAuthenticationFailed: '
        "invalid credentials with "
        "SASL mechanism SCRAM-SHA-512 (check sasl.username, sasl.password and sasl.mechanism)"
    )


async def test_without_a_logged_reason_the_error_is_unchanged() -> None:
    original = KafkaConnectionError("Unable to bootstrap from []")

    async def refused() -> None:
        AIOKAFKA.error("something unrelated, no exception attached")
        raise original

    with pytest.raises(KafkaConnectionError) as failed:
        await start_client(refused())
    assert failed.value is original
