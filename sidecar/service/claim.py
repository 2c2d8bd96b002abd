"""With ``task.grouping=single``, one replica per group: a claim in the committed offsets.

Why: with ``single`` every replica merges every input partition and writes output partition 0 —
two replicas write everything twice (under ``exactly_once_v2`` they fence each other, and the one
running is the one that dies). A single-task sidecar takes no part in a consumer group (it assigns
itself the partitions), so the group cannot tell it that another replica runs. The committed
offsets can: every commit of a single-task sidecar carries a claim in Kafka's offset metadata —
who (the host name: a Kubernetes pod's name), when, and whether it is running or stopped — and
refreshes it at least every ``REFRESH_S`` while running (a quiet input commits nothing new). A
clean stop leaves a ``stopped`` claim.

At start, a sidecar refuses to run (one line, exit 1) while another host's ``running`` claim is
fresher than ``STALE_S``. Its own host's claim is no conflict: a container restarted after a
crash keeps its pod name. So the rule tells pods apart, not processes on one host; and two
replicas started within the same moment see nothing of each other. A group with no committed
offset yet carries no claim until the first commit. ``task.grouping.single.guard=false`` turns
the check off (the claims are still written).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aiokafka.errors import KafkaError

from sidecar.core import TopicPartition
from sidecar.kafka.admin import AdminError
from sidecar.service.failures import is_retriable

#: How often a running single-task sidecar renews its claim when nothing else was committed.
REFRESH_S = 5.0
#: A running claim older than this no longer blocks a start (its owner is gone or wedged).
STALE_S = 30.0
#: The most two hosts' clocks may disagree. A claim stamped further ahead than this is not
#: believed (a wrong clock, or a forged stamp, must not block the group for ever): it counts as
#: stale, as a claim older than ``STALE_S`` does.
MAX_CLOCK_SKEW_S = 60.0

ClaimState = Literal["running", "stopped"]


@dataclass(frozen=True, slots=True)
class Claim:
    owner: str
    at_ms: int
    state: ClaimState


def owner() -> str:
    """This replica, as other replicas see it: the host name (a Kubernetes pod's name, which
    Kubernetes also puts in ``HOSTNAME``; the variable wins, so a test can name its replicas)."""
    return os.environ.get("HOSTNAME") or socket.gethostname()


def encode(claim: Claim) -> str:
    return orjson.dumps(
        {"timesync": 1, "owner": claim.owner, "at": claim.at_ms, "state": claim.state}
    ).decode()


def decode(metadata: str | None) -> Claim | None:
    """The claim in an offset's metadata, or ``None`` (another tool's commit, or none)."""
    if not metadata:
        return None
    try:
        data = orjson.loads(metadata)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("timesync") != 1:
        return None
    try:
        return Claim(
            str(data["owner"]), int(data["at"]), "stopped" if data["state"] == "stopped" else "running"
        )
    except (KeyError, TypeError, ValueError):
        return None


def fresh(claim: Claim, now_ms: int) -> bool:
    """Whether ``claim`` was stamped within the last ``STALE_S``, allowing for clocks up to
    ``MAX_CLOCK_SKEW_S`` ahead of ours (a stamp further in the future is not believed)."""
    age_ms = now_ms - claim.at_ms
    return -MAX_CLOCK_SKEW_S * 1000 <= age_ms < STALE_S * 1000


def conflict(claims: Iterable[Claim | None], me: str, now_ms: int) -> Claim | None:
    """The freshest running claim of another owner (see :func:`fresh`), if any."""
    live = [
        c for c in claims if c is not None and c.state == "running" and c.owner != me and fresh(c, now_ms)
    ]
    return max(live, key=lambda c: c.at_ms, default=None)


class ClaimError(AdminError):
    """Another replica runs this group with ``task.grouping=single``."""


def refuse(claim: Claim, group: str, now_ms: int) -> ClaimError:
    age = max(0, now_ms - claim.at_ms) / 1000
    return ClaimError(
        f"another sidecar (host {claim.owner}) is running group {group} with task.grouping=single: "
        f"it committed {age:.0f} s ago. Only one replica may run a single task (each would write "
        "everything, twice); use task.grouping=partition to share the work across replicas, stop the "
        "other one, or set task.grouping.single.guard=false"
    )


async def check(
    admin: Any, group: str, now_ms: int, guard: bool = True, me: str | None = None
) -> dict[TopicPartition, int]:
    """The group's committed offsets; with ``guard``, raise :class:`ClaimError` first if another
    replica's running claim on ``group`` is fresh."""
    committed = await _group_offsets(admin, group)
    if guard:
        claims = (decode(getattr(o, "metadata", None)) for o in committed.values())
        found = conflict(claims, me or owner(), now_ms)
        if found is not None:
            raise refuse(found, group, now_ms)
    return {
        TopicPartition(tp.topic, tp.partition): int(o.offset)
        for tp, o in committed.items()
        if getattr(o, "offset", -1) >= 0
    }


#: How long to wait for the group coordinator at start (a new cluster creates its offsets topic
#: on the first request; a coordinator may be moving).
COORDINATOR_WAIT_S = 30.0


async def _group_offsets(admin: Any, group: str) -> Mapping[Any, Any]:
    deadline = time.monotonic() + COORDINATOR_WAIT_S
    while True:
        try:
            offsets: Mapping[Any, Any] = await admin.list_consumer_group_offsets(group)
            return offsets
        except KafkaError as e:
            if not is_retriable(e) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
