"""Value formats: how event time is read from a value of each format, and the table of them.

:data:`FORMATS` is the one list of formats (the contract: :class:`.base.ValueFormat`): the
sidecar's ``timestamp.extractor`` and the Spark jobs' ``--value-format`` take their names from it,
and :func:`value_format` is the one lookup, an unknown name an error that lists the known ones.
A new format is a :class:`~.base.ValueFormat` subclass in a module of its own and one line here,
and its Spark decoder (``spark_consumer/value_decoders.py``).

The readers are plans, each a pure-Python specification with a C twin held to it: :mod:`.avro_plan`
(a path in an Avro body, skipped to by a plan compiled from the writer schema), :mod:`.json_scan`
(a path in a JSON document, found without building objects) and :mod:`.protobuf_plan` (a path in
a Protobuf body, walked from descriptors).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from timesync_wire.formats.avro import AvroFormat
from timesync_wire.formats.base import ValueFormat
from timesync_wire.formats.json import JsonFormat
from timesync_wire.formats.protobuf_format import ProtobufFormat

__all__ = ["FORMATS", "UnknownFormatError", "ValueFormat", "value_format"]

#: Every value format by name, in the order messages list them.
FORMATS: Mapping[str, ValueFormat] = MappingProxyType(
    {fmt.name: fmt for fmt in (JsonFormat(), AvroFormat(), ProtobufFormat())}
)


class UnknownFormatError(ValueError):
    """A format name the table does not hold; the message lists the ones it does."""


def value_format(name: str) -> ValueFormat:
    """The format called ``name``; :class:`UnknownFormatError` when there is none (never another
    format in its place)."""
    found = FORMATS.get(name)
    if found is None:
        raise UnknownFormatError(f"unknown value format {name!r}; known: {', '.join(FORMATS)}")
    return found
