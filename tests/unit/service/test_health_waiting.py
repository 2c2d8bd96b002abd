"""Waiting for a service outside Kafka (the schema registry) is degraded health that only that
service's return clears: Kafka answering says nothing about the registry."""

from __future__ import annotations

from sidecar.service.health import Health


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
