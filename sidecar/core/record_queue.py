"""A partition's buffered records (Kafka Streams' ``RecordQueue``): the Python one, the reference.

Theory of operation
-------------------
The records a fetch brought for one input partition wait here, in offset order, until the take
(``group.py``) chooses them. They are two parallel lists — records and their event times — and a
head index, so that taking a run of records is a slice, not a loop of pops; the consumed prefix
is dropped once the head has gone far enough (``_COMPACT_AT``) that the copy pays for itself.
``monotonic`` says whether the buffered times are known to be non-decreasing, which lets the
take find a run's end by binary search.

The rest of the core reads a queue only through :class:`BufferedRecords` — empty or not, how
many, the head's and the last record's times, the largest time, the head's offset — so that a
partition's records may also be held by the C merge kernel (``_kernel_queue.pyx``), which
keeps them as C arrays (see ``kernel.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sidecar.core.records import InputRecord

#: How far the head may advance before the consumed prefix of a queue is dropped.
_COMPACT_AT = 4096


class BufferedRecords(Protocol):
    """What the core reads of a partition's queue, whichever holds it."""

    @property
    def empty(self) -> bool:
        """Nothing is buffered."""
        ...

    @property
    def buffered(self) -> int:
        """How many records are buffered."""
        ...

    def head_timestamp(self) -> int:
        """The event time of the first buffered record (the queue is not empty)."""
        ...

    def last_timestamp(self) -> int:
        """The event time of the last buffered record (the queue is not empty)."""
        ...

    def max_timestamp(self) -> int | None:
        """The largest buffered event time (``None``: nothing is buffered)."""
        ...

    def head_offset(self) -> int | None:
        """The offset of the first buffered record (``None``: nothing is buffered)."""
        ...

    def buffered_offsets(self) -> list[int]:
        """The offsets of the buffered records, in order (for checks and tests: it is a loop)."""
        ...

    def append(self, records: Sequence[InputRecord], timestamps: list[int]) -> None:
        """Queue records already validated, in offset order, with their event times."""
        ...


class RecordQueue:
    """The Python queue: records and their event times as lists, and a head index."""

    __slots__ = ("head", "monotonic", "records", "timestamps")

    def __init__(self) -> None:
        self.records: list[InputRecord] = []
        self.timestamps: list[int] = []
        self.head = 0
        #: True while ``timestamps[head:]`` is known to be non-decreasing.
        self.monotonic = True

    @property
    def empty(self) -> bool:
        return self.head == len(self.timestamps)

    @property
    def buffered(self) -> int:
        return len(self.timestamps) - self.head

    def head_timestamp(self) -> int:
        return self.timestamps[self.head]

    def last_timestamp(self) -> int:
        return self.timestamps[-1]

    def max_timestamp(self) -> int | None:
        return max(self.timestamps[self.head :], default=None)

    def head_offset(self) -> int | None:
        return self.records[self.head].offset if self.head < len(self.records) else None

    def buffered_offsets(self) -> list[int]:
        return [r.offset for r in self.records[self.head :]]

    def append(self, records: Sequence[InputRecord], timestamps: list[int]) -> None:
        if not timestamps:
            return
        ts = self.timestamps
        if self.head >= _COMPACT_AT and self.head * 2 >= len(ts):
            del ts[: self.head]
            del self.records[: self.head]
            self.head = 0
        if self.head == len(ts):
            self.monotonic = True
        if self.monotonic:
            last = ts[-1] if self.head < len(ts) else timestamps[0]
            self.monotonic = last <= timestamps[0] and _non_decreasing(timestamps)
        ts += timestamps
        self.records += records


def _non_decreasing(values: list[int]) -> bool:
    # sorted() detects an already sorted list in one C pass; cheaper than a Python loop.
    return len(values) < 2 or values == sorted(values)
