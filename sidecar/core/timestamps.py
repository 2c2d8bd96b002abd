"""Timestamp extractors and the invalid-timestamp policy.

An extractor turns an input record into its event time in ms. Two exist: ``record`` (the Kafka
record's own timestamp, CreateTime or LogAppendTime) and ``json:<dotted.path>[:ms|s|iso]`` (a
field of the JSON value). Extraction runs once per record at push time, so each extractor offers
a batch method that returns ``INVALID`` (-1) for records it cannot read, and a slow ``explain``
that says why, called only for those.

What happens to an invalid record is ``timestamp.invalid`` — the three choices Kafka Streams
offers: ``fail`` (an error, then ``errors.tolerance`` decides between stopping and the dead
letter queue), ``skip`` (drop and count), ``partition-time`` (use the partition's time so far).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol, get_args

import orjson

from sidecar.core.records import InputRecord, TopicPartition

InvalidPolicy = Literal["fail", "skip", "partition-time"]
ErrorTolerance = Literal["none", "all"]
JsonUnit = Literal["ms", "s", "iso"]

INVALID = -1
#: Kafka timestamps are signed 64-bit milliseconds.
MAX_TIMESTAMP = 2**63 - 1
#: Kafka 4's default ``log.message.timestamp.after.max.ms`` (one hour).
DEFAULT_AFTER_MAX_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class BrokerTimestampLimits:
    """Which record timestamps the output topic's broker accepts, relative to its clock.

    A broker refuses a CreateTime record stamped more than ``message.timestamp.after.max.ms``
    ahead of its clock, or more than ``message.timestamp.before.max.ms`` behind it (and fails
    the *whole* produce batch). The limits are the output topic's effective settings, read at
    start (the broker's defaults when the topic sets none: one hour ahead, unbounded behind);
    ``None`` in place of limits means the topic is LogAppendTime, whose broker restamps and
    refuses nothing. Judged at emit against the wall clock, because that is what the broker
    does: an event time is valid whatever record carried it, however old the replay.
    """

    after_max_ms: int = DEFAULT_AFTER_MAX_MS
    before_max_ms: int = MAX_TIMESTAMP

    def window(self, now_ms: int) -> tuple[int, int]:
        """The timestamps the broker accepts at ``now_ms``, both ends inclusive: from
        ``now − before.max.ms`` to ``now + after.max.ms``.

        This is the refusal rule, written once: :meth:`refusal` and the merge's bounds read it
        from here, and the broker accepts a time exactly at either end.
        """
        return now_ms - self.before_max_ms, now_ms + self.after_max_ms

    def refusal(self, timestamp: int, now_ms: int) -> str | None:
        """Why the broker would refuse ``timestamp`` at ``now_ms``, naming the setting; ``None``
        when :meth:`window` holds it."""
        low, high = self.window(now_ms)
        if timestamp > high:
            return (
                f"timestamp {timestamp} is {timestamp - now_ms} ms ahead of the clock, more than the output "
                f"topic's message.timestamp.after.max.ms={self.after_max_ms}: the broker would refuse it"
            )
        if timestamp < low:
            return (
                f"timestamp {timestamp} is {now_ms - timestamp} ms behind the clock, more than the output "
                f"topic's message.timestamp.before.max.ms={self.before_max_ms}: the broker would refuse it"
            )
        return None


class InvalidTimestampError(Exception):
    """A record whose event time could not be read, under ``timestamp.invalid=fail``.

    Carries the record's coordinates so the service can name them in its one-line error.
    """

    #: The exception name a dead letter of this kind carries in its DLQ headers.
    dead_letter_class = "InvalidTimestampError"

    def __init__(self, tp: TopicPartition, offset: int, reason: str) -> None:
        super().__init__(f"invalid timestamp in {tp.topic}[{tp.partition}] at offset {offset}: {reason}")
        self.tp = tp
        self.offset = offset
        self.reason = reason


class RefusedTimestampError(InvalidTimestampError):
    """A record whose event time the output topic's broker would refuse (see
    :class:`BrokerTimestampLimits`), under ``errors.tolerance=none``."""

    #: As the broker names its refusal (the producer's error for the whole batch).
    dead_letter_class = "InvalidTimestampException"


class TimestampExtractor(Protocol):
    #: True when the output is the Kafka record timestamp (so LogAppendTime semantics apply).
    uses_record_time: bool

    def extract_all(self, records: Sequence[InputRecord]) -> list[int]:
        """Event times in ms, ``INVALID`` where a record has none."""
        ...

    def explain(self, record: InputRecord) -> str:
        """Why ``record`` has no valid event time (only called for invalid ones)."""
        ...


class RecordTimestamp:
    """The Kafka record timestamp: CreateTime as the producer set it, or the broker's LogAppendTime."""

    uses_record_time = True

    def extract_all(self, records: Sequence[InputRecord]) -> list[int]:
        return [r.timestamp for r in records]

    def explain(self, record: InputRecord) -> str:
        if record.timestamp >= 0:
            return "valid"
        return f"record timestamp {record.timestamp} is negative"

    def __repr__(self) -> str:
        return "record"


class JsonTimestamp:
    """A field of the JSON value: ``json:meta.ts`` reads ``{"meta": {"ts": ...}}``.

    Units: ``ms`` (default) and ``s`` take a number (or a string holding one; seconds may have a
    fraction); ``iso`` takes an ISO-8601 string with a zone (``2024-05-01T12:00:00Z``). A naive
    time is invalid: guessing its zone would silently shift events by hours. Any readable time in
    Kafka's range is valid here, however far from the record's own Kafka timestamp (a replay or a
    backfill stamps records long after their events); whether the output topic's broker accepts
    it is judged at emit (:class:`BrokerTimestampLimits`).
    """

    uses_record_time = False

    def __init__(self, path: Sequence[str], unit: JsonUnit = "ms") -> None:
        if not path or any(not part for part in path):
            raise ValueError(f"empty field name in JSON path {'.'.join(path)!r}")
        self.path = tuple(path)
        self.unit: JsonUnit = unit

    def __repr__(self) -> str:
        return f"json:{'.'.join(self.path)}:{self.unit}"

    def extract_all(self, records: Sequence[InputRecord]) -> list[int]:
        out = []
        for r in records:
            try:
                out.append(self._extract(r))
            except (ValueError, TypeError, KeyError, OverflowError):
                out.append(INVALID)
        return out

    def explain(self, record: InputRecord) -> str:
        try:
            self._extract(record)
        except _Invalid as e:
            return str(e)
        except (ValueError, TypeError, KeyError, OverflowError) as e:
            return f"{type(e).__name__}: {e}"
        return "valid"

    def _extract(self, record: InputRecord) -> int:
        if record.value is None:
            raise _Invalid("value is null")
        try:
            node = orjson.loads(record.value)
        except orjson.JSONDecodeError:
            raise _Invalid("value is not JSON") from None
        walked = []
        for part in self.path:
            walked.append(part)
            if not isinstance(node, dict):
                raise _Invalid(f"{_dotted(walked[:-1]) or 'value'} is not a JSON object")
            if part not in node:
                raise _Invalid(f"field {_dotted(walked)} is missing")
            node = node[part]
        return self._convert(node)

    def _convert(self, node: object) -> int:
        field = _dotted(self.path)
        if self.unit == "iso":
            if not isinstance(node, str):
                raise _Invalid(f"field {field} is not an ISO-8601 string: {_short(node)}")
            try:
                moment = datetime.fromisoformat(node)
            except ValueError:
                raise _Invalid(f"field {field} is not an ISO-8601 time: {_short(node)}") from None
            if moment.tzinfo is None:
                raise _Invalid(f"field {field} has no time zone: {_short(node)}")
            ms = _iso_to_ms(moment)
        else:
            number = _number(node)
            if number is None:
                raise _Invalid(f"field {field} is not a number: {_short(node)}")
            if self.unit == "s":
                number *= 1000
            if not math.isfinite(number):
                raise _Invalid(f"field {field} is not finite: {_short(node)}")
            ms = int(number)
        if ms < 0:
            raise _Invalid(f"field {field} is negative: {_short(node)}")
        if ms > MAX_TIMESTAMP:
            raise _Invalid(f"field {field} is beyond Kafka's timestamp range: {_short(node)}")
        return ms


class _Invalid(ValueError):
    pass


def _number(node: object) -> float | int | None:
    if isinstance(node, bool):  # bool is an int in Python; true is not a time
        return None
    if isinstance(node, int | float):
        return node
    if isinstance(node, str):
        text = node.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            return None
    return None


def _iso_to_ms(moment: datetime) -> int:
    # Integer arithmetic: float seconds lose sub-ms precision for years far from 1970.
    offset = moment.utcoffset()
    naive_utc = moment.replace(tzinfo=None) - (offset if offset is not None else timedelta(0))
    delta = naive_utc - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _dotted(path: Sequence[str]) -> str:
    """A JSON path for a reason: as written, or quoted when a name holds a line break or the like
    (a reason is one line: it becomes a DLQ header and the sidecar's error line)."""
    text = ".".join(path)
    return text if text.isprintable() else repr(text)


def _short(node: object) -> str:
    text = repr(node)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_extractor(spec: str) -> TimestampExtractor:
    """``record``, ``json:<dotted.path>[:ms|s|iso]``, or ``avro:``/``protobuf:<dotted.path>[:ms|s|us|iso]``
    (:mod:`sidecar.formats.extractor`); a bad spec raises ``ValueError`` saying why."""
    if spec == "record":
        return RecordTimestamp()
    if spec.startswith(("avro:", "protobuf:")):
        # Imported here: fastavro and protobuf load only for a sidecar that reads them.
        from sidecar.formats.extractor import parse_schema_extractor

        return parse_schema_extractor(spec)
    kind, _, rest = spec.partition(":")
    if kind != "json" or not rest:
        raise ValueError(
            f"expected 'record', 'json:<dotted.path>[:ms|s|iso]', 'avro:<dotted.path>[:ms|s|us|iso]' or "
            f"'protobuf:<dotted.path>[:ms|s|us|iso]', got {spec!r}"
        )
    path, _, unit = rest.partition(":")
    unit = unit or "ms"
    if unit not in get_args(JsonUnit):
        raise ValueError(f"unknown unit {unit!r} in {spec!r}; allowed: ms, s, iso")
    parts = path.split(".")
    if any(not p for p in parts):
        raise ValueError(f"empty field name in JSON path {path!r} of {spec!r}")
    return JsonTimestamp(parts, unit)  # type: ignore[arg-type]  # unit checked against JsonUnit above
