"""task.grouping=single: one replica per group, told by a claim in the committed offsets."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from sidecar.config import SidecarConfig
from sidecar.service import claim
from sidecar.service.claim import Claim, conflict, decode, encode
from sidecar.service.supervisor import FatalError
from tests.fakes.kafka import FakeCluster

from .harness import OUT, config, run_until, sidecar, sources

NOW = 1_700_000_000_000


def test_a_claim_round_trips_and_other_tools_metadata_is_no_claim() -> None:
    c = Claim("pod-a", NOW, "running")
    assert decode(encode(c)) == c
    assert decode("") is None
    assert decode("kafka-consumer-groups --reset-offsets") is None
    assert decode('{"owner": "x"}') is None


def test_only_another_hosts_fresh_running_claim_conflicts() -> None:
    fresh_other = Claim("pod-b", NOW - 5_000, "running")
    assert conflict([fresh_other], "pod-a", NOW) == fresh_other
    assert conflict([Claim("pod-a", NOW, "running")], "pod-a", NOW) is None, "its own restart"
    assert conflict([Claim("pod-b", NOW, "stopped")], "pod-a", NOW) is None, "a clean stop"
    stale = Claim("pod-b", NOW - int(claim.STALE_S * 1000) - 1, "running")
    assert conflict([stale, None], "pod-a", NOW) is None, "a crashed replica's claim goes stale"


def cluster_with_input() -> FakeCluster:
    cluster = FakeCluster()
    cluster.create_topic("a", 2)
    for p in range(2):
        cluster.produce("a", p, range(1_000, 1_010))
    return cluster


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_second_single_task_replica_on_another_host_refuses_to_start(
    guarantee: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = cluster_with_input()
    cfg = config(["a"], processing_guarantee=guarantee)
    committed = guarantee == "exactly_once_v2"
    monkeypatch.setenv("HOSTNAME", "pod-a")
    first = sidecar(cluster, cfg)
    running = asyncio.create_task(first.run())
    try:
        while len(sources(cluster.read(OUT, committed))) < 20 or not cluster.committed(
            cfg.effective_group_id
        ):
            await asyncio.sleep(0.005)
        monkeypatch.setenv("HOSTNAME", "pod-b")
        with pytest.raises(FatalError) as refused:
            await asyncio.wait_for(sidecar(cluster, cfg).run(), 5)
        assert str(refused.value).startswith(
            f"another sidecar (host pod-a) is running group {cfg.effective_group_id} with task.grouping="
        )
        assert "task.grouping=partition" in str(refused.value)
        assert len(sources(cluster.read(OUT))) == 20, "the refused replica wrote nothing"
    finally:
        first.request_stop()
        await running
    # A clean stop leaves a stopped claim: the other host starts at once.
    cluster.produce("a", 0, [2_000])
    assert (
        await run_until(sidecar(cluster, cfg), lambda: len(sources(cluster.read(OUT, committed))) == 21)
        is None
    )


@contextlib.asynccontextmanager
async def caught_up_and_renewing(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[FakeCluster, SidecarConfig]]:
    """pod-a's sidecar, renewing its claim every 50 ms, once it has written its 20 records and
    gone quiet; stopped cleanly on exit."""
    monkeypatch.setattr(claim, "REFRESH_S", 0.05)
    monkeypatch.setenv("HOSTNAME", "pod-a")
    cluster = cluster_with_input()
    cfg = config(["a"])
    s = sidecar(cluster, cfg)
    running = asyncio.create_task(s.run())
    try:
        while len(sources(cluster.read(OUT))) < 20:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.2)
        yield cluster, cfg
    finally:
        s.request_stop()
        await running


async def test_a_quiet_single_task_renews_its_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    async with caught_up_and_renewing(monkeypatch) as (cluster, cfg):
        first = decode(cluster.metadata[cfg.effective_group_id][("a", 0)])
        await asyncio.sleep(0.3)
        later = decode(cluster.metadata[cfg.effective_group_id][("a", 0)])
        assert first is not None
        assert later is not None
        assert later.at_ms > first.at_ms, "renewed with no new offsets"
        assert later.state == "running"
        assert cluster.committed(cfg.effective_group_id)[("a", 0)] == 10, "the same offsets, again"
    final = decode(cluster.metadata[cfg.effective_group_id][("a", 0)])
    assert final is not None
    assert final.state == "stopped"


async def test_with_the_guard_off_a_second_replica_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = cluster_with_input()
    group = config(["a"]).effective_group_id
    monkeypatch.setenv("HOSTNAME", "pod-a")
    assert (
        await run_until(sidecar(cluster, config(["a"])), lambda: len(sources(cluster.read(OUT))) == 20)
        is None
    )
    # pod-a crashed a moment ago, leaving a fresh running claim.
    fresh = encode(Claim("pod-a", int(time.time() * 1000), "running"))
    cluster.metadata[group] = dict.fromkeys(cluster.committed(group), fresh)
    monkeypatch.setenv("HOSTNAME", "pod-b")
    with pytest.raises(FatalError, match="another sidecar"):
        await asyncio.wait_for(sidecar(cluster, config(["a"])).run(), 5)
    cluster.produce("a", 1, [3_000])
    guard_off = config(["a"], task_grouping_single_guard="false")
    assert await run_until(sidecar(cluster, guard_off), lambda: len(sources(cluster.read(OUT))) == 21) is None


async def test_a_periodic_commit_still_in_flight_cannot_outlive_the_stopped_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two helpers saw it on a real broker, about one clean stop in eight: the commit loop's
    "running" commit landed after the drain's "stopped" one, and another host had to wait the
    claim out. Here the loop's commit is slow to land while the stop comes."""
    async with caught_up_and_renewing(monkeypatch) as (cluster, cfg):
        cluster.commit_delays = [0.5]  # the next periodic commit (a claim renewal) hangs
        await asyncio.sleep(0.15)
    await asyncio.sleep(0.6)  # long enough for a hanging commit to land, had it survived
    final = decode(cluster.metadata[cfg.effective_group_id][("a", 0)])
    assert final is not None
    assert final.state == "stopped"


def test_a_claim_stamped_further_ahead_than_the_allowed_skew_is_not_believed() -> None:
    skew_ms = int(claim.MAX_CLOCK_SKEW_S * 1000)
    ahead = Claim("pod-b", NOW + skew_ms, "running")
    assert conflict([ahead], "pod-a", NOW) == ahead, "a clock a little ahead still counts"
    forged = Claim("pod-b", NOW + skew_ms + 1, "running")
    assert conflict([forged], "pod-a", NOW) is None, "else a stamp in the year 3000 blocks for ever"
