"""Per-partition intake: event times read once, the invalid-timestamp policy, valid records queued.

Theory of operation
-------------------
Kafka Streams settles a record's timestamp as it enters its partition's queue
(``RecordQueue``): the merge then only ever sees valid, readable times. Here too. At push each
record's event time is extracted once; a batch of valid times goes straight into the queue
(the common case, one C-speed check). Otherwise each record is judged:

* **unreadable** (no event time) — ``timestamp.invalid``: ``skip`` drops it (counted),
  ``partition-time`` restamps it with its partition's time so far (the largest time before it
  — taken, buffered, or earlier in this push; with none yet it fails), ``fail`` fails it;
* **refused** — readable, but further ahead than the output topic's broker accepts by the last
  clock reading: ``skip`` drops it, otherwise it fails. Left in the buffer, its far-future time
  would hold its whole partition back in the merge until every other partition passed it.

A failed record stops the push under ``errors.tolerance=none`` (raising, with the records
before it queued) and becomes a dead letter under ``all`` — watched by the dead letter budget,
so that a bad deploy cannot route everything to the DLQ.

Offsets whose records could not be read at all (:class:`~sidecar.core.records.Unreadable`: a
corrupt batch) come here only under ``all`` (under ``none`` the adapter stops first): their
trace is a dead letter like a failed record's, or, under ``timestamp.invalid=skip``, they are
dropped and counted as ``unreadable``. Either way the partition goes on after them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sidecar.core.config import TaskConfig
from sidecar.core.deadletters import DeadLetterBudget
from sidecar.core.merge import PartitionState
from sidecar.core.records import DeadLetter, InputRecord, Record, Unreadable
from sidecar.core.timestamps import InvalidTimestampError, RefusedTimestampError


class Intake:
    """Queues pushed records into their partitions under the timestamp policies.

    ``dead`` receives ``(partition index, dead letter)`` in push order; the task sends them
    with its next batch. ``dropped`` and ``restamped`` count by reason.
    """

    __slots__ = ("_budget", "_config", "clock", "dead", "dropped", "records_in", "restamped")

    def __init__(self, config: TaskConfig, dropped: Counter[str], restamped: Counter[str]) -> None:
        self._config = config
        self._budget = DeadLetterBudget(config.dlq_max_ratio)
        #: The latest clock reading the task was given (fetch responses, polls): judges times at
        #: push. ``None`` before the first, when nothing is refused.
        self.clock: int | None = None
        self.dead: list[tuple[int, DeadLetter]] = []
        self.dropped = dropped
        self.restamped = restamped
        self.records_in = 0

    def tick(self, now_ms: int) -> None:
        """A clock reading; an earlier one than already seen changes nothing."""
        if self.clock is None or now_ms > self.clock:
            self.clock = now_ms

    def push(self, p: PartitionState, records: Sequence[InputRecord] | Unreadable) -> None:
        """Queue ``records`` (non-empty, in offset order) into ``p``. Raises
        :class:`InvalidTimestampError` at the first failing record under
        ``errors.tolerance=none``: those before it are queued, it and those after it are not.
        Offsets that could not be read go to :meth:`unreadable`."""
        if isinstance(records, Unreadable):
            self.unreadable(p, records)
            return
        if p.start_offset is None:
            p.start_offset = records[0].offset
        timestamps = self._config.extractor.extract_all(records)
        ahead = self._ahead_limit()
        if min(timestamps) >= 0 and (ahead is None or max(timestamps) <= ahead):
            p.queue.append(records, timestamps)
            self._budget.observe(len(records))
        else:
            self._push_judged(p, records, timestamps, ahead)
        p.next_offset = records[-1].offset + 1
        self.records_in += len(records)

    def unreadable(self, p: PartitionState, gone: Unreadable) -> None:
        """Offsets of ``p`` that could not be read: a dead letter standing for them (or dropped,
        under ``skip``); ``p`` continues at ``gone.next_offset``. Counts as one failed record."""
        cfg = self._config
        if cfg.errors_tolerance == "none":
            raise ValueError("unreadable offsets reach the task only under errors.tolerance=all")
        if p.start_offset is None:
            p.start_offset = gone.first_offset
        p.next_offset = gone.next_offset
        self.records_in += 1
        if cfg.timestamp_invalid == "skip":
            self.dropped["unreadable"] += 1
            self._budget.observe(1)
            return
        trace = Record(p.tp.topic, p.tp.partition, gone.first_offset, -1, value=gone.data)
        self.dead.append(
            (p.index, DeadLetter(trace, gone.reason, Unreadable.dead_letter_class, gone.next_offset - 1))
        )
        self._budget.observe(1, (0,))

    def _ahead_limit(self) -> int | None:
        """The latest time the output topic's broker accepts by the last clock reading (``None``:
        no limit, or no reading yet)."""
        limits = self._config.output_limits
        if limits is None or self.clock is None:
            return None
        return limits.window(self.clock)[1]

    def _push_judged(
        self, p: PartitionState, records: Sequence[InputRecord], timestamps: list[int], ahead: int | None
    ) -> None:
        """Record by record, for a push holding an unreadable or refused time."""
        keep: list[InputRecord] = []
        keep_ts: list[int] = []
        failed_at: list[int] = []
        known_time = _partition_time_so_far(p)
        for i, (record, ts) in enumerate(zip(records, timestamps, strict=True)):
            judged = self._judge(p, record, ts, known_time, ahead)
            if isinstance(judged, int):
                keep.append(record)
                keep_ts.append(judged)
                if known_time is None or judged > known_time:
                    known_time = judged
            elif judged is not None:
                if self._config.errors_tolerance == "none":
                    p.queue.append(keep, keep_ts)
                    p.next_offset = record.offset
                    self.records_in += i
                    raise judged
                failed_at.append(i)
                self.dead.append((p.index, DeadLetter(record, judged.reason, judged.dead_letter_class)))
        p.queue.append(keep, keep_ts)
        self._budget.observe(len(records), failed_at)

    def _judge(
        self, p: PartitionState, record: InputRecord, ts: int, known_time: int | None, ahead: int | None
    ) -> int | InvalidTimestampError | None:
        """The time to queue ``record`` with, ``None`` to skip it (counted), or why it fails."""
        cfg = self._config
        if ahead is not None and ts > ahead:  # readable, but the output topic would refuse it
            if cfg.timestamp_invalid == "skip":
                self.dropped["refused-timestamp"] += 1
                return None
            assert cfg.output_limits is not None  # there is an ahead limit
            assert self.clock is not None
            reason = cfg.output_limits.refusal(ts, self.clock) or "refused"
            return RefusedTimestampError(p.tp, record.offset, reason)
        if ts >= 0:
            return ts
        if cfg.timestamp_invalid == "skip":
            self.dropped["invalid-timestamp"] += 1
            return None
        reason = cfg.extractor.explain(record)
        if cfg.timestamp_invalid == "partition-time":
            if known_time is not None:
                self.restamped["partition-time"] += 1
                return known_time
            reason += "; no partition time to fall back on yet"
        return InvalidTimestampError(p.tp, record.offset, reason)


def _partition_time_so_far(p: PartitionState) -> int | None:
    """Kafka Streams' partition time before a push: the largest timestamp of the partition so
    far, taken already or still buffered."""
    buffered, taken = p.queue.max_timestamp(), p.partition_time
    if buffered is None or (taken is not None and taken > buffered):
        return taken
    return buffered
