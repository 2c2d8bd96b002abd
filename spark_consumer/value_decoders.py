"""How the jobs decode each value format: one decoder per format of the table, chosen once.

The formats are the wire layer's (:data:`timesync_wire.formats.FORMATS`): ``--value-format``
takes its choices from there, and :func:`spark_decoder` finds the format's decoder here — a name
with no decoder is a one-line error, never another format's decoder. A decoder says whether its
schemas come from the registry (``--schema-registry-url``, ``--value-subject``) and, for those
that do, how to plan (fetch the subject's versions before Spark starts), what Spark type the
values decode to, and the column that decodes them:

* ``json`` — text, parsed with ``--value-schema`` by Spark's ``from_json``
  (:func:`spark_consumer.values.with_data`); nothing to plan;
* ``avro`` — Spark's ``from_avro``, one branch per schema id of the subject, resolved to the
  latest version (:func:`spark_consumer.value_decoding.avro_value`);
* ``protobuf`` — a row decoder in the Python workers, as ``spark-protobuf`` is not served
  (:func:`spark_consumer.value_decoding.protobuf_value`).

A new format: its :class:`RegistryDecoder` (or :class:`SparkDecoder`) subclass here and one line
in :data:`DECODERS`; ``tests/spark/test_value_decoders.py`` holds the table to the formats'.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from spark_consumer.options import UsageError
from spark_consumer.value_formats import (
    AvroValues,
    BinaryValues,
    ProtobufValues,
    proto_file_name,
    require_bounded,
)
from timesync_wire.formats import FORMATS, UnknownFormatError, ValueFormat, value_format

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.types import StructType

    from spark_consumer.schema_registry import RegistryClient, SubjectVersion


class SparkDecoder(ABC):
    """How the jobs decode one value format (see the module)."""

    #: The name of the format in :data:`timesync_wire.formats.FORMATS`.
    name: ClassVar[str]

    @property
    def format(self) -> ValueFormat:
        return value_format(self.name)

    @property
    def registry(self) -> bool:
        """Its schemas come from the registry: the format has a registry schema type."""
        return self.format.schema_type is not None


class TextDecoder(SparkDecoder):
    """Values that are text, parsed with ``--value-schema``: nothing to plan, nothing decoded
    before the job reads ``data``."""

    name: ClassVar[str] = "json"


class RegistryDecoder(SparkDecoder):
    """Values framed for a registry, decoded with the subject's schemas."""

    @abstractmethod
    def plan(
        self, client: RegistryClient, versions: list[SubjectVersion], message: str | None
    ) -> BinaryValues:
        """The subject's ``versions`` (oldest first, the last of this format) made ready to
        decode; ``message``: the values' message, for a format with message indexes."""

    @abstractmethod
    def struct(self, spark: SparkSession, values: BinaryValues) -> StructType:
        """The Spark type the values decode to."""

    @abstractmethod
    def column(self, value: Column, values: BinaryValues, spark: SparkSession) -> Column:
        """``value`` (BINARY) decoded, with its verdict, within the session's bounds."""


class AvroDecoder(RegistryDecoder):
    name: ClassVar[str] = "avro"

    def plan(self, client: RegistryClient, versions: list[SubjectVersion], message: str | None) -> AvroValues:
        fmt = self.format
        latest = versions[-1]
        writers = {
            v.id: fmt.compile(v.schema, client.referenced(v))
            for v in versions
            if v.schema_type == fmt.schema_type
        }
        for v in versions:
            if v.id in writers:
                require_bounded(latest.subject, v, writers[v.id])
        return AvroValues(latest.subject, writers[latest.id], writers)

    def struct(self, spark: SparkSession, values: BinaryValues) -> StructType:
        from spark_consumer.value_decoding import avro_struct

        assert isinstance(values, AvroValues)
        return avro_struct(spark, values)

    def column(self, value: Column, values: BinaryValues, spark: SparkSession) -> Column:
        from spark_consumer.value_decoding import avro_value, session_limits

        assert isinstance(values, AvroValues)
        return avro_value(value, values, session_limits(spark))


class ProtobufDecoder(RegistryDecoder):
    name: ClassVar[str] = "protobuf"

    def plan(
        self, client: RegistryClient, versions: list[SubjectVersion], message: str | None
    ) -> ProtobufValues:
        from spark_consumer.protobuf_schema import compile_descriptor_set, message_path

        latest = versions[-1]
        name = proto_file_name(latest)
        descriptor_set = compile_descriptor_set(name, {**client.referenced(latest), name: latest.schema})
        indexes, full_name = message_path(descriptor_set, name, message)
        ids = frozenset(v.id for v in versions)
        return ProtobufValues(latest.subject, descriptor_set, name, ids, indexes, full_name)

    def struct(self, spark: SparkSession, values: BinaryValues) -> StructType:
        from spark_consumer.value_decoding import protobuf_struct

        assert isinstance(values, ProtobufValues)
        return protobuf_struct(values)

    def column(self, value: Column, values: BinaryValues, spark: SparkSession) -> Column:
        from spark_consumer.value_decoding import protobuf_value, session_limits

        assert isinstance(values, ProtobufValues)
        return protobuf_value(value, values, session_limits(spark))


#: The jobs' decoder of every value format, by the format's name.
DECODERS: dict[str, SparkDecoder] = {d.name: d for d in (TextDecoder(), AvroDecoder(), ProtobufDecoder())}


def spark_decoder(name: str) -> SparkDecoder:
    """The decoder of the format ``name``; :class:`UsageError` for a name of no format, or of a
    format the jobs cannot decode."""
    try:
        value_format(name)
    except UnknownFormatError as e:
        raise UsageError(f"--value-format: {e}") from None
    found = DECODERS.get(name)
    if found is None:
        raise UsageError(
            f"--value-format {name}: the Spark jobs have no decoder for it; known: {', '.join(DECODERS)}"
        )
    return found


def formats_where(holds: Callable[[SparkDecoder], bool]) -> str:
    """The names of the formats whose decoder ``holds``, as a message lists them (``avro or
    protobuf``)."""
    return " or ".join(name for name, decoder in DECODERS.items() if holds(decoder))


def with_registry(decoder: SparkDecoder) -> bool:
    return decoder.registry


def with_messages(decoder: SparkDecoder) -> bool:
    return decoder.format.message_indexes


def registry_decoder(name: str) -> RegistryDecoder:
    """The decoder of the registry format ``name`` (:class:`UsageError` otherwise)."""
    found = spark_decoder(name)
    if not isinstance(found, RegistryDecoder):
        raise UsageError(f"--value-format {name}: its values take no registry schemas")
    return found


def plan_values(name: str, client: RegistryClient, subject: str, message: str | None = None) -> BinaryValues:
    """Fetch ``subject``'s versions and prepare their decoding as the format ``name``
    (:class:`~spark_consumer.schema_registry.RegistryError` or :class:`UsageError` otherwise).

    The subject's latest version must be of the format's schema type. ``message`` names the
    values' message type, for a format with message indexes (Protobuf: full or relative to the
    file's package; by default the file's first message)."""
    from spark_consumer.schema_registry import RegistryError

    decoder = registry_decoder(name)
    versions = client.all_versions(subject)
    if not versions:
        raise RegistryError(f"schema registry: subject {subject!r} has no versions")
    latest, expected = versions[-1], decoder.format.schema_type
    if latest.schema_type != expected:
        raise UsageError(
            f"--value-format {name}: subject {subject!r} holds {latest.schema_type} schemas "
            f"(version {latest.version}, id {latest.id}), not {expected}"
        )
    return decoder.plan(client, versions, message)


def decoded_value(value: Column, values: BinaryValues) -> Column:
    """``value`` (BINARY) decoded as ``values`` says, with its verdict, within the active
    session's bounds."""
    from pyspark.sql import SparkSession

    return registry_decoder(values.format).column(value, values, SparkSession.active())


def value_struct(spark: SparkSession, values: BinaryValues) -> StructType:
    """The Spark type :func:`decoded_value` gives."""
    return registry_decoder(values.format).struct(spark, values)


__all__ = ["DECODERS", "FORMATS", "formats_where", "plan_values", "spark_decoder"]
