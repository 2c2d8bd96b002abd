"""The Spark side of ``make demo``: a live windowed count on the ordered topic, then replays of
both arrival orders, the join and the per-key final results (:class:`SparkPart`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.demo_settings import CLICKS, IMPRESSIONS, ORDERED, RAW_ARRIVALS, SPARK_DELAY_MS

#: Where Spark's "Current batch is falling behind" warning comes from (4.2, and before it moved).
TRIGGER_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
)


class SparkPart:
    """The Spark side of the demo, run in worker threads (pyspark calls block).

    A windowed count per ad runs live on the ordered topic while data flows. What Spark drops as
    late depends on when records arrive, and on a loaded 2-core machine a live query's
    micro-batches stretch to several seconds, so the raw-versus-ordered comparison replays both
    sides afterwards in micro-batches of the same size — two seconds of arrivals — at the same
    watermark delay (``available-now``): the raw inputs in the order a plain consumer received
    them, and the ordered topic. The join and the per-key suppression then run on the ordered
    topic as it stands: it is ordered, and its heartbeats close the last windows, so their
    results are final.
    """

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.bootstrap = bootstrap
        self.workdir = workdir
        #: Avro values' decoding plan (``DEMO_FORMAT=avro``); ``None``: JSON values.
        self.values: Any = None
        self.live: dict[str, Any] = {}
        self.spark: Any = None
        self.per_batch = 1  # records per replayed micro-batch, set once the workload is known

    def start_session(self) -> None:
        from spark_consumer.metrics import track_drops
        from spark_consumer.session import SessionOptions, get_session

        self.spark = get_session(SessionOptions(master="local[2]", app_name="timesync-demo"))
        track_drops(self.spark)
        self._quiet_trigger_warnings()

    def _quiet_trigger_warnings(self) -> None:
        """The demo's live query runs a 1 s trigger on 2 shared cores, so Spark's "falling behind"
        warning would interleave with the demo's own lines; it is held to errors here, for the
        demo only (users keep it: for them it is worth reading)."""
        jvm = self.spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.ERROR
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        for name in TRIGGER_LOGGERS:
            configurator.setLevel(name, level)

    def _jobs(self) -> dict[str, Any]:
        from spark_consumer.jobs import aggregate, join, suppress
        from spark_consumer.options import AggSpec, WindowSpec
        from spark_consumer.schema import load_schema
        from spark_consumer.source import SourceOptions
        from spark_consumer.value_decoding import value_struct

        if self.values is None:
            schema = load_schema("imp STRING, ad STRING, ts BIGINT")
        else:
            schema = value_struct(self.spark, self.values)
        window = WindowSpec("tumbling", size_ms=5_000)

        def source(topic: str, per_batch: int | None = None) -> SourceOptions:
            return SourceOptions(
                self.bootstrap,
                topic,
                watermark_delay_ms=SPARK_DELAY_MS,
                max_offsets_per_trigger=per_batch,
                values=self.values,
            )

        per_ad = aggregate.AggregateOptions(window, key_field="ad", value_schema=schema)
        pairs = join.JoinOptions(
            IMPRESSIONS, CLICKS, within_ms=10_000, key_field="imp", left_schema=schema, right_schema=schema
        )
        finals = suppress.SuppressOptions(
            window,
            grace_ms=1_000,
            ttl_ms=60_000,
            aggs=(AggSpec("count"),),
            key_field="ad",
            value_schema=schema,
        )
        return {
            "counts-live": lambda: aggregate.build(self.spark, source(ORDERED), per_ad),
            "counts-ordered": lambda: aggregate.build(self.spark, source(ORDERED, self.per_batch), per_ad),
            "counts-raw": lambda: aggregate.build(self.spark, source(RAW_ARRIVALS, self.per_batch), per_ad),
            "clicks-joined": lambda: join.build(self.spark, source(ORDERED), pairs),
            "final-per-ad": lambda: suppress.build(self.spark, source(ORDERED), finals),
        }

    def _start(self, name: str, trigger: str | int) -> Any:
        from spark_consumer.sinks import SinkOptions, start

        sink = SinkOptions(
            "kafka",
            str(self.workdir / name),
            self.bootstrap,
            f"demo.{name}",
            trigger=trigger,
            query_name=name,
        )
        return start(self._jobs()[name](), sink)

    def start_live(self) -> None:
        self.live["counts-live"] = self._start("counts-live", 1_000)

    def stop_live(self) -> dict[str, int]:
        """Stop the live queries (each after its running micro-batch); rows each dropped as late."""
        from spark_consumer.sinks import stop_between_batches

        # Stopping streaming queries makes Spark log cancelled tasks; failures are checked below.
        self.spark.sparkContext.setLogLevel("OFF")
        dropped = {}
        for name, query in self.live.items():
            stop_between_batches(query)
            dropped[name] = self._dropped(name, query)
        return dropped

    def run_to_end(self, *names: str) -> dict[str, int]:
        """Run queries side by side over what their topics hold now; the rows each dropped as late.

        Their micro-batches are cut by offsets, not by time, so running them together changes
        nothing they compute.
        """
        queries = {name: self._start(name, "available-now") for name in names}
        for query in queries.values():
            query.awaitTermination()
        return {name: self._dropped(name, query) for name, query in queries.items()}

    @staticmethod
    def _dropped(name: str, query: Any) -> int:
        from spark_consumer.metrics import drops

        error = query.exception()
        if error is not None:
            raise RuntimeError(f"Spark query {name} failed: {str(error).splitlines()[0]}")
        return drops(query).total

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()
