"""The two ways a sidecar exited during a broker outage (issue 15), each reproduced on purpose
with aiokafka's real clients against real brokers.

1. ``exactly_once_v2``: an in-process restart closes the consumer while its fetch task sleeps in
   its retry backoff (the broker it fetched from is gone); aiokafka's ``Fetcher.close`` cancels that task and
   re-raises its ``CancelledError`` from ``consumer.stop()``. It must not escape the pipeline's
   close (``sidecar/kafka/clients.py`` ``close_quietly``).
2. ``at_least_once``: an output batch whose partition has no leader for longer than the
   producer's request timeout fails with ``LeaderNotAvailableError`` — retriable — and the
   sidecar exited. It must go on retrying up to ``delivery.timeout.ms``
   (``sidecar/kafka/clients.py`` ``bound_delivery``).

Both widen aiokafka's timing, never its code paths: a 60 s fetcher backoff (default 100 ms, set
on the running consumer's fetcher) so that the restart certainly finds the fetch task asleep in
it, and a 3 s produce request timeout (default 40 s) so that a 10 s leaderless output is already
longer than it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

import sidecar.kafka.clients as clients_module
from sidecar.config import load_config
from sidecar.kafka.admin import TopicSpec
from sidecar.service.supervisor import Supervisor
from testkit import kafka_io, ordered
from testkit.workloads import steady

from .delivery import check, end_offsets, per_partition, wait_committed
from .scenario import describe

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(300)]

BASE_MS = 1_700_000_000_000


def settings(bootstrap: str, inputs: list[str], output: str, guarantee: str) -> Any:
    sets = {
        "bootstrap.servers": bootstrap,
        "input.topics": ",".join(inputs),
        "output.topic": output,
        "processing.guarantee": guarantee,
        "http.port": 0,
        "watermark.heartbeat.ms": 1000,
    }
    return load_config(None, [f"{k}={v}" for k, v in sets.items()], environ={})


class Seen(logging.Handler):
    """The messages of one logger, at its level or above, while attached."""

    def __init__(self, name: str, level: int) -> None:
        super().__init__(level)
        self.logger = logging.getLogger(name)
        self.level_before = self.logger.level
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> Seen:
        self.logger.addHandler(self)
        self.logger.setLevel(self.level)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)

    def saw(self, text: str) -> bool:
        return any(text in m for m in self.messages)


async def wait_for(
    what: str, done: Callable[[], bool], running: asyncio.Task[None], timeout_s: float
) -> None:
    """Until ``done()``; fails at once if the sidecar's run ended (it must not) or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if running.done():
            error = running.exception() if not running.cancelled() else "cancelled (CancelledError escaped)"
            raise AssertionError(f"the sidecar's run ended while waiting for {what}: {error!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.05)


def records_out(supervisor: Supervisor) -> int:
    return sum(int(t.get("records_out", 0)) for t in supervisor.status().get("tasks", {}).values())


async def finish(
    supervisor: Supervisor,
    running: asyncio.Task[None],
    bootstrap: str,
    expected: dict[tuple[str, int], int],
    group: str,
) -> None:
    """Wait until every input is committed, stop the sidecar cleanly (its run must return)."""
    await wait_committed(bootstrap, group, expected, timeout_s=120)
    assert not running.done(), "the sidecar's run ended before it was asked to stop"
    supervisor.request_stop()
    await asyncio.wait_for(running, 60)


async def stop_quietly(supervisor: Supervisor, running: asyncio.Task[None]) -> None:
    """Cleanup after a failed test: the failure is already reported; stop the run if it goes on."""
    if not running.done():
        supervisor.request_stop()
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(running, 60)


async def test_eos_restart_while_a_broker_is_away_survives_a_cancelled_fetch_backoff(
    cluster3: Any, topic_name: Callable[[str], str]
) -> None:
    bootstrap = cluster3.bootstrap
    a, out = topic_name("a"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 1, 3)])
    cfg = settings(bootstrap, [a], out, "exactly_once_v2")
    events = steady([a], 1, 2_000, BASE_MS, seed=5, rate_per_s=1_000)
    await kafka_io.produce(bootstrap, events[:1_000])
    supervisor = Supervisor(cfg, backoff_s=0.2)
    running = asyncio.create_task(supervisor.run())
    (desc,) = await describe(bootstrap, [a])
    leader = int(desc["partitions"][0]["leader"])  # the broker the consumer fetches from
    try:
        await wait_for("the first records out", lambda: records_out(supervisor) > 0, running, 60)
        # The fetcher's backoff only (the consumer's own retry_backoff_ms would slow its start
        # too: coordinator lookups wait it out).
        supervisor.pipeline.consumer._fetcher._retry_backoff = 60.0
        with (
            Seen("aiokafka.consumer.fetcher", logging.ERROR) as fetcher,
            Seen("timesync", logging.WARNING) as sidecar_log,
        ):
            await asyncio.to_thread(cluster3.kill_node, leader)
            await wait_for(
                "a failed fetch (its task now sleeps in the backoff)",
                lambda: fetcher.saw(f"Failed fetch messages from {leader}"),
                running,
                30,
            )
            # What the error table does for a failed client under exactly_once_v2.
            supervisor.pipeline.control.restart("a Kafka client failed: (the test's restart)")
            await wait_for("the in-process restart", lambda: supervisor.restarts >= 1, running, 50)
            assert sidecar_log.saw("closing a Kafka client failed (ignored): CancelledError"), (
                "the restart did not meet aiokafka's CancelledError (the reproduction missed): "
                f"{sidecar_log.messages}"
            )
        cluster3.spawn_node(leader)
        await asyncio.to_thread(cluster3.wait_ready, [leader])
        await kafka_io.produce(bootstrap, events[1_000:])
        expected = await end_offsets(bootstrap, per_partition((e.topic, e.partition) for e in events))
        await finish(supervisor, running, bootstrap, expected, cfg.effective_group_id)
    finally:
        await stop_quietly(supervisor, running)
        if not cluster3.node(leader).alive():
            cluster3.spawn_node(leader)
            await asyncio.to_thread(cluster3.wait_ready, [leader])
    delivery = check(
        expected,
        ordered.data(
            await kafka_io.read_topics(bootstrap, [out], idle_s=1.0, isolation_level="read_committed")
        ),
    )
    assert (delivery.lost, delivery.duplicates, delivery.problems) == (0, 0, [])


async def test_alo_output_without_a_leader_longer_than_the_request_timeout_is_retried_not_fatal(
    cluster3: Any, topic_name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap = cluster3.bootstrap
    a, out = topic_name("a"), topic_name("out")
    # The output on one broker only: while that broker is away its partition has no leader
    # (Kafka's metadata says -1, LEADER_NOT_AVAILABLE) — what a single broker's outage does.
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, 1, 3), TopicSpec(out, 1, 1)])
    monkeypatch.setattr(
        clients_module, "AIOKafkaProducer", functools.partial(AIOKafkaProducer, request_timeout_ms=3_000)
    )
    cfg = settings(bootstrap, [a], out, "at_least_once")
    events = steady([a], 1, 12_000, BASE_MS, seed=6, rate_per_s=600)  # 20 s of input
    supervisor = Supervisor(cfg, backoff_s=0.2)
    running = asyncio.create_task(supervisor.run())
    (desc,) = await describe(bootstrap, [out])
    leader = int(desc["partitions"][0]["leader"])
    writing = asyncio.create_task(kafka_io.produce(bootstrap, events, paced=True, enable_idempotence=True))
    try:
        await wait_for("the first records out", lambda: records_out(supervisor) > 0, running, 60)
        await asyncio.to_thread(cluster3.stop_node, leader)
        away = time.monotonic()
        # The producer refreshes its metadata (leader -1) and holds the output's batches; each
        # is past aiokafka's 3 s batch age long before the broker is back.
        await wait_for("the output's leader away 10 s", lambda: time.monotonic() - away >= 10.0, running, 15)
        cluster3.spawn_node(leader)
        await asyncio.to_thread(cluster3.wait_ready, [leader])
        await writing
        expected = await end_offsets(bootstrap, per_partition((e.topic, e.partition) for e in events))
        await finish(supervisor, running, bootstrap, expected, cfg.effective_group_id)
    finally:
        writing.cancel()
        await stop_quietly(supervisor, running)
        if not cluster3.node(leader).alive():
            cluster3.spawn_node(leader)
            await asyncio.to_thread(cluster3.wait_ready, [leader])
    delivery = check(expected, ordered.data(await kafka_io.read_topics(bootstrap, [out], idle_s=1.0)))
    assert (delivery.lost, delivery.problems) == (0, [])
