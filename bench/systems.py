"""The systems the benchmark compares, started and stopped the same way.

Each system under test runs as its own process, so its CPU seconds and peak RSS can be read from
``/proc/<pid>`` without the harness's own work in the figures:

* ``passthrough`` — ``python -m bench.peers.passthrough``: consume → produce, no ordering;
* ``timesync`` — ``python -m sidecar`` (the product), at a ``max.task.idle.ms`` and a
  ``task.grouping``;
* ``kafka-streams`` — the Kafka Streams peer's JVM (``bench/peers/kafka-streams``), at the
  benchmark's own settings or as its users run it (:data:`KS_PROFILES`), warmed up by a drain of
  other topics in the same JVM when the harness asks for it;
* ``rdkafka-copy`` — ``python -m bench.peers.rdkafka_copy``: confluent-kafka (librdkafka) consume →
  produce, no ordering — the fastest Python client, the throughput floor of a Python sidecar;
* ``optimum`` — not a process: the whole input sorted offline (see :mod:`bench.analysis`).

:func:`running` starts one and yields a :class:`Running` once it is ready to consume (the
sidecar's ``/healthz`` says 200; the peers print ``READY``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.peers.kafka_streams import KafkaStreamsPeer, PeerProcess, PeerSettings
from testkit.processes import spawn_logged, terminate
from testkit.sidecar_process import SidecarProcess

Kind = Literal["passthrough", "timesync", "kafka-streams", "rdkafka-copy", "optimum"]
IDLE_VALUES = ("-1", "0", "100", "1000", "max")
#: timesync's settings in the live phase: the fixed ones of :data:`IDLE_VALUES`, 500 and 2000 ms
#: beside them, and ``auto`` (learnt per partition; bench.idle_auto compares it with the others).
LIVE_TIMESYNC_IDLES = ("-1", "0", "100", "500", "1000", "2000", "max", "auto")
READY_TIMEOUT_S = 60.0

#: Kafka Streams' throughput tuning as a user would write it (the issue's "tuned" peer).
KS_TUNED = {
    "producer.compression.type": "lz4",
    "producer.batch.size": "262144",
    "producer.linger.ms": "5",
    "consumer.max.poll.records": "5000",
    "metrics.recording.level": "INFO",
}
#: Kafka Streams as its users run it: profile → (commit.interval.ms, extra settings).
#: ``defaults``: Kafka Streams' own defaults (commit every 30 s under at-least-once, its producer
#: override linger.ms=100 — the peer otherwise sets 5 ms —, max.poll.records 1000);
#: ``tuned``: tuned for throughput; ``tuned commit 100 ms``: the same at timesync's commit interval
#: (``sidecar.service.delivery.COMMIT_INTERVAL_S``), i.e. with the same durability window.
#: No profile (``None``): the benchmark's latency settings (commit 100 ms, linger 5 ms), used by
#: the live runs.
KS_PROFILES: dict[str, tuple[int, dict[str, str]]] = {
    "defaults": (30_000, {"producer.linger.ms": "100"}),
    "tuned": (30_000, KS_TUNED),
    "tuned commit 100 ms": (100, KS_TUNED),
}


@dataclass(frozen=True, slots=True)
class SystemSpec:
    """One system at one setting. ``idle`` is ``max.task.idle.ms`` as text (``None``: no idling)."""

    kind: Kind
    idle: str | None = None
    grouping: Literal["single", "partition"] = "single"
    #: timesync only: ``compression.lz4.level`` when not Kafka's default (10: LZ4 HC, about the
    #: effort aiokafka — and so the passthrough — spends on every lz4 batch).
    lz4_level: int | None = None
    #: kafka-streams only: a key of :data:`KS_PROFILES` (``None``: the benchmark's own settings).
    profile: str | None = None
    #: timesync only: another checkout of the repository whose sidecar runs (its ``.venv``), named
    #: in the label as ``@NAME`` — the "before" of a before/after comparison (:mod:`bench.ab`).
    checkout: Path | None = None

    @property
    def label(self) -> str:
        """Short, unique, stable: ``passthrough``, ``timesync idle 0``, ``timesync/partition idle 0``,
        ``kafka-streams idle 0 tuned``."""
        name = self.kind if self.grouping == "single" or self.kind != "timesync" else "timesync/partition"
        label = name if self.idle is None else f"{name} idle {self.idle}"
        if self.profile is not None:
            label = f"{label} {self.profile}"
        if self.lz4_level is not None:
            label = f"{label} lz4 {self.lz4_level}"
        return label if self.checkout is None else f"{label} @{self.checkout.name}"

    @property
    def slug(self) -> str:
        """The label as a topic-name fragment."""
        slug = self.label.replace("/", "-").replace(" idle ", "-i").replace("-1", "m1").replace(" ", "-")
        return slug.replace("@", "at-")

    @property
    def warms_up(self) -> bool:
        """A JVM that the throughput phase warms up with a drain of other topics first."""
        return self.kind == "kafka-streams"

    def output_partitions(self, input_partitions: int) -> int:
        """One output partition per task: Kafka Streams and ``task.grouping=partition`` have one
        task per partition index; the passthrough and ``task.grouping=single`` write partition 0."""
        per_task = self.kind == "kafka-streams" or self.grouping == "partition"
        return input_partitions if per_task else 1

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "idle": self.idle,
            "grouping": self.grouping,
            "label": self.label,
        }
        if self.profile is not None:
            commit_ms, config = KS_PROFILES[self.profile]
            out["profile"] = {"name": self.profile, "commit_interval_ms": commit_ms, "config": config}
        if self.checkout is not None:
            out["checkout"] = self.checkout.name
        return out if self.lz4_level is None else {**out, "lz4_level": self.lz4_level}


#: The sidecar at an lz4 level that compresses with LZ4 HC, as aiokafka does for the passthrough:
#: the throughput comparison at equal compression effort (harness, goals and report use it).
LZ4_HC = 10
TIMESYNC_LZ4_HC = SystemSpec("timesync", "0", lz4_level=LZ4_HC)


@dataclass
class Usage:
    """CPU seconds (user + system) and peak resident memory of one process."""

    cpu_s: float
    peak_rss_bytes: int


def usage(pid: int) -> Usage:
    """Read ``/proc/<pid>/stat`` (utime + stime) and ``VmHWM`` of ``/proc/<pid>/status`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    hwm_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return Usage(cpu, hwm_kb * 1024)


def usage_fields(pid: int, cpu_at_ready: float) -> dict[str, Any]:
    """A run's ``cpu_s`` (since the system was ready), ``cpu_s_with_start`` and ``peak_rss_mib``."""
    used = usage(pid)
    return {
        "cpu_s": round(used.cpu_s - cpu_at_ready, 2),
        "cpu_s_with_start": round(used.cpu_s, 2),
        "peak_rss_mib": round(used.peak_rss_bytes / 2**20, 1),
    }


class CpuSampler:
    """Samples a process's CPU seconds every ``every_s`` (wall-clock ms, CPU s), so the CPU spent
    between two instants known only afterwards (first and last output) can be read off."""

    def __init__(self, pid: int, every_s: float = 0.05) -> None:
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[int, float]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(OSError, ValueError):
                self.samples.append((time.time_ns() // 1_000_000, usage(self.pid).cpu_s))
            await asyncio.sleep(self.every_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def cpu_at(self, wall_ms: int) -> float:
        """CPU seconds used by ``wall_ms`` (linear between samples, clamped at the ends)."""
        if not self.samples:
            return 0.0
        for (t0, c0), (t1, c1) in itertools.pairwise(self.samples):
            if t0 <= wall_ms <= t1:
                return c0 + (c1 - c0) * (wall_ms - t0) / max(1, t1 - t0)
        return self.samples[0][1] if wall_ms < self.samples[0][0] else self.samples[-1][1]


@dataclass
class Running:
    """A started system: its pid, when it became ready (wall-clock ms), and its CPU time then."""

    spec: SystemSpec
    pid: int
    ready_ms: int
    start_s: float
    cpu_at_ready_s: float
    sidecar: SidecarProcess | None = None

    async def status(self) -> dict[str, Any] | None:
        """The sidecar's ``/status`` (``None`` for the other systems)."""
        if self.sidecar is None:
            return None
        with contextlib.suppress(Exception):
            return await self.sidecar.status()
        return None


class PassthroughProcess:
    """A Python copy peer (``python -m <module>``, the passthrough by default) as a child process,
    ready once it prints READY."""

    def __init__(
        self,
        bootstrap: str,
        inputs: list[str],
        output: str,
        group: str,
        log_path: Path,
        module: str = "bench.peers.passthrough",
    ) -> None:
        self.module = module
        self.argv = [
            sys.executable,
            "-m",
            module,
            "--bootstrap-servers",
            bootstrap,
            "--input-topics",
            ",".join(inputs),
            "--output-topic",
            output,
            "--group-id",
            group,
        ]
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.proc = await spawn_logged(self.argv, self.log_path, stdout=asyncio.subprocess.PIPE)
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
        except TimeoutError:
            await self.stop()
            raise RuntimeError(
                f"{self.module} printed no READY within {timeout_s:g} s; log {self.log_path}"
            ) from None
        if line.strip() != b"READY":
            await self.stop()
            raise RuntimeError(f"{self.module} did not start (stdout {line!r}); log {self.log_path}")
        self._drain = asyncio.create_task(self._discard(self.proc.stdout))

    @staticmethod
    async def _discard(stream: asyncio.StreamReader) -> None:
        async for _ in stream:
            pass

    async def stop(self, timeout_s: float = 30.0) -> int:
        proc = self.proc
        if proc is None:
            return 0
        await terminate(proc, timeout_s)
        if self._drain is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._drain, 5.0)
        assert proc.returncode is not None
        return proc.returncode


def sidecar_settings(spec: SystemSpec) -> dict[str, object]:
    """The sidecar settings of one benchmark run (everything else at its defaults)."""
    assert spec.idle is not None
    settings: dict[str, object] = {
        "max.task.idle.ms": spec.idle,
        "task.grouping": spec.grouping,
        # Every run starts with a fresh group on fresh topics; nothing to resume.
        "auto.offset.reset": "earliest",
    }
    if spec.lz4_level is not None:
        settings["compression.lz4.level"] = spec.lz4_level
    return settings


@contextlib.asynccontextmanager
async def running(
    spec: SystemSpec,
    bootstrap: str,
    inputs: list[str],
    output: str,
    run_id: str,
    log_dir: Path,
    warmup: tuple[list[str], int] | None = None,
) -> AsyncIterator[Running]:
    """Start ``spec`` on ``inputs`` → ``output``; yield once it is ready; stop it on exit.

    ``warmup`` (topics, records): a JVM peer first drains that many records of those topics in the
    same process, and is ready only after that (the others ignore it: no JIT to warm up).
    """
    started = time.monotonic()
    group = f"bench-{run_id}"
    if spec.kind in ("passthrough", "rdkafka-copy"):
        module = "bench.peers.passthrough" if spec.kind == "passthrough" else "bench.peers.rdkafka_copy"
        passthrough = PassthroughProcess(bootstrap, inputs, output, group, log_dir / f"{run_id}.log", module)
        await passthrough.start()
        try:
            yield _ready(spec, passthrough.pid, started)
        finally:
            await passthrough.stop()
    elif spec.kind == "timesync":
        settings = {**sidecar_settings(spec), "group.id": group}
        sidecar = SidecarProcess(bootstrap, inputs, output, settings, log_dir=log_dir, checkout=spec.checkout)
        await sidecar.start(timeout_s=READY_TIMEOUT_S)
        try:
            yield _ready(spec, sidecar.pid, started, sidecar)
        finally:
            await sidecar.stop()
    elif spec.kind == "kafka-streams":
        assert spec.idle is not None
        idle: int | Literal["max"] = "max" if spec.idle == "max" else int(spec.idle)
        commit_ms, config = KS_PROFILES[spec.profile] if spec.profile is not None else (100, {})
        settings = PeerSettings(
            bootstrap,
            inputs,
            output,
            idle,
            group,
            commit_interval_ms=commit_ms,
            config=config,
            warmup_topics=warmup[0] if warmup else (),
            warmup_records=warmup[1] if warmup else 0,
        )
        process = PeerProcess(ready_timeout_s=READY_TIMEOUT_S + (warmup[1] / 5_000 if warmup else 0))
        peer = KafkaStreamsPeer(settings, process)
        async with peer:
            yield _ready(spec, peer.pid, started)
    else:
        raise ValueError(f"{spec.label} is computed offline, not run")


def _ready(spec: SystemSpec, pid: int, started: float, sidecar: SidecarProcess | None = None) -> Running:
    return Running(
        spec,
        pid,
        ready_ms=time.time_ns() // 1_000_000,
        start_s=time.monotonic() - started,
        cpu_at_ready_s=usage(pid).cpu_s,
        sidecar=sidecar,
    )
