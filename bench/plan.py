"""What one ``bench run`` does: the systems, workloads and sizes, chosen once from the flags.

Its own module so that the phases (:mod:`bench.harness`, :mod:`bench.spark_bench`) can both read a
plan without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench import scenarios
from bench.scenarios import Sizes
from bench.systems import IDLE_VALUES, TIMESYNC_LZ4_HC, SystemSpec


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
    spark: bool = True
    spark_idle: str = "max"
    spark_duration_s: float = 31.0
    spark_rate_per_s: float = 200.0  # orders per second (as many payments)
    spark_trigger_ms: int = 500  # micro-batches hold what arrives in this long


def systems(idles: Sequence[str], ks_idles: Sequence[str]) -> tuple[SystemSpec, ...]:
    return (
        SystemSpec("passthrough"),
        *(SystemSpec("timesync", i) for i in idles),
        *(SystemSpec("kafka-streams", i) for i in ks_idles),
    )


def plan(quick: bool, seed: int = 42, workloads: Sequence[str] | None = None, spark: bool = True) -> Plan:
    """The full run (every idle value, every workload) or ``--quick`` (a subset, small sizes)."""
    if quick:
        live = (
            SystemSpec("passthrough"),
            SystemSpec("timesync", "0"),
            SystemSpec("timesync", "max"),
            SystemSpec("kafka-streams", "0"),
        )
        through = (
            SystemSpec("passthrough"),
            SystemSpec("timesync", "0"),
            SystemSpec("timesync", "0", "partition"),
            SystemSpec("kafka-streams", "0"),
        )
        return Plan(
            quick=True,
            seed=seed,
            sizes=scenarios.QUICK,
            workloads=tuple(workloads or ("steady", "skewed")),
            live_systems=live,
            throughput_systems=through,
            throughput_records=20_000,
            spark=spark,
            spark_duration_s=6.0,
            spark_rate_per_s=100.0,
            spark_trigger_ms=1500,
        )
    live = systems(IDLE_VALUES, IDLE_VALUES)
    through = (
        SystemSpec("passthrough"),
        *(SystemSpec("timesync", i) for i in IDLE_VALUES),
        SystemSpec("timesync", "0", "partition"),
        SystemSpec("timesync", "max", "partition"),
        TIMESYNC_LZ4_HC,
        *(SystemSpec("kafka-streams", i) for i in IDLE_VALUES),
    )
    return Plan(
        quick=False,
        seed=seed,
        sizes=scenarios.FULL,
        workloads=tuple(workloads or scenarios.NAMES),
        live_systems=live,
        throughput_systems=through,
        throughput_records=1_000_000,
        throughput_repeats=3,
        steady_repeats=3,
        spark=spark,
    )
