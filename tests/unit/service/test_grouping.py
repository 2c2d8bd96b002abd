"""task.grouping as a strategy chosen once from the config: what each grouping forms and decides,
and that no module outside the config (and the grouping module) compares the setting to a name."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sidecar
from sidecar.config import SidecarConfig
from sidecar.core import TopicPartition
from sidecar.service.grouping import GROUPINGS, SingleTask, TaskPerPartition, grouping_of

from .harness import config

SIDECAR = Path(sidecar.__file__).parent
SINGLE, PARTITION = GROUPINGS["single"], GROUPINGS["partition"]
#: Where a grouping's name may be compared (or matched) outside the grouping module, and why.
MAY_COMPARE_A_GROUPING = {
    SIDECAR / "config": "the setting's type and checks: the values a user may write",
    SIDECAR / "service" / "grouping.py": "the groupings themselves",
}

partitions = st.lists(
    st.builds(TopicPartition, st.sampled_from(["a", "b", "c"]), st.integers(0, 7)), unique=True, max_size=24
)


def test_every_grouping_the_config_accepts_has_a_strategy() -> None:
    accepted = get_args(SidecarConfig.model_fields["task_grouping"].annotation)
    assert set(accepted) == set(GROUPINGS)
    assert {name: g.name for name, g in GROUPINGS.items()} == {name: name for name in accepted}


def test_the_config_chooses_the_grouping_once_default_single() -> None:
    assert isinstance(grouping_of(config(["a"])), SingleTask)
    assert isinstance(grouping_of(config(["a"], task_grouping="partition")), TaskPerPartition)


@settings(max_examples=100, deadline=None)
@given(partitions)
def test_single_is_one_task_0_of_every_partition_writing_output_partition_0(
    tps: list[TopicPartition],
) -> None:
    assert SINGLE.tasks(tps) == {"0": (tps, 0)}


@settings(max_examples=100, deadline=None)
@given(partitions)
def test_partition_makes_task_i_of_partition_i_of_every_input_writing_output_partition_i(
    tps: list[TopicPartition],
) -> None:
    tasks = PARTITION.tasks(tps)
    assert list(tasks) == [str(i) for i in sorted({tp.partition for tp in tps})], "in output order"
    for name, (members, out) in tasks.items():
        assert out == int(name)
        assert members == sorted(tp for tp in tps if tp.partition == out)
    assert sorted(tp for members, _ in tasks.values() for tp in members) == sorted(tps), "each exactly once"


def test_output_partitions_one_or_one_per_task() -> None:
    inputs = {"a": 4, "b": 8}
    assert SINGLE.output_partitions(inputs) == 1
    assert PARTITION.output_partitions(inputs) == 8


def test_partition_grouping_gives_each_task_its_own_transactional_id() -> None:
    ids = {PARTITION.transactional_id("g", str(task)) for task in range(4)}
    assert ids == {"g-txn-0", "g-txn-1", "g-txn-2", "g-txn-3"}


def test_single_grouping_keeps_the_id_of_earlier_versions() -> None:
    # A run of the previous version that crashed is fenced by the first start of this one.
    assert SINGLE.transactional_id("g", "0") == "g-txn"


def test_only_single_claims_and_only_a_taskless_partition_replica_is_a_spare() -> None:
    assert (SINGLE.claims, PARTITION.claims) == (True, False)
    assert [SINGLE.spare(0), SINGLE.spare(1)] == [False, False]
    assert [PARTITION.spare(0), PARTITION.spare(1)] == [True, False]


class Assignment:
    """Records how a grouping takes its tasks."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool | None]] = []

    async def assign_every_partition(self, restarting: bool) -> None:
        self.calls.append(("every partition", restarting))

    def subscribe(self) -> None:
        self.calls.append(("subscribe", None))


@pytest.mark.parametrize("restarting", [False, True])
async def test_single_assigns_itself_every_partition_and_partition_joins_the_group(restarting: bool) -> None:
    single, partition = Assignment(), Assignment()
    await SINGLE.assign(single, restarting)
    await PARTITION.assign(partition, restarting)
    assert single.calls == [("every partition", restarting)]
    assert partition.calls == [("subscribe", None)]


class GroupAdmin:
    """An admin client whose group has committed these offsets (no claim in their metadata)."""

    def __init__(self, offsets: dict[Any, Any] | None = None) -> None:
        self.offsets = offsets
        self.asked: list[str] = []

    async def list_consumer_group_offsets(self, group: str) -> dict[Any, Any]:
        self.asked.append(group)
        assert self.offsets is not None, "this grouping must not read the group's offsets"
        return self.offsets


class Committed:
    def __init__(self, offset: int) -> None:
        self.offset, self.metadata = offset, ""


async def test_single_reads_the_groups_committed_offsets_at_start_and_partition_does_not() -> None:
    cfg = config(["a"])
    admin = GroupAdmin({TopicPartition("a", 0): Committed(7), TopicPartition("a", 1): Committed(-1)})
    assert await SINGLE.committed_at_start(admin, cfg, 0) == {TopicPartition("a", 0): 7}
    assert admin.asked == [cfg.effective_group_id]
    assert await PARTITION.committed_at_start(GroupAdmin(), cfg, 0) == {}


# -- no string comparisons of the setting outside the config ------------------------------------------


def grouping_comparisons(source: str) -> list[int]:
    """Lines of ``source`` comparing ``task_grouping`` to anything, or anything to a grouping's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare | ast.match_case):
            continue
        operands = [node.pattern] if isinstance(node, ast.match_case) else [node.left, *node.comparators]
        inside = [n for operand in operands for n in ast.walk(operand)]
        reads_setting = any(
            (isinstance(n, ast.Attribute) and n.attr == "task_grouping")
            or (isinstance(n, ast.Name) and n.id == "task_grouping")
            for n in inside
        )
        names_one = any(isinstance(n, ast.Constant) and n.value in GROUPINGS for n in inside)
        if reads_setting or names_one:
            found.append(getattr(node, "lineno", None) or node.pattern.lineno)
    return found


def test_the_check_sees_the_comparisons_it_forbids() -> None:
    assert grouping_comparisons('if cfg.task_grouping == "single":\n    pass\n') == [1]
    assert grouping_comparisons('x = grouping in ("single", "partition")\n') == [1]
    assert grouping_comparisons('match g:\n    case "partition":\n        pass\n') == [2]
    assert grouping_comparisons("if grouping_of(cfg).claims:\n    pass\nlog(cfg.task_grouping)\n") == []


def test_no_module_outside_the_config_compares_task_grouping_to_a_name() -> None:
    """Another grouping touches sidecar/service/grouping.py, not every module that once asked
    ``task_grouping == "single"`` (the failure table's rows name theirs as data, not in a comparison)."""
    compared = []
    for path in sorted(SIDECAR.rglob("*.py")):
        if any(path == allowed or allowed in path.parents for allowed in MAY_COMPARE_A_GROUPING):
            continue
        compared += [f"{path.relative_to(SIDECAR)}:{line}" for line in grouping_comparisons(path.read_text())]
    assert compared == []
