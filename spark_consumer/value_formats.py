"""``--value-format``: what the ordered topic's values are, resolved against the registry at plan time.

``json`` (the default) is the value as text, parsed with ``--value-schema``. ``avro`` and
``protobuf`` are framed for a Schema Registry (:mod:`spark_consumer.framing`); their schemas
come from the registry for the topic's value subject, read once before Spark starts
(:func:`plan_values`), so a wrong URL or subject costs no Spark start-up.

**Older versions still decode.** A record carries the id of the schema that wrote it, and a
subject's versions have different ids. For Avro, every version of the subject is fetched; a
record is decoded with *its own* version as the writer schema and the latest version as the
reader schema (Avro's schema resolution: fields added since get their defaults, removed ones
are skipped), so every record comes out with the latest version's fields. For Protobuf, the
wire format is itself compatible across versions of a message (unknown fields skipped, missing
ones at their defaults): every record is decoded with the latest version's descriptors, as the
message ``--value-message`` names (the file's first by default). An id
that is not one of the subject's versions at plan time (a version registered after the job
started, or another subject's) does not decode: its ``data`` is NULL; restarting the job picks
up the new versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from spark_consumer.options import UsageError
from spark_consumer.schema_registry import RegistryClient, RegistryError, SchemaVersion

ValueFormat = Literal["json", "avro", "protobuf"]
VALUE_FORMATS: tuple[ValueFormat, ...] = ("json", "avro", "protobuf")
_SCHEMA_TYPE = {"avro": "AVRO", "protobuf": "PROTOBUF"}


@dataclass(frozen=True, slots=True)
class AvroValues:
    """Avro values of ``subject``: the reader schema (the latest version) and every version's
    schema by its id, each the writer schema of the records that carry that id."""

    subject: str
    reader_schema: str
    writer_schemas: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class ProtobufValues:
    """Protobuf values of ``subject``: the latest version compiled into a ``FileDescriptorSet``
    (with everything it imports), the name of its file in it, the ids of every version, and
    which message of the file the values are (its message indexes and full name; a record framed
    with other indexes is another message and does not decode)."""

    subject: str
    descriptor_set: bytes
    file_name: str
    schema_ids: frozenset[int]
    message_indexes: tuple[int, ...] = (0,)
    message_name: str = ""


BinaryValues = AvroValues | ProtobufValues


def plan_values(
    value_format: ValueFormat, client: RegistryClient, subject: str, message: str | None = None
) -> BinaryValues:
    """Fetch ``subject``'s versions and prepare their decoding (:class:`RegistryError` otherwise).

    ``value_format`` is ``avro`` or ``protobuf``; the subject's latest version must be of that
    type. ``message`` (Protobuf) names the values' message type, full or relative to the file's
    package; by default the file's first message.
    """
    versions = client.all_versions(subject)
    if not versions:
        raise RegistryError(f"schema registry: subject {subject!r} has no versions")
    latest = versions[-1]
    expected = _SCHEMA_TYPE[value_format]
    if latest.schema_type != expected:
        raise UsageError(
            f"--value-format {value_format}: subject {subject!r} holds {latest.schema_type} schemas "
            f"(version {latest.version}, id {latest.id}), not {expected}"
        )
    if value_format == "avro":
        from sidecar.formats.avro_references import standalone

        writers = {
            v.id: standalone(v.schema, _referenced(client, v, {}))
            for v in versions
            if v.schema_type == "AVRO"
        }
        for v in versions:
            if v.id in writers:
                _require_bounded(subject, v, writers[v.id])
        return AvroValues(subject, writers[latest.id], writers)
    from spark_consumer.protobuf_schema import compile_descriptor_set, message_path

    name = proto_file_name(latest)
    descriptor_set = compile_descriptor_set(name, {**_referenced(client, latest, {}), name: latest.schema})
    indexes, full_name = message_path(descriptor_set, name, message)
    ids = frozenset(v.id for v in versions)
    return ProtobufValues(subject, descriptor_set, name, ids, indexes, full_name)


def _require_bounded(subject: str, version: SchemaVersion, schema: str) -> None:
    """:class:`UsageError` when a version's values could claim more items than any bound stops
    (:func:`spark_consumer.value_limits.unbounded_arrays`)."""
    from spark_consumer.value_limits import unbounded_arrays

    where = unbounded_arrays(schema)
    if where is not None:
        raise UsageError(
            f"--value-format avro: subject {subject!r} (version {version.version}, id {version.id}): "
            f"{where} is an array of items that take no bytes (null, an empty record, a fixed of size 0) "
            "inside an array or map; a value of a few bytes could claim billions of them, so the jobs "
            "do not read such schemas"
        )


def proto_file_name(version: SchemaVersion) -> str:
    """The file name a subject's own .proto text is compiled under (references keep theirs)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in version.subject)
    return f"{safe}.proto"


def _referenced(client: RegistryClient, version: SchemaVersion, out: dict[str, str]) -> dict[str, str]:
    """Every schema ``version`` references, and theirs in turn, by reference name: a Protobuf
    reference by its import name, an Avro one by the full name of the type it defines."""
    for ref in version.references:
        if ref.name not in out:
            referenced = client.version(ref.subject, ref.version)
            out[ref.name] = referenced.schema
            _referenced(client, referenced, out)
    return out
