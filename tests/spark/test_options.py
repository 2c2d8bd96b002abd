"""Job options parse without Spark: durations, windows, aggregations, JSON schemas."""

from __future__ import annotations

import pytest
from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from spark_consumer.options import AggSpec, UsageError, WindowSpec, parse_duration
from spark_consumer.schema import field_type, from_json_document


@pytest.mark.parametrize(
    ("text", "ms"), [("250ms", 250), ("5s", 5000), ("2m", 120_000), ("1h", 3_600_000), ("7", 7)]
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text, "--x") == ms


def test_a_bad_duration_names_the_option_and_value() -> None:
    with pytest.raises(UsageError, match=r"--within: '5 sec' is not a duration"):
        parse_duration("5 sec", "--within")


@pytest.mark.parametrize(
    ("window", "ts", "starts"),
    [
        (WindowSpec("tumbling", size_ms=5), 7, [5]),
        (WindowSpec("tumbling", size_ms=5), 5, [5]),
        (WindowSpec("hopping", size_ms=10, slide_ms=5), 7, [0, 5]),
        (WindowSpec("hopping", size_ms=10, slide_ms=4), 9, [0, 4, 8]),
        (WindowSpec("hopping", size_ms=10, slide_ms=3), 1, [-6, -3, 0]),
    ],
)
def test_window_starts_align_like_spark(window: WindowSpec, ts: int, starts: list[int]) -> None:
    assert window.starts(ts) == starts


def test_hopping_slide_must_not_exceed_size() -> None:
    with pytest.raises(UsageError, match="0 < slide <= size"):
        WindowSpec("hopping", size_ms=5, slide_ms=6)


def test_aggregations() -> None:
    assert [AggSpec.parse(t).column for t in ["count", "count:id", "sum:amount", "max:meta.temp"]] == [
        "count",
        "count_id",
        "sum_amount",
        "max_meta_temp",
    ]
    with pytest.raises(UsageError, match="sum needs a field"):
        AggSpec.parse("sum")


def test_json_schema_documents_map_to_spark_types() -> None:
    document = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "n": {"type": ["integer", "null"]},
            "meta": {"type": "object", "properties": {"temp": {"type": "number"}}},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    schema = from_json_document(document, "--value-schema")
    assert schema == StructType(
        [
            StructField("id", StringType()),
            StructField("n", LongType()),
            StructField("meta", StructType([StructField("temp", DoubleType())])),
            StructField("tags", ArrayType(StringType())),
        ]
    )
    assert field_type(schema, "meta.temp", "--agg") == DoubleType()
    with pytest.raises(UsageError, match=r"no field 'meta.hum' in the value schema \(meta has: temp\)"):
        field_type(schema, "meta.hum", "--agg")
