"""``DEMO_FORMAT``: the demo's events as framed Avro, the same records otherwise (no broker)."""

from __future__ import annotations

import io
import json

import fastavro
import orjson
import pytest

from bench import demo_avro
from testkit import workloads
from timesync_wire import framing


def test_the_demo_format_defaults_to_json_and_refuses_what_it_does_not_know(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEMO_FORMAT", raising=False)
    assert demo_avro.demo_format() == "json"
    monkeypatch.setenv("DEMO_FORMAT", "avro")
    assert demo_avro.demo_format() == "avro"
    monkeypatch.setenv("DEMO_FORMAT", "xml")
    with pytest.raises(SystemExit, match="DEMO_FORMAT='xml': expected one of json, avro"):
        demo_avro.demo_format()


def test_avro_events_carry_the_same_fields_framed_with_the_schema_id() -> None:
    events = workloads.ad_traffic("imp", "clk", 1_000_000, duration_s=1.0, lag_ms=500)[:50]
    converted = demo_avro.as_avro(events, schema_id=7)
    schema = fastavro.parse_schema(json.loads(demo_avro.AD_SCHEMA))
    for before, after in zip(events, converted, strict=True):
        frame = framing.split(after.value)
        assert frame is not None
        assert frame.schema_id == 7
        assert fastavro.schemaless_reader(io.BytesIO(frame.body), schema, schema) == orjson.loads(
            before.value
        )
        assert (after.topic, after.partition, after.ts, after.key) == (
            before.topic,
            before.partition,
            before.ts,
            before.key,
        )
