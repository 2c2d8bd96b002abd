"""``timesync-spark JOB --bootstrap-servers … --topic … [options]`` (also ``python -m spark_consumer``).

Runs one job over the ordered topic until SIGTERM/SIGINT (or, with ``--trigger available-now``,
until everything available has been processed), then prints what it dropped as late and how
many values did not decode.

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
from types import FrameType
from typing import TYPE_CHECKING, Any

from spark_consumer.common_options import (
    CommonOptions,
    Parser,
    common_parser,
    job_input,
    require_value_schema,
)
from spark_consumer.jobs import registry
from spark_consumer.jobs.command import Job
from spark_consumer.options import PROG, UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_consumer.jobs import JobOutput


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per job of the registry: the common options, then the job's own."""
    common = common_parser()
    parser = Parser(prog=PROG, description="Join, aggregate or suppress timesync's ordered topic with Spark.")
    subcommands = parser.add_subparsers(dest="job", required=True, metavar="JOB", parser_class=Parser)
    for each in registry.JOBS:
        each.add_arguments(subcommands.add_parser(each.name, parents=[common], help=each.help))
    return parser


class Plan:
    """Everything parsed and checked that can be without Spark: the job and its options."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.job: str = args.job
        self.command: Job[Any] = registry.job(args.job)
        common = CommonOptions.from_args(args)
        self.security = common.security
        self.source = common.source
        self.sink = common.sink
        self.session = common.session
        #: What the job's ``plan`` made of its own arguments; its ``build`` starts from it.
        self.options: Any = self.command.plan(args)
        require_value_schema(args, args.key_field is not None)


def job_output(plan: Plan, spark: SparkSession) -> JobOutput:
    """Parse the schemas (Spark's DDL parser needs the session) and build the job's stream."""
    return plan.command.build(spark, job_input(plan.args, plan.source), plan.options)


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
    from spark_consumer.session import get_session

    owns_session = SparkSession.getActiveSession() is None
    session = get_session(plan.session)
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
    if plan.command.counts_late_per_key:
        detail += f", key stream time {dropped.key_stream_time}"
    print(
        f"{PROG}: {plan.job} stopped; rows dropped as late: {dropped.total} ({detail}); "
        f"values that did not decode: {dropped.undecodable}",
        file=sys.stderr,
    )
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
