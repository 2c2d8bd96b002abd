"""The output record: its timestamp and the ``timesync.*`` headers — the one place that builds them.

Every output keeps the input's key, value and headers and gets the event time as its Kafka
timestamp. The headers say where it came from (topic, partition, offset: with each other a dedup
key for at-least-once replays), the task watermark when it went out, the stream time after it,
and flags for late and enforced records. Values are ASCII decimal, so any consumer can read
them without a schema.

Input headers named ``timesync.*`` are dropped: when an ordered topic is merged again, the new
source coordinates must be the only ones a consumer sees.

Header keys are text to Kafka's Java clients but only bytes on the wire, and the broker checks
nothing: a librdkafka or hand-built producer can write a key that is not UTF-8. The reader
decodes keys with ``surrogateescape`` (such a key becomes a ``str`` holding lone surrogates) and
every writer turns a key into bytes with :func:`header_key_bytes`, so the key leaves with the
bytes it came with — a Java consumer reads it from the output as it would from the input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

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
#: On the trace of offsets that could not be read at all (a corrupt batch): the last of them,
#: ``__connect.errors.offset`` being the first.
ERRORS_LAST_OFFSET = "timesync.errors.last.offset"

Headers = list[tuple[str, bytes]]
#: (key, value, timestamp ms or ``None`` to let the broker stamp it, headers) — what a producer
#: needs per record.
OutputRecord = tuple[bytes | None, bytes | None, int | None, Headers]

_FLAG = b"1"
_LATE = (LATE, _FLAG)
_ENFORCED = (ENFORCED, _FLAG)


def _ascii(n: int) -> bytes:
    return b"%d" % n


def header_key_bytes(key: str) -> bytes:
    """A header key as it goes on the wire: the bytes it was read from (see the module's
    docstring). Every writer of records encodes keys through here or, in C, the same way."""
    return key.encode("utf-8", "surrogateescape")


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
        """The batch's ordered output, record for record (for tests and small side outputs)."""
        sink = _Collect()
        self.stamp_into(emit, lambda: sink)
        return sink.records

    def stamp_into(self, emit: Emit, new_batch: Callable[[], BatchLike]) -> list[BatchLike]:
        """Stamp the batch straight into producer batches; return them, in order, to be sent.

        The sidecar's hottest loop after the Kafka client itself, so it builds nothing it need
        not: no intermediate output records, headers as one tuple, the per-partition headers
        looked up only when the source partition changes. ``new_batch`` makes an empty batch
        (aiokafka's ``producer.create_batch``); a batch that returns ``None`` from ``append``
        is full, and a fresh one always takes its first record.
        """
        batch = new_batch()
        batches = [batch]
        append = batch.append
        watermark = (WATERMARK, b"%d" % emit.watermark)
        stream_time = emit.stream_time_before
        late = set(emit.late) if emit.late else None
        enforced_from = emit.enforced_from
        sources = self._sources
        last_topic: str | None = None
        last_partition = -1
        topic_header = partition_header = watermark  # replaced at the first record
        for i, (record, ts) in enumerate(zip(emit.records, emit.timestamps, strict=True)):
            if ts > stream_time:
                stream_time = ts
            partition = record.partition
            if partition != last_partition or record.topic is not last_topic:
                last_topic, last_partition = record.topic, partition
                cached = sources.get((last_topic, partition))
                if cached is None:
                    cached = self._source(record)
                topic_header, partition_header = cached
            # A list: aiokafka's record builder accepts no other sequence.
            headers = [
                topic_header,
                partition_header,
                (SOURCE_OFFSET, b"%d" % record.offset),
                watermark,
                (STREAM_TIME, b"%d" % stream_time),
            ]
            carried = record.headers
            if carried:
                headers[:0] = [h for h in carried if not h[0].startswith("timesync.")]
            if late is not None and i in late:
                headers.append(_LATE)
            if i >= enforced_from:
                headers.append(_ENFORCED)
            key, value = record.key, record.value
            if append(timestamp=ts, key=key, value=value, headers=headers) is None:
                batch = new_batch()
                batches.append(batch)
                append = batch.append
                append(timestamp=ts, key=key, value=value, headers=headers)
        return batches

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


class BatchLike(Protocol):
    """What ``stamp_into`` fills: aiokafka's ``BatchBuilder`` fits."""

    def append(
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
    ) -> object | None: ...


class _Collect:
    """A batch that never fills, collecting output records as plain tuples."""

    def __init__(self) -> None:
        self.records: list[OutputRecord] = []

    def append(
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
    ) -> object | None:
        self.records.append((key, value, timestamp, list(headers)))
        return self


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
    if dl.last_offset is not None:
        headers.append((ERRORS_LAST_OFFSET, _ascii(dl.last_offset)))
    # The record's own timestamp may be the very thing that is invalid: let the broker stamp it.
    return (r.key, r.value, r.timestamp if r.timestamp >= 0 else None, headers)
