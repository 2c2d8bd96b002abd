"""Turning the value read at the extractor's path into event time in milliseconds.

A value whose type says what it is is read as that, whatever unit the extractor names: Avro's
``timestamp-millis`` and ``timestamp-micros`` logical types, and ``google.protobuf.Timestamp``.
Other values take the extractor's unit: ``ms`` (default), ``s`` (a fraction allowed), ``us`` for
numbers, and ``iso`` for strings holding an ISO-8601 time with a zone (a naive time is invalid:
guessing its zone would shift events by hours). Any time in Kafka's range (0 … 2^63-1 ms) is
valid; whether the output broker accepts it is judged at emit, as for every extractor.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

Unit = Literal["ms", "s", "us", "iso"]
UNITS: tuple[Unit, ...] = ("ms", "s", "us", "iso")
#: What the schema says a value is: a time in ms or µs, or a plain value the unit applies to.
Kind = Literal["millis", "micros", "plain"]

MAX_TIMESTAMP = 2**63 - 1


class TimeValueError(ValueError):
    """The value at the path is not a valid event time; the message says why (one line)."""


def to_millis(value: object, kind: Kind, unit: Unit, field: str) -> int:
    """Event time in ms of ``value`` read at ``field``; :class:`TimeValueError` if it is none."""
    if kind == "millis":
        ms = _integer(value, field)
    elif kind == "micros":
        ms = _integer(value, field) // 1000
    elif unit == "iso":
        if not isinstance(value, str):
            raise TimeValueError(f"field {field} is not an ISO-8601 string: {_short(value)}")
        ms = iso_to_millis(value, field)
    else:
        number = _number(value, field)
        if unit == "s":
            number *= 1000
        elif unit == "us":
            number = number // 1000 if isinstance(number, int) else number / 1000
        if not math.isfinite(number):
            raise TimeValueError(f"field {field} is not finite: {_short(value)}")
        ms = int(number)
    if ms < 0:
        raise TimeValueError(f"field {field} is negative: {_short(value)}")
    if ms > MAX_TIMESTAMP:
        raise TimeValueError(f"field {field} is beyond Kafka's timestamp range: {_short(value)}")
    return ms


def seconds_nanos_to_millis(seconds: int, nanos: int, field: str) -> int:
    """A ``google.protobuf.Timestamp`` (seconds and nanoseconds since the epoch) in ms."""
    if not 0 <= nanos < 1_000_000_000:
        raise TimeValueError(f"field {field} has nanos {nanos} outside 0..999999999")
    ms = seconds * 1000 + nanos // 1_000_000
    if ms < 0:
        raise TimeValueError(f"field {field} is before 1970: {seconds} s")
    if ms > MAX_TIMESTAMP:
        raise TimeValueError(f"field {field} is beyond Kafka's timestamp range: {seconds} s")
    return ms


def iso_to_millis(text: str, field: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise TimeValueError(f"field {field} is not an ISO-8601 time: {_short(text)}") from None
    offset = moment.utcoffset()
    if offset is None:
        raise TimeValueError(f"field {field} has no time zone: {_short(text)}")
    # Integer arithmetic: float seconds lose sub-ms precision far from 1970.
    delta = moment.replace(tzinfo=None) - offset - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _integer(value: object, field: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TimeValueError(f"field {field} is not an integer: {_short(value)}")


def _number(value: object, field: str) -> int | float:
    if isinstance(value, bool):  # a bool is an int in Python; true is not a time
        raise TimeValueError(f"field {field} is not a number: {_short(value)}")
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            pass
    raise TimeValueError(f"field {field} is not a number: {_short(value)}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
