"""Parity: the sidecar and the Spark jobs reach the same verdict on the same framed values.

The same corpus goes through both halves' real paths — the sidecar's extractor as the config
builds it, its schema cached as the resolver caches it; Spark's decode as the jobs run it
(:func:`~spark_consumer.value_decoders.decoded_value`, then :func:`~spark_consumer.values.with_data`,
in a batch query) — for JSON, Avro and Protobuf: ordinary values, the hostile corpora of issue 32
(``tests/spark/test_hostile_values.py``) with the time field added, and seeded mutations of
ordinary bodies.

**What is compared, and why.** The jobs' event time is the Kafka timestamp the sidecar stamped,
so what must agree is the *time field of the value*:

1. a value the sidecar reads an event time T from decodes in Spark, and its time field is T
   (a record the sidecar orders never becomes a NULL ``data`` in the job, and the job sees the
   time it was ordered by) — the drift of issue 33 (33 to 100 message indexes: ordered by the
   sidecar, NULL in Spark) broke this;
2. a value the sidecar reads no time from has no time field in Spark either (NULL ``data``, or
   a NULL field).

Spark gives no reasons (a NULL is a NULL), and Avro and JSON decode in the JVM (``from_avro``,
``from_json``), so the verdict is compared, not the reason: the event time in ms, or none.
Spark's bounds on one value are at their defaults (``spark.timesync.values.*``); lowered, they
refuse more than the sidecar, by choice. A time before 1970 is none to the sidecar (Kafka's
range) and a number or a date to Spark (:func:`before_1970`). The few other values where the
halves disagree by design are listed in ``DIFFERENT`` with the reason, and the test holds them to
it: each one must differ.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from sidecar.config.extractor import parse_extractor
from sidecar.core import Record
from sidecar.extractors.framed import SchemaTimestamp
from sidecar.extractors.schema_cache import Unreadable
from spark_consumer.value_decoders import decoded_value
from spark_consumer.value_formats import AvroValues, BinaryValues
from spark_consumer.values import with_data
from tests.spark.test_hostile_values import (
    ORDINARY_AVRO,
    ORDINARY_JSON,
    ORDINARY_PROTOBUF,
    READING,
    READING_PROTO,
    SCHEMA_ID,
    avro_corpus,
    json_corpus,
    protobuf_corpus,
    protobuf_values,
    zigzag,
)
from timesync_wire import framing
from timesync_wire.formats import FORMATS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TS = 1_700_000_000_123
#: label → why the halves differ on it (each must: a listed difference that no longer holds fails).
DIFFERENT = {
    "json: ts as a numeric string": "the ms unit takes a string holding a number; Spark's BIGINT "
    "field does not, and from_json makes the whole value NULL",
    "json: ts with a fraction": "the ms unit takes a fraction (cut to ms); Spark's BIGINT field does not",
    "json: a field of another type": "the sidecar reads one field; Spark's from_json refuses the whole "
    "value when any field of the job's schema has another type",
    "protobuf: a Timestamp past 9999": "Spark's TIMESTAMP holds years 1 to 9999; the sidecar reads the "
    "time and judges it at emit, where the broker's message.timestamp.after.max.ms refuses it",
}


def verdicts(
    spark: SparkSession, values: dict[str, bytes | None], decode: Callable[[DataFrame], DataFrame]
) -> dict[str, int | None]:
    """Each label's time field in ms as Spark's decode gives it (``None``: no time)."""
    frame = spark.createDataFrame(list(values.items()), "label STRING, value BINARY")
    decoded = decode(frame)
    ts = F.col("data.ts")
    if not isinstance(decoded.schema["data"].dataType["ts"].dataType, LongType):
        ts = F.unix_millis(ts)  # a TIMESTAMP (Avro's timestamp-millis, Protobuf's Timestamp)
    rows = decoded.select("label", ts.alias("ts")).collect()
    return {r.label: r.ts for r in rows}


def sidecar(spec: str, values: dict[str, bytes | None], schema: Any = None) -> dict[str, int | None]:
    """Each label's event time as the sidecar's extractor reads it (``None``: invalid), the
    schema cached as the resolver caches it (an id it does not know: unknown to the registry)."""
    extractor = parse_extractor(spec)
    if isinstance(extractor, SchemaTimestamp):
        fmt = extractor.format
        for sid, wanted in extractor.schemas.missing(values.values()).items():
            for indexes in wanted:
                if sid != SCHEMA_ID:
                    extractor.schemas.put(
                        sid, Unreadable(f"the registry does not know schema id {sid} (404)")
                    )
                    continue
                try:
                    extractor.schemas.put(
                        sid, fmt.time_reader(extractor.path, extractor.unit, schema, indexes), indexes
                    )
                except ValueError as e:  # a message of the file without the field
                    extractor.schemas.put(sid, Unreadable(str(e)), indexes)
    records = [Record("t", 0, i, 1, value=v) for i, v in enumerate(values.values())]
    times = extractor.extract_all(records)
    return {label: (None if ms < 0 else ms) for label, ms in zip(values, times, strict=True)}


def before_1970(ours: int | None, theirs: int | None) -> bool:
    """The one rule by which the halves differ on any value: a time before 1970 is outside
    Kafka's range, so the sidecar has none, where Spark reads the number or the date."""
    return ours is None and theirs is not None and theirs < 0


def compare(prefix: str, ours: dict[str, int | None], theirs: dict[str, int | None]) -> None:
    differing = {
        label
        for label in ours
        if ours[label] != theirs[label] and not before_1970(ours[label], theirs[label])
    }
    expected = {label for label in DIFFERENT if label.startswith(prefix)}
    assert {label: (ours[label], theirs[label]) for label in differing - expected} == {}, "sidecar vs Spark"
    assert expected <= differing, f"listed as different, but the halves agree: {sorted(expected - differing)}"
    assert any(ms is not None for ms in ours.values()), "the corpus holds values with a time"


def mutated(rng: random.Random, value: bytes, keep: int) -> bytes:
    """``value`` with one byte after ``keep`` flipped, cut, or inserted."""
    pos = rng.randrange(keep, len(value)) if len(value) > keep else keep
    kind = rng.randrange(3)
    if kind == 0 and pos < len(value):
        return value[:pos] + bytes([value[pos] ^ (1 << rng.randrange(8))]) + value[pos + 1 :]
    if kind == 1:
        return value[:pos]
    return value[:pos] + bytes([rng.randrange(256)]) + value[pos:]


def binary(values: BinaryValues) -> Callable[[DataFrame], DataFrame]:
    return lambda frame: with_data(
        frame.select("label", decoded_value(F.col("value"), values).alias("value")), None
    )


# --- Avro: the time last, so that the sidecar's skip plan walks every field before it -----------

PARITY = {
    **READING,
    "name": "Parity",
    "fields": [
        *READING["fields"],
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def avro_values() -> dict[str, bytes | None]:
    import io

    import fastavro

    def body(record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(PARITY), {**record, "ts": TS})
        return out.getvalue()

    values: dict[str, bytes | None] = {
        f"avro: ordinary {i}": framing.frame(SCHEMA_ID, body(r)) for i, r in enumerate(ORDINARY_AVRO)
    }
    values["avro: tombstone"] = None
    for label, value in avro_corpus().items():
        values[f"avro: {label}"] = value + zigzag(TS)  # the time after the hostile part
        values[f"avro: {label}, no time"] = value
    rng = random.Random(33)
    good = framing.frame(SCHEMA_ID, body(ORDINARY_AVRO[0]))
    for i in range(60):
        values[f"avro: mutation {i}"] = mutated(rng, good, framing.HEADER_SIZE)
    return values


def test_avro_values_get_the_same_verdict_from_the_sidecar_and_spark(spark: SparkSession) -> None:
    text = json.dumps(PARITY)
    values = avro_values()
    ours = sidecar("avro:ts", values, FORMATS["avro"].compile(text, {}))
    theirs = verdicts(spark, values, binary(AvroValues("parity-value", text, {SCHEMA_ID: text})))
    assert ours["avro: ordinary 0"] == theirs["avro: ordinary 0"] == TS
    compare("avro:", ours, theirs)


# --- Protobuf: the hostile test's message; the time is its google.protobuf.Timestamp ------------


def protobuf_parity_values() -> dict[str, bytes | None]:
    values: dict[str, bytes | None] = {
        f"protobuf: ordinary {i}": framing.frame(SCHEMA_ID, b, (0,)) for i, b in enumerate(ORDINARY_PROTOBUF)
    }
    values["protobuf: tombstone"] = None
    values.update({f"protobuf: {label}": v for label, v in protobuf_corpus().items()})
    rng = random.Random(33)
    good = values["protobuf: ordinary 0"]
    assert good is not None
    for i in range(60):
        values[f"protobuf: mutation {i}"] = mutated(rng, good, framing.HEADER_SIZE + 1)
    return values


def test_protobuf_values_get_the_same_verdict_from_the_sidecar_and_spark(spark: SparkSession) -> None:
    proto = protobuf_values()
    values = protobuf_parity_values()
    ours = sidecar("protobuf:at", values, FORMATS["protobuf"].compile(READING_PROTO, {}))
    theirs = verdicts(spark, values, lambda frame: _renamed(binary(proto)(frame)))
    assert ours["protobuf: ordinary 0"] == theirs["protobuf: ordinary 0"] == 2_000
    compare("protobuf:", ours, theirs)


def _renamed(decoded: DataFrame) -> DataFrame:
    """The message's time field is ``at``; the comparison reads ``data.ts``."""
    return decoded.withColumn("data", F.col("data").withField("ts", F.col("data.at")))


# --- JSON: the job's schema names the field the sidecar reads ------------------------------------

JSON_SCHEMA = StructType(
    [
        StructField("device", StringType()),
        StructField("temp", DoubleType()),
        StructField("xs", ArrayType(LongType())),
        StructField("ts", LongType()),
    ]
)


def json_values() -> dict[str, bytes | None]:
    values: dict[str, bytes | None] = {
        f"json: ordinary {i}": doc[:-1] + b', "ts": %d}' % TS for i, doc in enumerate(ORDINARY_JSON)
    }
    values.update(
        {
            "json: tombstone": None,
            "json: ts as a numeric string": b'{"ts": "%d"}' % TS,
            "json: ts with a fraction": b'{"ts": %d.5}' % TS,
            "json: ts negative": b'{"ts": -5}',
            "json: ts missing": b'{"device": "a"}',
            "json: ts null": b'{"ts": null}',
            "json: a field of another type": b'{"device": "a", "temp": "hot", "ts": %d}' % TS,
        }
    )
    for label, doc in json_corpus().items():
        values[f"json: {label}"] = b'{"ts": %d, "rest": ' % TS + doc + b"}" if doc else doc
    return values


def test_json_values_get_the_same_verdict_from_the_sidecar_and_spark(spark: SparkSession) -> None:
    values = json_values()
    ours = sidecar("json:ts", values)
    theirs = verdicts(
        spark,
        values,
        lambda frame: with_data(
            frame.select("label", F.col("value").cast("string").alias("value")), JSON_SCHEMA
        ),
    )
    assert ours["json: ordinary 0"] == theirs["json: ordinary 0"] == TS
    compare("json:", ours, theirs)
