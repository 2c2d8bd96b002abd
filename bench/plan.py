"""What one ``bench run`` does: the systems, workloads and sizes, chosen once from the flags.

Its own module so that the phases (:mod:`bench.throughput`, :mod:`bench.curves`,
:mod:`bench.live`, :mod:`bench.spark_bench`) can all read a plan without importing each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from bench import scenarios
from bench.scenarios import Sizes
from bench.systems import IDLE_VALUES, KS_PROFILES, LIVE_TIMESYNC_IDLES, TIMESYNC_LZ4_HC, SystemSpec


@dataclass(frozen=True)
class Plan:
    """What one ``bench run`` does."""

    quick: bool
    seed: int
    sizes: Sizes
    workloads: tuple[str, ...]
    live_systems: tuple[SystemSpec, ...]
    throughput_systems: tuple[SystemSpec, ...]
    throughput_records: int
    throughput_repeats: int = 1  # rounds for the headline systems (median reported)
    steady_repeats: int = 1  # rounds of passthrough and timesync idle 0 on steady (median p99)
    value_bytes: int = 100
    #: record shapes of the throughput phase (bench.throughput.SHAPES); the first one runs
    #: ``throughput_systems`` and the order checks, the others ``realistic_systems``
    throughput_shapes: tuple[str, ...] = ("keyless", "json")
    realistic_systems: tuple[SystemSpec, ...] = ()
    ceiling_records: int = 2_000_000  # ProducerPerformance's records per shape
    warmup_records: int = 200_000  # the JVM peer's warm-up drain, per run
    # Cost curves (bench.curves)
    curve_partitions: tuple[int, ...] = (4, 32, 128, 512)
    curve_value_bytes: tuple[int, ...] = (100, 1_000, 10_000)
    curve_systems: tuple[SystemSpec, ...] = ()
    curve_records: int = 300_000
    curve_bytes: int = 300_000_000  # at most this many value bytes per point (10 KB: 30,000 records)
    spark: bool = True
    live: bool = True  # the live workloads (latency, disorder)
    curves: bool = True  # the cost curves
    spark_idle: str = "max"
    spark_duration_s: float = 31.0
    spark_rate_per_s: float = 200.0  # orders per second (as many payments)
    spark_trigger_ms: int = 500  # micro-batches hold what arrives in this long
    # The Spark jobs' own rates (bench.spark_rates): a backlog of orders and payments
    spark_rate_records: int = 500_000
    spark_rate_keys: int = 5_000
    spark_rate_batch: int = 50_000  # maxOffsetsPerTrigger
    # suppress with many keys remembered (bench.spark_state): full runs only — a backlog of this
    # many distinct keys takes minutes to write, order and run, and says nothing at --quick's sizes
    spark_state: bool = True
    spark_state_keys: int = 1_000_000
    # timestamp.extractor costs (bench.extractors): in-process, no broker; ~1 s at --quick's sizes
    extractor_records: int = 200_000
    extractor_repeats: int = 7


def systems(idles: Sequence[str], ks_idles: Sequence[str]) -> tuple[SystemSpec, ...]:
    return (
        SystemSpec("passthrough"),
        *(SystemSpec("timesync", i) for i in idles),
        *(SystemSpec("kafka-streams", i) for i in ks_idles),
    )


KS_USERS = tuple(SystemSpec("kafka-streams", "0", profile=name) for name in KS_PROFILES)
RDKAFKA = SystemSpec("rdkafka-copy")


@dataclass(frozen=True, slots=True)
class RunFlags:
    """What ``bench run``'s command line chose: ``--quick`` (a subset, small sizes), the seed, the
    workloads (``None``: every one the run's size includes), and which optional phases run
    (``spark``, ``live``, ``curves``: False leaves that phase out; the throughput phase always
    runs)."""

    quick: bool = False
    seed: int = 42
    workloads: tuple[str, ...] | None = None
    spark: bool = True
    live: bool = True
    curves: bool = True


def plan(flags: RunFlags) -> Plan:
    """The full run (every idle value, every workload) or ``--quick`` (a subset, small sizes),
    with the phases ``flags`` leave out left out."""
    chosen = _quick_plan(flags) if flags.quick else _full_plan(flags)
    return dataclasses.replace(chosen, live=flags.live, curves=flags.curves)


def _quick_plan(flags: RunFlags) -> Plan:
    # No idle ``auto``, 500 or 2000 here: each is one more sidecar start and live run per
    # workload, more than the ~10 s a phase may add to --quick; and auto learns from producer
    # gaps that a 3 s workload hardly has.
    live: tuple[SystemSpec, ...] = (
        SystemSpec("passthrough"),
        SystemSpec("timesync", "0"),
        SystemSpec("timesync", "max"),
        SystemSpec("kafka-streams", "0"),
    )
    # One Kafka Streams profile (tuned) stands for all three: each is a JVM start and a warm-up.
    through: tuple[SystemSpec, ...] = (
        SystemSpec("passthrough"),
        RDKAFKA,
        SystemSpec("timesync", "0"),
        SystemSpec("timesync", "0", "partition"),
        SystemSpec("kafka-streams", "0", profile="tuned"),
    )
    return Plan(
        quick=True,
        seed=flags.seed,
        sizes=scenarios.QUICK,
        # steady alone: the goals read it; every other workload runs the same code with
        # other producers, which the unit tests of bench.live and the full run cover
        workloads=tuple(flags.workloads or ("steady",)),
        live_systems=live,
        throughput_systems=through,
        throughput_records=20_000,
        realistic_systems=(SystemSpec("timesync", "0"),),
        ceiling_records=20_000,
        warmup_records=5_000,
        curve_partitions=(4, 32),
        curve_value_bytes=(100, 1_000),
        curve_systems=(SystemSpec("timesync", "0"),),
        curve_records=3_000,
        curve_bytes=3_000_000,
        spark=flags.spark,
        spark_duration_s=3.0,
        spark_rate_per_s=100.0,
        spark_trigger_ms=1500,
        spark_rate_records=4_000,
        spark_rate_keys=200,
        spark_rate_batch=1_000,
        spark_state=False,
        extractor_records=20_000,
        extractor_repeats=3,
    )


def _full_plan(flags: RunFlags) -> Plan:
    live = systems(LIVE_TIMESYNC_IDLES, IDLE_VALUES)
    through = (
        SystemSpec("passthrough"),
        *(SystemSpec("timesync", i) for i in IDLE_VALUES),
        SystemSpec("timesync", "0", "partition"),
        SystemSpec("timesync", "max", "partition"),
        TIMESYNC_LZ4_HC,
        RDKAFKA,
        *(SystemSpec("kafka-streams", i) for i in IDLE_VALUES),
        *KS_USERS,
    )
    realistic = (
        SystemSpec("passthrough"),
        RDKAFKA,
        SystemSpec("timesync", "0"),
        SystemSpec("timesync", "0", "partition"),
        *KS_USERS,
    )
    return Plan(
        quick=False,
        seed=flags.seed,
        sizes=scenarios.FULL,
        workloads=tuple(flags.workloads or scenarios.NAMES),
        live_systems=live,
        throughput_systems=through,
        throughput_records=1_000_000,
        throughput_repeats=3,
        realistic_systems=realistic,
        curve_systems=(SystemSpec("timesync", "0"), SystemSpec("passthrough")),
        steady_repeats=3,
        spark=flags.spark,
    )
