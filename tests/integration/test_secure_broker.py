"""Kafka clients reach the local broker over SASL/SCRAM and TLS, and bad credentials are refused.

One secure broker serves the whole session (``secure_broker`` fixture). What these tests pin
down for the sidecar: a wrong password or an untrusted certificate makes aiokafka's ``start()``
raise ``KafkaConnectionError("Unable to bootstrap from ...")`` within a second; the *reason*
(``SaslAuthenticationFailed``, ``CERTIFICATE_VERIFY_FAILED``) is only in aiokafka's ERROR log
line, so the sidecar has to surface that line to give a clear message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError

from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, produce, read_topics
from testkit.workloads import Event
from tests.secure_broker import SecureBroker
from tests.security_certs import make_tls_files
from tests.unit.test_local_kafka_launcher import run_launcher

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

CLIENT_TIMEOUT_S = 30.0


async def round_trip(bootstrap: str, topic: str, client: dict[str, Any]) -> list[tuple[int, bytes]]:
    """Create ``topic``, write three records and read them back, all through ``bootstrap``."""
    async with asyncio.timeout(CLIENT_TIMEOUT_S):
        await create_topics(bootstrap, [TopicSpec(topic)], **client)
        events = [Event(topic, 0, ts, b"k", f"v{ts}".encode(), 0) for ts in (10, 20, 30)]
        await produce(bootstrap, events, **client)
        records = await read_topics(bootstrap, [topic], expected=3, timeout_s=20, **client)
    return [(r.timestamp, r.value) for r in records]


async def refused_start(bootstrap: str, client: dict[str, Any]) -> KafkaConnectionError:
    """Start a producer that must be refused; return the error ``start()`` raised."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **client)
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            with pytest.raises(KafkaConnectionError) as refused:
                await producer.start()
    finally:
        await producer.stop()
    return refused.value


EXPECTED = [(10, b"v10"), (20, b"v20"), (30, b"v30")]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
async def test_scram_user_round_trip_over_sasl_plaintext(
    secure_broker: SecureBroker, topic_name: Callable[[str], str], mechanism: str
) -> None:
    client = secure_broker.sasl_client(mechanism=mechanism)

    assert await round_trip(secure_broker.sasl_bootstrap, topic_name("sasl"), client) == EXPECTED


async def test_wrong_scram_password_is_refused_and_the_reason_is_logged_not_raised(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="aiokafka")
    wrong = "not-the-password"

    error = await refused_start(secure_broker.sasl_bootstrap, secure_broker.sasl_client(password=wrong))

    assert "Unable to bootstrap from" in str(error)
    assert error.__cause__ is None, "aiokafka keeps the reason out of the exception"
    reasons = [r.getMessage() for r in caplog.records if r.name == "aiokafka"]
    assert any("SaslAuthenticationFailed" in m and "invalid credentials" in m for m in reasons), reasons
    assert wrong not in caplog.text
    assert wrong not in str(error)


async def test_ssl_round_trip_with_the_generated_ca_and_host_name_check(
    secure_broker: SecureBroker, topic_name: Callable[[str], str]
) -> None:
    client = secure_broker.ssl_client()
    assert client["ssl_context"].check_hostname, "the server certificate must match 127.0.0.1"

    assert await round_trip(secure_broker.ssl_bootstrap, topic_name("ssl"), client) == EXPECTED


async def test_ssl_client_that_does_not_trust_the_ca_is_refused(
    secure_broker: SecureBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="aiokafka")
    stranger = make_tls_files(tmp_path / "other-ca")

    await refused_start(secure_broker.ssl_bootstrap, secure_broker.ssl_client(cafile=stranger.ca_cert))

    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text


async def test_mtls_listener_takes_a_client_certificate_with_an_encrypted_key(
    secure_broker: SecureBroker, topic_name: Callable[[str], str]
) -> None:
    client = secure_broker.ssl_client(client_cert=True)

    assert await round_trip(secure_broker.mtls_bootstrap, topic_name("mtls"), client) == EXPECTED


async def test_mtls_listener_refuses_a_client_without_a_certificate(secure_broker: SecureBroker) -> None:
    await refused_start(secure_broker.mtls_bootstrap, secure_broker.ssl_client(client_cert=False))


async def test_plaintext_client_on_the_sasl_listener_is_refused(secure_broker: SecureBroker) -> None:
    await refused_start(secure_broker.sasl_bootstrap, {"request_timeout_ms": 5_000})


def test_launcher_status_prints_every_listener(secure_broker: SecureBroker, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps(dataclasses.asdict(secure_broker.broker)))

    done = run_launcher("--state", str(state), "status")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        secure_broker.bootstrap,
        f"SASL_PLAINTEXT {secure_broker.sasl_bootstrap}",
        f"SSL {secure_broker.ssl_bootstrap}",
        f"MTLS {secure_broker.mtls_bootstrap}",
    ]
