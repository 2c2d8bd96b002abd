"""Waiting for a service outside Kafka (the schema registry) is degraded health that only that
service's return clears: Kafka answering says nothing about the registry."""

from __future__ import annotations

from sidecar.service.health import Health
from sidecar.service.metrics import Metrics


def test_waiting_for_the_registry_stays_degraded_through_kafka_contact_until_it_answers() -> None:
    now = [100.0]
    health = Health(silence_s=10, clock=lambda: now[0])
    health.started()
    health.waiting_for("schema registry unavailable (connection refused)")
    now[0] += 7
    health.contact()  # a fetch response: Kafka is fine
    assert health.status() == (
        "degraded",
        "schema registry unavailable (connection refused) (for 7 s; retrying)",
    )
    health.waiting_for(None)
    assert health.status() == ("healthy", "consuming and producing")


def test_a_registry_unusable_longer_than_its_bound_turns_health_unhealthy_until_it_answers() -> None:
    now = [100.0]
    health = Health(silence_s=10, clock=lambda: now[0])
    health.started()
    health.waiting_for("schema registry unavailable (429)", unhealthy_after_s=60)
    now[0] += 60
    assert health.status()[0] == "degraded"
    now[0] += 1
    health.contact()
    assert health.status() == (
        "unhealthy",
        "schema registry unavailable (429) (for 61 s, longer than the 60 s allowed; still retrying)",
    )
    assert health.waiting_seconds() == 61
    health.waiting_for(None)
    assert health.status() == ("healthy", "consuming and producing")
    assert health.waiting_seconds() == 0


def test_the_wait_is_a_metric_read_at_each_scrape() -> None:
    now = [0.0]
    health = Health(clock=lambda: now[0])
    metrics = Metrics()
    metrics.watch_registry(health.waiting_seconds, 300.0)
    health.waiting_for("schema registry unavailable (x)", 300.0)
    now[0] = 42.0
    text = metrics.exposition().decode()
    assert "timesync_schema_registry_unavailable_seconds 42.0" in text
    assert "timesync_schema_registry_unhealthy_after_seconds 300.0" in text
