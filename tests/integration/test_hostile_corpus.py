"""Every hostile input of issue 32 at once, among 100,000 ordinary records, through the real
broker and a real registry (Apicurio), with ``errors.tolerance=all``.

An attacker with write access to one input topic tries each of these, interleaved at random
places in three partitions of ordinary records:

* header keys that are not UTF-8 (a hand-built batch: the broker does not check them);
* a recursive Avro writer schema, with a body nested 1,500 deep and a 12-byte body whose array
  block claims 2^62 nulls; a valid schema 200 records deep; a tenth varint byte above 1;
  truncated bodies, wrong magic bytes, short and null values;
* hundreds of distinct schema ids nobody registered, past the per-fetch budget;
* a compressed batch that inflates past the fetch bound;
* for Protobuf: a reference named ``"."``, a body nested 10,000 deep, message indexes out of
  range.

The sidecar never stops (healthy at the end, exit 0 on SIGTERM); every input offset is either on
the ordered topic or in the dead letter queue, never both (a batch that cannot be read at all is
one dead letter naming its offset range); the ordinary records come out in event-time order; the
raw header keys come out byte for byte. ``HOSTILE_CORPUS_RECORDS`` sets the ordinary records per
run (100,000, the issue's size; the suite keeps it).
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered, raw_batches
from timesync_wire.framing import encode_message_indexes, frame
from timesync_wire.headers import header_key_bytes

from .conftest import StartSidecar
from .test_schema_registry import register

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(420)]

ORDINARY = int(os.environ.get("HOSTILE_CORPUS_RECORDS", "100000"))
PARTITIONS = 3
HOUR = 3_600_000
#: Past the sidecar's bound on an inflated batch (the consumer's fetch.max.bytes, 50 MiB).
BOMB = 60 * 1024 * 1024
RAW_KEYS = (b"\x80trace", b"span-\xed\xa0\x80")
#: Ids no registry holds: distinct, and more than the per-fetch budget the run sets.
UNKNOWN_IDS = 300
BUDGET = 100


def zigzag(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def unique(schema: Mapping[str, object]) -> str:
    """Apicurio gives equal texts one id: each run's schemas are its own."""
    return json.dumps({**schema, "doc": uuid.uuid4().hex})


Rec = tuple[bytes | None, list[raw_batches.Header]]


@dataclass
class Item:
    """One hostile input: the records of one batch (``codec`` for the bomb), made for the event
    time of the ordinary record before it, and whether they must come out (``out``) or be
    dead-lettered. Those that come out carry that time: a record far ahead of its partition's
    neighbours would hold the partition back and make them late, as the merge rightly does."""

    name: str
    make: Callable[[int], list[Rec]]
    out: bool
    codec: str = "none"

    @property
    def count(self) -> int:
        return len(self.make(0))


def fixed(records: list[Rec]) -> Callable[[int], list[Rec]]:
    return lambda _ts: records


@dataclass
class Plan:
    """What goes to each partition, in order: ordinary records (by index) and items between them."""

    parts: dict[int, list[int | Item]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})


# -- Avro -------------------------------------------------------------------------------------

PLAIN = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "id", "type": "string"}, {"name": "ts", "type": "long"}],
}
NODE = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "n", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}
LISTED = {
    "type": "record",
    "name": "Listed",
    "fields": [
        {"name": "list", "type": ["null", NODE]},
        {"name": "nulls", "type": {"type": "array", "items": "null"}},
        {"name": "ts", "type": "long"},
    ],
}


def deep_schema(levels: int) -> dict[str, object]:
    node: object = "long"
    for i in range(levels):
        node = {"type": "record", "name": f"Level{i}", "fields": [{"name": "inner", "type": node}]}
    return {"type": "record", "name": "Deep", "fields": [{"name": "top", "type": node}]}


async def avro_corpus(registry: str, topic: str, now: int) -> tuple[Callable[[int, int], bytes], list[Item]]:
    """The ordinary value maker and the Avro items, their schemas registered."""
    plain = await register(registry, f"{topic}-value", unique(PLAIN))
    listed = await register(registry, f"{topic}-listed", unique(LISTED))
    deep = await register(registry, f"{topic}-deep", unique(deep_schema(200)))

    def value(i: int, ts: int) -> bytes:
        name = b"c%d" % i
        return frame(plain, zigzag(len(name)) + name + zigzag(ts))

    ten_bytes = b"\xff" * 9 + b"\x7f"  # a tenth byte above 1
    items = [
        Item("listed ordinary", lambda ts: [(frame(listed, b"\x02\x02\x00\x00" + zigzag(ts)), [])], out=True),
        Item(
            "recursive 1,500 deep",
            fixed([(frame(listed, b"\x02" + b"\x02\x02" * 1500 + b"\x00\x00\x00" + zigzag(now)), [])]),
            out=False,
        ),
        Item(
            "2^62 nulls",
            fixed([(frame(listed, b"\x00" + zigzag(2**62) + b"\x00" + zigzag(now)), [])]),
            out=False,
        ),
        Item("schema 200 records deep", fixed([(frame(deep, zigzag(now)), [])]), out=False),
        Item("tenth varint byte", fixed([(frame(plain, b"\x02x" + ten_bytes), [])]), out=False),
        Item("truncated", fixed([(frame(plain, b"\x14abc"), [])]), out=False),
        Item("wrong magic", fixed([(b"\x01" + frame(plain, b"\x02x\x02")[1:], [])]), out=False),
        Item("short", fixed([(b"\x00\x00", [])]), out=False),
        Item("null", fixed([(None, [])]), out=False),
    ]
    return value, items


# -- Protobuf ---------------------------------------------------------------------------------

TICK = 'syntax = "proto3";\npackage corpus;\nmessage Tick {\n  int64 at_ms = 1;\n  Tick next = 2;\n}\n'
MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'


def nested_tick(depth: int, at_ms: int) -> bytes:
    body = b"\x08" + _uvarint(at_ms)
    for _ in range(depth):
        body = b"\x12" + _uvarint(len(body)) + body
    return b"\x08" + _uvarint(at_ms) + body


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


async def protobuf_corpus(
    registry: str, topic: str, now: int
) -> tuple[Callable[[int, int], bytes], list[Item]]:
    tick = await register(
        registry, f"{topic}-value", TICK.replace("Tick {", f"Tick {{ // {uuid.uuid4().hex}"), "PROTOBUF"
    )
    money = f"{topic}-money"
    await register(registry, money, MONEY, "PROTOBUF")
    dot = await register(
        registry, f"{topic}-odd", TICK, "PROTOBUF", [{"name": ".", "subject": money, "version": 1}]
    )

    def value(i: int, ts: int) -> bytes:
        return frame(tick, b"\x08" + _uvarint(ts), (0,))

    items = [
        Item("nested 3 deep", lambda ts: [(frame(tick, nested_tick(3, ts), (0,)), [])], out=True),
        Item("nested 10,000 deep", fixed([(frame(tick, nested_tick(10_000, now), (0,)), [])]), out=False),
        Item("reference named '.'", fixed([(frame(dot, b"\x08" + _uvarint(now), (0,)), [])]), out=False),
        Item(
            "101 message indexes",
            fixed([(frame(tick, b"", None) + encode_message_indexes((0,) * 101) + b"\x08\x01", [])]),
            out=False,
        ),
        Item("message index past the file", fixed([(frame(tick, b"\x08\x01", (7,)), [])]), out=False),
        Item("truncated", fixed([(frame(tick, b"\x08", (0,)), [])]), out=False),
    ]
    return value, items


# -- what every format shares -----------------------------------------------------------------


def shared_items(value: Callable[[int, int], bytes], topic_ids: int) -> list[Item]:
    raw_keyed = Item(
        "raw header keys",
        lambda ts: [
            (value(-1, ts), [(RAW_KEYS[0], b"x"), (b"app", b"1")]),
            (value(-2, ts), [(RAW_KEYS[1], None)]),
        ],
        out=True,
    )
    bomb = Item("bomb", fixed([(b"\x00" * BOMB, [])]), out=False, codec="zstd")
    unknown = Item(
        "unknown ids", fixed([(frame(topic_ids + i, b"\x00"), []) for i in range(UNKNOWN_IDS)]), out=False
    )
    return [raw_keyed, bomb, unknown]


def plan(items: list[Item], seed: int) -> Plan:
    """Ordinary records by index, items at random places, per partition."""
    rng = random.Random(seed)
    out = Plan()
    for i in range(ORDINARY):
        out.parts[i % PARTITIONS].append(i)
    for item in items:
        # Not among a partition's first tenth: the dead letter cap (half of the last 1,000
        # records) would rightly stop a run whose first records are mostly hostile.
        part = out.parts[rng.randrange(PARTITIONS)]
        part.insert(rng.randrange(len(part) // 10, len(part)), item)
    return out


async def produce(
    bootstrap: str, topic: str, layout: Plan, value: Callable[[int, int], bytes], base: int
) -> dict[int, dict[int, Item | int]]:
    """Write the plan as hand-built batches (ordinary records 500 to a batch, each item a batch of
    its own); per partition, what each offset holds."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=8 * 1024 * 1024)
    await producer.start()
    where: dict[int, dict[int, Item | int]] = {}
    try:
        for p, seq in layout.parts.items():
            where[p] = {}
            chunk: list[int] = []
            last = 0  # the index of the partition's last ordinary record so far
            for entry in [*seq, None]:
                if isinstance(entry, int):
                    chunk.append(entry)
                    last = entry
                    if len(chunk) < 500:
                        continue
                if chunk:
                    records = [
                        raw_batches.record(j, b"k%d" % (i % 97), value(i, base + i), [(b"app", b"1")])
                        for j, i in enumerate(chunk)
                    ]
                    first = await _send(producer, topic, p, raw_batches.batch(records, base), len(records))
                    where[p].update({first + j: i for j, i in enumerate(chunk)})
                    chunk = []
                if isinstance(entry, Item):
                    made = entry.make(base + last)
                    records = [raw_batches.record(j, b"h", v, h) for j, (v, h) in enumerate(made)]
                    first = await _send(
                        producer, topic, p, raw_batches.batch(records, base, entry.codec), len(records)
                    )
                    where[p].update({first + j: entry for j in range(len(records))})
    finally:
        await producer.stop()
    return where


async def _send(producer: AIOKafkaProducer, topic: str, partition: int, data: bytes, count: int) -> int:
    future = await producer.send_batch(raw_batches.Prebuilt(data, count), topic, partition=partition)
    return int((await future).offset)


def fate(what: Item | int) -> tuple[str, bool]:
    """What an offset holds, and whether it must come out."""
    return ("ordinary", True) if isinstance(what, int) else (what.name, what.out)


def _fates_of(written: list[Any], dead: list[Any]) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """The input offsets (partition, offset) the output holds, and those the DLQ names (a DLQ
    record of an unreadable range names every offset of it)."""
    came_out = {(o.source_partition, o.source_offset) for o in written}
    dead_lettered: set[tuple[int, int]] = set()
    for d in dead:
        h = dict(d.headers)
        p, first = int(h["__connect.errors.partition"]), int(h["__connect.errors.offset"])
        last = int(h.get("timesync.errors.last.offset", h["__connect.errors.offset"]))
        dead_lettered |= {(p, o) for o in range(first, last + 1)}
    return came_out, dead_lettered


@pytest.mark.parametrize("fmt", ["avro", "protobuf"])
async def test_every_hostile_input_among_ordinary_records_costs_a_dead_letter_never_the_pipeline(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar, fmt: str
) -> None:
    src, out, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src, partitions=PARTITIONS)])
    now = int(time.time() * 1000)
    base = now - HOUR
    make = avro_corpus if fmt == "avro" else protobuf_corpus
    value, items = await make(schema_registry, src, now)
    items += shared_items(value, 1_900_000_000 + random.randrange(10_000_000))
    where = await produce(bootstrap, src, plan(items, seed=32), value, base)
    total = sum(len(offsets) for offsets in where.values())

    process = await sidecar(
        [src],
        out,
        timestamp_extractor=f"{fmt}:{'ts' if fmt == 'avro' else 'at_ms'}",
        schema_registry_url=schema_registry,
        schema_registry_max_new_ids_per_fetch=BUDGET,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=0,
        # No heartbeats: the reads below count records. Likely what made one loaded run take
        # 151 s: heartbeats counted toward the expected records end the first read early, and
        # the second read waits out its 120 s, as a topic with heartbeats is never quiet.
        watermark_heartbeat_ms=0,
    )
    expected_out = ORDINARY + sum(i.count for i in items if i.out)
    written = ordered.data(
        await kafka_io.read_topics(
            bootstrap, [out], expected=expected_out, timeout_s=240, raw_header_keys=True
        )
    )
    expected_dead = sum(i.count for i in items if not i.out)
    dead = await kafka_io.read_topics(bootstrap, [dlq], expected=expected_dead, timeout_s=60, idle_s=3)
    assert (await process.get("/healthz"))[0] == 200, "the sidecar never stops"
    everything = {(p, o) for p, offsets in where.items() for o in offsets}
    if set().union(*_fates_of(written, dead)) != everything:
        # The reads stop at the expected counts: a duplicate or a misjudged record makes one stop
        # early. Read both topics to their ends before judging, so the message says which.
        written = ordered.data(
            await kafka_io.read_topics(bootstrap, [out], idle_s=3, timeout_s=120, raw_header_keys=True)
        )
        dead = await kafka_io.read_topics(bootstrap, [dlq], idle_s=3, timeout_s=60)
    assert await process.stop() == 0

    came_out, dead_lettered = _fates_of(written, dead)
    fates = {(p, o): fate(what) for p, offsets in where.items() for o, what in offsets.items()}
    assert not came_out & dead_lettered, "nothing is both written and dead-lettered"
    missing = sorted(everything - came_out - dead_lettered)
    assert not missing, f"output + DLQ = input; neither holds {[(k, fates[k]) for k in missing[:5]]}"
    assert came_out | dead_lettered == everything, "output + DLQ = input"
    assert len(came_out) + len(dead_lettered) == total

    wrong = sorted({fates[k][0] for k in came_out if not fates[k][1]})
    lost = sorted({fates[k][0] for k in dead_lettered if fates[k][1]})
    assert not wrong, f"written though hostile: {wrong}"
    assert not lost, f"dead-lettered though good: {lost}"
    stamps = [o.timestamp for o in written]
    first_inversion = next((i for i in range(1, len(stamps)) if stamps[i] < stamps[i - 1]), None)
    assert first_inversion is None, (
        "the output stays in event-time order; first inversion: "
        f"{[(o.source, o.timestamp, o.late) for o in written[first_inversion - 2 : first_inversion + 2]]}"
    )
    raw: list[list[tuple[bytes, bytes | None]]] = [
        [(header_key_bytes(k), v) for k, v in o.headers][:2] for o in written if o.key == b"h"
    ]
    assert [(RAW_KEYS[0], b"x"), (b"app", b"1")] in raw, "raw header keys come out byte for byte"
    assert [(RAW_KEYS[1], None)] in [r[:1] for r in raw]
