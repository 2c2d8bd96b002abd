"""A consumer-group assignor that keeps each task's partitions on one member.

With ``task.grouping=partition``, task *i* is partition *i* of every input topic: the merge must
see all of them together, so the group hands out whole tasks, never single partitions. Tasks are
dealt round-robin over the members in member-id order: deterministic, and balanced to within one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata


def deal_tasks(task_ids: Iterable[int], members: Iterable[str]) -> dict[str, list[int]]:
    """Task ids per member, round-robin in sorted order."""
    ordered = sorted(members)
    dealt: dict[str, list[int]] = {m: [] for m in ordered}
    for n, task in enumerate(sorted(task_ids)):
        dealt[ordered[n % len(ordered)]].append(task)
    return dealt


class TaskAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # aiokafka ships no types
    name = "timesync-task"
    version = 0

    @classmethod
    def assign(
        cls, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        topics = sorted({t for meta in members.values() for t in meta.subscription})
        partitions = {t: sorted(cluster.partitions_for_topic(t) or ()) for t in topics}
        task_ids = {p for parts in partitions.values() for p in parts}
        dealt = deal_tasks(task_ids, members)
        out = {}
        for member, tasks in dealt.items():
            mine = set(tasks)
            assignment = [(t, [p for p in partitions[t] if p in mine]) for t in topics]
            out[member] = ConsumerProtocolMemberAssignment(cls.version, assignment, b"")
        return out

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(cls.version, list(topics), b"")

    @classmethod
    def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
        pass
