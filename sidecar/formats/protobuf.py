"""Event time from Protobuf bodies: descriptors built from the registry's schema, one field read.

The registry gives a schema as ``.proto`` text plus its references; the service compiles them
into a ``FileDescriptorSet`` (:mod:`sidecar.registry.protoc`) and :func:`protobuf_time_reader`
builds, from that set alone, the message class the framing's message indexes name and checks
the extractor's path against it. Each schema id gets its own descriptor pool: two versions of
one subject define the same message names with different fields, and one shared pool would
refuse the second.

``google.protobuf.Timestamp`` is read as what it is (seconds and nanos); other fields take the
extractor's unit. A message field on the path that is not set is an invalid time, not 1970.

Untrusted bodies: protobuf's runtime (upb, the default since protobuf 4.21) parses in C without
recursion in Python, in time linear in the body (a megabyte of unknown fields: milliseconds), and
stops at 100 levels of nested messages (``upb_DecodeOptions_MaxDepth``): a body 10,000 deep is a
``DecodeError``, an invalid timestamp like any body that does not decode. Descriptor sets come
from our own protoc run (:mod:`sidecar.registry.protoc`), bounded there; one the runtime cannot
load is a :class:`SchemaError` with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from sidecar.formats.avro import SchemaError
from sidecar.formats.timevalues import TimeValueError, Unit, seconds_nanos_to_millis, to_millis

TIMESTAMP = "google.protobuf.Timestamp"
_PLAIN = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_DOUBLE,
    FieldDescriptor.TYPE_FLOAT,
    FieldDescriptor.TYPE_STRING,
}

__all__ = ["DecodeError", "ProtobufTimeReader", "SchemaError", "protobuf_time_reader"]


class ProtobufTimeReader:
    """Event time of bodies of one message type (one schema id and message-index path)."""

    __slots__ = ("_check", "_cls", "_names", "field", "timestamp", "unit")

    def __init__(self, cls: Any, fields: Sequence[FieldDescriptor], timestamp: bool, unit: Unit) -> None:
        self._cls = cls
        self._names = tuple(f.name for f in fields)
        # A message field on the path, or a leaf that tracks presence: ask HasField before reading.
        self._check = tuple(
            f.type == FieldDescriptor.TYPE_MESSAGE or bool(getattr(f, "has_presence", False)) for f in fields
        )
        self.timestamp = timestamp
        self.unit: Unit = unit
        self.field = ".".join(self._names)

    def millis(self, value: bytes, start: int = 0) -> int:
        """Event time of the body at ``value[start:]``; :class:`TimeValueError` or
        ``DecodeError`` when it has none."""
        node = self._cls.FromString(value[start:] if start else value)
        for name, check in zip(self._names, self._check, strict=True):
            if check and not node.HasField(name):
                raise TimeValueError(f"field {self.field} is not set (at {name})")
            node = getattr(node, name)
        if self.timestamp:
            return seconds_nanos_to_millis(node.seconds, node.nanos, self.field)
        return to_millis(node, "plain", self.unit, self.field)


def protobuf_time_reader(
    descriptor_set: bytes, file_name: str, indexes: Sequence[int], path: Sequence[str], unit: Unit
) -> ProtobufTimeReader:
    """The reader for the message at ``indexes`` of ``file_name`` in the serialized
    ``FileDescriptorSet``; :class:`SchemaError` when it has no such message or no time at
    ``path``, or when the set does not load (whatever the runtime raises: it says why)."""
    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
        pool = descriptor_pool.DescriptorPool()
        for proto in files.file:  # protoc writes dependencies before their dependents
            pool.Add(proto)
    except Exception as e:  # DecodeError, TypeError for a conflict, …: all mean "not loadable"
        raise SchemaError(f"the compiled descriptors do not load: {type(e).__name__}: {_line(e)}") from None
    for proto in files.file:
        if proto.name == file_name:
            break
    else:
        raise SchemaError(f"the descriptor set has no file {file_name}")
    name = _message_name(proto, indexes)
    try:
        message = pool.FindMessageTypeByName(name)
        cls = message_factory.GetMessageClass(message)
    except Exception as e:  # a descriptor the pool took but cannot build
        raise SchemaError(f"message {name} does not load: {type(e).__name__}: {_line(e)}") from None
    fields: list[FieldDescriptor] = []
    desc: Descriptor | None = message
    for i, part in enumerate(path):
        here = ".".join(path[: i + 1])
        if desc is None:
            raise SchemaError(f"{'.'.join(path[:i])} is not a message, so it has no field {part}")
        field = desc.fields_by_name.get(part)
        if field is None:
            raise SchemaError(f"message {desc.full_name} has no field {here}")
        if _repeated(field):
            raise SchemaError(f"field {here} is repeated; a time must be a single value")
        fields.append(field)
        desc = field.message_type if field.type == FieldDescriptor.TYPE_MESSAGE else None
        if desc is not None and desc.full_name == TIMESTAMP and i == len(path) - 1:
            break
    leaf = fields[-1]
    timestamp = (
        leaf.type == FieldDescriptor.TYPE_MESSAGE and getattr(leaf.message_type, "full_name", "") == TIMESTAMP
    )
    if not timestamp and leaf.type not in _PLAIN:
        raise SchemaError(f"field {'.'.join(path)} is not a number, a string or a {TIMESTAMP}")
    if timestamp and not _well_known_timestamp(leaf.message_type):
        # A schema may define a message of that name itself (without importing the real one).
        raise SchemaError(f"field {'.'.join(path)} is a {TIMESTAMP} without int64 seconds and int32 nanos")
    return ProtobufTimeReader(cls, fields, timestamp, unit)


def _well_known_timestamp(desc: Descriptor | None) -> bool:
    """``desc`` has the well-known Timestamp's fields: ``int64 seconds`` and ``int32 nanos``."""
    if desc is None:
        return False
    want = {"seconds": FieldDescriptor.TYPE_INT64, "nanos": FieldDescriptor.TYPE_INT32}
    for name, kind in want.items():
        field = desc.fields_by_name.get(name)
        if field is None or field.type != kind or _repeated(field):
            return False
    return True


def _line(error: Exception) -> str:
    return " ".join(str(error).split())[:200]


def _repeated(field: FieldDescriptor) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # protobuf ≥ 6 prefers it to label
    if isinstance(is_repeated, bool):
        return is_repeated
    return bool(getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED)


def _message_name(file: descriptor_pb2.FileDescriptorProto, indexes: Sequence[int]) -> str:
    """The full name of the message the indexes point at, in declaration order (which the
    framing's indexes count in)."""
    messages: Sequence[descriptor_pb2.DescriptorProto] = file.message_type
    names = [file.package] if file.package else []
    where = f"file {file.name}"
    if not indexes:
        raise SchemaError("empty message index")
    for index in indexes:
        if index >= len(messages):
            raise SchemaError(
                f"message index {list(indexes)} points past the {len(messages)} messages of {where}"
            )
        names.append(messages[index].name)
        where = f"message {'.'.join(names)}"
        messages = messages[index].nested_type
    return ".".join(names)
