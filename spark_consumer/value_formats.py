"""``--value-format``: what the ordered topic's values are, resolved against the registry at plan time.

``json`` (the default) is the value as text, parsed with ``--value-schema``. ``avro`` and
``protobuf`` are framed for a Schema Registry (:mod:`timesync_wire.framing`); their schemas
come from the registry for the topic's value subject, read once before Spark starts
(:func:`spark_consumer.value_decoders.plan_values`), so a wrong URL or subject costs no Spark
start-up.

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
from typing import ClassVar

from spark_consumer.options import UsageError
from spark_consumer.schema_registry import SubjectVersion


@dataclass(frozen=True, slots=True)
class AvroValues:
    """Avro values of ``subject``: the reader schema (the latest version) and every version's
    schema by its id, each the writer schema of the records that carry that id."""

    #: The value format (:data:`timesync_wire.formats.FORMATS`) whose decoder reads these.
    format: ClassVar[str] = "avro"

    subject: str
    reader_schema: str
    writer_schemas: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class ProtobufValues:
    """Protobuf values of ``subject``: the latest version compiled into a ``FileDescriptorSet``
    (with everything it imports), the name of its file in it, the ids of every version, and
    which message of the file the values are (its message indexes and full name; a record framed
    with other indexes is another message and does not decode)."""

    format: ClassVar[str] = "protobuf"

    subject: str
    descriptor_set: bytes
    file_name: str
    schema_ids: frozenset[int]
    message_indexes: tuple[int, ...] = (0,)
    message_name: str = ""


BinaryValues = AvroValues | ProtobufValues


def require_bounded(subject: str, version: SubjectVersion, schema: str) -> None:
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


def proto_file_name(version: SubjectVersion) -> str:
    """The file name a subject's own .proto text is compiled under (references keep theirs)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in version.subject)
    return f"{safe}.proto"
