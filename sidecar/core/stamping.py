"""The output record: its timestamp and the ``timesync.*`` headers — the one place that builds them.

Every output keeps the input's key, value and headers and gets the event time as its Kafka
timestamp. The headers say where it came from (topic, partition, offset: with each other a dedup
key for at-least-once replays), the task watermark when it went out, the stream time after it,
and flags for late and enforced records. Values are ASCII decimal, so any consumer can read
them without a schema.

Input headers named ``timesync.*`` are dropped: when an ordered topic is merged again, the new
source coordinates must be the only ones a consumer sees.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.records import DeadLetter, Emit, InputRecord, Late

SOURCE_TOPIC = "timesync.source.topic"
SOURCE_PARTITION = "timesync.source.partition"
SOURCE_OFFSET = "timesync.source.offset"
WATERMARK = "timesync.watermark"
STREAM_TIME = "timesync.stream.time"
LATE = "timesync.late"
ENFORCED = "timesync.enforced"
CONTROL = "timesync.control"
LATENESS = "timesync.lateness"

#: Kafka Connect's dead-letter headers, so existing DLQ tooling reads ours.
ERRORS_TOPIC = "__connect.errors.topic"
ERRORS_PARTITION = "__connect.errors.partition"
ERRORS_OFFSET = "__connect.errors.offset"
ERRORS_CLASS = "__connect.errors.exception.class.name"
ERRORS_MESSAGE = "__connect.errors.exception.message"

Headers = list[tuple[str, bytes]]
#: (key, value, timestamp ms or ``None`` to let the broker stamp it, headers) — what a producer
#: needs per record.
OutputRecord = tuple[bytes | None, bytes | None, int | None, Headers]

_FLAG = b"1"
_LATE = (LATE, _FLAG)
_ENFORCED = (ENFORCED, _FLAG)


def _ascii(n: int) -> bytes:
    return b"%d" % n


class Stamper:
    """Builds output records; caches the per-partition headers that never change."""

    __slots__ = ("_sources",)

    def __init__(self) -> None:
        self._sources: dict[tuple[str, int], tuple[tuple[str, bytes], tuple[str, bytes]]] = {}

    def _source(self, record: InputRecord) -> tuple[tuple[str, bytes], tuple[str, bytes]]:
        key = (record.topic, record.partition)
        cached = self._sources.get(key)
        if cached is None:
            cached = ((SOURCE_TOPIC, record.topic.encode()), (SOURCE_PARTITION, _ascii(record.partition)))
            self._sources[key] = cached
        return cached

    def stamp(self, emit: Emit) -> list[OutputRecord]:
        """The batch's ordered output, record for record."""
        out: list[OutputRecord] = []
        append = out.append
        watermark = (WATERMARK, _ascii(emit.watermark))
        stream_time = emit.stream_time_before
        late = set(emit.late)
        enforced_from = emit.enforced_from
        for i, (record, ts) in enumerate(zip(emit.records, emit.timestamps, strict=True)):
            if ts > stream_time:
                stream_time = ts
            topic, partition = self._source(record)
            headers = _carried(record.headers)
            headers += (
                topic,
                partition,
                (SOURCE_OFFSET, _ascii(record.offset)),
                watermark,
                (STREAM_TIME, _ascii(stream_time)),
            )
            if i in late:
                headers.append(_LATE)
            if i >= enforced_from:
                headers.append(_ENFORCED)
            append((record.key, record.value, ts, headers))
        return out

    def late_record(self, late: Late, watermark: int) -> OutputRecord:
        """A late record routed to the late topic: stamped as it would have been, plus its lateness."""
        topic, partition = self._source(late.record)
        headers = _carried(late.record.headers)
        headers += (
            topic,
            partition,
            (SOURCE_OFFSET, _ascii(late.record.offset)),
            (WATERMARK, _ascii(watermark)),
            (STREAM_TIME, _ascii(late.timestamp + late.lateness)),
            _LATE,
            (LATENESS, _ascii(late.lateness)),
        )
        return (late.record.key, late.record.value, late.timestamp, headers)


def _carried(headers: Sequence[tuple[str, bytes]]) -> Headers:
    if not headers:
        return []
    return [h for h in headers if not h[0].startswith("timesync.")]


def heartbeat(watermark: int) -> OutputRecord:
    """A control record: null key, empty value, timestamp = the task watermark."""
    return (None, b"", watermark, [(CONTROL, b"watermark"), (WATERMARK, _ascii(watermark))])


def dead_letter(dl: DeadLetter) -> OutputRecord:
    """The failing record as it came in, plus Kafka Connect's ``__connect.errors.*`` headers."""
    r = dl.record
    headers = list(r.headers) if r.headers else []
    headers += [
        (ERRORS_TOPIC, r.topic.encode()),
        (ERRORS_PARTITION, _ascii(r.partition)),
        (ERRORS_OFFSET, _ascii(r.offset)),
        (ERRORS_CLASS, dl.exception_class.encode()),
        (ERRORS_MESSAGE, dl.reason.encode("utf-8", "replace")),
    ]
    # The record's own timestamp may be the very thing that is invalid: let the broker stamp it.
    return (r.key, r.value, r.timestamp if r.timestamp >= 0 else None, headers)
