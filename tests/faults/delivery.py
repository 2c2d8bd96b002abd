"""What the fault tests check and report: delivery of every input record, order, duplicates.

Every input record is identified by its (topic, partition, offset); the sidecar writes those into
the ``timesync.source.*`` headers of the output, so the output alone tells what was lost,
repeated or reordered.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from testkit.offsets_command import committed as group_offsets
from testkit.ordered import Ordered

Source = tuple[str, int, int]
#: Headers that a restart recomputes (DESIGN: "a restart recomputes them") or that depend on
#: timing (enforced): they may differ between two copies of one input record.
RECOMPUTED = {"timesync.watermark", "timesync.stream.time", "timesync.late", "timesync.enforced"}


@dataclass
class Delivery:
    """The figures of one fault run, as the report's table wants them."""

    inputs: int
    out: int
    lost: int
    duplicates: int
    #: Places where an input partition's output goes back to an earlier offset (a replay after a
    #: crash): the most in any one partition.
    rewinds: int
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"records {self.inputs}, out {self.out}, lost {self.lost}, duplicates {self.duplicates}, "
            f"rewinds per partition ≤ {self.rewinds}, problems {len(self.problems)}"
        )


def _identity(o: Ordered) -> tuple[object, ...]:
    """What must be equal between two copies of one input record."""
    kept = tuple(h for h in o.headers if h[0] not in RECOMPUTED)
    return (o.key, o.value, o.timestamp, kept)


def check(expected: Mapping[tuple[str, int], int], out: Sequence[Ordered]) -> Delivery:
    """Compare the data records of the output with the inputs (``expected``: records per partition).

    Per input partition the output must read like ``0, 1, …, k, j, j+1, …`` with ``j ≤ k``: each
    step is the next offset, or a rewind to an offset already written (a replay from the last
    committed offset after a crash). A step forward past the next offset is a gap or a
    reordering.
    """
    problems: list[str] = []
    by_tp: dict[tuple[str, int], list[int]] = defaultdict(list)
    first: dict[Source, tuple[object, ...]] = {}
    for o in out:
        if o.source_topic is None or o.source_partition is None or o.source_offset is None:
            problems.append(f"output offset {o.offset} has no source headers")
            continue
        tp = (o.source_topic, o.source_partition)
        if tp not in expected or not 0 <= o.source_offset < expected[tp]:
            problems.append(f"output offset {o.offset} names an unknown input {o.source}")
            continue
        by_tp[tp].append(o.source_offset)
        src = (o.source_topic, o.source_partition, o.source_offset)
        seen = first.setdefault(src, _identity(o))
        if seen != _identity(o) and len(problems) < 20:
            problems.append(f"copies of {src} differ: {seen} vs {_identity(o)}")
    rewinds = 0
    lost = 0
    for tp, n in expected.items():
        offsets = by_tp.get(tp, [])
        back = 0
        previous = -1
        for offset in offsets:
            if offset > previous + 1:
                problems.append(f"{tp}: offset {offset} follows {previous} (gap or reordering)")
                break
            if offset <= previous:
                back += 1
            previous = offset
        rewinds = max(rewinds, back)
        lost += n - len(set(offsets))
    total = sum(expected.values())
    counted = sum(len(v) for v in by_tp.values())
    unique = sum(len(set(v)) for v in by_tp.values())
    return Delivery(total, counted, lost, counted - unique, rewinds, problems)


def per_partition(events: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Records per input (topic, partition), from (topic, partition) of each record written."""
    return dict(Counter(events))


async def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offset per (topic, partition)."""
    return await group_offsets(bootstrap, group)


async def end_offsets(bootstrap: str, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(*tp) for tp in tps])
    finally:
        await consumer.stop()
    return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}


async def wait_committed(
    bootstrap: str, group: str, ends: Mapping[tuple[str, int], int], timeout_s: float
) -> None:
    """Until the group has committed every input up to its end offset (all of it is out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        committed = await committed_offsets(bootstrap, group)
        behind = {tp: (committed.get(tp), end) for tp, end in ends.items() if committed.get(tp) != end}
        if not behind:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"group {group} has not committed the inputs' ends: {behind}")
        await asyncio.sleep(0.25)


def table_row(fault: str, runs: int, delivery: Delivery) -> str:
    """One row of the report's table: fault | runs | records | lost | duplicates."""
    return f"| {fault} | {runs} | {delivery.inputs} | {delivery.lost} | {delivery.duplicates} |"
