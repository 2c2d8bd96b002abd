"""``timesync-spark JOB --bootstrap-servers … --topic … [options]`` (also ``python -m spark_consumer``).

Runs one job over the ordered topic until SIGTERM/SIGINT (or, with ``--trigger available-now``,
until everything available has been processed), then prints what it dropped as late.

Exit status: 0 after a clean stop; 2 on a usage error (one line on stderr, before Spark starts
when the mistake can be seen without it); 1 when the query fails.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from spark_consumer.options import AggSpec, UsageError, WindowSpec, check_field, key_value, parse_duration
from spark_consumer.security import MECHANISMS, PROTOCOLS, KafkaSecurity

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_consumer.jobs import JobOutput

PROG = "timesync-spark"
JOBS = ("join", "aggregate", "suppress")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _pair(text: str) -> tuple[str, str]:
    try:
        return key_value(text)  # never echoes a value: it may be a password
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    src = common.add_argument_group("source (the ordered topic)")
    src.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]")
    src.add_argument("--topic", required=True, help="the ordered topic the sidecar writes")
    src.add_argument(
        "--starting-offsets", default="earliest", help="earliest (default), latest, or Spark's JSON"
    )
    src.add_argument(
        "--watermark-delay",
        default="1s",
        metavar="DURATION",
        help="Spark's watermark delay (default 1s); the ordered input needs only a small one",
    )
    src.add_argument("--max-offsets-per-trigger", type=int, metavar="N")
    src.add_argument(
        "--kafka-option",
        action="append",
        type=_pair,
        default=[],
        metavar="KEY=VALUE",
        help="passed to the Kafka source and sink, e.g. kafka.security.protocol=SSL",
    )
    sec = common.add_argument_group(
        "security (passwords from $TIMESYNC_SPARK_SASL_PASSWORD and $TIMESYNC_SPARK_SSL_PASSWORD)"
    )
    sec.add_argument("--security-protocol", choices=PROTOCOLS, help="as the sidecar's security.protocol")
    sec.add_argument("--sasl-mechanism", choices=MECHANISMS, help="default PLAIN")
    sec.add_argument("--sasl-username", metavar="NAME")
    sec.add_argument("--ssl-cafile", metavar="PEM", help="CA certificates to trust (PEM)")
    sec.add_argument(
        "--no-ssl-check-hostname",
        dest="ssl_check_hostname",
        action="store_false",
        help="accept a broker certificate that does not name the host",
    )
    sec.add_argument(
        "--ssl-keystore",
        metavar="FILE",
        help="client certificate and key: .p12/.pfx (PKCS#12), .jks, or .pem (key and chain in one file)",
    )
    val = common.add_argument_group("values")
    val.add_argument(
        "--value-schema",
        metavar="DDL|FILE",
        help="DDL string, or a file: DDL, Spark schema JSON, JSON Schema",
    )
    val.add_argument(
        "--key-field", metavar="FIELD", help="field of the JSON value to key on (default: the Kafka key)"
    )
    out = common.add_argument_group("sink")
    out.add_argument("--sink", choices=("kafka", "console", "parquet"), default="kafka")
    out.add_argument("--output-topic", help="with the Kafka sink (created when missing)")
    out.add_argument("--path", help="output directory for --sink parquet")
    out.add_argument(
        "--checkpoint", required=True, metavar="DIR", help="checkpoint directory; a restart resumes from it"
    )
    out.add_argument("--trigger", default="1s", metavar="DURATION|available-now")
    spark = common.add_argument_group("spark")
    spark.add_argument("--master", help="Spark master (default local[*])")
    spark.add_argument(
        "--jars-dir",
        type=Path,
        help="directory with the Kafka connector jars (default: none if the connector is on Spark's "
        "classpath already, else the checkout's .cache/jars/spark)",
    )
    spark.add_argument(
        "--packages",
        nargs="?",
        const="auto",
        metavar="COORDS",
        help="fetch the connector with Ivy instead (default coordinates: the one matching pyspark)",
    )
    spark.add_argument("--shuffle-partitions", type=int, default=2)
    spark.add_argument("--conf", action="append", type=_pair, default=[], metavar="KEY=VALUE")

    windowed = _Parser(add_help=False)
    win = windowed.add_argument_group("window")
    win.add_argument("--size", metavar="DURATION", help="window size (tumbling, hopping)")
    win.add_argument("--slide", metavar="DURATION", help="hop between window starts (hopping)")
    win.add_argument(
        "--agg",
        action="append",
        default=[],
        metavar="SPEC",
        help="count | count:FIELD | sum:FIELD | min:FIELD | max:FIELD (repeatable; default count)",
    )

    parser = _Parser(
        prog=PROG, description="Join, aggregate or suppress timesync's ordered topic with Spark."
    )
    jobs = parser.add_subparsers(dest="job", required=True, metavar="JOB", parser_class=_Parser)
    join = jobs.add_parser("join", parents=[common], help="stream-stream join of two source topics")
    join.add_argument("--left", required=True, metavar="SOURCE_TOPIC", help="input topic of the left side")
    join.add_argument("--right", required=True, metavar="SOURCE_TOPIC", help="input topic of the right side")
    join.add_argument("--within", required=True, metavar="DURATION", help="max |right.ts - left.ts|")
    join.add_argument("--how", choices=("inner", "left", "outer"), default="inner")
    join.add_argument("--right-value-schema", metavar="DDL|FILE", help="when the right side differs")
    agg = jobs.add_parser("aggregate", parents=[common, windowed], help="windowed count/sum/min/max")
    agg.add_argument("--window", choices=("tumbling", "hopping", "session"), default="tumbling")
    agg.add_argument("--gap", metavar="DURATION", help="session gap (session windows)")
    agg.add_argument("--output-mode", choices=("append", "update"), default="append")
    sup = jobs.add_parser("suppress", parents=[common, windowed], help="per-key final window results")
    sup.add_argument("--window", choices=("tumbling", "hopping"), default="tumbling")
    sup.add_argument(
        "--grace", default="0ms", metavar="DURATION", help="how long a key's window stays open after its end"
    )
    sup.add_argument(
        "--ttl", required=True, metavar="DURATION", help="evict keys idle this long (event time)"
    )
    sup.add_argument(
        "--closed-retention",
        metavar="DURATION",
        help="how long an evicted key remembers the windows it closed, so a straggler cannot "
        "reopen one (event time; default: --ttl)",
    )
    return parser


def _window(args: argparse.Namespace) -> WindowSpec:
    if args.window == "session":
        if args.gap is None:
            raise UsageError("--gap: required for session windows")
        return WindowSpec("session", gap_ms=parse_duration(args.gap, "--gap"))
    if args.size is None:
        raise UsageError(f"--size: required for {args.window} windows")
    size = parse_duration(args.size, "--size")
    if args.window == "hopping":
        if args.slide is None:
            raise UsageError("--slide: required for hopping windows")
        return WindowSpec("hopping", size_ms=size, slide_ms=parse_duration(args.slide, "--slide"))
    return WindowSpec("tumbling", size_ms=size)


def _trigger(text: str) -> str | int:
    return "available-now" if text == "available-now" else parse_duration(text, "--trigger")


class Plan:
    """Everything parsed and checked that can be without Spark: the job and its options."""

    def __init__(self, args: argparse.Namespace) -> None:
        from spark_consumer.sinks import SinkOptions
        from spark_consumer.source import SourceOptions

        self.args = args
        self.job: str = args.job
        self.security = KafkaSecurity.from_args(
            args.security_protocol,
            args.sasl_mechanism,
            args.sasl_username,
            args.ssl_cafile,
            args.ssl_check_hostname,
            args.ssl_keystore,
        )
        # The security settings first: an explicit --kafka-option wins.
        kafka_options = {**self.security.kafka_options(), **dict(args.kafka_option)}
        self.source = SourceOptions(
            bootstrap_servers=args.bootstrap_servers,
            topic=args.topic,
            watermark_delay_ms=parse_duration(args.watermark_delay, "--watermark-delay", allow_zero=True),
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            kafka_options=kafka_options,
        )
        self.sink = SinkOptions(
            kind=args.sink,
            checkpoint=args.checkpoint,
            bootstrap_servers=args.bootstrap_servers,
            topic=args.output_topic,
            path=args.path,
            trigger=_trigger(args.trigger),
            query_name=f"timesync-{args.job}",
            kafka_options={k: v for k, v in kafka_options.items() if k.startswith("kafka.")},
        )
        if args.key_field is not None:
            check_field(args.key_field, "--key-field")
        if args.shuffle_partitions < 1:
            raise UsageError(f"--shuffle-partitions: {args.shuffle_partitions} must be at least 1")
        self.aggs: list[AggSpec] = [AggSpec.parse(a) for a in getattr(args, "agg", [])] or [AggSpec("count")]
        if self.job == "join":
            self.within_ms = parse_duration(args.within, "--within", allow_zero=True)
            if args.left == args.right:
                raise UsageError(f"--right: the right source topic must differ from the left ({args.left!r})")
        else:
            self.window = _window(args)
        if self.job == "suppress":
            from spark_consumer.jobs.suppress import SuppressOptions

            self.grace_ms = parse_duration(args.grace, "--grace", allow_zero=True)
            self.ttl_ms = parse_duration(args.ttl, "--ttl")
            self.closed_retention_ms = (
                None
                if args.closed_retention is None
                else parse_duration(args.closed_retention, "--closed-retention", allow_zero=True)
            )
            SuppressOptions(  # checks the bounds
                self.window,
                self.grace_ms,
                self.ttl_ms,
                self.aggs,
                closed_retention_ms=self.closed_retention_ms,
            )
        if args.sink == "parquet" and getattr(args, "output_mode", "append") != "append":
            raise UsageError("--output-mode: Spark's Parquet sink writes only append mode")
        needs_schema = args.key_field is not None or any(a.field for a in self.aggs)
        if needs_schema and not args.value_schema:
            raise UsageError(
                "--value-schema: required to read value fields (--key-field, --agg FUNCTION:FIELD)"
            )


def job_output(plan: Plan, spark: SparkSession) -> JobOutput:
    """Parse the schemas (Spark's DDL parser needs the session) and build the job's stream."""
    from spark_consumer.schema import check_numeric, field_type, load_schema

    args = plan.args
    schema = load_schema(args.value_schema) if args.value_schema else None
    if schema is not None and args.key_field:
        field_type(schema, args.key_field, "--key-field")
    for spec in plan.aggs:
        if spec.field and schema is not None:
            if spec.function == "count":
                field_type(schema, spec.field, "--agg")
            else:
                check_numeric(schema, spec.field, "--agg")
    if plan.job == "join":
        from spark_consumer.jobs import join

        right = (
            load_schema(args.right_value_schema, "--right-value-schema")
            if args.right_value_schema
            else schema
        )
        if right is not None and args.key_field:
            field_type(right, args.key_field, "--key-field")
        options = join.JoinOptions(
            args.left, args.right, plan.within_ms, args.how, args.key_field, schema, right
        )
        return join.build(spark, plan.source, options)
    if plan.job == "aggregate":
        from spark_consumer.jobs import aggregate

        agg_options = aggregate.AggregateOptions(
            plan.window, plan.aggs, args.key_field, schema, args.output_mode
        )
        return aggregate.build(spark, plan.source, agg_options)
    from spark_consumer.jobs import suppress

    sup_options = suppress.SuppressOptions(
        plan.window,
        plan.grace_ms,
        plan.ttl_ms,
        plan.aggs,
        args.key_field,
        schema,
        closed_retention_ms=plan.closed_retention_ms,
    )
    return suppress.build(spark, plan.source, sup_options)


def _ensure_output_topic(plan: Plan) -> None:
    """Create the Kafka output topic when missing; Spark's producer would block on it for 60 s."""
    if plan.sink.kind != "kafka" or plan.sink.topic is None:
        return
    from aiokafka.admin import AIOKafkaAdminClient

    from sidecar.kafka.admin import TopicSpec, ensure_topics

    async def create() -> None:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=plan.source.bootstrap_servers,
            request_timeout_ms=10_000,
            **plan.security.aiokafka_options(),
        )
        await admin.start()
        try:
            await ensure_topics(admin, [TopicSpec(str(plan.sink.topic))])
        finally:
            await admin.close()

    try:
        asyncio.run(create())
    except Exception as e:  # a secured cluster, say: leave it to Spark and the operator
        print(
            f"{PROG}: warning: could not check/create output topic {plan.sink.topic!r}: {e}", file=sys.stderr
        )


def run(plan: Plan) -> int:
    """Start the session and the query; wait for a stop signal or the end; report drops."""
    from pyspark.sql import SparkSession

    from spark_consumer import metrics, sinks
    from spark_consumer.session import SessionOptions, get_session

    args = plan.args
    owns_session = SparkSession.getActiveSession() is None
    session = get_session(
        SessionOptions(
            master=args.master,
            jars_dir=args.jars_dir,
            packages=args.packages,
            shuffle_partitions=args.shuffle_partitions,
            conf=dict(args.conf),
        )
    )
    output = job_output(plan, session)
    _ensure_output_topic(plan)
    metrics.track_drops(session)
    query = sinks.start(output, plan.sink)

    from py4j.protocol import Py4JError
    from pyspark.errors import StreamingQueryException

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers live there only
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        # A short timeout keeps the main thread returning to Python, where signals are handled.
        while query.isActive and not stop.is_set():
            query.awaitTermination(1)
        sinks.stop_between_batches(query)
        error = query.exception()
        dropped = metrics.drops(query)
    except StreamingQueryException as e:
        error, dropped = e, metrics.drops(query)
    except (Py4JError, ConnectionError):
        # A signal sent to the whole process group (a supervisor, `timeout`) also ended the
        # Spark driver JVM: the stop was asked for, but nothing more can be learnt from Spark.
        if not stop.is_set():
            raise
        print(f"{PROG}: {plan.job} stopped; the Spark driver exited too, drops unknown", file=sys.stderr)
        return 0
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    detail = f"watermark {dropped.watermark}"
    if plan.job == "suppress":
        detail += f", key stream time {dropped.key_stream_time}"
    print(f"{PROG}: {plan.job} stopped; rows dropped as late: {dropped.total} ({detail})", file=sys.stderr)
    if owns_session:
        # Stopping drains Spark's listener bus while this process can still answer the Python
        # listener; exiting with the session up makes Spark log a py4j error for it instead.
        session.stop()
    if error is not None:
        print(f"{PROG}: error: {_first_line(error)}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        plan = Plan(args)
        return run(plan)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # one line, not a traceback (Spark's errors are long)
        from spark_consumer.session import SessionError

        print(f"{PROG}: error: {_first_line(e)}", file=sys.stderr)
        return 2 if isinstance(e, SessionError) else 1


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
