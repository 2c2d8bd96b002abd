"""Per-key final window results: each key closes its windows on its *own* stream time.

Spark's watermark is global: one number for the whole stream, max event time seen minus a
delay. When keys are skewed — key A's device reports t0..t3 first, key B's device reports
t0..t3 only afterwards — the watermark has already passed B's windows by the time B's records
arrive, and Spark drops them as late unless the delay covers the skew (which then holds every
key's results back by that much).

Here each key keeps its own stream time, the largest timestamp seen *for that key* (Kafka
Streams' stream time, kept per key). A record is late only for its own key: when its window's
end + grace is at or below the key's stream time, the window has closed and the record is
dropped (and counted). A window's final result for a key is emitted exactly once, as soon as the
key's stream time reaches window end + grace (``>=``, as Kafka Streams' ``suppress(untilWindow
Closes)`` does). B's records are not late for B.

Idle keys. A key that stops receiving records would keep its state, and its open windows,
forever. Each key holds an event-time timer at (its stream time + ``ttl``); when Spark's
watermark — moved by data of other keys and by the ordered topic's heartbeats — passes it, the
key's still-open windows are emitted (``closed_by = "ttl"``) and its windows and replay
identities are deleted. What the key has closed is *not* forgotten at once: the key keeps one
number, its stream time moved up to the end + grace of the last window the TTL emitted, so a
straggler for a window already emitted is late (dropped, counted) instead of reopening it — a
final result stays final across eviction, and across a restart from the checkpoint (the
number lives in the state store). That number is kept ``closed_retention`` more of event time
(default: ``ttl``), then deleted too, so state stays bounded by the keys seen recently; each
key forgotten so is counted (``timesync_suppress.forgotten_keys``), and a record that arrives
for it later starts afresh. The TTL is measured in event time so that a replay gives the same
output; processing-time timers would also make Spark run an empty micro-batch on every trigger
(``TransformWithStateExec.shouldRunAnotherBatch`` is always true in ``ProcessingTime`` mode,
SPARK-50180).

Duplicates from an at-least-once replay are dropped per key: the key remembers the
(source topic, partition, offset) of records whose windows are still open.

Built on ``transformWithStateInPandas`` (time mode ``EventTime``) with the RocksDB state store.
The input carries no watermarked column, so Spark itself drops nothing as late here: lateness
is decided per key by the processor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StructType

from spark_consumer.jobs import JobOutput
from spark_consumer.options import AggSpec, UsageError, WindowSpec
from spark_consumer.source import TS, SourceOptions, ordered_stream
from spark_consumer.values import data_field, key_column, with_data

OBSERVATION = "timesync_suppress"  # observed-metrics name in the query progress
LATE_ROWS = "late_rows"
FORGOTTEN_KEYS = "forgotten_keys"
CLOSED_BY_STREAM_TIME = "stream-time"
CLOSED_BY_TTL = "ttl"


@dataclass(frozen=True, slots=True)
class SuppressOptions:
    window: WindowSpec
    grace_ms: int
    ttl_ms: int
    aggs: Sequence[AggSpec] = field(default_factory=lambda: (AggSpec("count"),))
    key_field: str | None = None
    value_schema: StructType | None = None
    #: How long (event time) an evicted key remembers what it closed; ``None``: ``ttl_ms``.
    closed_retention_ms: int | None = None

    @property
    def retention_ms(self) -> int:
        return self.ttl_ms if self.closed_retention_ms is None else self.closed_retention_ms

    def __post_init__(self) -> None:
        if self.window.kind == "session":
            raise UsageError("--window: suppress supports tumbling and hopping windows, not session")
        if self.grace_ms < 0:
            raise UsageError("--grace: must not be negative")
        if self.ttl_ms <= self.window.size_ms + self.grace_ms:
            bound = self.window.size_ms + self.grace_ms
            raise UsageError(
                f"--ttl: {self.ttl_ms} ms must exceed window size + grace ({bound} ms), "
                "or keys would be evicted while their windows are still open"
            )
        if self.closed_retention_ms is not None and self.closed_retention_ms < 0:
            raise UsageError("--closed-retention: must not be negative")


def output_schema(aggs: Sequence[AggSpec]) -> StructType:
    """What the processor emits.

    ``kind`` is ``final`` for a window result, ``late`` for a row that only carries, in ``late``,
    how many records of this key the micro-batch dropped as late, or ``forgotten`` when an
    evicted key's closed horizon was deleted (see the module docstring).
    """
    fields = ", ".join(f"{a.column} {'BIGINT' if a.function == 'count' else 'DOUBLE'}" for a in aggs)
    ddl = (
        f"key STRING, kind STRING, window_start BIGINT, window_end BIGINT, {fields}, ts BIGINT, "
        "closed_by STRING, late BIGINT"
    )
    return StructType.fromDDL(ddl)  # type: ignore[return-value]


def _input_column(i: int) -> str:
    return f"agg_input_{i}"


class PerKeySuppress(StatefulProcessor):
    """The per-key windowing and suppression (state per key, see the module docstring).

    State per key: ``stream_time``; ``windows`` (start → end, max ts, count, one accumulator
    per aggregation); ``replay_ids`` (a list of source topic, partition, offset, ts) for
    deduplication, written whole once per call (one round trip to the state server, where a map
    entry per record cost one each);
    ``evicted`` (set while the key holds only its closed horizon, after a TTL eviction).
    """

    def __init__(
        self,
        window: WindowSpec,
        grace_ms: int,
        ttl_ms: int,
        aggs: Sequence[AggSpec],
        closed_retention_ms: int | None = None,
    ) -> None:
        self.window = window
        self.grace_ms = grace_ms
        self.ttl_ms = ttl_ms
        self.retention_ms = ttl_ms if closed_retention_ms is None else closed_retention_ms
        self.aggs = tuple(aggs)
        schema = output_schema(self.aggs)
        self.columns = [f.name for f in schema.fields]
        # Explicit, nullable dtypes: a frame whose numeric columns are all missing (a "late" or
        # "forgotten" row alone) would otherwise reach Arrow as untyped objects and fail.
        self.dtypes = {f.name: _PANDAS_DTYPES[f.dataType.typeName()] for f in schema.fields}
        self.value_columns = [_input_column(i) for i in range(len(self.aggs))]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.stream_time = handle.getValueState("stream_time", "t BIGINT")
        accumulators = "".join(
            f", a{i} {'BIGINT' if a.function == 'count' else 'DOUBLE'}" for i, a in enumerate(self.aggs)
        )
        self.windows = handle.getMapState(
            "windows", "start BIGINT", f"end BIGINT, ts BIGINT, n BIGINT{accumulators}"
        )
        self.seen = handle.getListState("replay_ids", "topic STRING, part INT, off BIGINT, ts BIGINT")
        self.evicted = handle.getValueState("evicted", "at BIGINT")
        # Keys that had records in this task (one micro-batch of one partition); see
        # handleExpiredTimer.
        self._handled: set[Any] = set()

    # --- per-record rules -------------------------------------------------------------------

    def _fold(self, acc: list[Any], values: Sequence[Any], ts: int) -> None:
        """Add one record to a window accumulator [end, ts, n, a0, a1, ...]."""
        acc[1] = max(acc[1], ts)
        acc[2] += 1
        for i, spec in enumerate(self.aggs):
            v = values[i]
            if spec.function == "count":
                if spec.field is None or _present(v):
                    acc[3 + i] += 1
            elif _present(v):
                current = acc[3 + i]
                if current is None:
                    acc[3 + i] = float(v)
                elif spec.function == "sum":
                    acc[3 + i] = current + float(v)
                elif spec.function == "min":
                    acc[3 + i] = min(current, float(v))
                else:
                    acc[3 + i] = max(current, float(v))

    def _new_window(self, start: int) -> list[Any]:
        return [start + self.window.size_ms, -(2**63), 0] + [
            0 if a.function == "count" else None for a in self.aggs
        ]

    def _row(self, key: str, start: int, acc: Sequence[Any], closed_by: str) -> dict[str, Any]:
        row: dict[str, Any] = {"key": key, "kind": "final", "window_start": start, "window_end": acc[0]}
        for i, spec in enumerate(self.aggs):
            row[spec.column] = acc[3 + i]
        row.update(ts=acc[1], closed_by=closed_by)
        return row

    def _frame(self, rows: list[dict[str, Any]]) -> pd.DataFrame:
        # Built column by column with its dtype: the same frame as DataFrame(rows).astype(...),
        # at under half the cost on the one or two rows a key emits per micro-batch.
        return pd.DataFrame(
            {c: pd.array([r.get(c) for r in rows], dtype=self.dtypes[c]) for c in self.columns}
        )

    # --- Spark callbacks ----------------------------------------------------------------------

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        the_key = key[0]
        batch = _records(list(rows), self.value_columns)

        saved = self.stream_time.get()
        stream_time: int | None = int(saved[0]) if saved is not None else None
        before = stream_time
        windows = {int(k[0]): list(v) for k, v in self.windows.iterator()}
        stored = set(windows)
        seen = {(r[0], int(r[1]), int(r[2])): int(r[3]) for r in self.seen.get()}
        new_seen: dict[tuple[str, int, int], int] = {}
        touched: set[int] = set()
        late = 0
        size, grace = self.window.size_ms, self.grace_ms

        for ident, ts, values in batch:
            if ident in seen or ident in new_seen:
                continue  # a replayed copy: already counted
            new_seen[ident] = ts
            if stream_time is None or ts > stream_time:
                stream_time = ts
            accepted = False
            for start in self.window.starts(ts):
                if start + size + grace <= stream_time:
                    continue  # this key's window has closed: the record is late for it
                acc = windows.get(start)
                if acc is None:
                    acc = windows[start] = self._new_window(start)
                self._fold(acc, values, ts)
                touched.add(start)
                accepted = True
            if not accepted:
                late += 1

        assert stream_time is not None  # handleInputRows is only called with rows
        out: list[dict[str, Any]] = []
        for start in sorted(windows):
            acc = windows[start]
            if acc[0] + grace <= stream_time:
                out.append(self._row(the_key, start, acc, CLOSED_BY_STREAM_TIME))
                if start in stored:
                    self.windows.removeKey((start,))
            elif start in touched:
                self.windows.updateValue((start,), tuple(acc))
        if late:
            out.append({"key": the_key, "kind": "late", "late": late})

        # Remember replay identities only while a copy could still land in an open window.
        horizon = stream_time - grace - size
        kept = [(*ident, ts) for ident, ts in seen.items() if ts > horizon]
        added = [(*ident, ts) for ident, ts in new_seen.items() if ts > horizon]
        if added or len(kept) < len(seen):
            if kept or added:
                self.seen.put(kept + added)
            else:
                self.seen.clear()

        if stream_time != before:
            self.stream_time.update((stream_time,))
        self._handled.add(the_key)
        if before is None:
            # A new key (or one forgotten): it has no timer yet.
            self._register_ttl(stream_time, timerValues)
        elif not stored and not seen and self.evicted.exists():
            # (Eviction empties windows and seen, so a key holding either is not evicted.)
            # The key is back: its TTL timer replaces the retention timer.
            self.evicted.clear()
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self._register_ttl(stream_time, timerValues)
        # Otherwise the key's TTL timer stays where it is, at or before the expiry its stream
        # time now asks for (stream time and watermark only grow): when it fires early,
        # handleExpiredTimer moves it on instead of evicting. One timer per TTL instead of a
        # list + delete + register per key per micro-batch.
        if out:
            yield self._frame(out)

    def _register_ttl(self, stream_time: int, timer_values: TimerValues, after_ms: int | None = None) -> None:
        # A timer at or below the current watermark would be refused or fire at once; a key
        # far behind the others simply expires at the next watermark advance.
        delay = self.ttl_ms if after_ms is None else after_ms
        expiry = max(stream_time + delay, timer_values.getCurrentWatermarkInMs() + 1)
        self.handle.registerTimer(expiry)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        if self.evicted.exists():  # the retention after eviction is over: forget the key
            self.evicted.clear()
            self.stream_time.clear()
            yield self._frame([{"key": key[0], "kind": "forgotten", "late": 0}])
            return
        saved = self.stream_time.get()
        stream_time = int(saved[0]) if saved is not None else -(2**63)
        watermark = timerValues.getCurrentWatermarkInMs()
        if key[0] in self._handled or stream_time + self.ttl_ms > watermark:
            # A timer armed for an earlier stream time: the key's TTL has moved on. A key that
            # had records in this micro-batch expires at the next watermark advance at the
            # earliest (what a timer registered now would do). Spark deletes the fired timer.
            self._register_ttl(stream_time, timerValues)
            return
        windows = sorted(((int(k[0]), list(v)) for k, v in self.windows.iterator()), key=lambda kv: kv[0])
        rows = [self._row(key[0], start, acc, CLOSED_BY_TTL) for start, acc in windows]
        self.windows.clear()
        self.seen.clear()
        # Every window the TTL emitted is closed for this key from now on: a straggler for one
        # of them is late, not the start of a second "final" result.
        closed = max([stream_time, *(acc[0] + self.grace_ms for _, acc in windows)])
        self.stream_time.update((closed,))
        self.evicted.update((closed,))
        # The fired TTL timer was the key's only one (Spark deletes it after this call).
        self._register_ttl(closed, timerValues, after_ms=self.ttl_ms + self.retention_ms)
        if rows:
            yield self._frame(rows)

    def close(self) -> None:
        pass


_PANDAS_DTYPES = {"long": "Int64", "double": "float64", "string": "object"}


def _records(
    frames: list[pd.DataFrame], value_columns: Sequence[str]
) -> Iterator[tuple[tuple[str, int, int], int, list[Any]]]:
    """(replay identity, ts, aggregation inputs) per record, in Kafka order of the ordered topic.

    Kafka order (partition, offset) is the order the sidecar decided, which a replay repeats.
    Columns are read whole as Python lists (pandas' per-row access costs far more than the
    rules themselves); rows are reordered only when they are not in that order already.
    """
    batch = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    part = batch["kafka_partition"].to_numpy()
    offset = batch["kafka_offset"].to_numpy()
    columns = [
        batch["source_topic"],
        batch["source_partition"],
        batch["source_offset"],
        batch["ts"],
        *(batch[c] for c in value_columns),
    ]
    if len(batch) > 1:
        step = part[1:] - part[:-1]
        in_order = bool(((step > 0) | ((step == 0) & (offset[1:] >= offset[:-1]))).all())
        if not in_order:
            order = np.lexsort((offset, part))  # stable, like sort_values(kind="stable")
            columns = [c.iloc[order] for c in columns]
    topics, parts, offsets, stamps, *values = (c.tolist() for c in columns)
    for i, ts in enumerate(stamps):
        yield (str(topics[i]), int(parts[i]), int(offsets[i])), int(ts), [v[i] for v in values]


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def suppress(records: DataFrame, options: SuppressOptions, key_field: str | None = None) -> DataFrame:
    """Per-key final window results from a stream with the ordered topic's columns and ``data``.

    Output columns: ``key``, ``window_start``, ``window_end``, one column per aggregation,
    ``ts`` (max record timestamp in the window) and ``closed_by`` (``stream-time`` or ``ttl``).
    Records dropped as late for their key are counted in the query progress's observed metric
    ``timesync_suppress.late_rows``; evicted keys whose closed horizon was deleted in
    ``timesync_suppress.forgotten_keys``.
    """
    inputs = records.select(
        key_column(key_field).alias("key"),
        # Epoch ms as a plain BIGINT: no watermarked column reaches the operator, so Spark's
        # global watermark drops nothing here (it still drives the TTL timers).
        TS,
        "source_topic",
        "source_partition",
        "source_offset",
        "kafka_partition",
        "kafka_offset",
        *(
            (data_field(a.field).cast("double") if a.field else F.lit(None).cast("double")).alias(
                _input_column(i)
            )
            for i, a in enumerate(options.aggs)
        ),
    )
    processor = PerKeySuppress(
        options.window, options.grace_ms, options.ttl_ms, options.aggs, options.closed_retention_ms
    )
    emitted = inputs.groupBy("key").transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=output_schema(options.aggs),
        outputMode="Append",
        timeMode="EventTime",
    )
    observed = emitted.observe(
        OBSERVATION,
        F.coalesce(F.sum(F.when(F.col("kind") == "late", F.col("late"))), F.lit(0)).alias(LATE_ROWS),
        F.count(F.when(F.col("kind") == "forgotten", True)).alias(FORGOTTEN_KEYS),
    )
    return observed.filter(F.col("kind") == "final").drop("kind", "late")


def build(spark: SparkSession, source: SourceOptions, options: SuppressOptions) -> JobOutput:
    # No Spark-side deduplication: dropDuplicatesWithinWatermark drops rows that are late for
    # the *global* watermark — exactly the records per-key suppression exists to keep.
    records = with_data(ordered_stream(spark, source, dedup=False), options.value_schema)
    return JobOutput(suppress(records, options, options.key_field), "append")
