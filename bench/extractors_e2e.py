"""The extractors end to end: records/s and CPU per record of the sidecar, as a process on a real
broker, draining the same ~250 B records with ``record``, ``json:meta.ts``, ``avro:meta.ts`` and
``protobuf:meta.ts`` (``python -m bench extractors-e2e``, and the phase of ``bench run`` after the
throughput phase, :func:`e2e_phase`).

**Records**: the in-process bench's orders (:func:`bench.extractors.orders`: ``n`` per extractor,
~250 B as JSON), written to one input partition before the sidecar starts; Avro and Protobuf
values framed with the id the registry gave their schema (a local Apicurio registry, or
``$SCHEMA_REGISTRY_URL``). ``record`` reads the JSON records' own timestamps, so it is the same
bytes as ``json:`` with no parse. Each record's Kafka timestamp is its event time plus
:data:`KAFKA_TS_AHEAD_MS`, so the output shows which time the sidecar stamped: after the drain,
the first and last output records must carry the event time (the value's, or for ``record`` the
Kafka timestamp) — a run that measured the wrong path fails rather than reporting a figure.

**Figure**: the sidecar drains the backlog into its output topic (heartbeats off, so the output
holds the data alone); ``records_per_s`` is the rate while the output grew from 25 % to 75 % of
``n`` (end offsets sampled every 20 ms: start-up, the registry lookup and the last fetch are not
in it), and ``cpu_us_per_record`` is the sidecar process's CPU (user + system, sampled with the
offsets) over that same stretch per record. One sidecar at a time, the extractors in turn, each
on fresh topics. An invalid timestamp stops the sidecar (``timestamp.invalid=fail``, the
default): the drain then fails with the sidecar's log instead of waiting out its timeout.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench import collect
from bench import extractors as in_process
from bench.demo_avro import register_schema, registry
from bench.plan import Plan
from bench.systems import CpuSampler, usage
from sidecar.config.extractor import extractor_format
from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.sidecar_process import SidecarProcess
from testkit.workloads import Event
from timesync_wire.schemas.protoc import compile_proto

SPECS = in_process.SPECS
#: Every input record's Kafka timestamp is its event time plus this: ``record`` stamps the one,
#: the other extractors the other, and the output's first and last records say which was read.
KAFKA_TS_AHEAD_MS = 7
#: The longest one extractor's drain may take before the run is given up.
DRAIN_TIMEOUT_S = 900.0
#: The middle of the drain that the figures cover, as fractions of the records.
LOW, HIGH = 0.25, 0.75


def needs_registry(spec: str) -> bool:
    """Whether the format of ``spec`` reads its schemas from a registry (``avro:``, ``protobuf:``)."""
    fmt = extractor_format(spec)
    return fmt is not None and fmt.schema_type is not None


def values_by_spec(
    n: int, specs: Sequence[str], registry_url: str | None, tag: str, seed: int
) -> tuple[list[int], dict[str, list[bytes]]]:
    """The orders' event times, and their values as each of ``specs`` reads them (Avro and
    Protobuf schemas registered under subjects of their own, named by ``tag``)."""
    rows = in_process.orders(n, collect.now_ms() - 10 * n, seed)
    as_json = [orjson.dumps(row) for row in rows]
    values: dict[str, list[bytes]] = {}
    for spec in specs:
        if not needs_registry(spec):
            values[spec] = as_json
            continue
        if registry_url is None:
            raise ValueError(f"timestamp.extractor={spec} reads its schemas from a registry: give one")
        subject = f"bench-{tag}-{spec.split(':')[0]}-value"
        if spec.startswith("avro:"):
            schema_id = register_schema(registry_url, subject, json.dumps(in_process.AVRO_SCHEMA), "AVRO")
            values[spec] = in_process.avro_bodies(rows, schema_id)
        else:
            schema_id = register_schema(registry_url, subject, in_process.PROTO_SCHEMA, "PROTOBUF")
            compiled = compile_proto(in_process.PROTO_SCHEMA, {})
            values[spec] = in_process.protobuf_bodies(rows, compiled, schema_id)
    return [row["meta"]["ts"] for row in rows], values


def sidecar_settings(spec: str, tag: str, registry_url: str | None) -> dict[str, object]:
    """The settings of the sidecar that drains with ``spec`` (everything else at its defaults);
    the registry only for a format whose schemas come from one."""
    slug = spec.split(":", maxsplit=1)[0]
    settings: dict[str, object] = {
        "timestamp.extractor": spec,
        "group.id": f"bench-{tag}-{slug}",
        "auto.offset.reset": "earliest",
        "max.task.idle.ms": -1,
        "watermark.heartbeat.ms": 0,
    }
    if needs_registry(spec):
        settings["schema.registry.url"] = registry_url
    return settings


def figures(
    samples: Sequence[tuple[int, int]], cpu: CpuSampler, n: int, values: Sequence[bytes]
) -> dict[str, Any]:
    """One drain's row from its output samples (wall ms, records out) and the sidecar's CPU
    samples: the rate and the CPU per record over the middle of the drain (:data:`LOW` to
    :data:`HIGH` of ``n``). Raises when the samples do not span that middle: the drain was too
    short to time (``n`` too small for the 20 ms sampling)."""
    low, high = collect.crossing(samples, LOW * n), collect.crossing(samples, HIGH * n)
    if low is None or high is None or high <= low:
        raise ValueError(f"{n:,} records drained too fast to time the middle of the drain: raise --records")
    middle = (HIGH - LOW) * n
    used = cpu.cpu_at(round(high)) - cpu.cpu_at(round(low))
    return {
        "value_bytes": round(sum(map(len, values)) / n),
        "records_per_s": round(middle / ((high - low) / 1000)),
        "cpu_us_per_record": round(used * 1e6 / middle, 3),
    }


async def edge_timestamps(bootstrap: str, topic: str) -> tuple[int, int]:
    """The Kafka timestamps of the first and the last record of partition 0 of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        found = []
        for offset in (0, end - 1):
            consumer.seek(tp, offset)
            got = await consumer.getone(tp)
            found.append(got.timestamp)
        return found[0], found[1]
    finally:
        await consumer.stop()


async def until_drained(
    sidecar: SidecarProcess, counted: asyncio.Task[list[tuple[int, int]] | None], n: int
) -> list[tuple[int, int]]:
    """Wait for ``counted`` (the output's samples until it holds ``n`` records); fail at once,
    with the sidecar's log, when the sidecar exits first, and after :data:`DRAIN_TIMEOUT_S`."""
    exited = asyncio.create_task(sidecar.wait(DRAIN_TIMEOUT_S + 60))
    try:
        await asyncio.wait({counted, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        exited.cancel()
    if not counted.done():
        counted.cancel()
        raise RuntimeError(f"the sidecar exited before its output held {n:,} records:\n{sidecar.log_tail()}")
    samples = counted.result()
    if samples is None:
        raise RuntimeError(f"the sidecar did not drain {n:,} records within {DRAIN_TIMEOUT_S:g} s")
    return samples


async def drain(
    bootstrap: str,
    registry_url: str | None,
    spec: str,
    ts: list[int],
    values: list[bytes],
    tag: str,
    log_dir: Path,
) -> dict[str, Any]:
    """One sidecar with ``timestamp.extractor=spec`` draining ``values``: its row (see
    :func:`figures`), with ``cpu_s_whole_run``, start-up and the last fetch included."""
    slug = spec.split(":", maxsplit=1)[0]
    source, output = f"bench-{tag}-{slug}-in", f"bench-{tag}-{slug}-out"
    # The output keeps the timestamps the sidecar wrote (CreateTime): they are checked below.
    await kafka_io.create_topics(bootstrap, [TopicSpec(source, 1), TopicSpec(output, 1)])
    ahead = [Event(source, 0, t + KAFKA_TS_AHEAD_MS, None, v, 0) for t, v in zip(ts, values, strict=True)]
    await kafka_io.produce(bootstrap, ahead)
    n = len(values)
    settings = sidecar_settings(spec, tag, registry_url)
    sidecar = SidecarProcess(bootstrap, [source], output, settings, log_dir=log_dir)
    # Sampling starts with the process: a sidecar on a small backlog may be done by the time
    # it answers /healthz, and the middle of the drain must lie between samples.
    counted = asyncio.create_task(
        collect.wait_for_count(bootstrap, output, 1, n, DRAIN_TIMEOUT_S, poll_s=0.02)
    )
    await sidecar.start(wait=None)
    sampler = CpuSampler(sidecar.pid, every_s=0.02)
    sampler.start()
    try:
        await sidecar.wait_healthy(timeout_s=120)
        samples = await until_drained(sidecar, counted, n)
        cpu_total = usage(sidecar.pid).cpu_s
    finally:
        counted.cancel()
        await sampler.stop()
        await sidecar.stop()
    row = {**figures(samples, sampler, n, values), "cpu_s_whole_run": round(cpu_total, 2)}
    shift = KAFKA_TS_AHEAD_MS if spec == "record" else 0
    stamped, expected = await edge_timestamps(bootstrap, output), (ts[0] + shift, ts[-1] + shift)
    if stamped != expected:
        raise RuntimeError(
            f"{spec}: the output's first and last timestamps are {stamped}, expected {expected}"
        )
    return row


async def run(
    bootstrap: str,
    registry_url: str | None,
    n: int,
    log_dir: Path,
    seed: int = 42,
    specs: Sequence[str] = SPECS,
) -> dict[str, Any]:
    """Every extractor's drain (see the module docstring): the ``extractors_e2e`` results.
    ``specs`` starts with ``record`` (the others are compared with it); ``registry_url`` may be
    ``None`` when none of them reads a registry."""
    tag = f"e2e{time.time_ns() // 1_000_000 % 10**8}"
    ts, values = values_by_spec(n, specs, registry_url, tag, seed)
    rows = {
        spec: await drain(bootstrap, registry_url, spec, ts, values[spec], tag, log_dir) for spec in specs
    }
    return summary(n, rows)


def summary(n: int, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The results of one run from its rows: each extractor's CPU per record over ``record``'s."""
    base = rows["record"]["cpu_us_per_record"]
    return {
        "records": n,
        "extractors": rows,
        "added_cpu_us_per_record": {
            spec: round(r["cpu_us_per_record"] - base, 3) for spec, r in rows.items() if spec != "record"
        },
    }


async def e2e_phase(bootstrap: str, p: Plan, log_dir: Path) -> dict[str, Any] | None:
    """``bench run``'s phase: :func:`run` with the plan's extractors and size, a registry started
    for it (``$SCHEMA_REGISTRY_URL``, else a local one) when one of them reads schemas; ``None``
    when the plan has no extractors to drain."""
    specs, n = p.extractor_e2e_specs, p.extractor_e2e_records
    if not specs:
        return None
    if not any(map(needs_registry, specs)):
        return await run(bootstrap, None, n, log_dir, p.seed, specs)
    with registry() as registry_url:
        return await run(bootstrap, registry_url, n, log_dir, p.seed, specs)
