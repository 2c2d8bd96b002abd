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

The hook reaches into private parts of aiokafka (pinned to ``>=0.14,<0.15``;
``tests/unit/test_fetch_hook.py`` checks each of them against the installed version).
:func:`install` refuses — and ``getmany`` stays aiokafka's own, public path — when the extension
is not built, when any of those parts is missing, or when the consumer deserializes keys or
values (the sidecar's does not).
"""

from __future__ import annotations

import collections
import inspect
import sys
from typing import Any, Literal

from aiokafka.consumer import fetcher as aiokafka_fetcher

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
    if PartitionReader is None:
        return False
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
    """Hook the started ``consumer``'s fetcher; say which records ``getmany`` now returns."""
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not hook_fits():
        return "aiokafka"
    if type(getattr(fetcher, "_records", None)) is _ReadInC:
        return "native"
    if (
        type(getattr(fetcher, "_records", None)) is not collections.OrderedDict
        or getattr(fetcher, "_key_deserializer", None) is not None
        or getattr(fetcher, "_value_deserializer", None) is not None
    ):
        return "aiokafka"
    if not isinstance(aiokafka_fetcher.MemoryRecords, type) or not issubclass(
        aiokafka_fetcher.MemoryRecords, _KeptBytes
    ):
        _KeptBytes.inner = aiokafka_fetcher.MemoryRecords
        aiokafka_fetcher.MemoryRecords = _KeptBytes
    fetcher._records = _ReadInC(fetcher._records)
    return "native"


class _KeptBytes:
    """aiokafka's ``MemoryRecords`` over a partition's bytes of a fetch response, keeping the
    bytes (aiokafka's own type hides them) so that the reader can decode v2 batches itself.

    The fetcher builds one per partition per response from a module-level name, so this stands
    in for it process-wide, for every consumer; it only delegates, so a consumer without the
    hook reads exactly as before.
    """

    __slots__ = ("batches", "raw")
    inner: Any = None

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.batches = self.inner(raw)

    def has_next(self) -> bool:
        return bool(self.batches.has_next())

    def next_batch(self) -> Any:
        return self.batches.next_batch()

    def size_in_bytes(self) -> int:
        return int(self.batches.size_in_bytes())


class _ReadInC(collections.OrderedDict[Any, Any]):
    """The fetcher's results by partition; a ``FetchResult`` stored here is read in C."""

    def __init__(self, results: collections.OrderedDict[Any, Any]) -> None:
        super().__init__()
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
        records: list[Any] = reader.take(sys.maxsize if max_records is None else max_records)
        result._update_position()
        if reader.exhausted:
            result._partition_records = None
            self._result = None
        return records
