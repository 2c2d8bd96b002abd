"""The Kafka clients the sidecar makes: their settings, how they start, and how they close.

:class:`KafkaClients` is the one place that constructs aiokafka's consumer, producers and admin
client with the sidecar's settings (``acks=all``, idempotence, compression, batch size, the
task assignor, the isolation level the caller asks for). The pipeline asks it for clients and never
calls a constructor itself, so tests hand the pipeline an in-memory double with the same methods.

aiokafka's ``start()`` raises only ``KafkaConnectionError("Unable to bootstrap from [...]")``
when no bootstrap server lets it in; the reason (``SaslAuthenticationFailed``,
``CERTIFICATE_VERIFY_FAILED``, connection refused) goes to its ERROR/WARNING log.
:func:`start_client` catches those log records while a client starts and puts the reason, with
what to check, into the error the user sees.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.helpers import create_ssl_context

from sidecar.config import SidecarConfig
from sidecar.kafka.assignor import TaskAssignor
from sidecar.output.writer import BATCH_BYTES, MAX_MESSAGE_BYTES

#: Longest single wait for a fetch, so a stop request is noticed quickly.
MAX_FETCH_WAIT_MS = 100
#: Longest wait for a client to close.
CLOSE_TIMEOUT_S = 30.0

#: Which records a consumer reads: every record, or only those of committed transactions.
IsolationLevel = Literal["read_committed", "read_uncommitted"]

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


class ClientStartError(KafkaError):  # type: ignore[misc]  # aiokafka ships no types
    """A client could not connect; the message says which client, to where, and why."""

    def __str__(self) -> str:  # aiokafka's errors prefix their class name; this one is a sentence
        return str(self.args[0]) if self.args else "cannot connect a Kafka client"


async def connect(starting: Awaitable[None], what: str, bootstrap: str) -> None:
    """:func:`start_client`, raising :class:`ClientStartError` that names the client and the
    bootstrap servers (``cannot connect the consumer to host:9092: <why>``)."""
    try:
        await start_client(starting)
    except KafkaError as e:
        text = str(e) or type(e).__name__
        reason = text if type(e).__name__ in text else f"{type(e).__name__}: {text}"
        raise ClientStartError(f"cannot connect {what} to {bootstrap}: {reason}") from None


class ClientFactory(Protocol):
    """What the pipeline asks for; :class:`KafkaClients` makes aiokafka's, tests make doubles."""

    def consumer(self, isolation_level: IsolationLevel) -> AIOKafkaConsumer: ...

    def producer(self, transactional_id: str | None) -> AIOKafkaProducer: ...

    def admin(self) -> AIOKafkaAdminClient: ...


class KafkaClients:
    """aiokafka clients with the sidecar's settings."""

    def __init__(self, config: SidecarConfig) -> None:
        self.config = config
        self.options = client_options(config)

    def consumer(self, isolation_level: IsolationLevel) -> AIOKafkaConsumer:
        """The group's consumer; the delivery in force says what it reads (``isolation_level``)."""
        cfg = self.config
        return AIOKafkaConsumer(
            **self.options,
            group_id=cfg.effective_group_id,
            enable_auto_commit=False,
            auto_offset_reset=cfg.auto_offset_reset,
            isolation_level=isolation_level,
            fetch_max_wait_ms=MAX_FETCH_WAIT_MS,
            partition_assignment_strategy=(TaskAssignor,),
        )

    def producer(self, transactional_id: str | None) -> AIOKafkaProducer:
        cfg = self.config
        producer = AIOKafkaProducer(
            **self.options,
            acks="all",
            enable_idempotence=True,
            compression_type=None if cfg.compression_type == "none" else cfg.compression_type,
            linger_ms=cfg.linger_ms,
            max_batch_size=BATCH_BYTES,
            max_request_size=MAX_MESSAGE_BYTES,
            transactional_id=transactional_id,
        )
        bound_delivery(producer, cfg.delivery_timeout_ms)
        return producer

    def admin(self) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(**self.options)


def bound_delivery(producer: AIOKafkaProducer, timeout_ms: int) -> None:
    """Give the producer's batches Kafka's ``delivery.timeout.ms`` meaning.

    aiokafka's idempotent producer retries a batch through every retriable error, for ever —
    except a batch whose partition has no leader, which fails (``LeaderNotAvailableError``) once
    it is older than ``request_timeout_ms`` (40 s): a broker away for longer, or an election that
    takes that long, would fail the output. Its accumulator keeps that age limit in one private
    attribute (aiokafka 0.14, pinned; ``tests/unit/test_clients.py`` checks it is still there):
    set to ``delivery.timeout.ms``, a batch fails only past the user's bound (``max``: never).
    """
    accumulator = producer._message_accumulator
    if not hasattr(accumulator, "_batch_ttl"):  # pragma: no cover - guarded by the pin's test
        raise RuntimeError("aiokafka's MessageAccumulator no longer has _batch_ttl: check the pin")
    accumulator._batch_ttl = timeout_ms / 1000


async def close_quietly(
    closing: Awaitable[Any], on_error: Callable[[BaseException], object], timeout_s: float = CLOSE_TIMEOUT_S
) -> None:
    """Await a client's ``stop()``/``close()``, bounded in time; whatever it raises goes to
    ``on_error`` and no further.

    aiokafka's consumer can re-raise, from ``stop()``, the ``CancelledError`` of a fetch task it
    cancelled while that task slept in its retry backoff (a broker away): that is not *our*
    cancellation, and must not end the process. Only a cancellation of the caller itself
    (``Task.cancelling()``) is let through.
    """
    try:
        await asyncio.wait_for(closing, timeout=timeout_s)
    except asyncio.CancelledError as e:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        on_error(e)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        on_error(e)
