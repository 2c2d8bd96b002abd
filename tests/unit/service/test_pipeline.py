"""The pipeline without a broker: the real service layer over an in-memory cluster.

What the sidecar promises about its output and its commits, checked for random inputs, fetch
splits, acknowledgement orders and injected producer failures — the cases that cost a real
cluster and seconds each in ``tests/integration`` run here in milliseconds.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from aiokafka.errors import KafkaTimeoutError, NotLeaderForPartitionError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.service import pipeline as pipeline_module
from sidecar.service.health import Health
from sidecar.service.run_state import Failed
from tests.fakes.kafka import FakeCluster, FakeProducer

from .harness import OUT, config, reference_merge, run_until, sidecar, sources

GUARANTEES = ("at_least_once", "exactly_once_v2")


@st.composite
def inputs(draw: st.DrawFn) -> tuple[FakeCluster, list[str]]:
    """One or two input topics of one to three partitions, each with 0–40 records whose
    timestamps mostly rise (with some disorder), a random fetch split and acknowledgement order."""
    cluster = FakeCluster(seed=draw(st.integers(0, 2**16)))
    topics = ["a", "b"][: draw(st.integers(1, 2))]
    partitions = draw(st.integers(1, 3))
    for t in topics:
        cluster.create_topic(t, partitions)
        for p in range(partitions):
            steps = draw(st.lists(st.integers(-3, 10), max_size=40))
            ts, stamps = 1_000, []
            for step in steps:
                ts = max(0, ts + step)
                stamps.append(ts)
            cluster.produce(t, p, stamps)
    low = draw(st.integers(1, 8))
    cluster.fetch_cap = (low, low + draw(st.integers(0, 30)))
    cluster.ack_order = draw(st.sampled_from(["fifo", "random"]))
    return cluster, topics


def total_inputs(cluster: FakeCluster, topics: list[str]) -> int:
    return sum(len(cluster.logs_of(t, p)) for t in topics for p in range(cluster.partitions[t]))


PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@PROPERTY
@given(inputs(), st.sampled_from(GUARANTEES))
def test_the_ordered_topic_is_the_reference_merge_for_any_fetch_split_and_ack_order(
    case: tuple[FakeCluster, list[str]], guarantee: str
) -> None:
    cluster, topics = case
    expected = reference_merge(cluster, topics)

    async def scenario() -> None:
        cfg = config(topics, processing_guarantee=guarantee)
        committed = guarantee == "exactly_once_v2"
        failure = await run_until(
            sidecar(cluster, cfg), lambda: len(sources(cluster.read(OUT, committed))) >= len(expected)
        )
        assert failure is None
        assert sources(cluster.read(OUT, committed)) == expected
        assert cluster.violations == []

    asyncio.run(scenario())


def check_at_least_once(cluster: FakeCluster, topics: list[str]) -> None:
    """Every input out at least once; per input partition the output steps to the next offset or
    rewinds to one already written (a replay from the last commit), never skips ahead."""
    out = sources(cluster.read(OUT))
    for t in topics:
        for p in range(cluster.partitions[t]):
            offsets = [o for (topic, part, o) in out if (topic, part) == (t, p)]
            seen = -1
            for o in offsets:
                assert o <= seen + 1, f"{t}[{p}] skipped from {seen} to {o}: {offsets}"
                seen = max(seen, o)
            assert seen == len(cluster.logs_of(t, p)) - 1, f"{t}[{p}] lost records: {offsets}"


@PROPERTY
@given(inputs(), st.lists(st.integers(0, 30), min_size=1, max_size=3))
def test_at_least_once_a_failed_write_loses_nothing_and_no_commit_passes_an_unacked_output(
    case: tuple[FakeCluster, list[str]], failing_at: list[int]
) -> None:
    """A batch the producer gave up on ends the run (exit 1 at least once); the next run starts
    from the committed offsets. Across runs: nothing lost, and no commit ever passed an output
    that was not acknowledged (checked by the cluster at every commit)."""
    cluster, topics = case
    n = total_inputs(cluster, topics)

    async def scenario() -> None:
        cfg = config(topics)
        for delay in failing_at:
            cluster.failures = [KafkaTimeoutError("batch expired")] if delay % 2 == 0 else []
            await run_until(sidecar(cluster, cfg), lambda: len(set(sources(cluster.read(OUT)))) >= n)
        cluster.failures = []
        assert (
            await run_until(sidecar(cluster, cfg), lambda: len(set(sources(cluster.read(OUT)))) >= n) is None
        )
        assert cluster.violations == []
        check_at_least_once(cluster, topics)

    asyncio.run(scenario())


@PROPERTY
@given(inputs(), st.lists(st.sampled_from(["timeout", "not leader"]), min_size=1, max_size=4))
def test_exactly_once_restarts_after_producer_failures_and_nothing_is_visible_twice(
    case: tuple[FakeCluster, list[str]], errors: list[str]
) -> None:
    """Under exactly_once_v2 a failed transactional producer restarts the pipeline in the process
    (its transaction is aborted by the next producer with the same id); a ``read_committed``
    reader sees every input exactly once."""
    cluster, topics = case
    n = total_inputs(cluster, topics)
    make = {"timeout": lambda: KafkaTimeoutError("expired"), "not leader": NotLeaderForPartitionError}
    cluster.failures = [make[e]() for e in errors]

    async def scenario() -> None:
        supervisor = sidecar(cluster, config(topics, processing_guarantee="exactly_once_v2"))
        failure = await run_until(supervisor, lambda: len(sources(cluster.read(OUT, committed=True))) >= n)
        assert failure is None
        seen = Counter(sources(cluster.read(OUT, committed=True)))
        assert [s for s, c in seen.items() if c > 1] == []
        assert len(seen) == n
        assert cluster.violations == []

    asyncio.run(scenario())


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_a_clean_stop_commits_every_acknowledged_output_and_a_restart_repeats_nothing(
    guarantee: str,
) -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 2)
    cluster.create_topic("b", 2)
    for t in ("a", "b"):
        for p in range(2):
            cluster.produce(t, p, range(1_000, 1_050))
    cfg = config(processing_guarantee=guarantee)
    committed = guarantee == "exactly_once_v2"
    assert await run_until(sidecar(cluster, cfg), lambda: len(cluster.read(OUT, committed)) >= 200) is None
    first = len(cluster.read(OUT))
    assert cluster.committed(cfg.effective_group_id) == {(t, p): 50 for t in ("a", "b") for p in range(2)}, (
        "the drain commits every offset whose output was acknowledged"
    )

    cluster.produce("a", 0, [2_000])
    assert await run_until(sidecar(cluster, cfg), lambda: len(cluster.read(OUT)) > first) is None
    assert sources(cluster.read(OUT))[first:] == [("a", 0, 50)], "nothing before the stop came out again"


@pytest.mark.parametrize("guarantee", GUARANTEES)
async def test_tasks_move_between_replicas_in_a_rebalance_and_nothing_is_lost_or_doubled(
    guarantee: str,
) -> None:
    """task.grouping=partition: a second replica joins mid-run (tasks are dealt again: each replica
    hands its tasks back, committing first), then the first leaves (its tasks move over)."""
    cluster = FakeCluster()
    cluster.create_topic("a", 4)
    cluster.create_topic("b", 4)
    cfg = config(task_grouping="partition", processing_guarantee=guarantee)
    committed = guarantee == "exactly_once_v2"

    def write(start: int) -> None:
        for t in ("a", "b"):
            for p in range(4):
                cluster.produce(t, p, range(start, start + 25))

    write(1_000)
    first, second = sidecar(cluster, cfg), sidecar(cluster, cfg)
    running = asyncio.create_task(first.run())
    while len(sources(cluster.read(OUT, committed))) < 50:
        await asyncio.sleep(0.002)
    joined = asyncio.create_task(second.run())
    write(2_000)
    while len(set(sources(cluster.read(OUT, committed)))) < 400:
        await asyncio.sleep(0.002)
    first.request_stop()
    await asyncio.wait_for(running, 10)
    write(3_000)
    while len(set(sources(cluster.read(OUT, committed)))) < 600:
        await asyncio.sleep(0.002)
    second.request_stop()
    await asyncio.wait_for(joined, 10)

    out = sources(cluster.read(OUT, committed))
    assert len(set(out)) == 600
    if committed:
        assert len(out) == 600, "read_committed sees each input once"
    assert cluster.violations == []
    by_partition: dict[tuple[str, int], list[int]] = {}
    for topic, part, offset in dict.fromkeys(out):
        by_partition.setdefault((topic, part), []).append(offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())


async def test_a_fenced_task_under_exactly_once_restarts_the_replica_which_joins_again() -> None:
    """Another producer takes task 1's transactional.id (this replica missed a rebalance): its
    producer is fenced, the replica starts over in the process, and read_committed readers see
    every input once."""
    cluster = FakeCluster()
    cluster.create_topic("a", 2)
    cluster.create_topic("b", 2)
    cfg = config(task_grouping="partition", processing_guarantee="exactly_once_v2")
    for t in ("a", "b"):
        for p in range(2):
            cluster.produce(t, p, range(1_000, 1_020))
    supervisor = sidecar(cluster, cfg)
    running = asyncio.create_task(supervisor.run())
    while len(sources(cluster.read(OUT, committed=True))) < 10:
        await asyncio.sleep(0.002)
    zombie_killer = FakeProducer(cluster, f"{cfg.effective_group_id}-txn-1")
    await zombie_killer.start()
    for t in ("a", "b"):
        for p in range(2):
            cluster.produce(t, p, range(2_000, 2_020))
    while len(set(sources(cluster.read(OUT, committed=True)))) < 160:
        assert not running.done(), running
        await asyncio.sleep(0.002)
    supervisor.request_stop()
    await asyncio.wait_for(running, 10)
    assert supervisor.restarts >= 1
    out = sources(cluster.read(OUT, committed=True))
    assert len(out) == len(set(out)) == 160


async def test_under_task_grouping_single_a_fenced_producer_means_another_process_and_is_fatal() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.produce("a", 0, range(1_000, 1_020))
    cfg = config(["a"], processing_guarantee="exactly_once_v2")
    supervisor = sidecar(cluster, cfg)
    running = asyncio.create_task(supervisor.run())
    while len(sources(cluster.read(OUT, committed=True))) < 20:
        await asyncio.sleep(0.002)
    await FakeProducer(cluster, f"{cfg.effective_group_id}-txn").start()
    cluster.produce("a", 0, [2_000])
    with pytest.raises(Exception, match=r"another process started with transactional\.id"):
        await asyncio.wait_for(running, 10)
    assert isinstance(supervisor.state, Failed)


async def test_a_client_that_raises_cancelled_error_while_closing_does_not_end_the_process() -> None:
    """aiokafka's consumer can re-raise, from stop(), the CancelledError of a fetch task it
    cancelled: a restart or a stop must go on."""
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.produce("a", 0, range(1_000, 1_010))
    cfg = config(["a"], processing_guarantee="exactly_once_v2")
    supervisor = sidecar(cluster, cfg)

    async def cancelled_stop() -> None:
        raise asyncio.CancelledError

    done = lambda: len(sources(cluster.read(OUT, committed=True))) >= 10  # noqa: E731
    running = asyncio.create_task(supervisor.run())
    while not done():
        await asyncio.sleep(0.002)
    consumer = supervisor.pipeline.consumer
    consumer.stop = cancelled_stop
    cluster.failures = [KafkaTimeoutError("expired")]  # the next write fails: a restart
    cluster.produce("a", 0, [2_000])
    while supervisor.restarts == 0:
        assert not running.done()
        await asyncio.sleep(0.002)
    supervisor.pipeline.control.changed.clear()
    while len(sources(cluster.read(OUT, committed=True))) < 11:
        assert not running.done()
        await asyncio.sleep(0.002)
    supervisor.request_stop()
    await asyncio.wait_for(running, 10)


async def test_a_spare_replica_with_no_task_stays_healthy_and_says_it_is_a_spare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More replicas than tasks: the one left without a task hears nothing from fetches or acks,
    yet the cluster answers it — it is healthy (a liveness probe must not restart it, which would
    rebalance the group), and /status says why it holds nothing."""
    monkeypatch.setattr(pipeline_module, "GAUGE_INTERVAL_S", 0.02)
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.create_topic("b", 1)
    cluster.produce("a", 0, range(1_000, 1_010))
    cfg = config(task_grouping="partition")
    replicas = [sidecar(cluster, cfg, Health(silence_s=0.2)) for _ in range(2)]
    running = [asyncio.create_task(s.run()) for s in replicas]

    def spare_has_asked() -> bool:
        idle = [s for s in replicas if not s.pipeline.tasks]
        return len(idle) == 1 and idle[0].pipeline.ctx.clients.consumers[0].metadata_requests > 5  # type: ignore[attr-defined]

    # Until the spare has asked the cluster a few times (0.1 s on a quiet machine; a loaded one
    # may starve the loop for longer), then everything is judged at once.
    deadline = asyncio.get_running_loop().time() + 10.0
    while not spare_has_asked() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    try:
        idle = [s for s in replicas if not s.pipeline.tasks]
        assert len(idle) == 1, "one replica holds the only task"
        assert idle[0].pipeline.ctx.clients.consumers[0].metadata_requests > 5  # type: ignore[attr-defined]
        status = idle[0].status()
        assert status["role"].startswith("spare: no task assigned")
        assert status["tasks"] == {}
        assert idle[0].health.status()[0] == "healthy"
    finally:
        for s in replicas:
            s.request_stop()
        await asyncio.gather(*running)


async def test_a_replica_that_loses_a_task_in_a_rebalance_drops_its_series_from_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gauges of partitions and tasks that moved away must leave /metrics: dashboards summing lag
    over replicas would count them twice, and a stale watermark would seem to fall behind."""
    monkeypatch.setattr(pipeline_module, "GAUGE_INTERVAL_S", 0.02)
    cluster = FakeCluster()
    cluster.create_topic("a", 2)
    cluster.create_topic("b", 2)
    for p in range(2):
        cluster.produce("a", p, range(1_000, 1_010))
    cfg = config(task_grouping="partition")
    first = sidecar(cluster, cfg)
    running = asyncio.create_task(first.run())
    while len(first.pipeline.tasks) < 2 or b'task="1"' not in first.metrics.exposition():
        await asyncio.sleep(0.01)
    second = sidecar(cluster, cfg)
    joined = asyncio.create_task(second.run())
    try:
        while len(first.pipeline.tasks) != 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        kept = next(iter(first.pipeline.tasks)).name
        gone = "1" if kept == "0" else "0"
        exposition = first.metrics.exposition().decode()
        assert f'task="{gone}"' not in exposition
        assert f'partition="{gone}"' not in exposition
        assert f'partition="{kept}"' in exposition
    finally:
        for s in (first, second):
            s.request_stop()
        await asyncio.gather(running, joined)
