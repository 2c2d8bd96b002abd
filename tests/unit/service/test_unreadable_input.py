"""Offsets the reader cannot read, through the real service layer over the in-memory cluster.

The hooked consumer hands the reader's verdict over as a partition's last item
(``tests/unit/test_unreadable_batches.py``); here the fake consumer does the same, and the
failure policy decides: ``errors.tolerance=all`` writes a trace to the dead letter queue and the
group's commits pass the offsets only once it is acknowledged (or drops them under
``timestamp.invalid=skip``); ``none`` stops with one line naming them and the way past. Whatever
``getmany`` itself raises goes through the failure table too, never out of the loop.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from sidecar.core.stamping import ERRORS_LAST_OFFSET
from sidecar.service.health import Health
from tests.fakes.kafka import FakeCluster, TopicPartition

from .harness import OUT, config, run_until, sidecar, sources

DLQ = "dlq"
A1 = TopicPartition("a", 1)


def cluster_with_a_corrupt_batch() -> FakeCluster:
    """Two partitions of ``a``, 20 records each; offsets 5-9 of ``a[1]`` cannot be read."""
    cluster = FakeCluster()
    cluster.create_topic("a", 2)
    for p in range(2):
        cluster.produce("a", p, range(1000, 1020))
    cluster.unreadable[A1] = [(5, 10)]
    cluster.fetch_cap = 3
    return cluster


def test_under_tolerance_all_a_trace_goes_to_the_dlq_and_commits_pass_it_once_written() -> None:
    cluster = cluster_with_a_corrupt_batch()
    cfg = config(["a"], errors_tolerance="all", errors_deadletterqueue_topic_name=DLQ)

    def done() -> bool:
        return (
            len(sources(cluster.read(OUT))) >= 35 and cluster.committed(cfg.effective_group_id).get(A1) == 20
        )

    async def scenario() -> None:
        assert await run_until(sidecar(cluster, cfg), done) is None

    asyncio.run(scenario())
    assert cluster.violations == []  # no commit passed offsets 5-9 before their trace was written
    out = sources(cluster.read(OUT))
    assert sorted(out) == sorted(
        {("a", p, o) for p in range(2) for o in range(20)} - {("a", 1, o) for o in range(5, 10)}
    )
    [trace] = cluster.read(DLQ)
    headers = dict(trace.headers)
    assert trace.source() == ("a", 1, 5)
    assert headers[ERRORS_LAST_OFFSET] == b"9"
    assert headers["__connect.errors.exception.class.name"] == b"CorruptRecordException"
    assert (
        headers["__connect.errors.exception.message"]
        == b"cannot read a[1] at offsets 5-9: Invalid CRC (injected)"
    )
    assert (trace.key, trace.value) == (None, None)


def test_under_skip_they_are_dropped_counted_and_passed() -> None:
    cluster = cluster_with_a_corrupt_batch()
    cfg = config(
        ["a"], errors_tolerance="all", errors_deadletterqueue_topic_name=DLQ, timestamp_invalid="skip"
    )
    supervisor = sidecar(cluster, cfg)

    async def scenario() -> None:
        done = lambda: cluster.committed(cfg.effective_group_id).get(A1) == 20  # noqa: E731
        assert await run_until(supervisor, done) is None

    asyncio.run(scenario())
    assert len(sources(cluster.read(OUT))) == 35
    assert cluster.read(DLQ) == []
    # 35 records, and the unreadable offsets counted as one input (as their trace would be)
    assert supervisor.metrics.registry.get_sample_value("timesync_records_in_total") == 36


def test_under_tolerance_none_the_sidecar_stops_naming_them_and_commits_nothing_past_them() -> None:
    cluster = cluster_with_a_corrupt_batch()
    cfg = config(["a"])
    failure = asyncio.run(run_until(sidecar(cluster, cfg), lambda: False))
    assert failure is not None
    assert str(failure) == (
        "cannot read a[1] at offsets 5-9: Invalid CRC (injected); stopping (errors.tolerance=none; "
        "errors.tolerance=all sends such offsets to the dead letter queue; or, with every replica "
        "stopped: timesync-sidecar offsets reset --partition a:1 --to-offset 10)"
    )
    assert cluster.committed(cfg.effective_group_id).get(A1, 0) <= 5
    assert cluster.violations == []


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
            "cannot read a fetched batch (UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in "
            "position 0: invalid start byte); aiokafka's reader, unhooked, does not say which offsets",
        ),
        (
            TopicAuthorizationFailedError(),
            "Kafka refused the sidecar: [Error 29] TopicAuthorizationFailedError",
        ),
    ],
    ids=["reader", "authorization"],
)
def test_what_getmany_raises_goes_through_the_failure_table(error: BaseException, line: str) -> None:
    """Before, it escaped the loop: a traceback, and exit 1 without the one line."""
    cluster = cluster_with_a_corrupt_batch()
    cluster.unreadable.clear()
    cluster.fetch_errors = [error]
    health = Health()
    failure = asyncio.run(run_until(sidecar(cluster, config(["a"]), health), lambda: False))
    assert failure is not None
    assert str(failure).startswith(line)
