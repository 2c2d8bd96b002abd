"""Hostile values through the jobs' decoders: each one a row with a NULL ``data``, counted —
never a failed query, an out-of-memory error or a hang.

One corpus per value format, ordinary values beside hostile ones, goes through the decode path
the jobs run (:func:`~spark_consumer.value_decoding.decoded_value` and
:func:`~spark_consumer.values.with_data`) in a streaming query over a file source (the undecodable
count lives in the streaming progress, where the jobs report it); a query that does not finish
within its time fails the test. One job (aggregate, on the real Kafka source) shows the count
where the command reports it. What each case did before its guard is in
``spark_consumer/value_limits.py``.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from spark_consumer import framing
from spark_consumer.jobs import aggregate
from spark_consumer.jobs.aggregate import AggregateOptions
from spark_consumer.metrics import sum_drops
from spark_consumer.options import AggSpec, WindowSpec
from spark_consumer.protobuf_schema import compile_descriptor_set, message_path
from spark_consumer.value_decoding import decoded_value, value_struct
from spark_consumer.value_formats import AvroValues, BinaryValues, ProtobufValues
from spark_consumer.value_limits import MAX_BYTES_KEY, MAX_ITEMS_KEY, ValueLimits
from spark_consumer.values import with_data
from tests.spark.ordered_topic import Stamper

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA_ID = 7
#: Runtime bounds for these queries, small so that breaking them costs little. Java Avro's own
#: bounds are JVM options fixed at session start: the defaults.
MAX_BYTES, MAX_ITEMS = 4096, 100
JVM = ValueLimits()
TIMEOUT_S = 120


def zigzag(n: int) -> bytes:
    """Avro's long (and Protobuf's sint64): zigzag, then a base-128 varint."""
    return varint((n << 1) ^ (n >> 63))


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


# --- Avro ----------------------------------------------------------------------------------------

READING = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "device", "type": "string"},
        {"name": "temp", "type": "double"},
        {"name": "xs", "type": {"type": "array", "items": "long"}},
        {"name": "gaps", "type": {"type": "array", "items": "null"}},  # items that take no bytes
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "blob", "type": "bytes"},
    ],
}
AVRO = AvroValues("hostile-value", json.dumps(READING), {SCHEMA_ID: json.dumps(READING)})
ORDINARY_AVRO = [
    {"device": "a", "temp": 1.5, "xs": [1, 2], "gaps": [None, None], "tags": {"k": "v"}, "blob": b"\x00"},
    {"device": "b", "temp": -0.5, "xs": [], "gaps": [], "tags": {}, "blob": b""},
]
_PREFIX = zigzag(1) + b"d" + struct.pack("<d", 1.0)  # device "d", temp 1.0
_EMPTY = zigzag(0)  # an empty array or map (its last block)


def avro(record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(READING), record)
    return out.getvalue()


def avro_corpus() -> dict[str, bytes]:
    good = avro(ORDINARY_AVRO[0])
    big = JVM.max_items
    return {
        "empty": b"",
        "shorter than the header": b"\x00\x00\x00",
        "wrong magic byte": b"\x01" + framing.frame(SCHEMA_ID, good)[1:],
        "unknown schema id": framing.frame(SCHEMA_ID + 1, good),
        "above maxBytes": framing.frame(SCHEMA_ID, good + b"\x00" * MAX_BYTES),  # decodes but for its size
        "truncated": framing.frame(SCHEMA_ID, good[:-3]),
        "negative string length": framing.frame(SCHEMA_ID, zigzag(-1) + b"d"),
        "an 11-byte varint": framing.frame(SCHEMA_ID, b"\xff" * 11),
        "2^62 nulls": framing.frame(SCHEMA_ID, _PREFIX + _EMPTY + zigzag(1 << 62) + _EMPTY * 3),
        "2^62 longs": framing.frame(SCHEMA_ID, _PREFIX + zigzag(1 << 62) + zigzag(1)),
        # Within Java Avro's own limit (2^31 - 9): each of these killed the driver JVM.
        "2^31-9 nulls": framing.frame(SCHEMA_ID, _PREFIX + _EMPTY + zigzag((1 << 31) - 9) + _EMPTY * 3),
        "2^31-9 longs": framing.frame(SCHEMA_ID, _PREFIX + zigzag((1 << 31) - 9) + zigzag(1)),
        "2^31-9 map entries": framing.frame(
            SCHEMA_ID, _PREFIX + _EMPTY * 2 + zigzag((1 << 31) - 9) + b"\x02k"
        ),
        "2^31-9 byte string": framing.frame(SCHEMA_ID, zigzag((1 << 31) - 9) + b"d"),
        "2^31-9 bytes": framing.frame(SCHEMA_ID, _PREFIX + _EMPTY * 3 + zigzag((1 << 31) - 9) + b"z"),
        # A negative count is followed by the block's size in bytes.
        "-(2^31-9) nulls in 0 bytes": framing.frame(
            SCHEMA_ID, _PREFIX + _EMPTY + zigzag(-((1 << 31) - 9)) + zigzag(0) + _EMPTY * 3
        ),
        "2^27 nulls": framing.frame(SCHEMA_ID, _PREFIX + _EMPTY + zigzag(1 << 27) + _EMPTY * 3),
        # Two blocks, each within the bound, together above it.
        "blocks past maxCollectionItems": framing.frame(
            SCHEMA_ID, _PREFIX + _EMPTY + zigzag(big) + zigzag(1) + _EMPTY * 3
        ),
    }


# --- Protobuf ------------------------------------------------------------------------------------

READING_PROTO = """
syntax = "proto3";
package hostile;
import "google/protobuf/timestamp.proto";

message Reading {
  string device = 1;
  double temp = 2;
  repeated int64 xs = 3;
  map<string, string> tags = 4;
  google.protobuf.Timestamp at = 5;
  Inner inner = 6;
}
message Inner { string note = 1; }
"""


def protobuf_values() -> ProtobufValues:
    descriptors = compile_descriptor_set("hostile.proto", {"hostile.proto": READING_PROTO})
    indexes, name = message_path(descriptors, "hostile.proto", None)
    return ProtobufValues(
        "hostile-value", descriptors, "hostile.proto", frozenset({SCHEMA_ID}), indexes, name
    )


def field(number: int, wire_type: int, payload: bytes) -> bytes:
    return varint(number << 3 | wire_type) + payload


def length_delimited(number: int, payload: bytes) -> bytes:
    return field(number, 2, varint(len(payload)) + payload)


ORDINARY_PROTOBUF = [
    b"".join(
        [
            length_delimited(1, b"a"),
            field(2, 1, struct.pack("<d", 1.5)),
            length_delimited(3, varint(1) + varint(2)),
            length_delimited(4, length_delimited(1, b"k") + length_delimited(2, b"v")),
            length_delimited(5, field(1, 0, varint(2))),
            length_delimited(6, length_delimited(1, b"n")),
        ]
    ),
    b"",  # every field at its default
]
EXPECTED_PROTOBUF = [
    {"device": "a", "temp": 1.5, "xs": [1, 2], "tags": {"k": "v"}, "at": 2, "inner": {"note": "n"}},
    {"device": "", "temp": 0.0, "xs": [], "tags": {}, "at": None, "inner": None},
]


def indexes(count: int) -> bytes:
    """A Protobuf frame's header announcing ``count`` message indexes (each 0)."""
    return framing.frame(SCHEMA_ID, b"") + zigzag(count) + zigzag(0) * max(0, min(count, 200))


def protobuf_corpus() -> dict[str, bytes]:
    good = ORDINARY_PROTOBUF[0]
    frame = lambda body: framing.frame(SCHEMA_ID, body, (0,))  # noqa: E731
    group = field(100, 3, b"")  # an unknown field's start-group tag
    seconds = field(1, 0, varint(1 << 40))  # year ~36,800
    return {
        "empty": b"",
        "shorter than the header": b"\x00\x00",
        "wrong magic byte": b"\x01" + frame(good)[1:],
        "unknown schema id": framing.frame(SCHEMA_ID + 1, good, (0,)),
        "another message of the file": framing.frame(SCHEMA_ID, length_delimited(1, b"n"), (1,)),
        "33 message indexes (the sidecar allows 100)": indexes(33) + good,
        "101 message indexes": indexes(101) + good,
        "2^62 message indexes": indexes(1 << 62) + good,
        "a negative index count": indexes(-2) + good,
        "above maxBytes": frame(good + length_delimited(99, b"\x00" * MAX_BYTES)),
        "truncated": frame(good[:-3]),
        "a 2^62 length prefix": frame(field(1, 2, varint(1 << 62)) + b"a"),
        "a 2^31 length prefix": frame(field(1, 2, varint(1 << 31)) + b"a"),
        "groups nested 10,000 deep": frame(group * 10_000 + field(100, 4, b"") * 10_000),
        "a string that is not UTF-8": frame(length_delimited(1, b"\xff\xfe")),
        "a Timestamp past 9999": frame(length_delimited(5, seconds)),
        "more items than maxCollectionItems": frame(length_delimited(3, varint(1) * (MAX_ITEMS + 1))),
        "an end-group with no start": frame(field(100, 4, b"")),
    }


# --- JSON ----------------------------------------------------------------------------------------

JSON_SCHEMA = StructType(
    [
        StructField("device", StringType()),
        StructField("temp", DoubleType()),
        StructField("xs", ArrayType(LongType())),
    ]
)
ORDINARY_JSON = [b'{"device": "a", "temp": 1.5, "xs": [1, 2]}', b'{"device": "b", "unknown": {"deep": [[]]}}']
EXPECTED_JSON = [{"device": "a", "temp": 1.5, "xs": [1, 2]}, {"device": "b", "temp": None, "xs": None}]


def json_corpus() -> dict[str, bytes]:
    return {
        "empty": b"",
        "not JSON": b"\x00\x01garbage",
        "an array": b"[1, 2]",
        "a field of another type (whole value NULL, not half)": b'{"device": "a", "temp": "hot"}',
        "truncated": ORDINARY_JSON[0][:-5],
        "above maxBytes": b'{"device": "' + b"a" * MAX_BYTES + b'"}',
        "nested 1,500 deep (Jackson allows 1,000)": b'{"x": ' + b"[" * 1500 + b"]" * 1500 + b"}",
        "nested 1,000,000 deep, never closed": b'{"x": ' + b"[" * 1_000_000,
        "a number of 2,000 digits": b'{"temp": 1' + b"0" * 2000 + b"}",
    }


# --- running a corpus ----------------------------------------------------------------------------


@pytest.fixture
def bounded(spark: SparkSession) -> Iterator[None]:
    """The session's runtime bounds set small (and unset after the test)."""
    spark.conf.set(MAX_BYTES_KEY, str(MAX_BYTES))
    spark.conf.set(MAX_ITEMS_KEY, str(MAX_ITEMS))
    try:
        yield
    finally:
        spark.conf.unset(MAX_BYTES_KEY)
        spark.conf.unset(MAX_ITEMS_KEY)


def decode_stream(
    spark: SparkSession,
    folder: Path,
    values: list[tuple[str, bytes | None]],
    decode: Callable[[DataFrame], DataFrame],
) -> tuple[dict[str, Row], int]:
    """``values`` (label, value) through ``decode`` then :func:`with_data`, as a streaming query
    over a file source: each label's row (``data``), and the undecodable count it reported."""
    spark.createDataFrame(values, "label STRING, value BINARY").coalesce(1).write.parquet(str(folder / "in"))
    source = spark.readStream.schema("label STRING, value BINARY").parquet(str(folder / "in"))
    rows: list[Row] = []
    lock = threading.Lock()

    def collect(batch: DataFrame, batch_id: int) -> None:
        got = batch.select("label", "data").collect()
        with lock:
            rows.extend(got)

    query = (
        decode(source)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(TIMEOUT_S)
    if not finished:
        query.stop()
    assert finished, f"the query did not finish within {TIMEOUT_S} s"
    assert query.exception() is None
    return {r.label: r for r in rows}, sum_drops(query.recentProgress).undecodable


def binary(values: BinaryValues, schema: StructType | None = None) -> Callable[[DataFrame], DataFrame]:
    def decode(frame: DataFrame) -> DataFrame:
        return with_data(frame.select("label", decoded_value(F.col("value"), values).alias("value")), schema)

    return decode


def text(schema: StructType) -> Callable[[DataFrame], DataFrame]:
    def decode(frame: DataFrame) -> DataFrame:
        return with_data(frame.select("label", F.col("value").cast("string").alias("value")), schema)

    return decode


def plain(data: Row | None) -> Any:
    return None if data is None else data.asDict(recursive=True)


# --- the tests -----------------------------------------------------------------------------------


def test_the_session_gives_java_avro_its_bounds(spark: SparkSession) -> None:
    """Without them, a 12-byte Avro value claiming 2^31 - 9 items kills the driver JVM."""
    system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    assert {k: system.getProperty(k) for k in JVM.java_properties()} == JVM.java_properties()


def test_hostile_avro_values_are_null_rows_counted_beside_ordinary_ones(
    spark: SparkSession, tmp_path: Path, bounded: None
) -> None:
    hostile = avro_corpus()
    values: list[tuple[str, bytes | None]] = [
        *((f"ordinary {i}", framing.frame(SCHEMA_ID, avro(r))) for i, r in enumerate(ORDINARY_AVRO)),
        # Java Avro keeps a string's bytes as they are: not UTF-8 is no reason to refuse it.
        (
            "not UTF-8",
            framing.frame(
                SCHEMA_ID, avro({**ORDINARY_AVRO[1], "device": "x"}).replace(b"\x02x", b"\x02\xff")
            ),
        ),
        ("tombstone", None),
        *hostile.items(),
    ]

    rows, undecodable = decode_stream(spark, tmp_path, values, binary(AVRO))

    assert [plain(rows[f"ordinary {i}"].data) for i in range(len(ORDINARY_AVRO))] == ORDINARY_AVRO
    assert rows["not UTF-8"].data is not None
    assert rows["tombstone"].data is None
    assert {label: rows[label].data for label in hostile} == dict.fromkeys(hostile)
    assert undecodable == len(hostile)  # the tombstone is no value to decode


def test_hostile_protobuf_values_are_null_rows_counted_beside_ordinary_ones(
    spark: SparkSession, tmp_path: Path, bounded: None
) -> None:
    hostile = protobuf_corpus()
    values: list[tuple[str, bytes | None]] = [
        *((f"ordinary {i}", framing.frame(SCHEMA_ID, b, (0,))) for i, b in enumerate(ORDINARY_PROTOBUF)),
        ("tombstone", None),
        *hostile.items(),
    ]

    rows, undecodable = decode_stream(spark, tmp_path, values, binary(protobuf_values()))

    decoded = [plain(rows[f"ordinary {i}"].data) for i in range(len(ORDINARY_PROTOBUF))]
    for row in decoded:
        row["at"] = None if row["at"] is None else int(row["at"].timestamp())
    assert decoded == EXPECTED_PROTOBUF
    assert rows["tombstone"].data is None
    assert {label: rows[label].data for label in hostile} == dict.fromkeys(hostile)
    assert undecodable == len(hostile)


def test_hostile_json_values_are_null_rows_counted_beside_ordinary_ones(
    spark: SparkSession, tmp_path: Path, bounded: None
) -> None:
    hostile = json_corpus()
    values: list[tuple[str, bytes | None]] = [
        *((f"ordinary {i}", v) for i, v in enumerate(ORDINARY_JSON)),
        ("not UTF-8", b'{"device": "\xff"}'),  # Spark keeps the bytes, as for Avro
        ("tombstone", None),
        *hostile.items(),
    ]

    rows, undecodable = decode_stream(spark, tmp_path, values, text(JSON_SCHEMA))

    assert [plain(rows[f"ordinary {i}"].data) for i in range(len(ORDINARY_JSON))] == EXPECTED_JSON
    assert rows["not UTF-8"].data is not None
    assert rows["tombstone"].data is None
    assert {label: rows[label].data for label in hostile} == dict.fromkeys(hostile)
    assert undecodable == len(hostile)


@pytest.mark.broker
def test_the_job_keeps_undecodable_rows_and_reports_their_count(
    spark: SparkSession, stream: Any, bounded: None
) -> None:
    """aggregate on the real Kafka source: the rows count in their window under a NULL key, a
    heartbeat's empty value is not counted, and the count is in the progress the command reports."""
    options = AggregateOptions(
        WindowSpec("tumbling", size_ms=10), (AggSpec("count"),), "device", value_struct(spark, AVRO)
    )
    s = stream(lambda src: aggregate.build(spark, src, options), watermark_delay_ms=1, values=AVRO)
    stamp = Stamper()
    hostile = avro_corpus()
    records = [
        stamp.record(1, framing.frame(SCHEMA_ID, avro(ORDINARY_AVRO[0])), "k"),
        *(stamp.record(2, value, "k") for value in hostile.values()),
        stamp.record(3, framing.frame(SCHEMA_ID, avro(ORDINARY_AVRO[1])), "k"),
        stamp.heartbeat(100),
    ]

    watchdog = threading.Timer(TIMEOUT_S, s.stop)  # a hang stops the query: a failure, not a stuck suite
    watchdog.start()
    try:
        out = s.feed(*records)
    finally:
        watchdog.cancel()

    assert s.query.isActive, f"the query did not finish its batches within {TIMEOUT_S} s"
    assert sorted((r.key or "", r["count"]) for r in out) == [("", len(hostile)), ("a", 1), ("b", 1)]
    assert s.drops().undecodable == len(hostile)
