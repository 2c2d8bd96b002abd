"""The benchmark's six workloads: topic layout, records and their arrival schedule, at two sizes.

A :class:`Scenario` is what one system run gets: input topics (all with the same partition
count, so Kafka Streams can co-partition them), an optional backlog written before the system
starts, and the live records written at their ``send_at_ms`` while it runs. Building the same
scenario twice with the same seed gives the same records; only the topic names (fresh per run)
and ``base_ms`` (the wall clock at the start, so event time tracks the clock) differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testkit import workloads
from testkit.workloads import Event

NAMES = ("steady", "skewed", "iot", "lagging", "quiet", "log-append")

DESCRIPTIONS = {
    "steady": "equal rates on every partition (2 topics x 2 partitions)",
    "skewed": "one partition at ~10K records/s beside one at ~1 record/s written in bursts (KIP-353)",
    "iot": "per-key bursts: each sensor dumps a day of readings at once (per-key stream time)",
    "lagging": "one partition with a backlog on the broker while the others are live (KIP-695)",
    "quiet": "one partition goes silent for 30 % of the run, then resumes",
    "log-append": "steady traffic into LogAppendTime topics (event time = broker append time)",
}


@dataclass(frozen=True)
class Sizes:
    """Knobs of every workload; :data:`FULL` and :data:`QUICK` are the two presets."""

    duration_s: float = 15.0
    rate_per_s: float = 4000.0  # all partitions together (steady, lagging, quiet, log-append)
    skewed_fast_rate: float = 10_000.0
    skewed_duration_s: float = 10.0
    iot_sensors: int = 16
    iot_readings: int = 1440  # one a minute over the day
    iot_dump_every_ms: int = 500
    lagging_backlog: int = 100_000
    # Steady traffic before the measured workload (not with a backlog, which it would drain):
    # Kafka Streams' JVM needs seconds of work before its JIT reaches full speed.
    warmup_s: float = 5.0

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


FULL = Sizes()
QUICK = Sizes(
    duration_s=3.0,
    rate_per_s=2000.0,
    skewed_fast_rate=5_000.0,
    skewed_duration_s=2.5,
    iot_sensors=8,
    iot_readings=500,
    iot_dump_every_ms=400,
    lagging_backlog=20_000,
    warmup_s=0.0,
)


@dataclass
class Scenario:
    name: str
    topics: list[str]
    partitions: int
    live: list[Event]
    backlog: list[Event] = field(default_factory=list)
    log_append_time: bool = False

    @property
    def records(self) -> int:
        return len(self.backlog) + len(self.live)

    @property
    def first_ts(self) -> int:
        return min(e.ts for e in (*self.backlog, *self.live))

    @property
    def duration_ms(self) -> int:
        return self.live[-1].send_at_ms if self.live else 0


def build(name: str, prefix: str, sizes: Sizes, seed: int, base_ms: int) -> Scenario:
    """The scenario ``name`` with topics ``<prefix>-a``, ``<prefix>-b``."""
    a, b = f"{prefix}-a", f"{prefix}-b"
    steady_records = int(sizes.duration_s * sizes.rate_per_s)
    if name == "steady":
        events = workloads.steady([a, b], 2, steady_records, base_ms, seed=seed, rate_per_s=sizes.rate_per_s)
        return Scenario(name, [a, b], 2, events)
    if name == "skewed":
        events = workloads.skewed(
            a, b, base_ms, duration_s=sizes.skewed_duration_s, fast_rate=sizes.skewed_fast_rate, seed=seed
        )
        return Scenario(name, [a, b], 1, events)
    if name == "iot":
        events = workloads.iot_dump(
            [a, b],
            2,
            base_ms,
            sensors=sizes.iot_sensors,
            readings=sizes.iot_readings,
            dump_every_ms=sizes.iot_dump_every_ms,
            seed=seed,
        )
        return Scenario(name, [a, b], 2, events)
    if name == "lagging":
        backlog, events = workloads.lagging(
            [a, b], 2, steady_records, base_ms, sizes.lagging_backlog, seed=seed, rate_per_s=sizes.rate_per_s
        )
        return Scenario(name, [a, b], 2, events, backlog)
    if name == "quiet":
        events = workloads.quiet([a, b], 2, steady_records, base_ms, seed=seed, rate_per_s=sizes.rate_per_s)
        return Scenario(name, [a, b], 2, events)
    if name == "log-append":
        events = workloads.steady([a, b], 2, steady_records, base_ms, seed=seed, rate_per_s=sizes.rate_per_s)
        return Scenario(name, [a, b], 2, events, log_append_time=True)
    raise ValueError(f"unknown workload {name!r}; known: {', '.join(NAMES)}")
