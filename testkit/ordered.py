"""Reading the ordered topic back: the ``timesync.*`` headers as fields, and order statistics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Ordered:
    """One record of the ordered topic, with its headers decoded."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    control: bool
    source_topic: str | None
    source_partition: int | None
    source_offset: int | None
    watermark: int | None
    stream_time: int | None
    late: bool
    enforced: bool
    headers: tuple[tuple[str, bytes], ...]

    @property
    def source(self) -> tuple[str | None, int | None, int | None]:
        return (self.source_topic, self.source_partition, self.source_offset)


def _int(value: bytes | None) -> int | None:
    return int(value) if value is not None else None


def decode(record: Any) -> Ordered:
    headers = tuple(record.headers or ())
    h = dict(headers)
    topic = h.get("timesync.source.topic")
    return Ordered(
        partition=record.partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=record.key,
        value=record.value,
        control=h.get("timesync.control") == b"watermark",
        source_topic=topic.decode() if topic is not None else None,
        source_partition=_int(h.get("timesync.source.partition")),
        source_offset=_int(h.get("timesync.source.offset")),
        watermark=_int(h.get("timesync.watermark")),
        stream_time=_int(h.get("timesync.stream.time")),
        late=h.get("timesync.late") == b"1",
        enforced=h.get("timesync.enforced") == b"1",
        headers=headers,
    )


def data(records: Iterable[Any]) -> list[Ordered]:
    """The data records (control records dropped), decoded, in the order given."""
    return [o for o in map(decode, records) if not o.control]


def inversions(timestamps: Sequence[int]) -> int:
    """Pairs (i < j) with ts[i] > ts[j]: how far from sorted the sequence is (merge count, O(n log n))."""

    def count(seq: list[int]) -> tuple[list[int], int]:
        if len(seq) < 2:
            return seq, 0
        mid = len(seq) // 2
        left, a = count(seq[:mid])
        right, b = count(seq[mid:])
        merged: list[int] = []
        i = j = 0
        inv = a + b
        while i < len(left) and j < len(right):
            if left[i] <= right[j]:
                merged.append(left[i])
                i += 1
            else:
                merged.append(right[j])
                inv += len(left) - i
                j += 1
        merged += left[i:]
        merged += right[j:]
        return merged, inv

    return count(list(timestamps))[1]


def lateness(timestamps: Sequence[int]) -> list[int]:
    """Per record, how far below the running maximum it arrived (0 when in order)."""
    out = []
    high = None
    for ts in timestamps:
        if high is None or ts >= high:
            high = ts
            out.append(0)
        else:
            out.append(high - ts)
    return out
