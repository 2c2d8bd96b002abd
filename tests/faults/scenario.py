"""One fault run on a local cluster: two sidecars (one per guarantee) under live input, a fault
schedule played against the cluster's nodes, then the delivery checked and the recovery timed.

The fault tests on the three-node cluster and the outage runs on a single broker share this: a
test says only which faults to play (:class:`Fault` steps built from the helpers below) and what
health it expects.

What is watched while the faults play, every 0.25 s and for each sidecar:

* the process is alive (a sidecar that exits fails the run at once, with its log);
* ``/healthz``: the states seen, and per fault whether it went degraded and when it was healthy
  again;
* the records it has written (``/status``), to time how long after a fault its output moved again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiokafka.admin import AIOKafkaAdminClient

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event, steady

from .delivery import Delivery, check, end_offsets, per_partition, table_row, wait_committed

GUARANTEES = ("at_least_once", "exactly_once_v2")
PARTITIONS = 2
SAMPLE_S = 0.25
#: A node that was stopped is back in every partition's ISR within this (Kafka's own rolling
#: restart tests wait for the ISR before they touch the next broker).
IN_SYNC_TIMEOUT_S = 120.0


@dataclass
class Sample:
    at: float
    state: str
    records_out: int
    message: str = ""


@dataclass
class Run:
    """One sidecar with its own inputs, output and live writer."""

    guarantee: str
    inputs: list[str]
    output: str
    events: list[Event]
    expected: dict[tuple[str, int], int]
    process: SidecarProcess
    samples: list[Sample] = field(default_factory=list)
    writing: asyncio.Task[None] | None = None
    written_at: float | None = None

    @property
    def group(self) -> str:
        return f"timesync-{self.output}"


@dataclass
class FaultWindow:
    """A fault as played: from ``start`` (the first node went away) to ``end`` (the cluster is
    whole again: every node serves)."""

    label: str
    start: float
    end: float = 0.0


@dataclass
class Recovery:
    """What one sidecar did around one fault."""

    degraded: bool
    #: Why it said degraded (the first reason seen), if it did.
    reason: str
    #: Seconds from the fault's end until the sidecar was healthy and its output moved (or its
    #: input was all written out already); ``None`` if that never happened.
    recover_s: float | None
    #: The longest the sidecar's output stood still from the fault's start to its recovery, while
    #: it had input left to write.
    stall_s: float


class Context:
    """What a fault step may use: the cluster (the launcher's ``Cluster``), its bootstrap, the
    runs, and the log of fault windows."""

    def __init__(self, cluster: Any, runs: list[Run]) -> None:
        self.cluster = cluster
        self.bootstrap: str = cluster.bootstrap
        self.runs = runs
        self.windows: list[FaultWindow] = []

    def open(self, label: str) -> FaultWindow:
        window = FaultWindow(label, time.monotonic())
        self.windows.append(window)
        return window

    async def stop(self, node_id: int, kill: bool = False) -> None:
        if kill:
            await asyncio.to_thread(self.cluster.kill_node, node_id)
        else:
            await asyncio.to_thread(self.cluster.stop_node, node_id)

    async def stop_all(self) -> None:
        """Every node at once, SIGTERM then SIGKILL after 5 s: the last nodes of a cluster going
        down have no controller quorum left to finish their controlled shutdown."""
        await asyncio.to_thread(self.cluster.stop_nodes, [n.node_id for n in self.cluster.nodes], 5.0)

    async def start(self, node_ids: Sequence[int]) -> None:
        # Spawned from this (the event loop's) thread, waited for in a worker: see
        # Cluster.spawn_node on why.
        for node_id in node_ids:
            self.cluster.spawn_node(node_id)
        await asyncio.to_thread(self.cluster.wait_ready, list(node_ids))

    async def until(self, state: str, timeout_s: float = 60.0) -> None:
        """Until every sidecar's last sample says ``state``."""
        deadline = time.monotonic() + timeout_s
        while not all(run.samples and run.samples[-1].state == state for run in self.runs):
            if time.monotonic() > deadline:
                last = {run.guarantee: run.samples[-1].state if run.samples else None for run in self.runs}
                raise AssertionError(f"/healthz not all {state} within {timeout_s} s: {last}")
            await asyncio.sleep(SAMPLE_S)

    async def recovered(self, window: FaultWindow, timeout_s: float = 120.0) -> None:
        """Until every sidecar, after the fault's end, is healthy with its output moving (or all
        its input written out): the next fault starts from a recovered sidecar."""
        deadline = time.monotonic() + timeout_s
        while True:
            pending = [run.guarantee for run in self.runs if not _recovered(run, window)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{pending}: not healthy with output moving {timeout_s} s after {window.label}"
                )
            await asyncio.sleep(SAMPLE_S)

    async def in_sync(self) -> None:
        """Until every partition of the runs' topics and of Kafka's internal topics has all its
        replicas in sync."""
        topics = [t for run in self.runs for t in (*run.inputs, run.output)]
        topics += ["__consumer_offsets", "__transaction_state"]
        deadline = time.monotonic() + IN_SYNC_TIMEOUT_S
        lagging: list[str] = []
        while time.monotonic() < deadline:
            lagging = []
            with contextlib.suppress(Exception):
                for desc in await describe(self.bootstrap, topics):
                    for p in desc["partitions"]:
                        if len(p["isr"]) < len(p["replicas"]):
                            lagging.append(f"{desc['topic']}-{p['partition']} isr {p['isr']}")
                if not lagging:
                    return
            await asyncio.sleep(0.5)
        raise AssertionError(f"replicas not in sync after {IN_SYNC_TIMEOUT_S} s: {lagging[:5]}")

    async def leader(self, topic: str, partition: int = 0) -> int:
        (desc,) = await describe(self.bootstrap, [topic])
        (p,) = [p for p in desc["partitions"] if p["partition"] == partition]
        return int(p["leader"])

    async def coordinator(self, group: str) -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            return int(await admin.find_coordinator(group))
        finally:
            await admin.close()


async def describe(bootstrap: str, topics: Sequence[str]) -> list[dict[str, Any]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(list(topics))
    finally:
        await admin.close()
    for desc in described:
        if desc["error_code"]:
            raise RuntimeError(f"describe {desc['topic']}: error {desc['error_code']}")
    return list(described)


Step = Callable[[Context], Awaitable[None]]


async def start_run(
    bootstrap: str,
    guarantee: str,
    topic_name: Callable[[str], str],
    records: int,
    write_s: float,
    log_dir: Path,
    replication: int,
) -> Run:
    a, b, out = topic_name(f"a-{guarantee}"), topic_name(f"b-{guarantee}"), topic_name(f"out-{guarantee}")
    await kafka_io.create_topics(
        bootstrap, [TopicSpec(a, PARTITIONS, replication), TopicSpec(b, PARTITIONS, replication)]
    )
    events = steady([a, b], PARTITIONS, records, 1_700_000_000_000, seed=3, rate_per_s=records / write_s)
    process = SidecarProcess(bootstrap, [a, b], out, {"processing.guarantee": guarantee}, log_dir=log_dir)
    await process.start()
    return Run(guarantee, [a, b], out, events, per_partition((e.topic, e.partition) for e in events), process)


def start_writing(bootstrap: str, run: Run) -> None:
    """The input, paced; idempotent and patient, so the writer itself neither loses nor repeats
    through the faults."""

    async def write() -> None:
        await kafka_io.produce(
            bootstrap, run.events, paced=True, enable_idempotence=True, request_timeout_ms=180_000
        )
        run.written_at = time.monotonic()

    run.writing = asyncio.create_task(write())


async def watch(runs: Sequence[Run]) -> None:
    """Sample every sidecar until cancelled; fails the moment one of them exits."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while True:
            for run in runs:
                proc = run.process.proc
                assert proc is not None
                if proc.returncode is not None:
                    tail = run.process.log_tail(40)
                    raise AssertionError(f"{run.guarantee}: the sidecar exited ({proc.returncode}):\n{tail}")
                base = f"http://127.0.0.1:{run.process.http_port}"
                state, out = "unreachable", run.samples[-1].records_out if run.samples else 0
                message = ""
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError, ValueError):
                    async with session.get(f"{base}/healthz") as r:
                        body = await r.json()
                        state, message = body["status"], body.get("message", "")
                    async with session.get(f"{base}/status") as r:
                        tasks = (await r.json()).get("tasks", {})
                        out = sum(int(t.get("records_out", 0)) for t in tasks.values())
                run.samples.append(Sample(time.monotonic(), state, out, message))
            await asyncio.sleep(SAMPLE_S)


def _recovered(run: Run, window: FaultWindow) -> bool:
    at_end = next((s for s in run.samples if s.at >= window.end), None)
    if at_end is None:
        return False
    last = run.samples[-1]
    return last.state == "healthy" and (last.records_out > at_end.records_out or _all_out(run, window, last))


def _all_out(run: Run, window: FaultWindow, s: Sample) -> bool:
    """Nothing left to move: every input written out, or (the count restarts with an in-process
    restart) the writer done and the sidecar healthy for 5 s past the fault."""
    if s.records_out >= len(run.events):
        return True
    return run.written_at is not None and s.at - max(run.written_at, window.end) > 5.0


def recovery(run: Run, window: FaultWindow, until: float) -> Recovery:
    """Judge one sidecar's samples from the fault's start to ``until`` (the next fault)."""
    seen = [s for s in run.samples if window.start <= s.at <= until]
    reasons = [s.message for s in seen if s.state == "degraded"]
    degraded = bool(reasons)
    at_end = next((s for s in seen if s.at >= window.end), None)
    recovered: Sample | None = None
    if at_end is not None:
        for s in seen:
            if s.at < window.end or s.state != "healthy":
                continue
            if s.records_out > at_end.records_out or _all_out(run, window, s):
                recovered = s
                break
    stall, moved_at, last_out = 0.0, window.start, None
    for s in seen:
        if (recovered is not None and s.at > recovered.at) or s.records_out >= len(run.events):
            break  # recovered, or all written: a still output is no stall
        if last_out is None or s.records_out != last_out:
            moved_at, last_out = s.at, s.records_out
        stall = max(stall, s.at - moved_at)
    reason = reasons[0].split(" (for ")[0] if reasons else ""
    return Recovery(degraded, reason, None if recovered is None else recovered.at - window.end, stall)


@dataclass
class Outcome:
    runs: list[Run]
    windows: list[FaultWindow]
    deliveries: dict[str, Delivery]
    recoveries: dict[str, list[Recovery]]


async def play(
    cluster: Any,
    name: str,
    steps: Sequence[Step],
    topic_name: Callable[[str], str],
    log_dir: Path,
    records: int,
    write_s: float,
    replication: int,
    lead_s: float = 2.0,
) -> Outcome:
    """Start both sidecars and their writers, play ``steps`` after ``lead_s``, let everything
    drain, stop the sidecars (each must exit 0), and read back what they wrote."""
    bootstrap = cluster.bootstrap
    runs = [
        await start_run(bootstrap, g, topic_name, records, write_s, log_dir, replication) for g in GUARANTEES
    ]
    watcher = asyncio.create_task(watch(runs))
    ctx = Context(cluster, runs)
    try:
        for run in runs:
            start_writing(bootstrap, run)
        await asyncio.sleep(lead_s)
        for step in steps:
            await race(step(ctx), watcher)
        for run in runs:
            assert run.writing is not None
            await race(run.writing, watcher)
            # What the inputs hold is what must come out.
            run.expected = await end_offsets(bootstrap, run.expected)
        for run in runs:
            await race(wait_committed(bootstrap, run.group, run.expected, timeout_s=240), watcher)
        await asyncio.sleep(2 * SAMPLE_S)  # a last sample after the drain
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, AssertionError):
            await watcher
        codes = {}
        for run in runs:
            if run.writing is not None:
                run.writing.cancel()
            if run.process.proc is not None and run.process.proc.returncode is None:
                codes[run.guarantee] = await run.process.stop()
            else:
                codes[run.guarantee] = run.process.proc.returncode if run.process.proc else None
    for run in runs:
        assert codes[run.guarantee] == 0, (
            f"{run.guarantee} exit {codes[run.guarantee]}:\n{run.process.log_tail()}"
        )

    deliveries = {}
    for run in runs:
        got = ordered.data(
            await kafka_io.read_topics(
                bootstrap, [run.output], idle_s=1.0, timeout_s=180, isolation_level="read_committed"
            )
        )
        deliveries[run.guarantee] = check(run.expected, got)
    ends = [w.start for w in ctx.windows[1:]] + [time.monotonic()]
    recoveries = {
        run.guarantee: [recovery(run, w, e) for w, e in zip(ctx.windows, ends, strict=True)] for run in runs
    }
    outcome = Outcome(runs, ctx.windows, deliveries, recoveries)
    report(name, outcome)
    return outcome


async def race(work: Awaitable[Any], watcher: asyncio.Task[None]) -> Any:
    """Await ``work`` unless the watcher fails first (a sidecar exited): then fail at once."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if watcher in done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        watcher.result()  # raises the watcher's AssertionError
        raise AssertionError("the watcher stopped")
    return task.result()


def report(name: str, outcome: Outcome) -> None:
    print(f"\n== {name}")
    for window in outcome.windows:
        print(f"   fault {window.label}: away {window.end - window.start:.1f} s")
    for run in outcome.runs:
        delivery = outcome.deliveries[run.guarantee]
        recs = outcome.recoveries[run.guarantee]
        states = sorted({s.state for s in run.samples})
        print(f"{run.guarantee}: {delivery.line()}; health states seen {states}")
        for window, rec in zip(outcome.windows, recs, strict=True):
            back = "never" if rec.recover_s is None else f"{rec.recover_s:.1f} s"
            print(
                f"   {window.label}: degraded {'yes' if rec.degraded else 'no'}, recovered {back} after "
                f"the cluster was whole, output stalled ≤ {rec.stall_s:.1f} s"
                + (f"; degraded because: {rec.reason[:160]}" if rec.degraded else "")
            )
        worst = max((r.recover_s or 0.0 for r in recs), default=0.0)
        print(table_row(f"{name}, {run.guarantee}", 1, delivery) + f" {worst:.1f} s |")


def failures(outcome: Outcome, degraded_each: bool) -> list[str]:
    """What the issue asks of every run: nothing lost, exactly once shows nothing twice, health
    back to healthy after every fault — and, with ``degraded_each``, degraded during every fault.
    (The sidecar never exiting is checked while the run goes, and by the exit codes.)"""
    found = []
    for run in outcome.runs:
        delivery = outcome.deliveries[run.guarantee]
        if delivery.problems or delivery.lost:
            found.append(f"{run.guarantee}: {delivery.line()}: {delivery.problems[:3]}")
        if run.guarantee == "exactly_once_v2" and delivery.duplicates:
            found.append(f"{run.guarantee}: read_committed saw {delivery.duplicates} duplicates")
        if any(s.state == "unhealthy" for s in run.samples):
            found.append(f"{run.guarantee}: /healthz said unhealthy (failed and leaving)")
        for window, rec in zip(outcome.windows, outcome.recoveries[run.guarantee], strict=True):
            if rec.recover_s is None:
                found.append(f"{run.guarantee}: never healthy with output moving after {window.label}")
            if degraded_each and not rec.degraded:
                found.append(f"{run.guarantee}: /healthz never said degraded during {window.label}")
    return found
