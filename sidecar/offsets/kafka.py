"""What a reset reads from Kafka and the one write it makes: the thin adapter under :mod:`plan`.

Reads: the input partitions (from ``input.topics``), each one's log start and end offsets (as
the sidecar reads them: the last stable offset when its delivery reads only committed records),
the first offset at or after a time (Kafka's ListOffsets by timestamp), the group's committed
offsets, and who is in the group. Writes: the new offsets, committed for the group by a client
that takes no part in it, as Kafka's own reset tool does, once the group was found without
members.

**Who counts as running.** A ``task.grouping=partition`` sidecar is a member of its consumer
group, so DescribeGroups lists it. A ``task.grouping=single`` sidecar assigns itself the
partitions and is never a member; what shows that it runs is the claim it renews in the
committed offsets' metadata (:mod:`sidecar.service.claim`): a ``running`` claim fresher than
``claim.STALE_S`` counts as a running sidecar, whichever host wrote it. A sidecar killed without
a clean stop therefore blocks a reset for up to that long; the refusal says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, for_code
from aiokafka.structs import OffsetAndMetadata

from sidecar.config import SidecarConfig
from sidecar.kafka.admin import AdminError, describe_partitions, error_name
from sidecar.kafka.clients import client_options, connect
from sidecar.offsets.plan import PartitionFacts, Target
from sidecar.service import claim
from sidecar.service.delivery import isolation_level
from sidecar.service.failures import is_retriable

T = TypeVar("T")

#: Group states in which the coordinator has no member (Kafka's ``Empty`` and ``Dead``; a group
#: that never existed is described as ``Dead``).
_NO_MEMBERS = {"Empty", "Dead", ""}


class Refused(RuntimeError):
    """Offsets must not change now (a sidecar runs on the group); the message says who and what
    to do."""


@dataclass(frozen=True, slots=True)
class Members:
    state: str
    hosts: tuple[str, ...]


async def group_members(admin: AIOKafkaAdminClient, group: str) -> Members:
    """The group's state and its members' client hosts, from DescribeGroups.

    A coordinator that is loading, moving or not there yet (a new cluster creates its offsets
    topic on the first group request) answers with a retriable code: that is raised as Kafka's
    retriable error, for the caller to ask again; any other code is a refusal (``AdminError``).
    """
    responses = await admin.describe_consumer_groups([group])
    for response in responses:
        for described in response.groups:
            code, name, state, members = described[0], described[1], described[2], described[5]
            if name != group:
                continue
            if code != 0 and for_code(code).retriable:
                raise for_code(code)(f"describing group {group}")
            if code != 0:
                raise AdminError(f"cannot describe group {group}: {error_name(code)}")
            return Members(state, tuple(str(m[2]).lstrip("/") for m in members))
    return Members("Dead", ())


def refusal(
    group: str, members: Members, claims: Sequence[claim.Claim | None], now_ms: int, me: str = ""
) -> Refused | None:
    """Why the offsets of ``group`` must not change now, or ``None``: active members, or a fresh
    running claim of a single-task sidecar (any owner but ``me``)."""
    if members.hosts or members.state not in _NO_MEMBERS:
        hosts = ", ".join(sorted(set(members.hosts))) or "none listed"
        return Refused(
            f"group {group} has {len(members.hosts)} active member(s) (state {members.state}, "
            f"hosts {hosts}): stop every sidecar of the group, then reset"
        )
    # "" is no host name: every running claim counts, this host's too.
    running = claim.conflict(claims, me, now_ms)
    if running is not None:
        age = max(0, now_ms - running.at_ms) / 1000
        return Refused(
            f"a sidecar (host {running.owner}) is running group {group}: its claim was renewed "
            f"{age:.0f} s ago; stop it first (a sidecar killed without a clean stop blocks a "
            f"reset for {claim.STALE_S:.0f} s)"
        )
    return None


async def _patiently(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, retried on retriable errors for up to :data:`claim.COORDINATOR_WAIT_S`: a new
    cluster creates its offsets topic on the first group request, and a coordinator may move."""
    deadline = time.monotonic() + claim.COORDINATOR_WAIT_S
    while True:
        try:
            return await call()
        except KafkaError as e:
            if not is_retriable(e) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


class GroupOffsets:
    """The sidecar's group on its cluster, with the clients a reset needs (``async with``)."""

    def __init__(self, config: SidecarConfig) -> None:
        self.config = config
        self.group = config.effective_group_id
        options = client_options(config)
        options["client_id"] = f"timesync-offsets-{config.output_topic}"
        self._options = options
        self.admin = AIOKafkaAdminClient(**options)
        self.reader = AIOKafkaConsumer(
            enable_auto_commit=False, isolation_level=isolation_level(config), **options
        )

    async def __aenter__(self) -> GroupOffsets:
        bootstrap = self.config.bootstrap_servers
        await connect(self.admin.start(), "the admin client", bootstrap)
        await connect(self.reader.start(), "the consumer", bootstrap)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.reader.stop()
        await self.admin.close()

    async def partitions(self) -> list[TopicPartition]:
        topics = self.config.topics
        counts = await describe_partitions(self.admin, topics)
        missing = [t for t in topics if t not in counts]
        if missing:
            raise AdminError(
                f"input topic(s) {', '.join(missing)} do not exist on {self.config.bootstrap_servers}"
            )
        return [TopicPartition(t, p) for t in topics for p in range(counts[t])]

    async def committed(self) -> dict[TopicPartition, Any]:
        """The group's committed offsets with their metadata (aiokafka's ``OffsetAndMetadata``)."""
        offsets: dict[TopicPartition, Any] = await _patiently(
            lambda: self.admin.list_consumer_group_offsets(self.group)
        )
        return offsets

    async def check_idle(self, committed: dict[TopicPartition, Any], me: str = "") -> None:
        """Raise :class:`Refused` while a sidecar runs on the group (``me``: a claim owner that
        is no sidecar, the reset's own fence)."""
        members = await _patiently(lambda: group_members(self.admin, self.group))
        claims = [claim.decode(getattr(o, "metadata", None)) for o in committed.values()]
        refused = refusal(self.group, members, claims, int(time.time() * 1000), me)
        if refused is not None:
            raise refused

    async def facts(
        self, tps: Sequence[TopicPartition], committed: dict[TopicPartition, Any], goal: Target
    ) -> list[PartitionFacts]:
        earliest = await self.reader.beginning_offsets(list(tps))
        end = await self.reader.end_offsets(list(tps))
        by_time: dict[TopicPartition, Any] = {}
        if goal.at_ms is not None:
            by_time = await self.reader.offsets_for_times(dict.fromkeys(tps, max(0, goal.at_ms)))
        out = []
        for tp in tps:
            current = committed.get(tp)
            found = by_time.get(tp)
            out.append(
                PartitionFacts(
                    tp.topic,
                    tp.partition,
                    int(current.offset) if current is not None and current.offset >= 0 else None,
                    int(earliest[tp]),
                    int(end[tp]),
                    None if found is None else int(found.offset),
                )
            )
        return out

    async def commit(self, offsets: dict[TopicPartition, int], metadata: str = "") -> None:
        """Commit ``offsets`` for the group from outside it (generation -1, no member id). With
        empty ``metadata`` (the default) they carry no claim, so the next sidecar of any host may
        start at once; a fence passes its own claim."""
        writer = AIOKafkaConsumer(group_id=self.group, enable_auto_commit=False, **self._options)
        await connect(writer.start(), "the consumer", self.config.bootstrap_servers)
        try:
            writer.assign(list(offsets))
            await writer.commit({tp: OffsetAndMetadata(offset, metadata) for tp, offset in offsets.items()})
        finally:
            await writer.stop()
