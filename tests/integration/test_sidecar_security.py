"""The sidecar over SASL/SCRAM and TLS, clear errors on bad credentials, secrets kept out of sight.

Against the session's secure broker (``secure_broker``: SASL_PLAINTEXT with SCRAM users, an SSL
listener, and an MTLS listener that requires a client certificate). Passwords reach the
sidecar as ``TIMESYNC_*`` environment variables, as a deployment would pass them (a ``--set``
would show them in ``ps``). The sidecar runs with ``--log-level DEBUG``, so "not in the log"
covers everything it can say.

Also here: ``http.host`` decides where the HTTP server listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event
from tests.secure_broker import SecureBroker

from .conftest import StartSidecar, stop_and_show

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

RECORDS = 600


class DebugSidecar(SidecarProcess):
    def args(self) -> list[str]:
        return [*super().args(), "--log-level", "DEBUG"]


StartSecure = Callable[..., Any]


@pytest.fixture
async def secure_sidecar(secure_broker: SecureBroker, tmp_path: Path) -> AsyncIterator[StartSecure]:
    """``start(bootstrap, inputs, output, settings, env, wait)`` → a started :class:`DebugSidecar`."""
    started: list[SidecarProcess] = []

    async def start(
        bootstrap: str,
        inputs: list[str],
        output: str,
        settings: dict[str, object],
        env: dict[str, str],
        wait: str | None = "healthy",
    ) -> SidecarProcess:
        process = DebugSidecar(bootstrap, inputs, output, settings, log_dir=tmp_path, env=env)
        started.append(process)
        return await process.start(wait=wait)

    yield start
    await stop_and_show(started)


def listener(broker: SecureBroker, name: str) -> tuple[str, dict[str, object], dict[str, str], list[str]]:
    """Bootstrap, sidecar settings, env (the secrets) and the secrets, for one secure listener."""
    tls = broker.tls
    if name == "sasl":
        settings: dict[str, object] = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": broker.username,
        }
        return broker.sasl_bootstrap, settings, {"TIMESYNC_SASL_PASSWORD": broker.password}, [broker.password]
    settings = {"security.protocol": "SSL", "ssl.cafile": tls.ca_cert, "ssl.check.hostname": "true"}
    if name == "ssl":
        return broker.ssl_bootstrap, settings, {}, []
    settings |= {"ssl.certfile": tls.client_cert, "ssl.keyfile": tls.client_key}
    env = {"TIMESYNC_SSL_PASSWORD": tls.client_key_password}
    return broker.mtls_bootstrap, settings, env, [tls.client_key_password]


def two_partitions(topic: str) -> list[Event]:
    """Each partition in order on its own, interleaved in time across the two."""
    return [
        Event(topic, i % 2, 1_000 + 7 * i + (500 if i % 2 else 0), b"k", b"v%d" % i, 0)
        for i in range(RECORDS)
    ]


async def wait_committed(bootstrap: str, group: str, ends: dict[TopicPartition, int]) -> None:
    """Until the sidecar's group has committed ``ends``: all input is safely through.

    Also keeps the stop that follows away from an in-flight commit: a SIGTERM during one can
    stall the sidecar's shutdown for 30 s (a runner issue, reported separately)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        deadline = time.monotonic() + 30
        while {tp: await consumer.committed(tp) for tp in ends} != ends:
            assert time.monotonic() < deadline, "the sidecar commits what it wrote"
            await asyncio.sleep(0.1)
    finally:
        await consumer.stop()


def assert_no_secret(secrets: list[str], *texts: str) -> None:
    for secret in secrets:
        for text in texts:
            assert secret not in text


@pytest.mark.parametrize("name", ["sasl", "ssl", "mtls"])
async def test_sidecar_moves_records_over_a_secure_listener_and_shows_no_secret(
    secure_broker: SecureBroker, topic_name: Callable[[str], str], secure_sidecar: StartSecure, name: str
) -> None:
    plain = secure_broker.bootstrap  # for setting up and reading back only
    src, out = topic_name("in"), topic_name("out")
    await kafka_io.create_topics(plain, [TopicSpec(src, 2)])
    events = two_partitions(src)
    await kafka_io.produce(plain, events)
    bootstrap, settings, env, secrets = listener(secure_broker, name)

    process = await secure_sidecar(
        bootstrap, [src], out, settings | {"max.task.idle.ms": 0, "watermark.heartbeat.ms": 0}, env
    )
    written = ordered.data(await kafka_io.read_topics(plain, [out], expected=RECORDS, timeout_s=60))
    await wait_committed(plain, f"timesync-{out}", {TopicPartition(src, p): RECORDS // 2 for p in (0, 1)})
    status_code, status = await process.get("/status")
    metrics = await process.metrics()
    _, health = await process.get("/healthz")
    assert await process.stop() == 0

    assert status_code == 200
    assert [o.timestamp for o in written] == sorted(e.ts for e in events)
    config = status["config"]
    assert config["security.protocol"] == settings["security.protocol"]
    if name == "sasl":
        assert config["sasl.password"] == "********"
    if name == "mtls":
        assert config["ssl.password"] == "********"
    log = process.log_path.read_text()
    assert_no_secret(secrets, log, json.dumps(status), metrics, json.dumps(health), " ".join(process.args()))


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "wrong-password",
            "SaslAuthenticationFailed: Authentication failed during authentication due to invalid "
            "credentials with SASL mechanism SCRAM-SHA-512 (check sasl.username, sasl.password and "
            "sasl.mechanism)",
        ),
        ("untrusted-ca", "CERTIFICATE_VERIFY_FAILED"),
    ],
)
async def test_bad_credentials_stop_the_sidecar_with_exit_1_and_one_line_saying_why(
    secure_broker: SecureBroker,
    topic_name: Callable[[str], str],
    secure_sidecar: StartSecure,
    tmp_path: Path,
    case: str,
    expected: str,
) -> None:
    src = topic_name("in")
    await kafka_io.create_topics(secure_broker.bootstrap, [TopicSpec(src)])
    wrong = "not-the-password-4711"
    if case == "wrong-password":
        bootstrap, settings, _, _ = listener(secure_broker, "sasl")
        env = {"TIMESYNC_SASL_PASSWORD": wrong}
    else:
        from tests.security_certs import make_tls_files

        stranger = make_tls_files(tmp_path / "other-ca")
        bootstrap, settings, env, _ = listener(secure_broker, "ssl")
        settings["ssl.cafile"] = stranger.ca_cert

    started = time.monotonic()
    process = await secure_sidecar(bootstrap, [src], topic_name("out"), settings, env, wait=None)
    code = await process.wait(timeout_s=60)

    assert code == 1
    line = process.log_tail(1)
    assert line.startswith("timesync-sidecar: cannot connect the "), line
    assert f" to {bootstrap}: " in line, line
    assert expected in line, line
    assert_no_secret([wrong, secure_broker.password], process.log_path.read_text())
    print(f"\n{case}: exit {code} after {time.monotonic() - started:.1f} s: {line}")


# -- http.host --------------------------------------------------------------------------------------


async def healthz(host: str, port: int) -> int:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session,
        session.get(f"http://{host}:{port}/healthz") as response,
    ):
        return response.status


async def test_http_host_is_the_address_the_http_server_binds(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src = topic_name("in")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    process = await sidecar([src], topic_name("out"), wait=None, http_host="127.0.0.2")

    deadline = time.monotonic() + 60
    code = None
    while code != 200:
        assert time.monotonic() < deadline, process.log_tail()
        assert process.proc is not None
        assert process.proc.returncode is None, process.log_tail()
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            code = await healthz("127.0.0.2", process.http_port)
        await asyncio.sleep(0.1)

    with pytest.raises(aiohttp.ClientConnectorError):
        await healthz("127.0.0.1", process.http_port)
    assert f"HTTP on 127.0.0.2:{process.http_port}" in process.log_path.read_text()


async def test_an_http_host_that_is_not_ours_is_a_one_line_fatal_error(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src = topic_name("in")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    # TEST-NET-1; off loopback, so with a token (else the config is refused before any bind)
    process = await sidecar([src], topic_name("out"), wait=None, http_host="192.0.2.1", http_auth_token="t0k")

    assert await process.wait(timeout_s=60) == 1
    port = process.http_port
    assert (
        process.log_tail(1)
        == f"timesync-sidecar: cannot serve HTTP on 192.0.2.1:{port}: Cannot assign requested address"
    )


async def test_bound_to_every_interface_without_a_token_the_sidecar_refuses_to_start(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    # As behind a service mesh, where every caller arrives from 127.0.0.6: loopback proves nothing.
    src = topic_name("in")
    process = await sidecar([src], topic_name("out"), wait=None, http_host="0.0.0.0")

    assert await process.wait(timeout_s=30) == 2
    line = process.log_tail(1)
    expected = "timesync-sidecar: config error: http.host=0.0.0.0 is not a loopback address"
    assert line.startswith(expected), line
    assert "http.auth.token" in line
