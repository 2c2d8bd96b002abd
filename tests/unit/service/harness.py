"""Running a sidecar over the in-memory cluster (``tests/fakes/kafka.py``), and reading its output."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence

from sidecar.config import SidecarConfig, load_config
from sidecar.service.health import Health
from sidecar.service.pipeline import Pipeline
from sidecar.service.run_state import FatalError
from sidecar.service.supervisor import Supervisor
from tests.fakes.kafka import FakeClients, FakeCluster, Stored

OUT = "out"


def config(inputs: Sequence[str] = ("a", "b"), **keys: object) -> SidecarConfig:
    """A sidecar config for the fake cluster: no HTTP, no heartbeats unless asked."""
    base = {
        "bootstrap.servers": "fake:9092",
        "input.topics": ",".join(inputs),
        "output.topic": OUT,
        "http.port": 0,
        "watermark.heartbeat.ms": 0,
    }
    base.update({k.replace("_", "."): v for k, v in keys.items()})
    return load_config(None, [f"{k}={v}" for k, v in base.items()], environ={})


def sidecar(cluster: FakeCluster, cfg: SidecarConfig, health: Health | None = None) -> Supervisor:
    """A supervisor whose pipelines talk to ``cluster``; restarts wait 10 ms instead of 1 s."""
    factory = functools.partial(Pipeline, clients=FakeClients(cluster, cfg))
    return Supervisor(cfg, health=health, pipeline_factory=factory, backoff_s=0.01)


async def run_until(
    supervisor: Supervisor, done: Callable[[], bool], timeout_s: float = 10.0
) -> FatalError | None:
    """Run ``supervisor`` until ``done()`` (then stop it cleanly) or until it fails; return the
    failure, if any. Fails the test if neither happens within ``timeout_s``."""
    running = asyncio.create_task(supervisor.run())
    deadline = time.monotonic() + timeout_s
    while not running.done() and not done():
        if time.monotonic() > deadline:
            supervisor.request_stop()
            await asyncio.wait_for(running, 5)
            raise AssertionError(f"not done within {timeout_s} s")
        await asyncio.sleep(0.002)
    supervisor.request_stop()
    try:
        await asyncio.wait_for(running, timeout_s)
    except FatalError as e:
        return e
    return None


def sources(records: Sequence[Stored]) -> list[tuple[str, int, int]]:
    """The input coordinates of the data records among ``records`` (heartbeats skipped)."""
    return [s for r in records if (s := r.source()) is not None]


def reference_merge(cluster: FakeCluster, inputs: Sequence[str]) -> list[tuple[str, int, int]]:
    """The merge of everything on the inputs, record by record: the head with the smallest
    (timestamp, topic position in ``input.topics``, partition) goes next."""
    queues = []
    for rank_topic, topic in enumerate(inputs):
        for p in range(cluster.partitions[topic]):
            records = cluster.logs_of(topic, p)
            queues.append([(rank_topic, p, r.offset, r.timestamp) for r in records])
    out = []
    heads = [0] * len(queues)
    while True:
        best = None
        for i, q in enumerate(queues):
            if heads[i] < len(q):
                t, p, _, ts = q[heads[i]]
                key = (ts, t, p)
                if best is None or key < best[0]:
                    best = (key, i)
        if best is None:
            return out
        i = best[1]
        t, p, offset, _ = queues[i][heads[i]]
        heads[i] += 1
        out.append((inputs[t], p, offset))
