"""Bad input end to end: malformed records go to the DLQ with their reason, nothing is lost.

10,000 records over three partitions, about a quarter of them malformed in every way a JSON
producer can get wrong (not JSON, no or a non-numeric ``ts``, negative or far-future times,
null values, 1 MiB values), some with binary or duplicate headers, a few valid but late. With
``timestamp.extractor=json:ts``, ``errors.tolerance=all`` and ``late.records=drop``:

- the valid records come out in timestamp order, keys, values and headers intact;
- every malformed record is in the DLQ, as it came in, with the reason;
- in = out + DLQ + dropped by policy (the late ones), in the topics and in ``/metrics``.

Far-future event times are bad records too: Kafka 4 refuses a record stamped more than the
topic's ``message.timestamp.after.max.ms`` (default 1 h) ahead of the broker's clock, and the
output record carries the event time, so such a record would fail the whole output batch. The
sidecar reads the output topic's setting at start and judges each record against the clock
(``BrokerTimestampLimits``): a refused one goes to the DLQ as ``InvalidTimestampException``,
naming the setting. A valid record 30 min ahead goes out. The last test pins the broker
behaviour this relies on.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidTimestampError
from prometheus_client.parser import text_string_to_metric_families

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(180)]

N = 10_000
PARTITIONS = 3
MIB = 1024 * 1024
HOUR = 3_600_000
#: Input topics take records a little over 1 MiB (the broker default is 1 MiB per batch).
INPUT_MAX_BYTES = 4 * MIB
SEED = 8


@dataclass(frozen=True, slots=True)
class In:
    """One input record and what must become of it."""

    partition: int
    kind: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    ts: int | None = None  # event time, for records that come out
    reason: str | None = None  # for records that go to the DLQ

    @property
    def fate(self) -> str:
        return "dlq" if self.reason else "late" if self.kind == "late" else "out"


REFUSED = "more than the output topic's message.timestamp.after.max.ms=3600000: the broker would refuse it"
#: What the DLQ names as the error: a time the output topic's broker would refuse, or none at all.
REFUSED_CLASS, UNREADABLE_CLASS = b"InvalidTimestampException", b"InvalidTimestampError"


def malformed(now: int, rng: random.Random) -> dict[str, tuple[bytes | None, str]]:
    """Each kind of bad value, with (a part of) the reason the DLQ must carry."""
    return {
        "not-json": (b"not json at all", "value is not JSON"),
        "binary": (b"\xff\xfe" + rng.randbytes(20), "value is not JSON"),
        "truncated": (b'{"ts": 12', "value is not JSON"),
        "empty": (b"", "value is not JSON"),
        "null": (None, "value is null"),
        "missing": (orjson.dumps({"seq": 1}), "field ts is missing"),
        "text-ts": (orjson.dumps({"ts": "soon"}), "field ts is not a number: 'soon'"),
        "bool-ts": (orjson.dumps({"ts": True}), "field ts is not a number: True"),
        "null-ts": (orjson.dumps({"ts": None}), "field ts is not a number: None"),
        "negative": (orjson.dumps({"ts": -5}), "field ts is negative: -5"),
        "far-future": (orjson.dumps({"ts": now + 10 * 365 * 24 * HOUR}), REFUSED),
        # 10 min past the limit: still past it when the record is read, minutes after ``now``.
        "just-too-far": (orjson.dumps({"ts": now + HOUR + 10 * 60_000}), REFUSED),
        "micros": (orjson.dumps({"ts": now * 1000}), REFUSED),
        "huge": (b'{"ts": 1e30}', "field ts is beyond Kafka's timestamp range: 1e+30"),
        "array": (b"[1, 2]", "value is not a JSON object"),
    }


def workload(now: int) -> list[In]:
    """N records, per partition: increasing event times (a day ago) among bad and late ones."""
    rng = random.Random(SEED)
    base = now - 24 * HOUR
    bad = malformed(now, rng)
    kinds = sorted(bad)
    out: list[In] = []
    for p in range(PARTITIONS):
        count = N // PARTITIONS + (1 if p < N % PARTITIONS else 0)
        seen_valid = False
        for j in range(count):
            headers: list[tuple[str, bytes]] = []
            if rng.random() < 0.1:
                headers += [("bin", b"\x00\xff" + rng.randbytes(6)), ("dup", b"1"), ("dup", b"2")]
            if rng.random() < 0.02:
                headers.append(("timesync.source.offset", b"999999"))  # a stale header from upstream
            key = None if rng.random() < 0.1 else b"k%d" % rng.randrange(50)
            roll = rng.random()
            ts = base + 10 * j + p
            if j == count - 1:  # the newest: 30 min ahead of its record time, still valid
                ts = now + HOUR // 2 + p
            if j in (500, 501) and p < 2:  # 1 MiB values: one valid, one not JSON, on two partitions
                if j == 500:
                    value = orjson.dumps({"ts": ts, "pad": "x" * MIB})
                    out.append(In(p, "big", key, value, tuple(headers), ts=ts))
                else:
                    out.append(In(p, "big-bad", key, b"x" * MIB, tuple(headers), reason="value is not JSON"))
                continue
            if j == count - 1 or roll < 0.73:
                out.append(In(p, "valid", key, orjson.dumps({"ts": ts, "j": j}), tuple(headers), ts=ts))
                seen_valid = True
            elif roll < 0.74 and seen_valid:  # older than anything emitted before it: late, dropped
                late_ts = base - 1 - j
                out.append(In(p, "late", key, orjson.dumps({"ts": late_ts}), tuple(headers), ts=late_ts))
            else:
                kind = rng.choice(kinds)
                value, reason = bad[kind]
                if value is None:
                    key = key or b"k"  # Kafka clients refuse a record with neither
                out.append(In(p, kind, key, value, tuple(headers), reason=reason))
    return out


async def produce(bootstrap: str, topic: str, records: list[In], timestamp: int) -> dict[tuple[int, int], In]:
    """Write every record with CreateTime ``timestamp``; return them by (partition, offset)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=INPUT_MAX_BYTES
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=timestamp,
                headers=list(r.headers),
            )
            for r in records
        ]
        acks = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return {(a.partition, a.offset): r for a, r in zip(acks, records, strict=True)}


def samples(metrics: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
    }


async def test_malformed_records_go_to_the_dlq_with_reasons_and_the_counts_balance(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(
        bootstrap, [TopicSpec(src, PARTITIONS, configs={"max.message.bytes": str(INPUT_MAX_BYTES)})]
    )
    now = int(time.time() * 1000)
    records = workload(now)
    sent = await produce(bootstrap, src, records, timestamp=now)
    fates = Counter(r.fate for r in records)
    kinds = Counter(r.kind for r in records)
    assert len(sent) == N
    assert fates["dlq"] < 0.3 * N, "well under errors.deadletterqueue.max.ratio=0.5 in any window"
    assert all(kinds[k] for k in malformed(now, random.Random(0))), kinds

    started = time.monotonic()
    process = await sidecar(
        [src],
        out,
        timestamp_extractor="json:ts",
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        late_records="drop",
        max_task_idle_ms=0,
        watermark_heartbeat_ms=0,
    )
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=fates["out"], timeout_s=90))
    dead = await kafka_io.read_topics(bootstrap, [dlq], expected=fates["dlq"], timeout_s=60)
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 10
    while (metrics := samples(await process.metrics()))[("timesync_records_in_total", ())] < N:
        assert time.monotonic() < deadline, "every input record is counted in"
        await asyncio.sleep(0.2)
    assert await process.stop() == 0

    # The valid records: all of them, each once, in timestamp order, intact.
    got = {(o.source_partition, o.source_offset): o for o in written}
    assert len(got) == len(written), "no duplicates"
    expected_out = {k for k, r in sent.items() if r.fate == "out"}
    assert set(got) == expected_out
    assert [o.timestamp for o in written] == sorted(o.timestamp for o in written)
    assert not any(o.late for o in written)
    for position, o in got.items():
        r = sent[position]  # type: ignore[index]  # source headers are present on data records
        assert (o.timestamp, o.key, o.value, o.source_topic) == (r.ts, r.key, r.value, src)
        carried = [h for h in r.headers if not h[0].startswith("timesync.")]
        assert list(o.headers[: len(carried)]) == carried, "binary and duplicate headers kept, in order"
        assert [v for k, v in o.headers if k == "timesync.source.offset"] == [b"%d" % position[1]]
    assert sum(1 for o in written if o.value and len(o.value) > MIB) == 2, "1 MiB values come through"

    # The malformed records: as they came in, plus the reason.
    dead_by = {}
    for d in dead:
        h = dict(d.headers)
        assert h["__connect.errors.topic"] == src.encode()
        dead_by[(int(h["__connect.errors.partition"]), int(h["__connect.errors.offset"]))] = d
    assert len(dead_by) == len(dead), "no duplicates"
    assert set(dead_by) == {k for k, r in sent.items() if r.fate == "dlq"}
    for position, d in dead_by.items():
        r = sent[position]
        h = dict(d.headers)
        assert (d.key, d.value) == (r.key, r.value)
        assert list(d.headers[: len(r.headers)]) == list(r.headers)
        assert r.reason is not None
        expected_class = REFUSED_CLASS if r.reason == REFUSED else UNREADABLE_CLASS
        assert h["__connect.errors.exception.class.name"] == expected_class, (r.kind, h)
        assert r.reason in h["__connect.errors.exception.message"].decode(), (r.kind, h)

    # The books balance: in = out + DLQ + dropped by policy, in the topics and in the metrics.
    assert len(written) + len(dead) + fates["late"] == N
    assert metrics[("timesync_records_in_total", ())] == N
    assert metrics[("timesync_records_out_total", ())] == len(written)
    assert metrics[("timesync_dropped_records_total", (("reason", "dead-letter"),))] == len(dead)
    assert metrics[("timesync_dropped_records_total", (("reason", "late"),))] == fates["late"]
    print(
        f"\nbad input: in {N}, out {len(written)}, DLQ {len(dead)}, dropped late {fates['late']}; "
        f"kinds {dict(sorted(kinds.items()))}; {elapsed:.1f} s to drain"
    )


async def test_a_stream_of_mostly_bad_records_stops_the_sidecar_instead_of_filling_the_dlq(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    now = int(time.time() * 1000)
    # A producer switched to a new format: 4 records in 5 have no "ts".
    records = [
        In(0, "valid", b"k", orjson.dumps({"ts": now - 1000 + i}), ())
        if i % 5 == 0
        else In(0, "missing", b"k", b"{}", ())
        for i in range(400)
    ]
    await produce(bootstrap, src, records, timestamp=now)

    process = await sidecar(
        [src],
        out,
        wait=None,
        timestamp_extractor="json:ts",
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=-1,
    )
    code = await process.wait(timeout_s=60)

    assert code == 1
    line = process.log_tail(1)
    assert line.startswith("timesync-sidecar: "), line
    assert "records failed (" in line
    assert line.endswith(
        "above errors.deadletterqueue.max.ratio=0.5: stopping rather than routing the stream to the dead "
        "letter queue"
    ), line
    print(f"\n{line}")


async def test_the_broker_refuses_a_create_time_more_than_an_hour_ahead(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    """Why far-future event times are invalid: Kafka 4's log.message.timestamp.after.max.ms = 1 h."""
    topic = topic_name("t")
    await kafka_io.create_topics(bootstrap, [TopicSpec(topic)])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        now = int(time.time() * 1000)
        await producer.send_and_wait(topic, b"ok", partition=0, timestamp_ms=now + HOUR // 2)
        with pytest.raises(InvalidTimestampError):
            await producer.send_and_wait(topic, b"refused", partition=0, timestamp_ms=now + 2 * HOUR)
    finally:
        await producer.stop()
