"""The faults a run plays against a cluster, as steps for :func:`tests.faults.scenario.play`.

Each step opens a fault window when the first node goes away and closes it when the cluster
serves again with every node; before the next fault it waits as Kafka's own system tests do —
for the replicas to be in sync again (a second broker away while the first still catches up
would leave partitions below ``min.insync.replicas``, a different fault).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable

from .scenario import Context, Step

#: Seconds a sidecar may take to say degraded once the cluster is gone (it does after 10 s
#: without an answer) and healthy once it is back.
HEALTH_TIMEOUT_S = 90.0


def rolling_restart(node_ids: list[int], down_s: float, kill: bool) -> list[Step]:
    """Each node in turn: stopped cleanly (SIGTERM: controlled shutdown) or killed (SIGKILL),
    away ``down_s``, started again; the next one once the replicas are in sync."""
    return [
        _bounce(lambda _ctx, n=n: _const(n), down_s, kill, f"{'kill -9' if kill else 'stop'} node {n}")
        for n in node_ids
    ]


def kill_output_leader(down_s: float, kills: int = 2) -> list[Step]:
    """For each sidecar (the first ``kills``): the broker leading its output partition, killed
    while it writes."""
    return [
        _bounce(lambda ctx, i=i: ctx.leader(ctx.runs[i].output), down_s, True, f"kill -9 output leader ({i})")
        for i in range(kills)
    ]


def kill_group_coordinator(down_s: float, kills: int = 2) -> list[Step]:
    """For each sidecar (the first ``kills``): the broker coordinating its consumer group, killed."""
    return [
        _bounce(
            lambda ctx, i=i: ctx.coordinator(ctx.runs[i].group),
            down_s,
            True,
            f"kill -9 group coordinator ({i})",
        )
        for i in range(kills)
    ]


def full_outages(count: int, range_s: tuple[float, float], replicated: bool) -> tuple[list[Step], int]:
    """``count`` outages of the whole cluster (every node stopped together), each of a length
    drawn from ``range_s`` and at least until every sidecar says degraded; between them, until
    every sidecar is healthy again. The seed is returned to print (``FAULTS_SEED`` replays one)."""
    seed = int(os.environ.get("FAULTS_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    lengths = [rng.uniform(*range_s) for _ in range(count)]

    def outage(n: int, drawn_s: float) -> Step:
        async def step(ctx: Context) -> None:
            window = ctx.open(f"outage {n} ({drawn_s:.0f} s drawn)")
            await ctx.stop_all()
            await ctx.until("degraded", HEALTH_TIMEOUT_S)
            await asyncio.sleep(drawn_s - (time.monotonic() - window.start))
            await ctx.start([node.node_id for node in ctx.cluster.nodes])
            window.end = time.monotonic()
            if replicated:
                await ctx.in_sync()
            await ctx.recovered(window, HEALTH_TIMEOUT_S)

        return step

    return [outage(n + 1, length) for n, length in enumerate(lengths)], seed


async def _const(n: int) -> int:
    return n


def _bounce(which: Callable[[Context], Awaitable[int]], down_s: float, kill: bool, label: str) -> Step:
    async def step(ctx: Context) -> None:
        node_id = await which(ctx)
        window = ctx.open(f"{label}: node {node_id}" if "node" not in label else label)
        await ctx.stop(node_id, kill=kill)
        await asyncio.sleep(down_s)
        await ctx.start([node_id])
        window.end = time.monotonic()
        await ctx.in_sync()
        await ctx.recovered(window)

    return step
