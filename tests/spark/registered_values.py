"""Values as a registry's serializers write them, for the Spark tests: schemas registered on the
session's real registry (Confluent's API), bodies framed with the id it assigned."""

from __future__ import annotations

import io
import json
import urllib.parse
import urllib.request
from typing import Any

import fastavro

from spark_consumer.protobuf_schema import compile_descriptor_set
from timesync_wire import framing
from timesync_wire.schemas.protobuf_files import load_file, message_at


def register(url: str, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    """Register ``schema`` as the next version of ``subject``; its global id."""
    return register_with_references(url, subject, schema, [], schema_type)


def register_with_references(
    url: str, subject: str, schema: str, references: list[dict[str, Any]], schema_type: str = "AVRO"
) -> int:
    """:func:`register` with schema references (``{"name", "subject", "version"}`` each)."""
    body: dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    if references:
        body["references"] = references
    request = urllib.request.Request(
        f"{url}/subjects/{urllib.parse.quote(subject, safe='')}/versions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(json.loads(answer.read())["id"])


def avro(schema_id: int, schema: str, record: dict[str, Any]) -> bytes:
    """``record`` written with ``schema`` (Avro binary), framed with ``schema_id``."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema)), record)
    return framing.frame(schema_id, out.getvalue())


class ProtobufWriter:
    """Serializes the first message of a .proto file, framed with its id and indexes ``[0]``."""

    def __init__(self, schema_id: int, proto: str, file_name: str = "test.proto") -> None:
        from google.protobuf import message_factory

        descriptors = compile_descriptor_set(file_name, {file_name: proto})
        message = message_at(load_file(descriptors, file_name), (0,))
        assert message is not None
        self.cls = message_factory.GetMessageClass(message)
        self.schema_id = schema_id

    def __call__(self, **fields: Any) -> bytes:
        return framing.frame(self.schema_id, self.cls(**fields).SerializeToString(), (0,))
