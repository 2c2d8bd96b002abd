"""The JVM operator against the rule it runs: the same finals, late and forgotten counts, batch
for batch, record for record.

Hypothesis draws per-key histories — records out of order, replays of records already sent
(the same source identity), heartbeats that evict keys by their TTL, stragglers after eviction,
a heartbeat exactly at a key's TTL expiry, restarts from the checkpoint — and feeds them to one
query. Spark decides the micro-batches; the test reads back which records and which watermark
each batch had (from the query's progress reports) and plays exactly those batches through
:meth:`SuppressRule.run_batch`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import DoubleType, StructField, StructType

from spark_consumer.jobs import suppress
from spark_consumer.jobs.suppress import OBSERVATION, SuppressOptions
from spark_consumer.options import AggSpec, WindowSpec
from spark_consumer.suppress_rule import Final, KeyState, Record, SuppressRule
from tests.spark.ordered_topic import OrderedRecord, Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker]

T0 = 1_000
KEYS = ("A", "B", None)  # None: a record without a key
AGGS = (AggSpec("count"), AggSpec("max", "reading"))
READING = StructType([StructField("reading", DoubleType())])

Step = tuple[Any, ...]
STEPS = st.one_of(
    st.tuples(
        st.just("records"),
        st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 120)), min_size=1, max_size=5),
    ),
    st.tuples(st.just("replay"), st.integers(1, 4)),  # the last n records again, same identities
    st.tuples(st.just("heartbeat"), st.integers(1, 40)),  # watermark to max ts + n
    st.tuples(st.just("expiry"), st.sampled_from(KEYS)),  # watermark exactly at a key's last ts + TTL
    st.just(("restart",)),
)
OPTIONS = st.builds(
    SuppressOptions,
    window=st.sampled_from(
        [WindowSpec("tumbling", size_ms=10), WindowSpec("hopping", size_ms=10, slide_ms=5)]
    ),
    grace_ms=st.integers(0, 3),
    ttl_ms=st.integers(14, 30),
    aggs=st.just(AGGS),
    value_schema=st.just(READING),
    closed_retention_ms=st.integers(0, 20),
)

# Every kind of step, in an order that makes each one matter: a replay inside open windows, an
# eviction whose timer equals the watermark, a restart, a straggler for the evicted window, and a
# key brought back then forgotten.
KNOWN = [
    ("records", [("A", 5), ("B", 3), ("A", 12), ("B", 1)]),
    ("replay", 3),
    ("expiry", "A"),
    ("restart",),
    ("records", [("A", 7), ("C", 40), ("B", 2), (None, 41)]),
    ("heartbeat", 35),
    ("records", [("A", 100), ("C", 41)]),
    ("heartbeat", 40),
]


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(
    options=SuppressOptions(WindowSpec("tumbling", size_ms=10), 0, 20, AGGS, None, READING, 10), steps=KNOWN
)
@given(options=OPTIONS, steps=st.lists(STEPS, min_size=3, max_size=7))
def test_the_operator_emits_what_the_rule_emits(
    spark: SparkSession, stream: Any, options: SuppressOptions, steps: list[Step]
) -> None:
    s = stream(lambda src: suppress.build(spark, src, options), watermark_delay_ms=0)
    stamp = Stamper()
    # (key, record, source offset; -1 for a heartbeat), by Kafka offset
    sent: list[tuple[str | None, OrderedRecord, int]] = []
    last_ts: dict[str | None, int] = {}
    for step in steps:
        if step[0] == "restart":
            s.restart()
            continue
        batch: list[tuple[str | None, OrderedRecord, int]] = []
        if step[0] == "records":
            for key, dt in step[1]:
                offset = stamp.offsets.get(("in", 0), 0)
                batch.append((key, stamp.record(T0 + dt, {"reading": dt % 7}, key), offset))
                last_ts[key] = max(last_ts.get(key, 0), T0 + dt)
        elif step[0] == "replay":
            data = [r for r in sent if r[2] >= 0][-step[1] :]
            batch = [(k, stamp.record(r.timestamp, r.value, k, offset=o), o) for k, r, o in data]
        else:
            top = max([T0, *(r.timestamp for _, r, _ in sent)])
            at = top + step[1] if step[0] == "heartbeat" else last_ts.get(step[1], T0) + options.ttl_ms
            batch = [(None, stamp.heartbeat(at), -1)]
        sent += batch
        s.feed(*(r for _, r, _ in batch))

    played = play(options, sent, s.progress(), s.topic)
    got = dict(s.batches)
    for batch_id, (finals, late, forgotten, counted) in played.items():
        assert Counter(final(r) for r in got.get(batch_id, [])) == Counter(finals), f"batch {batch_id}"
        assert counted == (late, forgotten), f"batch {batch_id}: (late, forgotten)"
    if steps == KNOWN:  # the known history reaches every rule: say so, or the comparison proves less
        finals = [f for finals, *_ in played.values() for f in finals]
        assert {f.closed_by for f in finals} == {"stream-time", "ttl"}
        assert sum(p[1] for p in played.values()) >= 1, "a straggler after eviction is late"
        assert sum(p[2] for p in played.values()) >= 1, "a key is forgotten"


def play(
    options: SuppressOptions,
    sent: Sequence[tuple[str | None, OrderedRecord, int]],
    progress: Sequence[Any],
    topic: str,
) -> dict[int, tuple[tuple[Final, ...], int, int, tuple[int, int]]]:
    """Each micro-batch Spark ran, played through the rule: batch id → (rule's finals, rule's
    late, rule's forgotten, the operator's (late, forgotten) from the observed metrics)."""
    rule = SuppressRule(options.window, options.grace_ms, options.ttl_ms, options.retention_ms, AGGS)
    states: dict[str | None, KeyState] = {}
    out = {}
    by_batch = {int(p.batchId): p for p in progress}  # a batch run again after a restart: once
    for batch_id in sorted(by_batch):
        p = by_batch[batch_id]
        (source,) = p.sources
        start, end = _offset(source.startOffset, topic), _offset(source.endOffset, topic)
        batch = [
            (key, Record(("in", 0, o), r.timestamp, (None, float(json.loads(r.value)["reading"]))))
            for key, r, o in sent[start:end]
            if o >= 0
        ]
        result = rule.run_batch(states, batch, _ms(p.eventTime.get("watermark")))
        metrics = (p.observedMetrics or {}).get(OBSERVATION)
        values = metrics.asDict() if metrics is not None else {}
        counted = (int(values.get("late_rows") or 0), int(values.get("forgotten_keys") or 0))
        out[batch_id] = (result.finals, result.late, result.forgotten, counted)
    return out


def final(row: Row) -> Final:
    return Final(
        row.key, row.window_start, row.window_end, (row["count"], row["max_reading"]), row.ts, row.closed_by
    )


def _offset(text: str | None, topic: str) -> int:
    offsets = json.loads(text) if text else None  # the first batch starts at "null"
    return int(offsets[topic]["0"]) if offsets else 0


def _ms(iso: str | None) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000) if iso else 0
