"""The record types that flow through the core.

The core never copies input records: the adapter pushes whatever its Kafka client returned, as
long as it has the attributes of :class:`InputRecord` (aiokafka's ``ConsumerRecord`` does), and
the same objects come back out in :class:`Emit`. Per-record allocations are what make a Python
merge slow, so an ``Emit`` is columnar: the records in output order, their output timestamps,
and sparse side tables for the few records that are late or enforced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

#: Kafka's ``timestamp_type`` values.
CREATE_TIME = 0
LOG_APPEND_TIME = 1

#: A watermark or stream time that is not known yet.
UNKNOWN = -1


class TopicPartition(NamedTuple):
    """Equal to (and hashing like) aiokafka's ``TopicPartition``, so adapters can mix them."""

    topic: str
    partition: int


class InputRecord(Protocol):
    """What the core reads from a consumed record (aiokafka's ``ConsumerRecord`` fits)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes]]: ...


@dataclass(frozen=True, slots=True)
class Record:
    """A plain input record, for tests, benchmarks and replays."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[tuple[str, bytes]] = ()
    timestamp_type: int = CREATE_TIME


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An input record that could not be processed, with the reason, bound for the DLQ.

    ``last_offset`` is set on the trace of a range of offsets that could not be read at all
    (:class:`Unreadable`): ``record`` then stands for them, at the first offset, holding the
    batch's bytes as its value when they were kept."""

    record: InputRecord
    reason: str
    exception_class: str
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Offsets ``first_offset`` … ``next_offset - 1`` of a partition whose records could not be
    read (a corrupt batch; a record the reading path cannot carry): no record to merge, only a
    trace for the dead letter queue, and the partition goes on at ``next_offset``.

    ``data`` is the failing batch as fetched, when it was kept; ``reason`` says what failed."""

    first_offset: int
    next_offset: int
    reason: str
    data: bytes | None = None

    #: The exception name its trace carries (Kafka's own name for a batch that does not read).
    dead_letter_class = "CorruptRecordException"


@dataclass(frozen=True, slots=True)
class Late:
    """A late record routed to the late-records topic instead of the ordered output."""

    record: InputRecord
    timestamp: int
    lateness: int


@dataclass(slots=True)
class Emit:
    """One batch of output, in output order; the adapter acks it as a whole with ``batch_id``.

    ``records[i]`` goes out with timestamp ``timestamps[i]``: lists from the Python take, read-only
    sequences over C arrays from the C one (``kernel.py``), equal to lists of the same items. Records at index
    ``>= enforced_from`` were emitted under enforced processing (enforcement can only switch on
    within a batch, never off). ``late`` lists the indices of forwarded late records and
    ``lateness`` their lateness in ms. The stream time after record *i* is the running maximum
    of ``timestamps`` starting from ``stream_time_before``; the stamping module derives it so
    the merge loop does not have to store it per record.
    """

    batch_id: int
    records: Sequence[InputRecord]
    timestamps: Sequence[int]
    watermark: int
    stream_time_before: int
    enforced_from: int
    late: list[int] = field(default_factory=list)
    lateness: list[int] = field(default_factory=list)
    late_routed: list[Late] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    dropped_late: int = 0

    def __len__(self) -> int:
        return len(self.records)

    @property
    def enforced_count(self) -> int:
        return len(self.records) - self.enforced_from
