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


async def test_output_batches_expire_only_past_delivery_timeout_ms_not_aiokafkas_request_timeout() -> None:
    """aiokafka fails a queued batch whose partition has no leader once it is older than
    request_timeout_ms (40 s) — a broker away for 50 s ended the sidecar. The clients give the
    accumulator the user's delivery.timeout.ms instead (a private attribute of the pinned aiokafka:
    this test fails if an upgrade renames it)."""
    from aiokafka.producer.message_accumulator import BatchBuilder, MessageAccumulator
    from aiokafka.structs import TopicPartition

    from sidecar.config import load_config
    from sidecar.kafka.clients import KafkaClients

    keys = ["bootstrap.servers=127.0.0.1:1", "input.topics=a", "output.topic=o"]
    default = KafkaClients(load_config(None, keys, environ={})).producer(None)
    assert isinstance(default._message_accumulator, MessageAccumulator)
    assert default._message_accumulator._batch_ttl == 120.0
    assert default._request_timeout_ms == 40_000, "requests themselves keep aiokafka's timeout"
    forever = KafkaClients(load_config(None, [*keys, "delivery.timeout.ms=max"], environ={})).producer(None)
    assert forever._message_accumulator._batch_ttl > 10**15
    # The attribute is what the accumulator gives each new batch as its time to live.
    batch = default._message_accumulator._append_batch(BatchBuilder(1024, 0), TopicPartition("o", 0))
    assert batch._ttl == 120.0
