"""Where a reset moves each partition: Kafka's reset-offsets rules, without a broker."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sidecar.offsets.plan import (
    Move,
    PartitionFacts,
    PlanError,
    Target,
    parse_datetime,
    parse_duration,
    plain,
    plan,
    table,
    target,
)

NOW = 1_800_000_000_000


def facts(
    committed: int | None = 50, earliest: int = 10, end: int = 100, by_time: int | None = None
) -> PartitionFacts:
    return PartitionFacts("in", 0, committed, earliest, end, by_time)


def test_earliest_is_the_log_start_not_zero() -> None:
    assert plan([facts(earliest=10)], Target("earliest"))[0].new == 10


def test_latest_is_the_end_offset() -> None:
    assert plan([facts(end=100)], Target("latest"))[0].new == 100


def test_by_time_is_the_first_offset_at_or_after_the_time() -> None:
    assert plan([facts(by_time=42)], Target("datetime", at_ms=NOW))[0].new == 42


def test_by_time_goes_to_the_end_when_every_record_is_older() -> None:
    assert plan([facts(by_time=None, end=100)], Target("duration", at_ms=NOW))[0].new == 100


@pytest.mark.parametrize(("asked", "new"), [(0, 10), (10, 10), (55, 55), (100, 100), (10_000, 100)])
def test_an_offset_is_clamped_into_the_log(asked: int, new: int) -> None:
    assert plan([facts(earliest=10, end=100)], Target("offset", offset=asked))[0].new == new


def test_a_duration_is_counted_back_from_now() -> None:
    assert target("duration", "PT2H", NOW) == Target("duration", at_ms=NOW - 2 * 3_600_000)


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("PT2H", timedelta(hours=2)),
        ("PT30M", timedelta(minutes=30)),
        ("P1DT12H", timedelta(days=1, hours=12)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("p2d", timedelta(days=2)),
    ],
)
def test_iso_8601_durations(text: str, span: timedelta) -> None:
    assert parse_duration(text) == span


@pytest.mark.parametrize("text", ["2h", "P", "PT", "P1M2D", "P1Y", "PT-1H", ""])
def test_other_durations_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(PlanError, match="PT2H"):
        parse_duration(text)


def test_a_datetime_with_a_zone_is_read_as_that_instant() -> None:
    assert parse_datetime("2027-01-15T08:00:00Z") == parse_datetime("2027-01-15T09:00:00+01:00")
    assert parse_datetime("1970-01-01T00:00:01.5Z") == 1500


def test_a_datetime_without_a_zone_is_refused_not_guessed() -> None:
    with pytest.raises(PlanError, match="no time zone"):
        parse_datetime("2027-01-15T08:00:00")


def test_a_negative_or_non_numeric_offset_is_refused() -> None:
    with pytest.raises(PlanError, match="negative"):
        target("offset", "-1", NOW)
    with pytest.raises(PlanError, match="whole number"):
        target("offset", "ten", NOW)


def test_moves_come_in_topic_and_partition_order_and_say_what_is_replayed() -> None:
    moves = plan(
        [
            PartitionFacts("b", 0, None, 0, 7),
            PartitionFacts("a", 1, 5, 0, 9),
            PartitionFacts("a", 0, 9, 0, 9),
        ],
        Target("earliest"),
    )
    assert moves == [Move("a", 0, 9, 0), Move("a", 1, 5, 0), Move("b", 0, None, 0)]
    assert [m.change for m in moves] == [9, 5, None]
    assert table(moves) == [("a", "0", "9", "0", "+9"), ("a", "1", "5", "0", "+5"), ("b", "0", "-", "0", "-")]


def test_skipping_shows_as_negative_and_no_move_as_zero() -> None:
    rows = table([Move("a", 0, 3, 9), Move("a", 1, 4, 4)])
    assert [r[-1] for r in rows] == ["-6", "0"]


def test_plain_lines_are_aligned_under_the_header() -> None:
    lines = plain([("clicks", "0", "1200", "0", "+1200")])
    assert lines == [
        "TOPIC   PARTITION  CURRENT-OFFSET  NEW-OFFSET  REPLAYED",
        "clicks  0          1200            0           +1200",
    ]


@pytest.mark.parametrize("text", ["P1000000000D", "PT99999999999999999999H"])
def test_a_duration_longer_than_any_calendar_is_one_line_not_a_traceback(text: str) -> None:
    with pytest.raises(PlanError, match="longer than any log"):
        parse_duration(text)
