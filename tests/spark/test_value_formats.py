"""Avro and Protobuf values through a real registry: the jobs give what they give on JSON.

The same readings are written twice, as JSON and as Avro framed for the registry (two versions
of the subject interleaved: the second adds a field with a default), and each job runs on both:
grouped by an Avro field, the results are equal. ``join`` runs on Protobuf values.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_consumer import framing
from spark_consumer.cli import Plan, build_parser
from spark_consumer.common_options import job_input
from spark_consumer.jobs import JobOutput, aggregate, join, suppress
from spark_consumer.jobs.aggregate import AggregateOptions
from spark_consumer.jobs.join import JoinOptions
from spark_consumer.jobs.suppress import SuppressOptions
from spark_consumer.options import AggSpec, WindowSpec
from spark_consumer.schema import load_schema
from spark_consumer.schema_registry import RegistryClient, RegistrySettings, value_subject
from spark_consumer.source import SourceOptions
from spark_consumer.value_decoding import decoded_value, value_struct
from spark_consumer.value_formats import AvroValues, plan_values
from spark_consumer.values import with_data
from tests.spark import registered_values
from tests.spark.ordered_topic import OrderedRecord, Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.slow]

READING_V1 = json.dumps(
    {
        "type": "record",
        "name": "Reading",
        "fields": [{"name": "device", "type": "string"}, {"name": "temp", "type": "double"}],
    }
)
# Version 2 adds a field with a default: version-1 records still decode, reading the default.
READING_V2 = json.dumps(
    {
        "type": "record",
        "name": "Reading",
        "fields": [
            {"name": "device", "type": "string"},
            {"name": "temp", "type": "double"},
            {"name": "site", "type": "string", "default": "unknown"},
        ],
    }
)
JSON_SCHEMA = "device STRING, temp DOUBLE, site STRING"

# (event time, device, temp, subject version that wrote it); the Kafka key is not the device.
READINGS = [
    (1, "a", 1.5, 1),
    (2, "b", 2.0, 2),
    (3, "a", 3.0, 2),
    (4, "b", 0.5, 1),
    (6, "b", 4.0, 1),
    (7, "a", 5.0, 2),
    (8, "a", 2.5, 1),
    (12, "a", 1.0, 2),
]
AGGS = (AggSpec("count"), AggSpec("sum", "temp"), AggSpec("max", "temp"))
TUMBLING_5 = WindowSpec("tumbling", size_ms=5)


def _json_records() -> list[OrderedRecord]:
    stamp = Stamper()
    out = [
        stamp.record(ts, {"device": d, "temp": t, "site": "unknown"}, key=f"k{ts}")
        for ts, d, t, _ in READINGS
    ]
    return [*out, stamp.heartbeat(30)]


def _avro_records(url: str, subject: str) -> list[OrderedRecord]:
    ids = {1: registered_values.register(url, subject, READING_V1)}
    ids[2] = registered_values.register(url, subject, READING_V2)
    assert ids[1] != ids[2]
    schemas = {1: READING_V1, 2: READING_V2}
    stamp = Stamper()
    out = []
    for ts, d, t, version in READINGS:
        fields: dict[str, Any] = {"device": d, "temp": t}
        if version == 2:
            fields["site"] = "unknown"
        out.append(stamp.record(ts, registered_values.avro(ids[version], schemas[version], fields), f"k{ts}"))
    return [*out, stamp.heartbeat(30)]


def _run(stream: Any, build: Callable[[SourceOptions], JobOutput], records: list[OrderedRecord]) -> list[Any]:
    s = stream(build, watermark_delay_ms=1)
    return s.feed(*records)


def _with_avro(spark: SparkSession, url: str, src: SourceOptions) -> tuple[SourceOptions, Any]:
    """The schemas registered for ``src``'s topic, resolved as the CLI does before Spark starts."""
    subject = value_subject(src.topic)
    records = _avro_records(url, subject)
    values = plan_values("avro", RegistryClient(RegistrySettings(url)), subject)
    assert sorted(values.writer_schemas) == sorted(set(values.writer_schemas))  # both versions
    assert len(values.writer_schemas) == 2
    return dataclasses.replace(src, values=values), (records, value_struct(spark, values))


def test_aggregate_on_avro_grouped_by_an_avro_field_equals_the_json_run(
    spark: SparkSession, stream: Any, schema_registry: str
) -> None:
    json_options = AggregateOptions(TUMBLING_5, AGGS, "device", load_schema(JSON_SCHEMA), "append")
    from_json = _run(stream, lambda src: aggregate.build(spark, src, json_options), _json_records())

    avro_records: list[OrderedRecord] = []

    def build_avro(src: SourceOptions) -> JobOutput:
        source, (records, schema) = _with_avro(spark, schema_registry, src)
        avro_records.extend(records)
        return aggregate.build(spark, source, dataclasses.replace(json_options, value_schema=schema))

    s = stream(build_avro, watermark_delay_ms=1)
    from_avro = s.feed(*avro_records)

    def rows(out: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r.key, r.window_start, r["count"], r.sum_temp, r.max_temp, r.ts) for r in out)

    assert rows(from_avro) == rows(from_json)
    assert rows(from_json) == [
        ("a", 0, 2, 4.5, 3.0, 3),
        ("a", 5, 2, 7.5, 5.0, 8),
        ("a", 10, 1, 1.0, 1.0, 12),
        ("b", 0, 2, 2.5, 2.0, 4),
        ("b", 5, 1, 4.0, 4.0, 6),
    ]


def test_suppress_on_avro_grouped_by_an_avro_field_equals_the_json_run(
    spark: SparkSession, stream: Any, schema_registry: str
) -> None:
    json_options = SuppressOptions(TUMBLING_5, 0, 20, AGGS, "device", value_schema=load_schema(JSON_SCHEMA))
    from_json = _run(stream, lambda src: suppress.build(spark, src, json_options), _json_records())

    avro_records: list[OrderedRecord] = []

    def build_avro(src: SourceOptions) -> JobOutput:
        source, (records, schema) = _with_avro(spark, schema_registry, src)
        avro_records.extend(records)
        return suppress.build(spark, source, dataclasses.replace(json_options, value_schema=schema))

    s = stream(build_avro, watermark_delay_ms=1)
    from_avro = s.feed(*avro_records)

    def rows(out: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r.key, r.window_start, r["count"], r.sum_temp, r.max_temp, r.ts) for r in out)

    assert rows(from_avro) == rows(from_json)
    assert ("a", 5, 2, 7.5, 5.0, 8) in rows(from_json)


READING_PROTO = """
syntax = "proto3";
package timesync.test;
import "google/protobuf/timestamp.proto";

message Reading {
  string device = 1;
  double temp = 2;
  google.protobuf.Timestamp taken = 3;
}
"""


def test_join_on_protobuf_values_keys_on_a_decoded_field(
    spark: SparkSession, stream: Any, schema_registry: str
) -> None:
    records: list[OrderedRecord] = []

    def build(src: SourceOptions) -> JobOutput:
        subject = value_subject(src.topic)
        schema_id = registered_values.register(schema_registry, subject, READING_PROTO, "PROTOBUF")
        write = registered_values.ProtobufWriter(schema_id, READING_PROTO)
        stamp = Stamper()
        for ts, topic, device in [(1, "left", "a"), (2, "right", "a"), (3, "right", "b"), (9, "left", "b")]:
            value = write(device=device, temp=float(ts), taken={"seconds": ts})
            records.append(stamp.record(ts, value, key="same", topic=topic))
        records.append(stamp.heartbeat(40))
        values = plan_values("protobuf", RegistryClient(RegistrySettings(schema_registry)), subject)
        source = dataclasses.replace(src, values=values)
        schema = value_struct(spark, values)
        options = JoinOptions("left", "right", 6, "inner", "device", schema, schema)
        return join.build(spark, source, options)

    s = stream(build, watermark_delay_ms=1)
    out = s.feed(*records)

    assert sorted((r.key, r.left_ts, r.right_ts, r.ts, r.left.temp, r.right.temp) for r in out) == [
        ("a", 1, 2, 2, 1.0, 2.0),
        ("b", 9, 3, 9, 9.0, 3.0),
    ]
    assert {r.left.taken.timestamp() for r in out} == {1.0, 9.0}


CLICK_PROTO = """
syntax = "proto3";
package timesync.test;

message Click { string device = 1; string button = 2; }
"""


def test_join_of_two_protobuf_subjects_decodes_each_side_with_its_own(
    spark: SparkSession, stream: Any, schema_registry: str
) -> None:
    """Each input topic has its own subject (the serializers' default naming): the right side
    names its subject with ``--right-value-subject``."""
    records: list[OrderedRecord] = []

    def build(src: SourceOptions) -> JobOutput:
        left_subject, right_subject = value_subject(src.topic), f"{src.topic}-clicks-value"
        reading = registered_values.ProtobufWriter(
            registered_values.register(schema_registry, left_subject, READING_PROTO, "PROTOBUF"),
            READING_PROTO,
        )
        click = registered_values.ProtobufWriter(
            registered_values.register(schema_registry, right_subject, CLICK_PROTO, "PROTOBUF"), CLICK_PROTO
        )
        stamp = Stamper()
        records.extend(
            [
                stamp.record(1, reading(device="a", temp=1.0), key="k", topic="readings"),
                stamp.record(2, click(device="a", button="buy"), key="k", topic="clicks"),
                stamp.record(3, click(device="b", button="back"), key="k", topic="clicks"),
                stamp.heartbeat(40),
            ]
        )
        argv = ["join", "--bootstrap-servers", src.bootstrap_servers, "--topic", src.topic]
        argv += [
            "--checkpoint",
            "/tmp/unused",
            "--sink",
            "console",
            "--left",
            "readings",
            "--right",
            "clicks",
        ]
        argv += ["--within", "6ms", "--how", "left", "--key-field", "device", "--value-format", "protobuf"]
        argv += ["--schema-registry-url", schema_registry, "--right-value-subject", right_subject]
        plan = Plan(build_parser().parse_args(argv))
        given = job_input(plan.args, dataclasses.replace(src, values=plan.source.values))
        return plan.command.build(spark, given, plan.options)

    out = stream(build, watermark_delay_ms=1).feed(*records)

    assert [(r.key, r.left_ts, r.right_ts, r.left.temp, r.right.button) for r in out] == [
        ("a", 1, 2, 1.0, "buy")
    ]


def test_the_cli_plan_fetches_the_subject_and_the_job_reads_the_decoded_fields(
    spark: SparkSession, schema_registry: str, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("cli")
    registered_values.register(schema_registry, f"{topic}-value", READING_V1)
    registered_values.register(schema_registry, f"{topic}-value", READING_V2)
    argv = ["aggregate", "--bootstrap-servers", "127.0.0.1:1", "--topic", topic, "--checkpoint", "/tmp/x"]
    argv += ["--sink", "console", "--size", "5s", "--key-field", "device", "--agg", "sum:temp"]
    argv += ["--value-format", "avro", "--schema-registry-url", schema_registry]
    plan = Plan(build_parser().parse_args(argv))

    given = job_input(plan.args, plan.source)

    assert given.value_schema == load_schema(
        "device STRING NOT NULL, temp DOUBLE NOT NULL, site STRING NOT NULL"
    )
    assert isinstance(plan.source.values, AvroValues)
    assert len(plan.source.values.writer_schemas) == 2
    frame = plan.command.build(spark, given, plan.options).frame
    assert frame.columns == ["key", "window_start", "window_end", "sum_temp", "ts"]


def test_avro_values_that_do_not_decode_are_null_not_a_failed_query(
    spark: SparkSession, schema_registry: str, topic_name: Callable[[str], str]
) -> None:
    subject = f"{topic_name('bad')}-value"
    first = registered_values.register(schema_registry, subject, READING_V1)
    values = plan_values("avro", RegistryClient(RegistrySettings(schema_registry)), subject)
    good = registered_values.avro(first, READING_V1, {"device": "a", "temp": 1.0})
    cases = [
        good,
        b"\x01" + good[1:],  # wrong magic byte
        framing.frame(first + 1000, good[5:]),  # an id that is not one of the subject's versions
        framing.frame(first, b"\xff\xff\xff"),  # a body that is not the schema's
        good[:4],  # shorter than the header
        b"",  # a heartbeat's empty value
    ]
    frame = spark.createDataFrame([(c,) for c in cases], "value BINARY")

    decoded = [
        r.data
        for r in with_data(frame.select(decoded_value(F.col("value"), values).alias("value")), None).collect()
    ]

    assert decoded[0].asDict() == {"device": "a", "temp": 1.0}
    # Whole or not at all: a body from_avro's PERMISSIVE mode cannot read is NULL too.
    assert decoded[1:] == [None, None, None, None, None]


def test_avro_with_a_schema_reference_decodes_with_the_referenced_type_in_place(
    spark: SparkSession, schema_registry: str, topic_name: Callable[[str], str]
) -> None:
    place = {
        "type": "record",
        "name": "Place",
        "namespace": "geo",
        "fields": [{"name": "site", "type": "string"}],
    }
    reading = {
        "type": "record",
        "name": "Reading",
        "fields": [{"name": "device", "type": "string"}, {"name": "at", "type": "geo.Place"}],
    }
    place_subject, subject = f"{topic_name('place')}-value", f"{topic_name('r')}-value"
    registered_values.register(schema_registry, place_subject, json.dumps(place))
    sid = registered_values.register_with_references(
        schema_registry,
        subject,
        json.dumps(reading),
        [{"name": "geo.Place", "subject": place_subject, "version": 1}],
    )
    values = plan_values("avro", RegistryClient(RegistrySettings(schema_registry)), subject)
    assert isinstance(values, AvroValues)
    value = registered_values.avro(sid, values.reader_schema, {"device": "a", "at": {"site": "s1"}})
    frame = spark.createDataFrame([(value,)], "value BINARY")

    (row,) = with_data(frame.select(decoded_value(F.col("value"), values).alias("value")), None).collect()

    assert row.data.asDict(recursive=True) == {"device": "a", "at": {"site": "s1"}}
