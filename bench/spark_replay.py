"""One replay of an arrival order through a Spark job, and what it comes to (see
:mod:`bench.spark_bench`): the query in micro-batches cut by offsets (:func:`start_replay`), each
batch's end offset (:func:`batch_ends`), and its drops, results and final-result latency
(:func:`summarise`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench import analysis

WATERMARK_DELAY_MS = 1000
WINDOW_MS = 2000
JOIN_WITHIN_MS = 2000
TAIL_EXCLUDED_MS = 3000


def start_replay(
    spark: Any, bootstrap: str, topic: str, job: str, orders: str, payments: str, per_batch: int, ck: Path
) -> tuple[list[tuple[int, list[dict[str, Any]]]], Any]:
    """Start ``job`` over ``topic`` in micro-batches of ``per_batch`` records, ``available-now``.

    Returns the list the rows of each batch are appended to (batch id, rows) and the query. The
    batches are cut by offsets, not by time, so queries may run side by side without changing
    what any of them computes.
    """
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from spark_consumer.jobs import aggregate, join
    from spark_consumer.options import AggSpec, WindowSpec
    from spark_consumer.source import SourceOptions

    source = SourceOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        watermark_delay_ms=WATERMARK_DELAY_MS,
        max_offsets_per_trigger=per_batch,
    )
    if job == "aggregate":
        window = aggregate.AggregateOptions(WindowSpec("tumbling", size_ms=WINDOW_MS), [AggSpec("count")])
        output = aggregate.build(spark, source, window)
    else:
        schema = StructType([StructField("ts", LongType()), StructField("id", StringType())])
        options = join.JoinOptions(
            orders, payments, JOIN_WITHIN_MS, "inner", key_field="id", left_schema=schema
        )
        output = join.build(spark, source, options)
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    lock = threading.Lock()
    columns = ("key", "ts", "window_end", "count") if job == "aggregate" else ("key", "ts")

    def keep(frame: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in frame.select(*columns).collect()]
        with lock:
            batches.append((batch_id, rows))

    return batches, _start_query(spark, output, keep, job, topic, ck)


def _start_query(spark: Any, output: Any, keep: Any, job: str, topic: str, ck: Path) -> Any:
    """Start ``output``'s query into ``keep``. The join's operator (transformWithState) runs only on
    the RocksDB state store, whatever the session's (in-memory) store; a query keeps the session's
    settings of the moment it starts, so the session's is set back right after."""
    from spark_consumer.session import ROCKSDB_PROVIDER

    provider = "spark.sql.streaming.stateStore.providerClass"
    session_provider = spark.conf.get(provider)
    if job == "join":
        spark.conf.set(provider, ROCKSDB_PROVIDER)
    try:
        return (
            output.frame.writeStream.outputMode(output.output_mode)
            .foreachBatch(keep)
            .option("checkpointLocation", str(ck))
            .queryName(f"bench-{job}-{topic}")
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.set(provider, session_provider)


def batch_ends(query: Any, topic: str) -> dict[int, int]:
    """Each data batch's end offset (exclusive), from the query's progress reports."""
    ends: dict[int, int] = {}
    for progress in query.recentProgress:
        if progress.get("numInputRows"):
            end = orjson.loads(progress["sources"][0]["endOffset"])
            ends[int(progress["batchId"])] = int(end[topic]["0"])
    return ends


def summarise(
    job: str,
    batches: list[tuple[int, list[dict[str, Any]]]],
    ends: dict[int, int],
    arrived: list[int],
    dropped: int,
    last_ts: int,
    expected: int,
) -> dict[str, Any]:
    """Drops, results and final-result latency of one replay."""
    data_batches = sorted(ends)
    latencies = []
    results = 0
    counted = 0
    for batch_id, rows in batches:
        # The batch started once its input had arrived: that of the last data batch up to it (a
        # no-data batch runs right after the data batch before it).
        upto = [b for b in data_batches if b <= batch_id]
        ready = arrived[min(len(arrived), ends[upto[-1]]) - 1] if upto else arrived[0]
        for row in rows:
            if row["key"] in (None, "bench-end"):
                continue
            results += 1
            closes = int(row["window_end"]) if job == "aggregate" else int(row["ts"])
            counted += int(row["count"]) if job == "aggregate" else 1
            if closes <= last_ts - TAIL_EXCLUDED_MS:
                latencies.append(ready - closes)
    return {
        "rows_dropped": dropped,
        "results": results,
        # aggregate: input rows counted in some window; join: matched pairs (one per order)
        "rows_in_results": counted,
        "rows_expected": expected,
        "micro_batches_with_data": len(data_batches),
        "final_result_latency": analysis.latency(np.asarray(latencies, dtype=np.int64)),
    }
