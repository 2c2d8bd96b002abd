"""``offsets reset --partition TOPIC:N``: past a record that stops every start, on its partition
only — the way the sidecar's one line names when it cannot read some offsets."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import TopicPartition

from sidecar.cli import main
from sidecar.config import load_config
from sidecar.offsets import cli
from sidecar.offsets.plan import PartitionFacts, PlanError, Target

CONFIG = load_config(None, ["bootstrap.servers=k:9092", "input.topics=a,b", "output.topic=o"], {})
PARTITIONS = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
KEYS = ["--set", "bootstrap.servers=127.0.0.1:1", "--set", "input.topics=a", "--set", "output.topic=o"]


class Group:
    """Three input partitions, each committed at 100 with 200 records; what a reset commits."""

    written: dict[TopicPartition, int]

    def __init__(self, config: object) -> None:
        pass

    async def __aenter__(self) -> Group:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def partitions(self) -> list[TopicPartition]:
        return list(PARTITIONS)

    async def committed(self) -> dict[TopicPartition, Any]:
        return {}

    async def check_idle(self, committed: dict[TopicPartition, Any], me: str = "") -> None:
        pass

    async def facts(self, tps: Any, committed: Any, goal: Target) -> list[PartitionFacts]:
        return [PartitionFacts(tp.topic, tp.partition, 100, 0, 200) for tp in tps]

    async def commit(self, offsets: dict[TopicPartition, int], metadata: str = "") -> None:
        Group.written.update(offsets)


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch) -> type[Group]:
    Group.written = {}
    monkeypatch.setattr(cli, "GroupOffsets", Group)
    return Group


async def test_only_the_named_partition_moves(group: type[Group]) -> None:
    only = [TopicPartition("a", 1)]
    moves = await cli.reset(CONFIG, Target("offset", offset=150), dry_run=False, settle_s=0, only=only)
    assert [(m.topic, m.partition, m.current, m.new) for m in moves] == [("a", 1, 100, 150)]
    assert group.written == {TopicPartition("a", 1): 150}


async def test_a_partition_that_is_not_an_input_is_a_plan_error(group: type[Group]) -> None:
    with pytest.raises(PlanError, match=r"--partition a:7: not a partition of input.topics \(a, b\)"):
        await cli.reset(CONFIG, Target("latest"), dry_run=True, only=[TopicPartition("a", 7)])
    assert group.written == {}


def test_a_partition_that_is_not_topic_colon_number_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["offsets", "reset", *KEYS, "--to-offset", "5", "--partition", "a-3"])
    assert done.value.code == 2
    assert "'a-3' is not TOPIC:N" in capsys.readouterr().err
