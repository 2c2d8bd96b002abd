"""The consumer's fetched records read in C (:mod:`sidecar.kafka._fetched`) instead of as
aiokafka's ``ConsumerRecord`` s.

aiokafka 0.14's fetcher keeps, per partition, the last fetch response as a ``FetchResult``
holding a ``PartitionRecords`` (an iterator over the response's batches that builds one
``ConsumerRecord`` per record in Python), stored with ``fetcher._records[tp] = FetchResult(...)``;
``getmany`` drains them through ``FetchResult.getall``. :func:`install` hooks that one store, for
one consumer: every ``FetchResult`` put there gets a :class:`~sidecar.kafka._fetched.PartitionReader`
over the same batches, and a ``getall`` that takes its records in one C loop. So that the reader
can decode v2 batches from the bytes themselves (aiokafka's ``MemoryRecords`` hides them), the
fetcher module's ``MemoryRecords`` is replaced by :class:`_KeptBytes`, which keeps them and
otherwise only delegates. Everything else — positions, pausing, seeks, rebalances, errors,
``highwater`` and the rest — stays aiokafka's.

The records are then :class:`~sidecar.kafka._fetched.FetchedRecord` s: the fields of
:class:`~sidecar.core.records.InputRecord`, equal to the ``ConsumerRecord`` 's, and the output
written from them is the same byte for byte (``tests/integration/test_fetch_hook.py``).

A batch that cannot be read never raises out of ``getmany``: aiokafka's fetcher would lose the
records it had already taken from other partitions (their positions moved on), and the same
batch would fail every fetch. Instead the reader's verdict,
:class:`~sidecar.kafka.unreadable.UnreadableRecords`, comes back as the *last item* of that
partition's list, and the consumer's position is already past the offsets it names;
:mod:`sidecar.service.fetch` decides what becomes of them. Without the extension, :func:`install`
still puts a guard around aiokafka's own reader (:class:`_Guarded`) with the same contract — it
cannot carry a header key that is not UTF-8, so such a record's batch becomes a verdict there.

The hook reaches into private parts of aiokafka (pinned to ``>=0.14,<0.15``;
``tests/unit/test_fetch_hook.py`` checks each of them against the installed version).
:func:`install` refuses — and ``getmany`` stays aiokafka's own, public path — when any of those
parts is missing, or when the consumer deserializes keys or values (the sidecar's does not).
"""

from __future__ import annotations

import collections
import inspect
import sys
from typing import Any, Literal

from aiokafka.consumer import fetcher as aiokafka_fetcher
from aiokafka.errors import CorruptRecordException

from sidecar.kafka.codecs import DEFAULT_MAX_BATCH_BYTES
from sidecar.kafka.unreadable import UnreadableRecords, describe_cause

try:
    from sidecar.kafka._fetched import PartitionReader
except ImportError:  # built at install when a C compiler is present
    PartitionReader = None  # type: ignore[assignment,misc]

ReaderName = Literal["native", "aiokafka"]

#: What the hook calls on aiokafka's ``FetchResult``.
_FETCH_RESULT_METHODS = ("getall", "check_assignment", "has_more", "_update_position")
#: The attributes it reads or replaces, as the fetcher's source assigns them.
_ASSIGNED = (
    "self._topic_partition = ",
    "self._partition_records = ",
    "self._tp = ",
    "self._records = ",
    "self._aborted_transactions = ",
    "self._check_crcs = ",
    "self._isolation_level = ",
    "self.next_fetch_offset = ",
    "self._key_deserializer = ",
    "self._value_deserializer = ",
    # the one line that stores a fetch response's records
    "self._records[tp] = FetchResult(",
    # and the one that wraps a partition's bytes of the response
    "records = MemoryRecords(part_data[-1])",
)


def hook_fits() -> bool:
    """The extension is built and aiokafka's fetcher is still shaped as the hook expects."""
    return PartitionReader is not None and fetcher_fits()


def fetcher_fits() -> bool:
    """aiokafka's fetcher is still shaped as the hook (and the guard) expect."""
    fetch_result = aiokafka_fetcher.FetchResult
    if not all(callable(getattr(fetch_result, name, None)) for name in _FETCH_RESULT_METHODS):
        return False
    if not isinstance(getattr(aiokafka_fetcher, "READ_COMMITTED", None), int):
        return False
    try:
        source = inspect.getsource(aiokafka_fetcher)
    except (OSError, TypeError):  # pragma: no cover - installed without sources
        return False
    return all(line in source for line in _ASSIGNED)


def install(consumer: Any) -> ReaderName:
    """Hook the started ``consumer``'s fetcher; say which records ``getmany`` now returns (read
    in C, or aiokafka's own behind the guard)."""
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not fetcher_fits():
        return "aiokafka"
    held = type(getattr(fetcher, "_records", None))
    if held is _ReadInC or held is _Guarded:
        return "native" if held is _ReadInC else "aiokafka"
    if (
        held is not collections.OrderedDict
        or getattr(fetcher, "_key_deserializer", None) is not None
        or getattr(fetcher, "_value_deserializer", None) is not None
    ):
        return "aiokafka"
    if not isinstance(aiokafka_fetcher.MemoryRecords, type) or not issubclass(
        aiokafka_fetcher.MemoryRecords, _KeptBytes
    ):
        _KeptBytes.inner = aiokafka_fetcher.MemoryRecords
        aiokafka_fetcher.MemoryRecords = _KeptBytes
    limit = getattr(fetcher, "_fetch_max_bytes", None)
    limit = limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_BATCH_BYTES
    if PartitionReader is None:
        fetcher._records = _Guarded(fetcher._records)
        return "aiokafka"
    fetcher._records = _ReadInC(fetcher._records, limit)
    return "native"


class _KeptBytes:
    """aiokafka's ``MemoryRecords`` over a partition's bytes of a fetch response, keeping the
    bytes (aiokafka's own type hides them) so that the reader can decode v2 batches itself.

    The fetcher builds one per partition per response from a module-level name, so this stands
    in for it process-wide, for every consumer; it only delegates, so a consumer without the
    hook reads exactly as before.
    """

    __slots__ = ("at", "batches", "last", "raw")
    inner: Any = None

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.batches = self.inner(raw)
        #: The batch aiokafka's reader is reading (``None`` while the next one is being read):
        #: where a verdict of the guard ends; ``at``: where the next one starts in ``raw``.
        self.last: Any = None
        self.at = 0

    def has_next(self) -> bool:
        return bool(self.batches.has_next())

    def next_batch(self) -> Any:
        """The next batch, as aiokafka reads it — unless aiokafka would read past its bytes
        (a v2 batch shorter than its 61-byte header, a v1 one shorter than 34 bytes, a format
        Kafka never had): then a ``CorruptRecordException`` (the C reader checks the same)."""
        self.last = None
        raw, at = self.raw, self.at
        if len(raw) - at >= 17:
            length = int.from_bytes(raw[at + 8 : at + 12], "big", signed=True)
            magic = raw[at + 16]
            if 14 <= length <= len(raw) - at - 12:
                self.at = at + 12 + length
                if magic > 2 or (magic == 2 and length < 49) or (magic == 1 and length < 22):
                    raise CorruptRecordException(f"a batch of {12 + length} bytes with magic {magic}")
        self.last = batch = self.batches.next_batch()
        return batch

    def size_in_bytes(self) -> int:
        return int(self.batches.size_in_bytes())


class _ReadInC(collections.OrderedDict[Any, Any]):
    """The fetcher's results by partition; a ``FetchResult`` stored here is read in C."""

    def __init__(
        self, results: collections.OrderedDict[Any, Any], limit: int = DEFAULT_MAX_BATCH_BYTES
    ) -> None:
        super().__init__()
        #: The most a batch's records may inflate to (the consumer's ``fetch_max_bytes``).
        self.limit = limit
        for tp, result in results.items():
            self[tp] = result

    def __setitem__(self, tp: Any, result: Any) -> None:
        if type(result) is aiokafka_fetcher.FetchResult:
            records = result._partition_records
            if type(records) is aiokafka_fetcher.PartitionRecords:
                batches = records._records
                raw = None
                if type(batches) is _KeptBytes:
                    batches, raw = batches.batches, batches.raw
                reader = PartitionReader(
                    records._tp,
                    batches,
                    records._aborted_transactions,
                    records.next_fetch_offset,
                    records._check_crcs,
                    records._isolation_level == aiokafka_fetcher.READ_COMMITTED,
                    raw,
                    self.limit,
                )
                result._partition_records = reader
                result.getall = _Getall(result, reader)
        super().__setitem__(tp, result)


class _Getall:
    """``FetchResult.getall`` for a result read by a ``PartitionReader``: the same contract
    (nothing while the partition is paused, unassigned or seeked elsewhere; the position moved
    past what is returned; the result finished once read to its end), one C loop for the records."""

    __slots__ = ("_reader", "_result")

    def __init__(self, result: Any, reader: Any) -> None:
        self._result = result
        self._reader = reader

    def __call__(self, max_records: int | None = None) -> list[Any]:
        result = self._result
        if result is None or not result.check_assignment(result._topic_partition) or not result.has_more():
            self._result = None  # finished: the fetcher drops it (and no cycle keeps it alive)
            return []
        reader = self._reader
        try:
            records: list[Any] = reader.take(sys.maxsize if max_records is None else max_records)
        except UnreadableRecords as verdict:
            records = [verdict]  # the reader's position is already past it
        result._update_position()
        if reader.exhausted:
            result._partition_records = None
            self._result = None
        return records


class _Guarded(collections.OrderedDict[Any, Any]):
    """The fetcher's results by partition, read by aiokafka's own ``PartitionRecords`` (no C
    extension) behind a guard: a batch it cannot read becomes a verdict, as with the C reader."""

    def __init__(self, results: collections.OrderedDict[Any, Any]) -> None:
        super().__init__()
        for tp, result in results.items():
            self[tp] = result

    def __setitem__(self, tp: Any, result: Any) -> None:
        if type(result) is aiokafka_fetcher.FetchResult:
            records = result._partition_records
            if type(records) is aiokafka_fetcher.PartitionRecords:
                result.getall = _GuardedGetall(result, records)
        super().__setitem__(tp, result)


class _GuardedGetall:
    """``FetchResult.getall`` over aiokafka's reader (its contract, see :class:`_Getall`), with
    what it raises turned into a verdict that ends the list: the offsets from the first not yet
    read to the end of the batch aiokafka was reading (or the one offset, when it failed between
    batches). aiokafka's records with no timestamp (it says ``None`` for -1) get -1 back."""

    __slots__ = ("_records", "_result")

    def __init__(self, result: Any, records: Any) -> None:
        self._result = result
        self._records = records

    def __call__(self, max_records: int | None = None) -> list[Any]:
        result, records = self._result, self._records
        if result is None or not result.check_assignment(result._topic_partition) or not result.has_more():
            self._result = None
            return []
        out: list[Any] = []
        limit = sys.maxsize if max_records is None else max_records
        try:
            for record in records:
                if record.timestamp is None:
                    record.timestamp, record.timestamp_type = -1, 0
                out.append(record)
                if len(out) >= limit:
                    result._update_position()
                    return out
        except Exception as e:
            out.append(self._verdict(e))
        result._update_position()
        result._partition_records = None
        self._result = None
        return out

    def _verdict(self, error: Exception) -> UnreadableRecords:
        records = self._records
        tp = records._tp
        start = records.next_fetch_offset
        kept = records._records
        batch = kept.last if type(kept) is _KeptBytes else None
        resume = batch.next_offset if batch is not None else start + 1
        verdict = UnreadableRecords(tp.topic, tp.partition, start, resume, describe_cause(error))
        records.next_fetch_offset = verdict.next_offset
        return verdict
