"""One local SparkSession for the whole test session, and a driver for streaming queries.

Starting Spark costs 8–16 s on a small machine, so every Spark test of a process shares one session
(``local[2]``, two shuffle partitions). Queries are driven deterministically: the test writes
records to the ordered topic, then :meth:`Stream.feed` calls ``processAllAvailable()``, so each
feed is one micro-batch (plus the no-data batch Spark runs when the watermark moved).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_consumer.jobs import JobOutput
from spark_consumer.metrics import Drops, sum_drops
from spark_consumer.session import SessionOptions, get_session
from spark_consumer.source import SourceOptions
from tests.spark import ordered_topic
from tests.spark.ordered_topic import OrderedRecord


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # py4j logs every callback-server connection at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = get_session(SessionOptions(master="local[2]", shuffle_partitions=2, log_level="ERROR"))
    yield session
    session.stop()


class Stream:
    """A running query whose micro-batches the test collects, batch by batch."""

    def __init__(
        self,
        launch: Callable[[], StreamingQuery],
        batches: list[tuple[int, list[Row]]],
        bootstrap: str,
        topic: str,
    ):
        self._launch = launch
        self.query = launch()
        self.batches = batches
        self.bootstrap = bootstrap
        self.topic = topic
        #: Progress reports of the queries stopped by :meth:`restart`.
        self._earlier_progress: list[Any] = []

    def feed(self, *records: OrderedRecord) -> list[Row]:
        """Write ``records``, process everything available; return the rows this produced."""
        before = len(self.rows())
        if records:
            ordered_topic.produce(self.bootstrap, self.topic, records)
        self.query.processAllAvailable()
        return self.rows()[before:]

    def rows(self) -> list[Row]:
        return [row for _, rows in sorted(self.batches, key=lambda b: b[0]) for row in rows]

    def drops(self) -> Drops:
        return sum_drops(self.progress())

    def progress(self) -> list[Any]:
        """Every progress report so far, the stopped queries' included, in batch order."""
        return [*self._earlier_progress, *self.query.recentProgress]

    def stop(self) -> None:
        self.query.stop()

    def restart(self) -> None:
        """Stop the query and start it again from its checkpoint (a new driver, the same state)."""
        self.query.stop()
        self._earlier_progress += self.query.recentProgress
        self.query = self._launch()


@pytest.fixture
def stream(
    spark: SparkSession, bootstrap: str, topic_name: Callable[[str], str], tmp_path: Path
) -> Iterator[Any]:
    """``stream(build, **source)`` → a started :class:`Stream` over a fresh ordered topic.

    ``build(source_options)`` returns a :class:`JobOutput`. Queries still running at the end of
    the test are stopped.
    """
    started: list[Stream] = []

    def start(build: Callable[[SourceOptions], JobOutput], **source: Any) -> Stream:
        topic = ordered_topic.create(bootstrap, topic_name(f"ordered{len(started)}"))
        options = SourceOptions(bootstrap_servers=bootstrap, topic=topic, **source)
        output = build(options)
        batches: list[tuple[int, list[Row]]] = []
        lock = threading.Lock()

        def collect(batch: DataFrame, batch_id: int) -> None:
            rows = batch.collect()
            with lock:
                batches.append((batch_id, rows))

        checkpoint = str(tmp_path / f"checkpoint{len(started)}")

        def launch() -> StreamingQuery:
            return (
                output.frame.writeStream.outputMode(output.output_mode)
                .foreachBatch(collect)
                .option("checkpointLocation", checkpoint)
                .start()
            )

        s = Stream(launch, batches, bootstrap, topic)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.query.isActive:
            s.query.stop()
