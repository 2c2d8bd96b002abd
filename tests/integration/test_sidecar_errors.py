"""Bad config exits 2 naming the key; bad records go to the DLQ (``all``) or stop the sidecar (``none``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io, ordered
from testkit.workloads import Event

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_bad_value_exits_2_with_one_line_naming_the_key() -> None:
    done = run_cli(
        "--set",
        "bootstrap.servers=127.0.0.1:1",
        "--set",
        "input.topics=a",
        "--set",
        "output.topic=b",
        "--set",
        "max.task.idle.ms=soon",
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "timesync-sidecar: config error: max.task.idle.ms = 'soon' (from --set): "
        "expected -1, 0, a number of milliseconds, max, or auto"
    ]


def test_an_unknown_key_in_the_file_exits_2_with_a_hint(tmp_path: object) -> None:
    from pathlib import Path

    config = Path(str(tmp_path)) / "timesync.properties"
    config.write_text("bootstrap.servers=127.0.0.1:1\ninput.topics=a\noutput.topic=b\nmax.task.idle=5\n")
    done = run_cli("--config", str(config))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "unknown key 'max.task.idle'" in line
    assert "did you mean max.task.idle.ms?" in line


def test_a_missing_required_key_exits_2() -> None:
    done = run_cli("--set", "bootstrap.servers=127.0.0.1:1", "--set", "input.topics=a")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "timesync-sidecar: config error: output.topic is required "
        "(set it in the file, as TIMESYNC_OUTPUT_TOPIC, or --set output.topic=...)"
    ]


def bad_and_good(topic: str, bad: bytes = b"not json at all") -> list[Event]:
    """Six records with Kafka timestamp 1: offset 1 is ``bad``, 3 and 4 are bad too."""
    values = [
        orjson.dumps({"ts": 1_000}),
        bad,
        orjson.dumps({"ts": 2_000}),
        orjson.dumps({"other": 1}),
        orjson.dumps({"ts": "soon"}),
        orjson.dumps({"ts": 3_000}),
    ]
    return [Event(topic, 0, 1, b"k%d" % i, v, 0) for i, v in enumerate(values)]


async def test_invalid_json_timestamps_with_tolerance_all_land_in_the_dlq_with_reasons(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src, out, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    await kafka_io.produce(bootstrap, bad_and_good(src))

    await sidecar(
        [src],
        out,
        timestamp_extractor="json:ts",
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        max_task_idle_ms=0,
        watermark_heartbeat_ms=0,
    )
    good = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=3, timeout_s=30))
    dead = await kafka_io.read_topics(bootstrap, [dlq], expected=3, timeout_s=30)

    assert [(o.source_offset, o.timestamp) for o in good] == [(0, 1_000), (2, 2_000), (5, 3_000)]
    reasons = {int(dict(r.headers)["__connect.errors.offset"]): dict(r.headers) for r in dead}
    assert sorted(reasons) == [1, 3, 4]
    assert reasons[1]["__connect.errors.exception.message"] == (
        b"value is not JSON: no JSON value where one was expected at byte 0"
    )
    assert reasons[3]["__connect.errors.exception.message"] == b"field ts is missing"
    assert reasons[4]["__connect.errors.exception.message"] == b"field ts is not a number: 'soon'"
    assert all(h["__connect.errors.topic"] == src.encode() for h in reasons.values())
    assert all(
        h["__connect.errors.exception.class.name"] == b"InvalidTimestampError" for h in reasons.values()
    )
    assert [r.value for r in dead] == [
        b"not json at all",
        orjson.dumps({"other": 1}),
        orjson.dumps({"ts": "soon"}),
    ]


@pytest.mark.parametrize(
    ("bad", "reason", "stopping"),
    [
        (
            b"not json at all",
            "value is not JSON: no JSON value where one was expected at byte 0",
            "timestamp.invalid=fail, errors.tolerance=none",
        ),
        # Two hours ahead of the clock: the output topic's broker (after.max.ms = 1 h) would refuse it.
        (
            "two hours ahead",
            "ms ahead of the clock, more than the output topic's message.timestamp.after.max.ms=3600000: "
            "the broker would refuse it",
            "errors.tolerance=none;",
        ),
    ],
)
async def test_invalid_json_timestamps_with_tolerance_none_stop_with_exit_1_naming_the_record(
    bootstrap: str,
    topic_name: Callable[[str], str],
    sidecar: StartSidecar,
    bad: bytes | str,
    reason: str,
    stopping: str,
) -> None:
    events = bad_and_good("any", b"")
    if bad == "two hours ahead":
        # Judged when it goes out, after the whole fetch was read: only readable records follow it.
        bad = orjson.dumps({"ts": int(time.time() * 1000) + 2 * 3_600_000})
        keep = 3
    else:
        keep = len(events)
    assert isinstance(bad, bytes)
    src, out = topic_name("in"), topic_name("out")
    await kafka_io.create_topics(bootstrap, [TopicSpec(src)])
    await kafka_io.produce(bootstrap, bad_and_good(src, bad)[:keep])

    process = await sidecar(
        [src],
        out,
        wait=None,
        timestamp_extractor="json:ts",
        errors_tolerance="none",
        max_task_idle_ms=-1,
        group_id=f"{out}-group",
    )
    code = await process.wait(timeout_s=60)

    assert code == 1
    last = process.log_tail(1)
    assert last.startswith(f"timesync-sidecar: invalid timestamp in {src}[0] at offset 1: "), last
    assert f"{reason}; stopping ({stopping}" in last, last
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=f"{out}-group", enable_auto_commit=False
    )
    await consumer.start()
    try:
        committed = await consumer.committed(TopicPartition(src, 0))
    finally:
        await consumer.stop()
    assert committed in (None, 1), "the failing record's offset is never committed"
