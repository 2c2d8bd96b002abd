"""Protobuf values framed for a Schema Registry: the format's entry in the table.

A schema id's ``.proto`` text and references are compiled by protoc in a bounded child process
(:mod:`timesync_wire.schemas.protoc`), once per id; each message a value's indexes name gets its
reader: a plan compiled from the descriptors (:mod:`.protobuf_plan`, in C when built, held to the
runtime's verdicts) or, for what a plan cannot read as the runtime does
(:class:`~.protobuf_compile.NoPlan`: groups, message sets, extensions, a oneof shared with a
closed enum, a Timestamp that is a schema's own copy), the runtime's parse
(:func:`.protobuf.protobuf_time_reader`). Either way the path is checked against the schema
first, by the runtime's descriptors.

Kept apart from the readers so that the table of formats loads no protobuf runtime: a sidecar
that reads another format never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from timesync_wire import timevalues
from timesync_wire.formats.base import TimeReader, ValueFormat
from timesync_wire.timevalues import Unit


class ProtobufFormat(ValueFormat):
    """Protobuf messages framed for a Schema Registry (with message indexes)."""

    name: ClassVar[str] = "protobuf"
    schema_type: ClassVar[str | None] = "PROTOBUF"
    message_indexes: ClassVar[bool] = True

    def compile(self, text: str, references: Mapping[str, str]) -> bytes:
        """The schema's ``FileDescriptorSet``, its main file named ``MAIN_NAME``."""
        from timesync_wire.schemas.protoc import compile_proto

        return compile_proto(text, references)

    def time_reader(
        self, path: Sequence[str], unit: Unit, schema: Any = None, indexes: Sequence[int] = ()
    ) -> TimeReader:
        from timesync_wire.formats.protobuf import protobuf_time_reader
        from timesync_wire.formats.protobuf_compile import NoPlan, compile_plan
        from timesync_wire.formats.protobuf_plan import ProtobufTimePlan
        from timesync_wire.schemas.protoc import MAIN_NAME

        reader = protobuf_time_reader(schema, MAIN_NAME, indexes, path, unit)
        try:
            return ProtobufTimePlan(compile_plan(reader.descriptor, path), unit, timevalues)
        except NoPlan:
            return reader
