"""Topic preparation: the layout it learns, and one line naming Kafka's error when the broker refuses."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sidecar.core import BrokerTimestampLimits
from sidecar.kafka.admin import AdminError
from sidecar.service.topics import output_limits, prepare_topics
from tests.fakes.kafka import FakeAdmin, FakeCluster

from .harness import config

TOPIC_AUTHORIZATION_FAILED = 29
POLICY_VIOLATION = 44


class RefusingAdmin(FakeAdmin):
    """The fake cluster's admin, refusing to describe or create the topics the test names."""

    def __init__(self, cluster: FakeCluster, describe: dict[str, int] | None = None, create: int = 0) -> None:
        super().__init__(cluster)
        self.refuse_describe = describe or {}
        self.refuse_create = create

    async def describe_topics(self, topics: Any) -> list[dict[str, Any]]:
        described = await super().describe_topics(topics)
        for d in described:
            if d["topic"] in self.refuse_describe:
                d.update(partitions=[], error_code=self.refuse_describe[d["topic"]])
        return described

    async def create_topics(self, new_topics: Any) -> Any:
        if self.refuse_create:
            return SimpleNamespace(
                topic_errors=[(t.name, self.refuse_create, "refused by policy") for t in new_topics]
            )
        return await super().create_topics(new_topics)


async def test_the_layout_names_partitions_side_topics_and_log_append_time_inputs() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 3, {"message.timestamp.type": "LogAppendTime"})
    cluster.create_topic("b", 2)
    cfg = config(task_grouping="partition", late_records="topic:late")
    layout = await prepare_topics(FakeAdmin(cluster), cfg)
    assert dict(layout.input_partitions) == {"a": 3, "b": 2}
    assert layout.output_partitions == 3, "one output partition per task, created"
    assert dict(layout.side_partitions) == {"late": 3}
    assert layout.log_append_time_inputs == {"a"}
    assert layout.side_partition("late", 4) == 1


async def test_the_layout_carries_the_timestamps_the_output_topics_broker_accepts() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.create_topic("out", 1, {"message.timestamp.before.max.ms": "86400000"})
    layout = await prepare_topics(FakeAdmin(cluster), config(inputs=("a",), output_topic="out"))
    assert layout.output_limits == BrokerTimestampLimits(after_max_ms=3_600_000, before_max_ms=86_400_000)

    cluster.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    restamped = await prepare_topics(FakeAdmin(cluster), config(inputs=("a",), output_topic="lat"))
    assert restamped.output_limits is None, "the broker restamps a LogAppendTime topic: it refuses none"


async def test_a_topic_just_created_whose_configs_a_broker_does_not_know_yet_is_asked_for_again() -> None:
    """On a three-broker cluster the broker that answers DescribeConfigs may not have the new
    output topic's metadata yet (the full-size rolling-restart run met it)."""
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.configs_unknown_for = 3
    layout = await prepare_topics(FakeAdmin(cluster), config(inputs=("a",), output_topic="new-out"))
    assert layout.output_limits == BrokerTimestampLimits()
    assert cluster.configs_unknown_for == 0


def test_output_limits_default_to_kafkas_when_the_broker_reports_none() -> None:
    assert output_limits({}) == BrokerTimestampLimits(3_600_000, 2**63 - 1)
    assert output_limits({"message.timestamp.after.max.ms": "60000"}).after_max_ms == 60_000  # type: ignore[union-attr]


async def test_an_input_the_principal_may_not_describe_is_not_called_missing() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.create_topic("b", 1)
    admin = RefusingAdmin(cluster, describe={"b": TOPIC_AUTHORIZATION_FAILED})
    with pytest.raises(AdminError) as refused:
        await prepare_topics(admin, config())
    message = str(refused.value)
    assert message.startswith("cannot describe topic 'b': TopicAuthorizationFailedError")
    assert "check the ACLs" in message
    assert "do not exist" not in message


async def test_a_missing_input_is_named_with_the_bootstrap_servers() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    with pytest.raises(AdminError, match=r"^input topic\(s\) b do not exist on fake:9092$"):
        await prepare_topics(FakeAdmin(cluster), config())


async def test_an_output_the_broker_refuses_to_create_names_the_error_and_what_to_check() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 1)
    cluster.create_topic("b", 1)
    with pytest.raises(AdminError) as refused:
        await prepare_topics(RefusingAdmin(cluster, create=POLICY_VIOLATION), config())
    assert str(refused.value) == (
        "cannot create topic 'out': PolicyViolationError (refused by policy); the broker's "
        "create.topic.policy refused it: create the topic yourself"
    )


async def test_an_existing_output_with_too_few_partitions_for_its_tasks_is_refused() -> None:
    cluster = FakeCluster()
    cluster.create_topic("a", 4)
    cluster.create_topic("b", 4)
    cluster.create_topic("out", 2)
    with pytest.raises(AdminError, match=r"has 2 partition\(s\) but task\.grouping=partition needs 4"):
        await prepare_topics(FakeAdmin(cluster), config(task_grouping="partition"))
