"""``json:<dotted.path>[:unit]``: the JSON format's extractor, as the config builds it
(the scan and its rules are held to orjson's in tests/unit/wire/test_json_scan.py)."""

from __future__ import annotations

import orjson
import pytest

from sidecar.config.extractor import parse_extractor
from sidecar.core import Record

#: The records' Kafka timestamp: when they were produced (2027), after every event time below.
PRODUCED_AT = 1_800_000_000_000


def json_record(value: object, offset: int = 0, raw: bytes | None = None) -> Record:
    return Record("a", 0, offset, PRODUCED_AT, value=raw if raw is not None else orjson.dumps(value))


def one(spec: str, value: object = None, raw: bytes | None = None) -> int:
    return parse_extractor(spec).extract_all([json_record(value, raw=raw)])[0]


def why(spec: str, value: object = None, raw: bytes | None = None) -> str:
    return parse_extractor(spec).explain(json_record(value, raw=raw))


def test_json_dotted_path_walks_nested_objects() -> None:
    assert one("json:meta.ts", {"meta": {"ts": 1700000000123}}) == 1700000000123


def test_json_unit_defaults_to_milliseconds() -> None:
    assert one("json:ts", {"ts": 42}) == one("json:ts:ms", {"ts": 42}) == 42


def test_json_seconds_may_have_a_fraction() -> None:
    assert one("json:t:s", {"t": 1700000000.5}) == 1700000000500
    assert one("json:t:s", {"t": "12"}) == 12000


def test_json_takes_microseconds_as_avro_and_protobuf_do() -> None:
    assert one("json:t:us", {"t": 1700000000123456}) == 1700000000123
    assert one("json:t:us", {"t": "1700000000123999"}) == 1700000000123


def test_json_iso_needs_a_zone() -> None:
    assert one("json:t:iso", {"t": "2024-05-01T12:00:00Z"}) == 1714564800000
    assert one("json:t:iso", {"t": "2024-05-01T14:00:00.250+02:00"}) == 1714564800250
    assert one("json:t:iso", {"t": "2024-05-01T12:00:00"}) == -1
    assert "no time zone" in why("json:t:iso", {"t": "2024-05-01T12:00:00"})


@pytest.mark.parametrize(
    ("value", "raw", "reason"),
    [
        (None, b"not json", "value is not JSON"),
        ({"other": 1}, None, "field ts is missing"),
        ({"ts": "soon"}, None, "field ts is not a number: 'soon'"),
        ({"ts": True}, None, "field ts is not a number: True"),
        ({"ts": -5}, None, "field ts is negative: -5"),
        (None, b'{"ts": 18446744073709551616}', "beyond Kafka's timestamp range"),
        (None, b'{"ts": NaN}', "value is not JSON"),
        ([1, 2], None, "value is not a JSON object"),
    ],
)
def test_invalid_json_timestamps_are_explained(value: object, raw: bytes | None, reason: str) -> None:
    assert one("json:ts", value, raw) == -1
    assert reason in why("json:ts", value, raw)


def test_an_event_time_hours_away_from_the_records_kafka_timestamp_is_valid() -> None:
    """A backfill stamps records at load time, hours after their events; a replay's CreateTimes come
    from another clock. Whether the broker accepts the output is judged at emit (test_event_time_edges)."""
    hour = 3_600_000
    assert one("json:ts", {"ts": PRODUCED_AT + 5 * hour}) == PRODUCED_AT + 5 * hour
    assert one("json:ts", {"ts": PRODUCED_AT - 24 * hour}) == PRODUCED_AT - 24 * hour


def test_a_record_without_a_kafka_timestamp_has_no_future_bound() -> None:
    record = Record("a", 0, 0, -1, value=orjson.dumps({"ts": 2**62}))
    assert parse_extractor("json:ts").extract_all([record]) == [2**62]


def test_null_value_is_invalid() -> None:
    extractor = parse_extractor("json:ts")
    record = Record("a", 0, 0, 1, value=None)
    assert extractor.extract_all([record]) == [-1]
    assert extractor.explain(record) == "value is null"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("jsn:ts", "expected 'record' or 'json:<dotted.path>[:ms|s|us|iso]' or 'avro:"),
        ("json:", "expected 'record' or 'json:<dotted.path>[:ms|s|us|iso]'"),
        ("protobf:ts", "'protobuf:<dotted.path>[:ms|s|us|iso]', got 'protobf:ts'"),
        ("json:a..b", "empty field name"),
        ("json:ts:hours", "unknown unit 'hours'"),
    ],
)
def test_bad_extractor_specs_say_what_is_allowed(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("|", r"\|")):
        parse_extractor(spec)


def test_json_extractor_is_not_record_time() -> None:
    assert parse_extractor("json:ts").uses_record_time is False
