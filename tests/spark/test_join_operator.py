"""The JVM join operator and Spark's own stream-stream join against the rule: the same rows and
late counts, batch for batch.

Hypothesis draws histories — records of both sides out of order, late ones, replays of records
already sent (the same source identity), NULL keys, heartbeats, restarts from the checkpoint —
and feeds each to one query that runs both joins side by side over the same records:
``timesync-spark join`` (the operator) and the plan it replaced (Spark's ``join`` of two
deduplicated sides, :func:`spark_join`), their rows told apart by ``engine``. Both therefore see
the same micro-batches and watermarks, which Spark decides; the test reads them back from the
query's progress reports and plays exactly those batches through :meth:`JoinRule.run_batch`.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from spark_consumer.jobs import JobOutput, join, join_checkpoint, join_operator
from spark_consumer.jobs.join import JoinOptions
from spark_consumer.join_rule import LEFT, RIGHT, Joined, JoinRule, KeyState, Record, Side
from spark_consumer.options import UsageError
from spark_consumer.source import (
    EVENT_TIME,
    TS,
    SourceOptions,
    above_watermark,
    deduplicate,
    ordered_stream,
)
from spark_consumer.values import DATA, key_column, with_data
from tests.spark.ordered_topic import OrderedRecord, Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker]

T0 = 1_000
TOPICS: dict[Side, str] = {LEFT: "orders", RIGHT: "payments"}
SCHEMA = StructType([StructField("n", LongType())])
KEYS = ("A", "B", None)  # None: a record without a key
SPARK_HOW = {"inner": "inner", "left": "left_outer", "outer": "full_outer"}


def spark_join(records: DataFrame, options: JoinOptions) -> DataFrame:
    """Spark's own stream-stream join of the ordered topic's ``records``, as ``timesync-spark
    join`` ran it before the operator: each side filtered from the stream and deduplicated, then
    ``l.key = r.key AND r.time BETWEEN l.time − within AND l.time + within``."""
    sides = []
    for name, topic in (("l", options.left_topic), ("r", options.right_topic)):
        mine = deduplicate(records.filter(above_watermark(F.col("source_topic") == F.lit(topic))))
        mine = with_data(mine, options.left_schema)
        sides.append(
            mine.select(
                key_column(options.key_field).alias(f"{name}_key"),
                F.col(EVENT_TIME).alias(f"{name}_time"),
                F.col(TS).alias(f"{name}_ts"),
                F.col(DATA).alias(name),
            )
        )
    within = F.expr(f"INTERVAL {options.within_ms} MILLISECONDS")
    condition = (
        (F.col("l_key") == F.col("r_key"))
        & (F.col("r_time") >= F.col("l_time") - within)
        & (F.col("r_time") <= F.col("l_time") + within)
    )
    return (
        sides[0]
        .join(sides[1], condition, SPARK_HOW[options.how])
        .select(
            F.coalesce("l_key", "r_key").alias("key"),
            F.greatest("l_ts", "r_ts").alias(TS),
            F.col("l_ts").alias("left_ts"),
            F.col("r_ts").alias("right_ts"),
            F.col("l").alias("left"),
            F.col("r").alias("right"),
        )
    )


Step = tuple[Any, ...]
STEPS = st.one_of(
    st.tuples(
        st.just("records"),
        st.lists(
            st.tuples(st.sampled_from(KEYS), st.sampled_from([LEFT, RIGHT]), st.integers(0, 60)),
            min_size=1,
            max_size=5,
        ),
    ),
    st.tuples(st.just("replay"), st.integers(1, 4)),  # the last n records again, same identities
    st.tuples(st.just("heartbeat"), st.integers(1, 30)),  # watermark to max ts + n
    st.just(("restart",)),
)
OPTIONS = st.builds(
    JoinOptions,
    left_topic=st.just(TOPICS[LEFT]),
    right_topic=st.just(TOPICS[RIGHT]),
    within_ms=st.integers(0, 12),
    how=st.sampled_from(["inner", "left", "outer"]),
    left_schema=st.just(SCHEMA),
)

# Every kind of step, in an order that makes each one matter: pairs in one batch and across
# batches (one at the bound exactly), a late record, replays while held and after eviction, a
# NULL key, a restart while records are held, unmatched records on both sides, a heartbeat that
# reaches a record's time + bound exactly and then passes it.
KNOWN = [
    ("records", [("A", LEFT, 10), ("A", RIGHT, 13), ("B", RIGHT, 20), (None, LEFT, 21), ("B", LEFT, 25)]),
    ("records", [("A", RIGHT, 15), ("B", LEFT, 40), ("B", RIGHT, 2)]),
    ("replay", 3),
    ("restart",),
    ("records", [("A", LEFT, 45), ("C", RIGHT, 45)]),
    ("heartbeat", 4),
    ("heartbeat", 1),
    ("replay", 5),
    ("heartbeat", 20),
]


OURS = ("transformWithStateExec",)
ENGINES = {"operator": OURS, "spark": ("symmetricHashJoin", "dedupeWithinWatermark")}


def both(source: SourceOptions, options: JoinOptions) -> JobOutput:
    """The operator's rows and Spark's join's rows, in one query over one read of the topic
    (``engine`` says whose rows)."""
    spark = SparkSession.getActiveSession()
    assert spark is not None
    records = ordered_stream(spark, source, dedup=False)
    inputs = join.operator_input(records, options)
    ours = join.join(inputs, options.within_ms, options.how).withColumn("engine", F.lit("operator"))
    theirs = spark_join(records, options).withColumn("engine", F.lit("spark"))
    return JobOutput(ours.unionByName(theirs), "append")


@settings(
    max_examples=1,  # with the known history: two Spark runs of a minute each in the suite
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(options=JoinOptions(TOPICS[LEFT], TOPICS[RIGHT], 5, "outer", left_schema=SCHEMA), steps=KNOWN)
@given(options=OPTIONS, steps=st.lists(STEPS, min_size=3, max_size=5))
def test_the_operator_and_sparks_own_join_emit_what_the_rule_emits(
    spark: SparkSession, stream: Any, tmp_path: Path, options: JoinOptions, steps: list[Step]
) -> None:
    s = stream(lambda src: both(src, options), watermark_delay_ms=1)
    sent = feed(steps, s)

    played = play(JoinRule(options.within_ms, options.how), sent, s.progress(), s.topic)
    got = dict(s.batches)
    for batch_id, (expected, late, counted) in played.items():
        for engine, operators in ENGINES.items():
            rows = [joined(r) for r in got.get(batch_id, []) if r.engine == engine]
            assert Counter(rows) == Counter(expected), f"{engine}, batch {batch_id}"
            dropped = sum(n for name, n in counted.items() if name in operators)
            assert dropped == late, f"{engine}, batch {batch_id}: rows dropped as late"
    if steps == KNOWN:  # the known history reaches every rule: say so, or the comparison proves less
        out = [j for expected, *_ in played.values() for j in expected]
        kinds = {(j.left_ts is None, j.right_ts is None) for j in out}
        assert kinds == {(False, False), (True, False), (False, True)}, "pairs, unmatched on each side"
        assert sum(p[1] for p in played.values()) >= 2, "a late record and a late replay"
        assert any(j.key is None for j in out), "a NULL key comes out unmatched"
        held = [op.numRowsTotal for p in s.progress() for op in p.stateOperators if op.operatorName in OURS]
        assert max(held) > 0, "the state size is reported"
        assert held[-1] == 0, "and everything is evicted once the watermark has passed it"
        # This query's checkpoint holds Spark's join too: the operator's job refuses it.
        (checkpoint,) = [
            c for c in tmp_path.glob("checkpoint*") if s.topic in (c / "offsets" / "0").read_text()
        ]
        with pytest.raises(
            UsageError, match=r"another join plan \((?=.*symmetricHashJoin)(?=.*dedupeWithin)"
        ):
            join_checkpoint.check_plan(str(checkpoint), join_operator.state_variable(spark.range(1)))


def feed(steps: Sequence[Step], s: Any) -> list[tuple[str | None, Side, OrderedRecord, int]]:
    """Write ``steps`` to the stream ``s``; (key, side, record, source offset; -1 for a
    heartbeat), by Kafka offset."""
    stamp = Stamper()
    sent: list[tuple[str | None, Side, OrderedRecord, int]] = []
    for step in steps:
        if step[0] == "restart":
            s.restart()
            continue
        batch: list[tuple[str | None, Side, OrderedRecord, int]] = []
        if step[0] == "records":
            for key, side, dt in step[1]:
                offset = stamp.offsets.get((TOPICS[side], 0), 0)
                record = stamp.record(T0 + dt, {"n": len(sent) + len(batch)}, key, topic=TOPICS[side])
                batch.append((key, side, record, offset))
        elif step[0] == "replay":
            data = [r for r in sent if r[3] >= 0][-step[1] :]
            batch = [
                (k, side, stamp.record(r.timestamp, r.value, k, topic=TOPICS[side], offset=o), o)
                for k, side, r, o in data
            ]
        else:
            top = max([T0, *(r.timestamp for _, _, r, _ in sent)])
            batch = [(None, LEFT, stamp.heartbeat(top + step[1]), -1)]
        sent += batch
        asyncio.run(produce_at_once(s.bootstrap, s.topic, [r for _, _, r, _ in batch]))
        s.feed()
    return sent


async def produce_at_once(bootstrap: str, topic: str, records: Sequence[OrderedRecord]) -> None:
    """Write ``records`` to partition 0 as one record batch: they become readable together, so
    the query's two scans of the topic (one per join) cannot cut a batch between them."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1000)
    await producer.start()
    try:
        batch = producer.create_batch()
        for r in records:
            assert batch.append(key=r.key, value=r.value, timestamp=r.timestamp, headers=list(r.headers))
        await (await producer.send_batch(batch, topic, partition=0))
    finally:
        await producer.stop()


def play(
    rule: JoinRule,
    sent: Sequence[tuple[str | None, Side, OrderedRecord, int]],
    progress: Sequence[Any],
    topic: str,
) -> dict[int, tuple[tuple[Joined, ...], int, dict[str, int]]]:
    """Each micro-batch Spark ran, played through the rule: batch id → (the rule's rows, the
    rule's late count, the rows each stateful operator of the query dropped as late)."""
    states: dict[str | None, KeyState] = {}
    out = {}
    by_batch = {int(p.batchId): p for p in progress}  # a batch run again after a restart: once
    for batch_id in sorted(by_batch):
        p = by_batch[batch_id]
        cuts = {
            (_offset(source.startOffset, topic), _offset(source.endOffset, topic)) for source in p.sources
        }
        assert len(cuts) == 1, f"batch {batch_id}: the two scans read different records: {p.sources}"
        ((start, end),) = cuts
        batch = [
            (key, Record(side, (0, o), r.timestamp, json.loads(r.value)["n"]))
            for key, side, r, o in sent[start:end]
            if o >= 0
        ]
        previous = by_batch.get(batch_id - 1)
        late_watermark = _ms(previous.eventTime.get("watermark")) if previous is not None else 0
        result = rule.run_batch(states, batch, late_watermark, _ms(p.eventTime.get("watermark")))
        counted: Counter[str] = Counter()
        for op in p.stateOperators:
            counted[op.operatorName] += int(op.numRowsDroppedByWatermark or 0)
        out[batch_id] = (result.joined, result.late, dict(counted))
    return out


def joined(row: Row) -> Joined:
    value = {side: row[side].n if row[side] is not None else None for side in (LEFT, RIGHT)}
    return Joined(row.key, row.ts, row.left_ts, row.right_ts, value[LEFT], value[RIGHT])


def _offset(text: str | None, topic: str) -> int:
    offsets = json.loads(text) if text else None  # the first batch starts at "null"
    return int(offsets[topic]["0"]) if offsets else 0


def _ms(iso: str | None) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000) if iso else 0
