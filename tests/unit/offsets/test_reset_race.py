"""A reset and a single-task sidecar that starts while it runs: the reset is never lost in silence.

The group lives in memory; the sidecar is played by what it does to the committed offsets (see
:mod:`sidecar.service.claim`): at start it reads them and, unless a fresh running claim of
another host is there, runs; while running it renews its claim, re-committing what it read.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import TopicPartition

from sidecar.config import load_config
from sidecar.offsets import cli
from sidecar.offsets.kafka import Members, Refused, refusal
from sidecar.offsets.plan import PartitionFacts, Target
from sidecar.service import claim

TP = TopicPartition("a", 0)
CONFIG = load_config(None, ["bootstrap.servers=k:9092", "input.topics=a", "output.topic=o"], {})


@dataclass
class Committed:
    offset: int
    metadata: str


class Group:
    """The group's committed offsets, and a sidecar on host ``pod-a`` that may start."""

    def __init__(self) -> None:
        self.offsets = {TP: Committed(100, "")}
        self.sidecar_started = False
        self.read_at_start: int | None = None

    def start_sidecar(self) -> bool:
        now = int(time.time() * 1000)
        claims = [claim.decode(c.metadata) for c in self.offsets.values()]
        if claim.conflict(claims, "pod-a", now) is not None:
            return False  # refused, as the sidecar's own start-up check does
        self.sidecar_started = True
        self.read_at_start = self.offsets[TP].offset
        return True

    def renew_claim(self) -> None:
        if self.sidecar_started:
            stamp = claim.encode(claim.Claim("pod-a", int(time.time() * 1000), "running"))
            self.offsets[TP] = Committed(self.read_at_start or 0, stamp)


class FakeGroupOffsets:
    """:class:`sidecar.offsets.kafka.GroupOffsets` over :class:`Group`; ``on_check`` runs after
    each idle check (the moment a sidecar may start)."""

    group: Group
    on_check: Any = None
    checks = 0

    def __init__(self, config: object) -> None:
        pass

    async def __aenter__(self) -> FakeGroupOffsets:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def partitions(self) -> list[TopicPartition]:
        return [TP]

    async def committed(self) -> dict[TopicPartition, Any]:
        return dict(self.group.offsets)

    async def check_idle(self, committed: dict[TopicPartition, Any], me: str = "") -> None:
        claims = [claim.decode(c.metadata) for c in committed.values()]
        refused = refusal("g", Members("Empty", ()), claims, int(time.time() * 1000), me)
        if refused is not None:
            raise refused
        cls = type(self)
        cls.checks += 1
        if cls.on_check is not None:
            cls.on_check(cls.checks)

    async def facts(self, tps: Any, committed: Any, goal: Target) -> list[PartitionFacts]:
        return [PartitionFacts("a", 0, 100, 0, 200)]

    async def commit(self, offsets: dict[TopicPartition, int], metadata: str = "") -> None:
        for tp, offset in offsets.items():
            self.group.offsets[tp] = Committed(offset, metadata)


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch) -> Group:
    g = Group()
    FakeGroupOffsets.group = g
    FakeGroupOffsets.checks = 0
    FakeGroupOffsets.on_check = None
    monkeypatch.setattr(cli, "GroupOffsets", FakeGroupOffsets)
    return g


async def test_a_sidecar_started_between_the_check_and_the_commit_fails_the_reset_loudly(
    group: Group,
) -> None:
    def sidecar_starts_after_the_first_check(n: int) -> None:
        if n == 1:
            assert group.start_sidecar()

    FakeGroupOffsets.on_check = sidecar_starts_after_the_first_check

    async def renewing() -> None:
        while True:
            await asyncio.sleep(0.01)
            group.renew_claim()

    renewer = asyncio.create_task(renewing())
    try:
        with pytest.raises(
            Refused, match=r"a sidecar \(host pod-a\) started during the reset and committed over it"
        ):
            await cli.reset(CONFIG, Target("earliest"), dry_run=False, settle_s=0.1)
    finally:
        renewer.cancel()


async def test_a_sidecar_starting_while_the_reset_is_fenced_is_refused(group: Group) -> None:
    refused: list[bool] = []
    # The second check runs after the fence: a sidecar starting then sees the reset's claim.
    FakeGroupOffsets.on_check = lambda n: refused.append(n == 2 and not group.start_sidecar())

    moves = await cli.reset(CONFIG, Target("earliest"), dry_run=False, settle_s=0.01)

    assert refused == [False, True]
    assert [m.new for m in moves] == [0]
    assert group.offsets[TP] == Committed(0, ""), "the final commit carries no claim: sidecars may start"
