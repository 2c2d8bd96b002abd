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

The rule is written once, as plain Python, in ``spark_consumer/suppress_rule.py`` (the
specification); it runs inside Spark as a JVM ``StatefulProcessor`` (``transformWithState``,
time mode ``EventTime``, RocksDB state, one state row per key), built from ``operators/suppress``
and driven through py4j (``suppress_operator.py``); a differential test holds the two equal.
The input carries no watermarked column, so Spark itself drops nothing as late here: lateness
is decided per key by the operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.suppress_checkpoint import check_layout
from spark_consumer.jobs.suppress_operator import INPUT_COLUMNS, run_operator, state_variable
from spark_consumer.options import AggSpec, UsageError, WindowSpec
from spark_consumer.source import SourceOptions, ordered_stream
from spark_consumer.values import data_field, key_column, with_data

OBSERVATION = "timesync_suppress"  # observed-metrics name in the query progress
LATE_ROWS = "late_rows"
FORGOTTEN_KEYS = "forgotten_keys"


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
    """What the operator emits.

    ``kind`` is ``final`` for a window result, ``late`` for a row that only carries, in ``late``,
    how many records of this key the micro-batch dropped as late, or ``forgotten`` when an
    evicted key's closed horizon was deleted (see the module docstring).
    """
    return StructType.fromDDL(output_ddl(aggs))  # type: ignore[return-value]


def output_ddl(aggs: Sequence[AggSpec]) -> str:
    fields = ", ".join(f"{a.column} {'BIGINT' if a.function == 'count' else 'DOUBLE'}" for a in aggs)
    return (
        f"key STRING, kind STRING, window_start BIGINT, window_end BIGINT, {fields}, ts BIGINT, "
        "closed_by STRING, late BIGINT"
    )


def _input_column(i: int) -> str:
    return f"agg_input_{i}"


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
        *INPUT_COLUMNS[1:],
        *(
            (data_field(a.field).cast("double") if a.field else F.lit(None).cast("double")).alias(
                _input_column(i)
            )
            for i, a in enumerate(options.aggs)
        ),
    )
    emitted = run_operator(
        inputs,
        options.window,
        options.grace_ms,
        options.ttl_ms,
        options.retention_ms,
        options.aggs,
        output_ddl(options.aggs),
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
    frame = suppress(records, options, options.key_field)
    variable = state_variable(frame)
    return JobOutput(frame, "append", check_checkpoint=lambda path: check_layout(path, variable))
