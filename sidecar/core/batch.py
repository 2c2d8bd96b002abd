"""One output batch in the making: the late and refused-timestamp policies, applied once.

Theory of operation
-------------------
A take path (see ``group.py``) chooses records in output order and hands them here a run at a
time: ``add(records, timestamps, start, end, monotonic)``. Both take paths share this one pass,
so each policy is written once:

* **refused** — a time the output topic's broker would refuse (:class:`BrokerTimestampLimits`;
  it would fail the whole produce batch). ``timestamp.invalid=skip`` drops it (counted),
  ``errors.tolerance=all`` makes it a dead letter; under ``none`` the batch stops just before
  it: what came before goes out, and the take stops there, leaving it unconsumed at the head
  of its partition (its offset is never committed), so the next poll raises
  :class:`RefusedTimestampError` on it. A refused time is readable, so ``partition-time`` does
  not restamp it. It is not emitted, so it moves neither stream time nor anyone's lateness.
* **late** — a time below the stream time (the largest emitted so far) is late by the
  difference: ``late.records=forward`` emits it (marked), ``topic`` routes it to the late
  topic, ``drop`` counts it.

Records emitted after an empty partition's idle deadline passed are enforced processing;
``mark_enforced`` notes where that began.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from sidecar.core.config import TaskConfig
from sidecar.core.merge import late_positions
from sidecar.core.records import DeadLetter, InputRecord, Late, TopicPartition
from sidecar.core.timestamps import RefusedTimestampError

#: Beyond any Kafka timestamp: the bound of a take that nothing limits.
NO_BOUND = 2**63


class BatchDraft:
    """The records a take chose, sorted into output, late and refused, plus what the batch must
    record for commits (``firsts``: partition index → first offset taken)."""

    __slots__ = (
        "_config",
        "_high",
        "_low",
        "_now_ms",
        "_owned",
        "dead_letters",
        "dropped_late",
        "enforced_from",
        "firsts",
        "late",
        "lateness",
        "records",
        "refused_skipped",
        "routed",
        "stream_time",
        "stream_time_before",
        "timestamps",
    )

    def __init__(self, config: TaskConfig, now_ms: int, stream_time: int) -> None:
        self._config = config
        self._now_ms = now_ms
        #: A list handed over by :meth:`add_merged`, which the draft may keep instead of copying.
        self._owned: list[InputRecord] | None = None
        limits = config.output_limits
        self._low, self._high = limits.window(now_ms) if limits is not None else (0, NO_BOUND)
        self.records: list[InputRecord] = []
        self.timestamps: list[int] = []
        self.late: list[int] = []
        self.lateness: list[int] = []
        self.routed: list[Late] = []
        self.dropped_late = 0
        #: Refused records left out of the output: dead letters, or counted when skipped.
        self.dead_letters: list[DeadLetter] = []
        self.refused_skipped = 0
        self.firsts: dict[int, int] = {}
        self.stream_time_before = self.stream_time = stream_time
        #: Where enforced processing began in ``records``; -1 until it does.
        self.enforced_from = -1

    @property
    def empty(self) -> bool:
        """Nothing taken yet (emitted, routed, dropped or refused)."""
        return not (
            self.records or self.routed or self.dropped_late or self.dead_letters or self.refused_skipped
        )

    def mark_enforced(self) -> None:
        """What is added from now on is enforced processing (once on, it stays on)."""
        if self.enforced_from < 0:
            self.enforced_from = len(self.records)

    def add_merged(self, records: list[InputRecord], timestamps: list[int], enforced_at: int) -> int:
        """The sorted take's records, merged into fresh sorted lists the draft may keep rather than
        copy (copying costs a seventh of the sort itself); those from ``enforced_at`` on are
        enforced. Returns where the take stopped, as :meth:`add` does."""
        n = len(records)
        self._owned = records
        try:
            taken = self.add(records, timestamps, 0, min(enforced_at, n), True) if enforced_at else 0
            if taken == enforced_at < n:
                self.mark_enforced()
                taken = self.add(records, timestamps, taken, n, True)
        finally:
            self._owned = None
        return taken

    def add(
        self, records: list[InputRecord], timestamps: list[int], start: int, end: int, monotonic: bool
    ) -> int:
        """Take ``records[start:end]``, in output order; returns where the take stopped: ``end``,
        or the index of a refused record that stops it (see the module's theory). Raises
        :class:`RefusedTimestampError` when that record would be the first of the batch.
        ``monotonic``: ``timestamps[start:end]`` is known to be non-decreasing."""
        if monotonic:
            low, high = timestamps[start], timestamps[end - 1]
        else:
            low, high = min(timestamps[start:end]), max(timestamps[start:end])
        if low >= self._low and high <= self._high:
            self._accept(records, timestamps, start, end, monotonic)
        elif not monotonic:
            return self._take_one_by_one(records, timestamps, start, end)
        else:  # sorted: refused times are a prefix and a suffix
            keep_from = bisect_left(timestamps, self._low, start, end)
            keep_to = bisect_right(timestamps, self._high, start, end)
            if self._config.refusal_stops:
                stop = start if keep_from > start else keep_to
                if stop == start and self.empty:
                    raise self._refusal(records[stop], timestamps[stop])
                if stop > start:
                    self._accept(records, timestamps, start, stop, True)
                return stop
            self._refuse(records, timestamps, start, keep_from)
            if keep_to > keep_from:
                self._accept(records, timestamps, keep_from, keep_to, True)
            self._refuse(records, timestamps, keep_to, end)
        return end

    def _accept(
        self, records: list[InputRecord], timestamps: list[int], start: int, end: int, monotonic: bool
    ) -> None:
        """Records the broker accepts: emitted in order, the late ones as ``late.records`` says."""
        stream_time = self.stream_time
        if monotonic:
            if timestamps[start] >= stream_time:  # the common case: nothing late
                self._extend(records, timestamps, start, end)
            else:  # non-decreasing: only a prefix is late, and it leaves the stream time as it is
                late_prefix = range(start, bisect_left(timestamps, stream_time, start, end))
                self._accept_sorted(records, timestamps, late_prefix, end)
            high = timestamps[end - 1]
        else:
            late = late_positions(timestamps, start, end, stream_time)
            if not late or self._config.late_records == "forward":
                base = len(self.records) - start
                self._extend(records, timestamps, start, end)
                for j, lost in late:
                    self.late.append(base + j)
                    self.lateness.append(lost)
            else:
                self._sift_unsorted(records, timestamps, range(start, end), dict(late))
            high = max(timestamps[start:end])
        if high > stream_time:
            self.stream_time = high

    def _accept_sorted(
        self, records: list[InputRecord], timestamps: list[int], late: range, end: int
    ) -> None:
        """A sorted run from ``late.start`` to ``end`` whose ``late`` prefix (non-empty) is below
        the stream time."""
        policy = self._config.late_records
        if policy == "forward":
            first, stream_time = len(self.records), self.stream_time
            self.late += range(first, first + len(late))
            self.lateness += [stream_time - t for t in timestamps[late.start : late.stop]]
            self._extend(records, timestamps, late.start, end)
            return
        if policy == "topic":
            stream_time = self.stream_time
            self.routed += [Late(records[j], timestamps[j], stream_time - timestamps[j]) for j in late]
        else:
            self.dropped_late += len(late)
        self._extend(records, timestamps, late.stop, end)

    def _extend(self, records: list[InputRecord], timestamps: list[int], start: int, end: int) -> None:
        if records is self._owned and not self.records and start == 0 and end == len(records):
            self.records, self.timestamps = records, timestamps
        else:
            self.records += records[start:end]
            self.timestamps += timestamps[start:end]

    def _sift_unsorted(
        self, records: list[InputRecord], timestamps: list[int], span: range, late: dict[int, int]
    ) -> None:
        """Emit the records of ``span`` in order, setting aside the ``late`` ones (index → lateness)."""
        for j in span:
            lateness = late.get(j)
            if lateness is None:
                self.records.append(records[j])
                self.timestamps.append(timestamps[j])
            else:
                self._set_aside(records[j], timestamps[j], lateness)

    def _set_aside(self, record: InputRecord, timestamp: int, lateness: int) -> None:
        """A late record not forwarded: routed to the late topic, or dropped."""
        if self._config.late_records == "topic":
            self.routed.append(Late(record, timestamp, lateness))
        else:
            self.dropped_late += 1

    def _take_one_by_one(
        self, records: list[InputRecord], timestamps: list[int], start: int, end: int
    ) -> int:
        """The rare unsorted run holding a refused time: judged record by record."""
        low, high = self._low, self._high
        for j in range(start, end):
            ts = timestamps[j]
            if low <= ts <= high:
                self._accept(records, timestamps, j, j + 1, True)
            elif self._config.refusal_stops:
                if self.empty:
                    raise self._refusal(records[j], ts)
                return j
            else:
                self._refuse(records, timestamps, j, j + 1)
        return end

    def _refuse(self, records: list[InputRecord], timestamps: list[int], start: int, end: int) -> None:
        """Refused records the policy lets the batch go on without: skipped, or dead letters."""
        if self._config.timestamp_invalid == "skip":
            self.refused_skipped += end - start
            return
        limits = self._config.output_limits
        assert limits is not None  # only a task with limits refuses anything
        for j in range(start, end):  # errors.tolerance=all (under none the batch stops instead)
            reason = limits.refusal(timestamps[j], self._now_ms) or "refused"
            self.dead_letters.append(DeadLetter(records[j], reason, RefusedTimestampError.dead_letter_class))

    def _refusal(self, record: InputRecord, timestamp: int) -> RefusedTimestampError:
        limits = self._config.output_limits
        assert limits is not None  # only a task with limits refuses anything
        reason = limits.refusal(timestamp, self._now_ms) or "refused"
        return RefusedTimestampError(TopicPartition(record.topic, record.partition), record.offset, reason)
