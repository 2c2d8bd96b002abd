"""``timesync-sidecar offsets reset`` on a real broker: every mode, the dry run, and the refusal
while a sidecar runs on the group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit import kafka_io
from testkit.offsets_command import committed, committed_metadata, reset, until_released
from testkit.workloads import Event

from .conftest import StartSidecar

pytestmark = [pytest.mark.broker, pytest.mark.slow]

MINUTE = 60_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


async def ten_minutes(bootstrap: str, topic: str, now_ms: int) -> None:
    """Two partitions of ten records each, one a minute, the last one a minute ago."""
    await kafka_io.create_topics(bootstrap, [TopicSpec(topic, 2)])
    await kafka_io.produce(
        bootstrap,
        [Event(topic, p, now_ms - (10 - i) * MINUTE, b"k", b"v", 0) for p in (0, 1) for i in range(10)],
    )


async def test_each_mode_moves_the_group_where_kafkas_reset_tool_would(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    a, out = topic_name("a"), topic_name("out")
    group = f"timesync-{out}"
    now = int(time.time() * 1000)
    await ten_minutes(bootstrap, a, now)

    async def moved_to(*args: str) -> list[int]:
        # Each mode plans the same under either grouping; task.grouping=partition has no
        # single-task fence to verify after a claim-renewal interval (test_reset_race.py plays
        # that), so the seven resets here do not each wait for it.
        result = await reset(bootstrap, [a], out, *args, task_grouping="partition")
        assert result.returncode == 0, result.stderr
        offsets = await committed(bootstrap, group)
        return [offsets[(a, 0)], offsets[(a, 1)]]

    assert await moved_to("--to-latest") == [10, 10]
    assert await moved_to("--to-earliest") == [0, 0]
    assert await moved_to("--to-datetime", iso(now - 3 * MINUTE)) == [7, 7], "the record at T is replayed"
    assert await moved_to("--to-datetime", iso(now - 3 * MINUTE + 1)) == [8, 8]
    # PT5M30S before the test's "now": each reset waits for claim renewals (SETTLE_S) after it
    # commits, so by now the clock has moved on by more than a minute on a slow machine.
    since_now_s = time.time() - now / 1000
    assert await moved_to("--by-duration", f"PT{330 + since_now_s:.3f}S") == [5, 5]
    assert await moved_to("--to-datetime", iso(now + MINUTE)) == [10, 10], "past the last record: the end"
    assert await moved_to("--to-offset", "4") == [4, 4]
    assert await moved_to("--to-offset", "999") == [10, 10], "clamped to the end"


async def test_the_plan_is_printed_and_a_dry_run_changes_nothing(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    a, out = topic_name("a"), topic_name("out")
    group = f"timesync-{out}"
    await ten_minutes(bootstrap, a, int(time.time() * 1000))
    assert (await reset(bootstrap, [a], out, "--to-offset", "6")).returncode == 0

    result = await reset(bootstrap, [a], out, "--to-earliest", "--dry-run")

    assert result.returncode == 0, result.stderr
    assert await committed(bootstrap, group) == {(a, 0): 6, (a, 1): 6}
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "REPLAYED"]
    assert [line.split() for line in lines[1:3]] == [[a, "0", "6", "0", "+6"], [a, "1", "6", "0", "+6"]]
    assert lines[3] == f"dry run: group {group} unchanged"


async def test_a_group_that_never_committed_shows_no_current_offset(
    bootstrap: str, topic_name: Callable[[str], str]
) -> None:
    a, out = topic_name("a"), topic_name("out")
    await ten_minutes(bootstrap, a, int(time.time() * 1000))
    result = await reset(bootstrap, [a], out, "--to-latest", "--dry-run")
    assert [line.split() for line in result.stdout.splitlines()[1:3]] == [
        [a, "0", "-", "10", "-"],
        [a, "1", "-", "10", "-"],
    ]
    assert await committed(bootstrap, f"timesync-{out}") == {}


async def test_refused_with_one_line_while_a_sidecar_runs_on_the_group(
    bootstrap: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    a, out = topic_name("a"), topic_name("out")
    group = f"timesync-{out}"
    await ten_minutes(bootstrap, a, int(time.time() * 1000))

    # task.grouping=single: no group member; its running claim in the offsets' metadata says it runs.
    single = await sidecar([a], out, max_task_idle_ms=0)
    await until_claimed(bootstrap, group)
    before = await committed(bootstrap, group)
    refused = await reset(bootstrap, [a], out, "--to-earliest")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1
    assert refused.stderr.startswith("timesync-sidecar offsets: refused: a sidecar (host ")
    assert f"is running group {group}" in refused.stderr
    assert (await reset(bootstrap, [a], out, "--to-earliest", "--dry-run")).returncode == 1
    assert await committed(bootstrap, group) == before

    assert await single.stop() == 0  # a clean stop leaves a stopped claim: the reset may go
    await until_released(bootstrap, group)
    assert (await reset(bootstrap, [a], out, "--to-earliest")).returncode == 0
    assert await committed(bootstrap, group) == {(a, 0): 0, (a, 1): 0}

    # task.grouping=partition (its own output topic, with a partition per task): a group member.
    await sidecar([a], topic_name("out2"), task_grouping="partition", group_id=group, max_task_idle_ms=0)
    refused = await reset(bootstrap, [a], out, "--to-latest")
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1
    assert f"refused: group {group} has 1 active member(s)" in refused.stderr


async def until_claimed(bootstrap: str, group: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any('"state":"running"' in m for m in await committed_metadata(bootstrap, group)):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no running claim on {group} within {timeout_s} s")
