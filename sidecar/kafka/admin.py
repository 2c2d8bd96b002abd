"""Topic administration the sidecar needs at start: create missing topics, read partition counts
and topic configs.

Every refusal becomes :class:`AdminError` with one line: the topic, Kafka's error *name* (not its
number) and what to check. A topic the broker will not describe for lack of permission is
reported as such, never as missing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import for_code

NO_ERROR = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36

#: What to check, by Kafka error name, for the errors a sidecar meets at start.
_HINTS = {
    "TopicAuthorizationFailedError": "the sidecar's principal needs Describe (inputs) or Create and "
    "Describe (outputs) on the topic: check the ACLs",
    "ClusterAuthorizationFailedError": "the principal needs Create on the cluster or the topic: "
    "check the ACLs",
    "PolicyViolationError": "the broker's create.topic.policy refused it: create the topic yourself",
    "InvalidReplicationFactorError": "fewer brokers are up than the broker's default.replication.factor",
    "InvalidConfigurationError": "the broker refused a topic config (max.message.bytes?)",
}


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)


class AdminError(RuntimeError):
    """The broker refused a topic operation; the message names the topic, Kafka's error and what
    to check."""


def error_name(code: int) -> str:
    return str(for_code(code).__name__)


def _refusal(what: str, topic: str, code: int, message: str | None = None) -> AdminError:
    name = error_name(code)
    detail = f" ({message})" if message else ""
    hint = _HINTS.get(name)
    return AdminError(f"cannot {what} topic {topic!r}: {name}{detail}" + (f"; {hint}" if hint else ""))


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
        if code == NO_ERROR:
            created.append(name)
        elif code != TOPIC_ALREADY_EXISTS:
            raise _refusal("create", name, code, message)
    return created


async def describe_partitions(admin: AIOKafkaAdminClient, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per existing topic; a missing topic is absent from the result.

    Raises :class:`AdminError` for a topic the broker refuses to describe (authorization, ...).
    """
    described: list[dict[str, Any]] = await admin.describe_topics(list(topics))
    counts = {}
    for t in described:
        code = t["error_code"]
        if code == NO_ERROR:
            counts[t["topic"]] = len(t["partitions"])
        elif code != UNKNOWN_TOPIC_OR_PARTITION:
            raise _refusal("describe", t["topic"], code)
    return counts


async def wait_for_partitions(
    admin: AIOKafkaAdminClient, topics: Sequence[str], timeout_s: float = 10.0
) -> dict[str, int]:
    """Partition counts of topics that must exist, waiting out metadata propagation after a create.

    Raises :class:`AdminError` naming the topics still unknown after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        counts = await describe_partitions(admin, topics)
        missing = [t for t in topics if not counts.get(t)]
        if not missing:
            return counts
        if time.monotonic() > deadline:
            raise AdminError(
                f"topics {', '.join(missing)} still unknown {timeout_s:g} s after they were created: "
                "check that the brokers are up and agree on metadata"
            )
        await asyncio.sleep(0.1)


async def default_replication(admin: AIOKafkaAdminClient) -> int:
    """The broker's ``default.replication.factor``, at most the number of brokers up (a topic
    cannot have more replicas than brokers).

    aiokafka's CreateTopics (v3 at most) cannot ask for the broker's default with -1 (v4+), so
    the sidecar reads it and asks for it by number.
    """
    cluster = await admin.describe_cluster()
    brokers = [b["node_id"] for b in cluster["brokers"]]
    if not brokers:
        return 1
    responses = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(brokers[0]), {"default.replication.factor": None})]
    )
    for response in responses:
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] == "default.replication.factor" and entry[1] is not None:
                    return max(1, min(int(entry[1]), len(brokers)))
    return 1


async def topic_configs(
    admin: AIOKafkaAdminClient, topics: Sequence[str], keys: Sequence[str], unknown_for_s: float = 10.0
) -> dict[str, dict[str, str]]:
    """The effective values of ``keys`` per topic (a broker default when the topic sets none).

    A topic the answering broker does not know yet (just created: on a cluster, metadata reaches
    the brokers one by one) is asked for again for up to ``unknown_for_s``. Raises
    :class:`AdminError` for a topic whose configs the broker will not describe.
    """
    if not topics:
        return {}
    deadline = time.monotonic() + unknown_for_s
    while True:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t, dict.fromkeys(keys)) for t in topics]
        )
        out: dict[str, dict[str, str]] = {}
        unknown = False
        for response in responses:
            for resource in response.resources:
                code, message, _, name, entries = resource[:5]
                if code == UNKNOWN_TOPIC_OR_PARTITION and time.monotonic() < deadline:
                    unknown = True
                elif code != NO_ERROR:
                    raise _refusal("describe the configs of", name, code, message)
                else:
                    out[name] = {entry[0]: entry[1] for entry in entries if entry[1] is not None}
        if not unknown:
            return out
        await asyncio.sleep(0.1)
