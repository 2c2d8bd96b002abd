"""What the job drops, and what it could not decode, from Structured Streaming's query progress.

Two kinds of drop, both reported per micro-batch by Spark:

- **late for Spark's watermark**: ``numRowsDroppedByWatermark`` of each stateful operator
  (deduplication, aggregation, the join's operator, which Spark filters on the watermarked event
  time it carries) — rows whose event time was at or below the watermark;
- **late for their key** (suppress only): the processor's count, published as the observed
  metric ``timesync_suppress.late_rows``.

Beside them, not a drop: the values that did not decode (their rows go on with a NULL ``data``),
the observed metrics ``timesync_values_<n>.undecodable`` of :mod:`spark_consumer.values`.

:func:`drops` sums them over a query's progress reports. ``query.recentProgress`` keeps only
the last ``spark.sql.streaming.numRecentProgressUpdates`` (100) of them, so a long-running job
registers a :class:`DropTracker` listener, which sees every report.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener
from pyspark.sql.streaming.query import StreamingQuery

from spark_consumer.jobs.suppress import FORGOTTEN_KEYS, LATE_ROWS, OBSERVATION
from spark_consumer.values import OBSERVATION_PREFIX, UNDECODABLE


@dataclass(frozen=True, slots=True)
class Drops:
    """Rows dropped as late: by Spark's watermark, and (suppress) by a key's own stream time.

    ``forgotten_keys`` (suppress) counts evicted keys whose closed windows were forgotten after
    ``--closed-retention``: not a drop, but what the bound on state costs — a record for such a
    key starts afresh. ``undecodable`` counts values that did not decode: not a drop either,
    their rows went on with a NULL ``data`` (:mod:`spark_consumer.values`).
    """

    watermark: int = 0
    key_stream_time: int = 0
    forgotten_keys: int = 0
    undecodable: int = 0

    @property
    def total(self) -> int:
        return self.watermark + self.key_stream_time

    def __add__(self, other: Drops) -> Drops:
        return Drops(
            self.watermark + other.watermark,
            self.key_stream_time + other.key_stream_time,
            self.forgotten_keys + other.forgotten_keys,
            self.undecodable + other.undecodable,
        )


def drops_in(progress: Any) -> Drops:
    """The drops one progress report (``StreamingQueryProgress``) records for its micro-batch."""
    by_watermark = sum(int(op.numRowsDroppedByWatermark or 0) for op in progress.stateOperators)
    metrics = progress.observedMetrics or {}
    observed = metrics.get(OBSERVATION)
    values = observed.asDict() if observed is not None else {}
    undecodable = sum(
        int(row.asDict().get(UNDECODABLE) or 0)
        for name, row in metrics.items()
        if name.startswith(OBSERVATION_PREFIX)
    )
    return Drops(
        by_watermark, int(values.get(LATE_ROWS) or 0), int(values.get(FORGOTTEN_KEYS) or 0), undecodable
    )


def sum_drops(progresses: Iterable[Any]) -> Drops:
    total = Drops()
    for progress in progresses:
        total += drops_in(progress)
    return total


class DropTracker(StreamingQueryListener):
    """Sums :class:`Drops` per query over every progress report of the session.

    Progress reports reach listeners asynchronously: after a query stops, wait for the report
    of its last batch (:meth:`wait_for_batch` with ``query.lastProgress.batchId``) before
    reading :meth:`drops`.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._drops: dict[str, Drops] = {}
        self._last_batch: dict[str, int] = {}
        self._started: set[str] = set()

    def onQueryStarted(self, event: Any) -> None:
        # Delivered synchronously with writeStream.start(): seen() is reliable right after it.
        with self._lock:
            self._started.add(str(event.id))

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        query_id = str(progress.id)
        with self._lock:
            self._drops[query_id] = self._drops.get(query_id, Drops()) + drops_in(progress)
            self._last_batch[query_id] = int(progress.batchId)
            self._lock.notify_all()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def seen(self, query: StreamingQuery) -> bool:
        """Whether this tracker was listening when ``query`` started (so it saw every report)."""
        with self._lock:
            return str(query.id) in self._started

    def drops(self, query: StreamingQuery) -> Drops:
        with self._lock:
            return self._drops.get(str(query.id), Drops())

    def wait_for_batch(self, query: StreamingQuery, batch_id: int, timeout_s: float = 10.0) -> bool:
        """Wait until the report of ``batch_id`` (or a later one) has been delivered."""
        key = str(query.id)
        with self._lock:
            return self._lock.wait_for(lambda: self._last_batch.get(key, -1) >= batch_id, timeout_s)


_tracker: DropTracker | None = None
_tracker_session: SparkSession | None = None


def track_drops(spark: SparkSession) -> DropTracker:
    """The session's :class:`DropTracker`, registered on first use.

    Call it before starting the queries it should count.
    """
    global _tracker, _tracker_session
    if _tracker is None or _tracker_session is not spark:
        _tracker = DropTracker()
        _tracker_session = spark
        spark.streams.addListener(_tracker)
    return _tracker


def untrack_drops(spark: SparkSession) -> None:
    """Unregister the session's :class:`DropTracker` (once its queries are done).

    A Python listener left registered when the process exits gets the JVM's last queued events
    after Python's callback server is gone, and Spark logs a py4j stack trace for each.
    """
    global _tracker, _tracker_session
    if _tracker is not None and _tracker_session is spark:
        spark.streams.removeListener(_tracker)
        _tracker = _tracker_session = None


def drops(query: StreamingQuery) -> Drops:
    """Rows ``query`` dropped as late so far.

    From the :class:`DropTracker` when one was registered before the query started (every
    report; for a stopped query, after waiting up to 5 s for its last report), else from the
    query's ``recentProgress`` (the last 100 reports).
    """
    if _tracker is not None and _tracker.seen(query):
        last = query.lastProgress
        if last is not None and not query.isActive:
            # Reports reach the listener asynchronously: let the last one arrive.
            _tracker.wait_for_batch(query, int(last.batchId), timeout_s=5.0)
        return _tracker.drops(query)
    return sum_drops(query.recentProgress)
