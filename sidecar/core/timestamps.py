"""The timestamp-extractor contract, the record's own timestamp, and the invalid-timestamp policy.

An extractor turns an input record into its event time in ms. The core defines what one is
(:class:`TimestampExtractor`) and the one that needs no format, ``record`` (the Kafka record's own
timestamp, CreateTime or LogAppendTime); the others read a field of the value in a value format
(JSON, Avro, Protobuf) and are built by the config layer (``sidecar.config.extractor``) — the
core never imports a format. Extraction runs once per record at push time, so each extractor
offers a batch method that returns ``INVALID`` (-1) for records it cannot read, and a slow
``explain`` that says why, called only for those.

What happens to an invalid record is ``timestamp.invalid`` — the three choices Kafka Streams
offers: ``fail`` (an error, then ``errors.tolerance`` decides between stopping and the dead
letter queue), ``skip`` (drop and count), ``partition-time`` (use the partition's time so far).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from sidecar.core.records import InputRecord, TopicPartition

InvalidPolicy = Literal["fail", "skip", "partition-time"]
ErrorTolerance = Literal["none", "all"]

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
