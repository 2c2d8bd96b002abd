"""``timesync-spark``: jobs from the registry, one-line usage errors, a whole run through the Kafka sink."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_consumer import cli
from spark_consumer.cli import main
from spark_consumer.common_options import JobInput
from spark_consumer.jobs import JobOutput, registry
from spark_consumer.jobs.command import Job
from spark_consumer.options import parse_duration
from testkit.kafka_io import read_topics
from tests.spark import ordered_topic
from tests.spark.ordered_topic import Stamper

COMMON = ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--checkpoint", "/tmp/unused"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: JOB"),
        (["aggregate", "--topic", "t"], "the following arguments are required: --bootstrap-servers"),
        (["aggregate", *COMMON, "--output-topic", "o", "--size", "5x"], "--size: '5x' is not a duration"),
        (["aggregate", *COMMON, "--output-topic", "o"], "--size: required for tumbling windows"),
        (["aggregate", *COMMON, "--output-topic", "o", "--size", "5s", "--agg", "avg:n"], "--agg: 'avg:n'"),
        (["aggregate", *COMMON, "--size", "5s"], "--output-topic: required with the Kafka sink"),
        (
            ["aggregate", *COMMON, "--sink", "console", "--size", "5s", "--key-field", "id"],
            "--value-schema: required",
        ),
        (
            ["suppress", *COMMON, "--sink", "console", "--size", "5s", "--ttl", "5s"],
            "--ttl: 5000 ms must exceed",
        ),
        (["join", *COMMON, "--sink", "console", "--left", "a", "--right", "a", "--within", "1s"], "--right:"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("timesync-spark: error: ")
    assert message in err


def test_a_job_in_the_registry_is_a_subcommand_with_the_common_options(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new job is one Job in the registry: it gets the shared options, its own arguments are
    planned before Spark starts, and its usage errors read like every other job's."""

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--every", required=True, metavar="DURATION")

    def plan(args: argparse.Namespace) -> int:
        return parse_duration(args.every, "--every")

    def build(spark: SparkSession, given: JobInput, every_ms: int) -> JobOutput:
        raise AssertionError("built only once Spark runs")

    tick = Job("tick", "a job that only a test knows", add_arguments, plan, build)
    monkeypatch.setattr(registry, "JOBS", (*registry.JOBS, tick))

    plan_ = cli.Plan(cli.build_parser().parse_args(["tick", *COMMON, "--sink", "console", "--every", "2s"]))
    assert plan_.command is tick
    assert plan_.options == 2000
    assert plan_.sink.query_name == "timesync-tick"
    assert plan_.source.topic == "t"

    assert main(["tick", *COMMON, "--sink", "console", "--every", "2x"]) == 2
    assert capsys.readouterr().err.startswith("timesync-spark: error: --every: '2x' is not a duration;")


def test_missing_connector_jars_say_to_run_make_jars(tmp_path: Path) -> None:
    """In a fresh process (the jars are checked before Spark starts): one line, exit 2."""
    argv = ["aggregate", *COMMON, "--sink", "console", "--size", "5s", "--jars-dir", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "spark_consumer", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "run `make jars`" in done.stderr


@pytest.mark.spark
@pytest.mark.broker
def test_aggregate_to_kafka_stamps_the_output_time_and_reports_drops(
    spark: SparkSession,
    bootstrap: str,
    topic_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = ordered_topic.create(bootstrap, topic_name("ordered"))
    output = topic_name("out")
    stamp = Stamper()
    # Two records per micro-batch: [1, 6], [7, 8], [2, heartbeat]. Spark drops a row when its
    # time is at or below the watermark of the *previous* batch: 5 (= 6 - 1) for the third
    # batch, so 2 is dropped there. The heartbeat then closes [5, 10).
    records = [stamp.record(ts, {"n": ts}, "k") for ts in (1, 6, 7, 8, 2)] + [stamp.heartbeat(20)]
    ordered_topic.produce(bootstrap, topic, records)

    status = main(
        [
            "aggregate", "--bootstrap-servers", bootstrap, "--topic", topic, "--output-topic", output,
            "--checkpoint", str(tmp_path / "checkpoint"), "--trigger", "available-now",
            "--max-offsets-per-trigger", "2", "--watermark-delay", "1ms",
            "--value-schema", "n BIGINT", "--size", "5ms", "--agg", "count", "--agg", "max:n",
        ]
    )  # fmt: skip

    assert status == 0
    assert "rows dropped as late: 1 " in capsys.readouterr().err
    written = ordered_topic.asyncio.run(read_topics(bootstrap, [output], expected=2, timeout_s=30))
    results = [(dict(r.headers)["timesync.timestamp"], json.loads(r.value)) for r in written]
    assert results == [
        (b"1", {"key": "k", "window_start": 0, "window_end": 5, "count": 1, "max_n": 1, "ts": 1}),
        (b"8", {"key": "k", "window_start": 5, "window_end": 10, "count": 3, "max_n": 8, "ts": 8}),
    ]
