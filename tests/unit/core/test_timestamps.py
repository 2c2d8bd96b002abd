"""Timestamp extractors and ``timestamp.invalid`` (fail, skip, partition-time) with ``errors.tolerance``."""

from __future__ import annotations

import orjson
import pytest

from sidecar.config.extractor import parse_extractor
from sidecar.core import InvalidTimestampError, Record, RecordTimestamp
from sidecar.core.deadletters import DeadLetterRatioExceeded

from .helpers import A0, B0, drain, task

#: The records' Kafka timestamp: when they were produced (2027), after every event time below.
PRODUCED_AT = 1_800_000_000_000


def json_record(value: object, offset: int = 0, raw: bytes | None = None) -> Record:
    return Record("a", 0, offset, PRODUCED_AT, value=raw if raw is not None else orjson.dumps(value))


def one(spec: str, value: object = None, raw: bytes | None = None) -> int:
    return parse_extractor(spec).extract_all([json_record(value, raw=raw)])[0]


def why(spec: str, value: object = None, raw: bytes | None = None) -> str:
    return parse_extractor(spec).explain(json_record(value, raw=raw))


def test_record_extractor_uses_the_kafka_timestamp() -> None:
    assert RecordTimestamp().extract_all([Record("a", 0, 0, 1234)]) == [1234]
    assert RecordTimestamp().uses_record_time is True


# -- the invalid-timestamp policy, applied by the task --------------------------------------------


def bad_and_good() -> list[Record]:
    return [
        Record("a", 0, 0, 10),
        Record("a", 0, 1, -1),  # invalid
        Record("a", 0, 2, 30),
    ]


def test_fail_with_tolerance_none_stops_at_the_record_naming_topic_partition_offset() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="fail", errors_tolerance="none")

    with pytest.raises(InvalidTimestampError, match=r"a\[0\] at offset 1: record timestamp -1 is negative"):
        t.push(A0, bad_and_good())

    batches, _ = drain(t, now=0)
    assert [b.timestamps for b in batches] == [[10]], "the records before it still go out"
    assert t.acked([b.batch_id for b in batches]) == {A0: 1}, "never past the bad record"


def test_fail_with_tolerance_all_sends_it_to_the_dead_letter_queue_with_the_reason() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="fail", errors_tolerance="all")
    t.push(A0, bad_and_good())

    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [10, 30]
    (dead,) = batch.dead_letters
    assert dead.record.offset == 1
    assert dead.reason == "record timestamp -1 is negative"
    assert dead.exception_class == "InvalidTimestampError"


def test_skip_drops_and_counts_the_record() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="skip")
    t.push(A0, bad_and_good())

    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [10, 30]
    assert batch.dead_letters == []
    assert t.dropped["invalid-timestamp"] == 1


def test_partition_time_uses_the_largest_timestamp_seen_before_it_in_the_partition() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="partition-time")
    t.push(A0, bad_and_good())

    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [10, 10, 30]


def test_partition_time_with_no_time_yet_is_an_error() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="partition-time", errors_tolerance="all")
    t.push(A0, [Record("a", 0, 0, -1), Record("a", 0, 1, 5)])

    (batch,), _ = drain(t, now=0)

    assert batch.timestamps == [5]
    assert "no partition time to fall back on yet" in batch.dead_letters[0].reason


def test_dead_letters_go_out_even_while_the_merge_is_blocked() -> None:
    t = task(A0, B0, max_task_idle_ms=0, timestamp_invalid="fail", errors_tolerance="all")
    t.push(A0, bad_and_good())  # B0's lag unknown: the merge is blocked

    out = t.poll(0)

    assert out.records == [] if hasattr(out, "records") else False  # type: ignore[union-attr]
    assert [d.record.offset for d in out.dead_letters] == [1]  # type: ignore[union-attr]


def test_a_stream_of_mostly_failing_records_stops_the_task() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="fail", errors_tolerance="all", dlq_max_ratio=0.5)
    good = [Record("a", 0, i, 5) for i in range(60)]
    t.push(A0, good)
    bad = [Record("a", 0, 60 + i, -1) for i in range(61)]

    with pytest.raises(DeadLetterRatioExceeded, match=r"61 of the last 121 records failed"):
        t.push(A0, bad)


def test_a_few_failing_records_among_many_do_not_stop_the_task() -> None:
    t = task(A0, max_task_idle_ms=-1, timestamp_invalid="fail", errors_tolerance="all", dlq_max_ratio=0.5)
    for chunk in range(10):
        t.push(A0, [Record("a", 0, chunk * 100 + i, -1 if i % 3 == 0 else 5) for i in range(100)])

    assert t.records_in == 1000
