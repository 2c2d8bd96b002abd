"""Topic preparation at start: check the inputs, create the outputs, learn the layout.

:func:`prepare_topics` returns a :class:`TopicLayout`, everything the pipeline needs to know
about the topics, read once per start: each input's partition count, the partitions of the side
topics (late records, dead letters), which inputs the broker stamps with LogAppendTime (they
get the log-append-time watermark under ``watermark.policy=auto``), and which record timestamps
the output topic's broker accepts (``message.timestamp.after.max.ms`` / ``before.max.ms``: a
record outside them is refused at emit rather than failing its whole produce batch).

Errors are :class:`~sidecar.kafka.admin.AdminError` with one line: a missing input, an output
with too few partitions for ``task.grouping=partition``, or a refusal by the broker with its
error's name and what to check.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient

from sidecar.config import SidecarConfig
from sidecar.core import BrokerTimestampLimits, TopicPartition
from sidecar.kafka.admin import (
    AdminError,
    TopicSpec,
    default_replication,
    describe_partitions,
    ensure_topics,
    topic_configs,
    wait_for_partitions,
)
from sidecar.output.writer import MAX_MESSAGE_BYTES
from sidecar.service.grouping import grouping_of

log = logging.getLogger("timesync")

TIMESTAMP_TYPE = "message.timestamp.type"
AFTER_MAX = "message.timestamp.after.max.ms"
BEFORE_MAX = "message.timestamp.before.max.ms"


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """What one start learnt about the topics."""

    #: Partition count of each input topic, in ``input.topics`` order.
    input_partitions: Mapping[str, int]
    #: Partition count of the output topic.
    output_partitions: int = 1
    #: Partition count of each side topic (late records, dead letters).
    side_partitions: Mapping[str, int] = field(default_factory=dict)
    #: Inputs whose records the broker stamps (``message.timestamp.type=LogAppendTime``).
    log_append_time_inputs: frozenset[str] = frozenset()
    #: Which timestamps the output topic's broker accepts (``None``: a LogAppendTime output,
    #: restamped by the broker, refuses none).
    output_limits: BrokerTimestampLimits | None = field(default_factory=BrokerTimestampLimits)

    def all_input_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, n in self.input_partitions.items() for p in range(n)]

    def side_partition(self, topic: str, output_partition: int) -> int:
        """Where a task writing output partition ``output_partition`` puts its side records."""
        return output_partition % self.side_partitions.get(topic, 1)


async def prepare_topics(admin: AIOKafkaAdminClient, config: SidecarConfig) -> TopicLayout:
    """Check the inputs exist, create missing outputs, read the layout (see the module docstring)."""
    inputs = await describe_partitions(admin, config.topics)
    missing = [t for t in config.topics if t not in inputs]
    if missing:
        raise AdminError(f"input topic(s) {', '.join(missing)} do not exist on {config.bootstrap_servers}")
    needed = grouping_of(config).output_partitions(inputs)
    big = {"max.message.bytes": str(MAX_MESSAGE_BYTES)}
    side = [t for t in (config.errors_deadletterqueue_topic_name, config.late_topic) if t]
    written = [config.output_topic, *side]
    missing_outputs = set(written) - set(await admin.list_topics())
    if missing_outputs:
        replicas = config.replication_factor
        if replicas == -1:
            replicas = await default_replication(admin)
        specs = [TopicSpec(t, needed, replicas, configs=big) for t in written if t in missing_outputs]
        created = await ensure_topics(admin, specs)
        if created:
            log.info("created topics %s (%d replicas each)", ", ".join(created), replicas)
    outputs = await wait_for_partitions(admin, written)
    have = outputs[config.output_topic]
    if have < needed:
        raise AdminError(
            f"output topic {config.output_topic} has {have} partition(s) but task.grouping="
            f"{config.task_grouping} needs {needed} (one per task); use a new topic or add partitions"
        )
    types = await topic_configs(admin, config.topics, [TIMESTAMP_TYPE])
    output = await topic_configs(admin, [config.output_topic], [TIMESTAMP_TYPE, AFTER_MAX, BEFORE_MAX])
    return TopicLayout(
        input_partitions={t: inputs[t] for t in config.topics},
        output_partitions=have,
        side_partitions={t: outputs[t] for t in side},
        log_append_time_inputs=frozenset(
            t for t, c in types.items() if c.get(TIMESTAMP_TYPE) == "LogAppendTime"
        ),
        output_limits=output_limits(output.get(config.output_topic, {})),
    )


def output_limits(configs: Mapping[str, str]) -> BrokerTimestampLimits | None:
    """The output topic's effective timestamp settings as limits (Kafka's defaults where the
    broker reported none); ``None`` for a LogAppendTime topic."""
    if configs.get(TIMESTAMP_TYPE) == "LogAppendTime":
        return None
    default = BrokerTimestampLimits()
    return BrokerTimestampLimits(
        after_max_ms=int(configs.get(AFTER_MAX, default.after_max_ms)),
        before_max_ms=int(configs.get(BEFORE_MAX, default.before_max_ms)),
    )
