"""Stop the broker under running sidecars and start it again on the same data dir.

Two sidecars ride through the same outage, one per ``processing.guarantee``, each on its own
topics with a live writer. Each reconnects by itself; ``/healthz`` says degraded (200) while the
broker is away and healthy (200) once it is back; nothing is lost and each input partition's
order holds; under ``exactly_once_v2`` a ``read_committed`` reader sees each input once (under
``at_least_once`` a batch the producer retried may show twice, as identical copies: reported).

The broker stays away until both sidecars report degraded (about 10 s); at full size
(``FAULTS_SIZE=full``) for ``Size.outage_s``, beyond aiokafka's 40 s request timeout, after which
a client that gives up on a silent broker would end the sidecar.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event, steady

from .conftest import RestartableBroker, Size
from .delivery import check, end_offsets, per_partition, table_row, wait_committed

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(400)]

PARTITIONS = 2
GUARANTEES = ("at_least_once", "exactly_once_v2")
#: Each input is written over this long; the broker goes away after RUN_BEFORE_STOP_S of it.
WRITE_S = 8.0
RUN_BEFORE_STOP_S = 2.0
#: The sidecar's health turns degraded after 10 s without an answer from Kafka.
HEALTH_TIMEOUT_S = 45.0


async def wait_health(process: SidecarProcess, state: str, timeout_s: float) -> float:
    """Seconds until ``/healthz`` says ``state`` (``degraded`` and ``healthy`` answer 200);
    fails with the sidecar's log after ``timeout_s``."""
    started = time.monotonic()
    last: object = None
    while time.monotonic() - started < timeout_s:
        assert process.proc is not None
        assert process.proc.returncode is None, f"the sidecar exited:\n{process.log_tail()}"
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            status, body = await process.get("/healthz")
            last = (status, body)
            if status == 200 and body["status"] == state:
                return time.monotonic() - started
        await asyncio.sleep(0.2)
    raise AssertionError(
        f"/healthz never said {state} within {timeout_s} s (last {last}):\n{process.log_tail()}"
    )


@dataclass
class Run:
    """One sidecar with its own inputs, output and live writer."""

    guarantee: str
    output: str
    events: list[Event]
    expected: dict[tuple[str, int], int]
    process: SidecarProcess
    writing: asyncio.Task[None] | None = None
    out_before: int = 0
    message: str = ""
    to_degraded: float = 0.0
    to_healthy: float = 0.0


async def start_run(
    bootstrap: str, guarantee: str, topic_name: Callable[[str], str], records: int, log_dir: Path
) -> Run:
    a, b, out = topic_name(f"a-{guarantee}"), topic_name(f"b-{guarantee}"), topic_name(f"out-{guarantee}")
    await kafka_io.create_topics(bootstrap, [TopicSpec(a, PARTITIONS), TopicSpec(b, PARTITIONS)])
    events = steady([a, b], PARTITIONS, records, 1_700_000_000_000, seed=3, rate_per_s=records / WRITE_S)
    process = SidecarProcess(bootstrap, [a, b], out, {"processing.guarantee": guarantee}, log_dir=log_dir)
    await process.start()
    return Run(guarantee, out, events, per_partition((e.topic, e.partition) for e in events), process)


def write(bootstrap: str, run: Run) -> None:
    """The input, paced; the writer waits out the outage too: idempotent (no duplicates on retry)
    and patient."""
    run.writing = asyncio.create_task(
        kafka_io.produce(
            bootstrap, run.events, paced=True, enable_idempotence=True, request_timeout_ms=180_000
        )
    )


async def test_broker_stop_and_restart_mid_run_sidecars_reconnect_degraded_meanwhile_nothing_lost(
    own_broker: RestartableBroker, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    bootstrap = own_broker.bootstrap
    runs = [await start_run(bootstrap, g, topic_name, size.records, tmp_path) for g in GUARANTEES]
    try:
        for run in runs:
            write(bootstrap, run)
        await asyncio.sleep(RUN_BEFORE_STOP_S)
        for run in runs:
            run.out_before = (await run.process.status())["tasks"]["0"]["records_out"]

        stopped_at = time.monotonic()
        await asyncio.to_thread(own_broker.stop)
        for run in runs:
            await wait_health(run.process, "degraded", HEALTH_TIMEOUT_S)
            run.to_degraded = time.monotonic() - stopped_at
            run.message = (await run.process.get("/healthz"))[1]["message"]
        await asyncio.sleep(size.outage_s - (time.monotonic() - stopped_at))
        for run in runs:
            await wait_health(run.process, "degraded", 1.0)  # still there, still degraded
        down_s = time.monotonic() - stopped_at
        await asyncio.to_thread(own_broker.start)
        restarted_at = time.monotonic()
        for run in runs:
            await wait_health(run.process, "healthy", HEALTH_TIMEOUT_S)
            run.to_healthy = time.monotonic() - restarted_at

        for run in runs:
            assert run.writing is not None
            await run.writing
            # What the inputs hold is what must come out. (aiokafka's idempotent producer has been
            # seen to write a batch twice across a broker restart: those are inputs too.)
            run.expected = await end_offsets(bootstrap, run.expected)
        for run in runs:
            await wait_committed(bootstrap, f"timesync-{run.output}", run.expected, timeout_s=180)
            assert await run.process.stop() == 0, run.process.log_tail()
    finally:
        for run in runs:
            if run.writing is not None:
                run.writing.cancel()
            if run.process.proc is not None and run.process.proc.returncode is None:
                await run.process.stop()

    print(f"\nbroker away {down_s:.1f} s")
    written = {run.guarantee: sum(run.expected.values()) - len(run.events) for run in runs}
    print(f"records the test's writers wrote twice across the restart: {written}")
    failures = []
    for run in runs:
        got = ordered.data(
            await kafka_io.read_topics(
                bootstrap, [run.output], idle_s=1.0, timeout_s=120, isolation_level="read_committed"
            )
        )
        delivery = check(run.expected, got)
        print(
            f"{run.guarantee}: {run.out_before} records out before the stop; degraded "
            f"{run.to_degraded:.1f} s after it ({run.message!r}); healthy {run.to_healthy:.1f} s "
            f"after the restart; {delivery.line()}"
        )
        print(table_row(f"broker stop + restart, {run.guarantee}", 1, delivery))
        if not 0 < run.out_before < size.records:
            failures.append(f"{run.guarantee}: the broker did not go away mid-run ({run.out_before} out)")
        if "no answer from Kafka" not in run.message and "restarting" not in run.message:
            failures.append(f"{run.guarantee}: /healthz message {run.message!r}")
        if delivery.problems or delivery.lost:
            failures.append(f"{run.guarantee}: {delivery.line()}: {delivery.problems[:3]}")
        # at_least_once may repeat what its producer retried; exactly_once_v2 may not.
        if run.guarantee == "exactly_once_v2" and delivery.duplicates:
            failures.append(f"{run.guarantee}: read_committed saw {delivery.duplicates} duplicates")
    assert failures == []
