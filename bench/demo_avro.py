"""``make demo DEMO_FORMAT=avro``: the demo's ad traffic as Avro values through a real registry.

The default demo writes JSON. With ``DEMO_FORMAT=avro`` the same events are written as Avro,
framed for a Schema Registry (Confluent's wire format) under one subject that every topic of
the demo shares, ``demo.ad-value``; the registry is ``$SCHEMA_REGISTRY_URL`` or the local one
(``deploy/local/registry.py``, started and stopped here). The sidecar copies the values
untouched and orders by the record timestamp, which the workload sets to the event time, so it
needs no Avro of its own; Spark's jobs decode the values with the registry's schema
(:mod:`spark_consumer.value_formats`), the way ``timesync-spark --value-format avro`` does.
"""

from __future__ import annotations

import io
import json
import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import fastavro
import orjson

from spark_consumer.schema_registry import RegistryClient, checked_settings
from spark_consumer.value_decoders import plan_values
from spark_consumer.value_formats import AvroValues
from testkit.local_broker import load_registry_launcher
from testkit.workloads import Event
from timesync_wire import framing

FORMATS = ("json", "avro")
SUBJECT = "demo.ad-value"
AD_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "AdEvent",
        "namespace": "timesync.demo",
        "fields": [
            {"name": "imp", "type": "string"},
            {"name": "ad", "type": "string"},
            {"name": "ts", "type": "long"},
        ],
    }
)


def demo_format() -> str:
    """``$DEMO_FORMAT`` (default ``json``); anything else is refused in one line."""
    chosen = os.environ.get("DEMO_FORMAT", "json") or "json"
    if chosen not in FORMATS:
        raise SystemExit(f"DEMO_FORMAT={chosen!r}: expected one of {', '.join(FORMATS)}")
    return chosen


@contextmanager
def registry() -> Iterator[str]:
    """The registry's Confluent-API URL: ``$SCHEMA_REGISTRY_URL``, else a local one for the demo."""
    existing = os.environ.get("SCHEMA_REGISTRY_URL")
    if existing:
        yield existing.rstrip("/")
        return
    local = load_registry_launcher().start_registry(die_with_parent=True)
    try:
        yield local.url
    finally:
        local.stop()


def register_schema(url: str, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    """Register ``schema`` (of ``schema_type``: ``AVRO``, ``PROTOBUF``, ``JSON``) under
    ``subject`` of the registry at ``url``; the id the registry gave it."""
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps({"schema": schema, "schemaType": schema_type}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.loads(answer.read())["id"])


def register(url: str) -> tuple[int, AvroValues]:
    """Register the ad schema under :data:`SUBJECT`: its id, and the jobs' decoding plan."""
    schema_id = register_schema(url, SUBJECT, AD_SCHEMA)
    values = plan_values("avro", RegistryClient(checked_settings(url)), SUBJECT)
    assert isinstance(values, AvroValues)
    return schema_id, values


def as_avro(events: list[Event], schema_id: int) -> list[Event]:
    """The workload's events with their JSON values written as framed Avro."""
    parsed = fastavro.parse_schema(json.loads(AD_SCHEMA))
    out = []
    for event in events:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, orjson.loads(event.value))
        out.append(replace(event, value=framing.frame(schema_id, body.getvalue())))
    return out
