"""The output record: timestamp = event time, input key/value/headers kept, ``timesync.*`` headers added."""

from __future__ import annotations

from sidecar.core import DeadLetter, Record
from sidecar.core.stamping import Stamper, dead_letter, heartbeat

from .helpers import A0, B0, caught_up, drain, feed, task


def test_output_keeps_key_value_and_input_headers_and_takes_the_event_time() -> None:
    t = task(A0, max_task_idle_ms=-1)
    t.push(A0, [Record("a", 0, 7, 1_000, key=b"k", value=b"v", headers=[("trace", b"x")])])
    (batch,), _ = drain(t, now=0)

    ((key, value, ts, headers),) = Stamper().stamp(batch)

    assert (key, value, ts) == (b"k", b"v", 1_000)
    assert headers[0] == ("trace", b"x")


def test_source_watermark_and_stream_time_headers_are_ascii_decimal() -> None:
    t = task(A0, B0, max_task_idle_ms=-1, watermark_policy="bounded-delay", watermark_max_delay_ms=100)
    caught_up(t, B0, now=5_000)
    feed(t, A0, [1_000, 2_000], lag_after=1)
    drain(t, now=5_000)
    feed(t, A0, [3_000], lag_after=1)
    (batch,), _ = drain(t, now=5_000)

    ((_, _, _, headers),) = Stamper().stamp(batch)

    assert dict(headers) == {
        "timesync.source.topic": b"a",
        "timesync.source.partition": b"0",
        "timesync.source.offset": b"2",
        "timesync.watermark": b"1900",
        "timesync.stream.time": b"3000",
    }


def test_unknown_watermark_is_minus_one_in_the_header() -> None:
    t = task(A0, B0, max_task_idle_ms=-1)
    feed(t, A0, [5])
    (batch,), _ = drain(t, now=0)

    ((*_, headers),) = Stamper().stamp(batch)

    assert dict(headers)["timesync.watermark"] == b"-1"


def test_late_and_enforced_flags_appear_only_on_those_records() -> None:
    t = task(A0, B0, max_task_idle_ms=0)
    feed(t, A0, [5, 3])
    caught_up(t, B0)
    (batch,), _ = drain(t, now=0)

    stamped = Stamper().stamp(batch)

    flags = [(dict(h).get("timesync.late"), dict(h).get("timesync.enforced")) for *_, h in stamped]
    assert flags == [(None, b"1"), (b"1", b"1")]


def test_input_timesync_headers_are_replaced_not_duplicated() -> None:
    t = task(A0, max_task_idle_ms=-1)
    t.push(A0, [Record("a", 0, 0, 1, headers=[("timesync.source.offset", b"99"), ("x", b"1")])])
    (batch,), _ = drain(t, now=0)

    ((*_, headers),) = Stamper().stamp(batch)

    assert [v for k, v in headers if k == "timesync.source.offset"] == [b"0"]
    assert ("x", b"1") in headers


def test_heartbeat_is_a_control_record_with_null_key_and_empty_value() -> None:
    assert heartbeat(12_345) == (
        None,
        b"",
        12_345,
        [("timesync.control", b"watermark"), ("timesync.watermark", b"12345")],
    )


def test_dead_letter_keeps_the_record_and_adds_kafka_connect_error_headers() -> None:
    record = Record("in", 3, 42, -1, key=b"k", value=b"{oops", headers=[("h", b"1")])

    key, value, ts, headers = dead_letter(DeadLetter(record, "value is not JSON", "InvalidTimestampError"))

    assert (key, value, ts) == (b"k", b"{oops", None)
    assert headers == [
        ("h", b"1"),
        ("__connect.errors.topic", b"in"),
        ("__connect.errors.partition", b"3"),
        ("__connect.errors.offset", b"42"),
        ("__connect.errors.exception.class.name", b"InvalidTimestampError"),
        ("__connect.errors.exception.message", b"value is not JSON"),
    ]
