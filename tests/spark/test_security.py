"""``timesync-spark`` reads and writes through the SASL/SCRAM listener with the security options.

The job runs in the session's shared SparkSession against the secure broker's SASL_PLAINTEXT
listener, which refuses any client that does not authenticate; the test itself sets up and reads
back through the PLAINTEXT listener of the same broker. The password contains a quote, an ``=``
and a ``]``, so the JAAS quoting is exercised.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_consumer.cli import main
from testkit.kafka_io import read_topics
from tests.secure_broker import SecureBroker
from tests.spark import ordered_topic
from tests.spark.ordered_topic import Stamper

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.timeout(240)]


def test_aggregate_over_sasl_scram_reads_and_writes_with_the_security_options(
    spark: SparkSession,
    secure_broker: SecureBroker,
    topic_name: Callable[[str], str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = secure_broker.bootstrap
    topic = ordered_topic.create(plain, topic_name("ordered"))
    output = topic_name("out")
    stamp = Stamper()
    records = [stamp.record(ts, {"n": ts}, "k") for ts in (1, 6, 7, 8)] + [stamp.heartbeat(20)]
    ordered_topic.produce(plain, topic, records)
    monkeypatch.setenv("TIMESYNC_SPARK_SASL_PASSWORD", secure_broker.password)

    status = main(
        [
            "aggregate", "--bootstrap-servers", secure_broker.sasl_bootstrap, "--topic", topic,
            "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512",
            "--sasl-username", secure_broker.username,
            "--output-topic", output, "--checkpoint", str(tmp_path / "checkpoint"),
            "--trigger", "available-now", "--watermark-delay", "1ms",
            "--value-schema", "n BIGINT", "--size", "5ms", "--agg", "count", "--agg", "max:n",
        ]
    )  # fmt: skip

    out, err = capfd.readouterr()
    assert status == 0, err[-2000:]
    assert "could not check/create output topic" not in err, "the topic check authenticated too"
    written = ordered_topic.asyncio.run(read_topics(plain, [output], expected=2, timeout_s=30))
    results = sorted((json.loads(r.value) for r in written), key=lambda r: r["window_start"])
    assert [(r["window_start"], r["count"], r["max_n"]) for r in results] == [(0, 1, 1), (5, 3, 8)]
    assert secure_broker.password not in out + err
