"""Topic administration the sidecar needs at start: create missing topics, read partition counts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

TOPIC_ALREADY_EXISTS = 36


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)


class AdminError(RuntimeError):
    """The broker refused a topic operation; the message names the topic and Kafka's error."""


async def ensure_topics(admin: AIOKafkaAdminClient, specs: Iterable[TopicSpec]) -> list[str]:
    """Create the topics that do not exist yet; return the names created.

    An existing topic is left as it is (its partition count is checked by the caller, which
    knows what it needs).
    """
    specs = list(specs)
    existing = set(await admin.list_topics())
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    response = await admin.create_topics(
        [NewTopic(s.name, s.partitions, s.replication, topic_configs=dict(s.configs)) for s in missing]
    )
    created = []
    for item in response.topic_errors:
        name, code = item[0], item[1]
        message = item[2] if len(item) > 2 else None
        if code == 0:
            created.append(name)
        elif code != TOPIC_ALREADY_EXISTS:
            raise AdminError(f"cannot create topic {name!r}: Kafka error {code} {message or ''}".strip())
    return created


async def partition_counts(admin: AIOKafkaAdminClient, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per existing topic; a missing topic is absent from the result."""
    described: list[dict[str, Any]] = await admin.describe_topics(list(topics))
    return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0}


async def wait_for_partitions(
    admin: AIOKafkaAdminClient, topics: Sequence[str], timeout_s: float = 10.0
) -> dict[str, int]:
    """Partition counts of topics that must exist, waiting out metadata propagation after a create.

    Raises ``LookupError`` naming the topics still unknown after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        counts = await partition_counts(admin, topics)
        missing = [t for t in topics if not counts.get(t)]
        if not missing:
            return counts
        if time.monotonic() > deadline:
            raise LookupError(f"topics not found: {', '.join(missing)}")
        await asyncio.sleep(0.1)
