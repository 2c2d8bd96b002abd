"""Protobuf values as Spark rows: a message's Spark type, and a framed value decoded into it.

Spark's own ``from_protobuf`` lives in ``spark-protobuf_2.13``, which Maven Central does not
serve at any Spark 4 version; the jobs decode Protobuf here instead, in the Python workers, with
the ``protobuf`` package and descriptors built from the registry's schema
(:mod:`spark_consumer.protobuf_schema`). The mapping follows ``from_protobuf``'s:

============================================  =============================
Protobuf                                      Spark
============================================  =============================
int32, sint32, sfixed32                       INT
int64, sint64, sfixed64, uint32, uint64,      BIGINT (uint64 above 2^63−1
fixed32, fixed64                              wraps, as in from_protobuf)
float / double / bool / string / bytes        FLOAT / DOUBLE / BOOLEAN / STRING / BINARY
enum                                          STRING (the value's name)
message                                       STRUCT (NULL when not set)
``google.protobuf.Timestamp``                 TIMESTAMP
repeated T / map<K, V>                        ARRAY<T> / MAP<K, V>
============================================  =============================

A scalar without presence (plain proto3) reads as its value, its default included, the way the
JSON of the same message has it; a field with presence (``optional``, proto2) that is not set
is NULL. A recursive message cannot be a Spark type and is refused at plan time.

:class:`FramedDecoder` is what runs per record: framing (:mod:`spark_consumer.framing`), the
body parsed as the job's message (the file's first, message indexes ``[0]``); a value that is
not framed, carries an id that is not one of the subject's versions or another message's
indexes, does not parse, or breaks a bound (:mod:`spark_consumer.value_limits`: its size, its
items, its depth) gives ``None`` (``data`` NULL, counted), never a failed query.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from google.protobuf.message import DecodeError
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_consumer import framing
from spark_consumer.options import UsageError
from spark_consumer.value_limits import DEFAULT_MAX_ITEMS, ValueLimits

TIMESTAMP = "google.protobuf.Timestamp"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_SCALARS: dict[int, DataType] = {
    FieldDescriptor.TYPE_INT32: IntegerType(),
    FieldDescriptor.TYPE_SINT32: IntegerType(),
    FieldDescriptor.TYPE_SFIXED32: IntegerType(),
    FieldDescriptor.TYPE_INT64: LongType(),
    FieldDescriptor.TYPE_SINT64: LongType(),
    FieldDescriptor.TYPE_SFIXED64: LongType(),
    FieldDescriptor.TYPE_UINT32: LongType(),
    FieldDescriptor.TYPE_FIXED32: LongType(),
    FieldDescriptor.TYPE_UINT64: LongType(),
    FieldDescriptor.TYPE_FIXED64: LongType(),
    FieldDescriptor.TYPE_FLOAT: FloatType(),
    FieldDescriptor.TYPE_DOUBLE: DoubleType(),
    FieldDescriptor.TYPE_BOOL: BooleanType(),
    FieldDescriptor.TYPE_STRING: StringType(),
    FieldDescriptor.TYPE_BYTES: BinaryType(),
    FieldDescriptor.TYPE_ENUM: StringType(),
}
_UNSIGNED_64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)
#: How deep messages may nest inside the value's message: the protobuf runtime's own recursion
#: limit (measured with upb: 100 nested messages parse, 101 do not), past which no body parses.
MAX_DEPTH = 100


@functools.lru_cache(maxsize=8)
def file_descriptor(descriptor_set: bytes, file_name: str) -> FileDescriptor:
    """The file ``file_name`` of a serialized ``FileDescriptorSet``, in a pool of its own."""
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:  # --include_imports lists dependencies before their users
        pool.Add(proto)
    return pool.FindFileByName(file_name)


def message_descriptor(file: FileDescriptor, indexes: Iterable[int]) -> Descriptor | None:
    """The message at the path ``indexes`` (top-level index, then nested ones), or ``None``."""
    path = list(indexes)
    if not path or not 0 <= path[0] < len(file.message_types_by_name):
        return None
    current: Descriptor = list(file.message_types_by_name.values())[path[0]]
    for i in path[1:]:
        if not 0 <= i < len(current.nested_types):
            return None
        current = current.nested_types[i]
    return current


def struct_type(message: Descriptor, seen: tuple[str, ...] = ()) -> StructType:
    """The Spark type of ``message`` (see the table above); :class:`UsageError` if recursive or
    nested deeper than :data:`MAX_DEPTH`."""
    if message.full_name in seen:
        raise UsageError(f"Protobuf message {message.full_name} is recursive, which Spark types cannot hold")
    if len(seen) > MAX_DEPTH:
        raise UsageError(
            f"Protobuf message {seen[0]} nests messages more than {MAX_DEPTH} deep "
            f"(at {message.full_name}), more than the protobuf runtime parses"
        )
    inner = (*seen, message.full_name)
    return StructType([StructField(f.name, _field_type(f, inner), nullable=True) for f in message.fields])


def _field_type(field: Any, seen: tuple[str, ...]) -> DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return MapType(_single_type(key, seen), _single_type(value, seen))
    single = _single_type(field, seen)
    return ArrayType(single) if _repeated(field) else single


def _single_type(field: Any, seen: tuple[str, ...]) -> DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if field.message_type.full_name == TIMESTAMP:
            return TimestampType()
        return struct_type(field.message_type, seen)
    return _SCALARS[field.type]


# The descriptors are the protobuf runtime's (upb) objects, whose types the stubs do not match:
# Any at this boundary.
def _repeated(field: Any) -> bool:
    return bool(field.is_repeated)


def _is_map(field: Any) -> bool:
    return bool(
        _repeated(field)
        and field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
    )


class Undecodable(ValueError):
    """A body that parses but is not a value of its message: a ``Timestamp`` outside
    0001–9999, a string that is not UTF-8 (proto2 does not check), more items than allowed."""


# google.protobuf.Timestamp's own range (its .proto says so): 0001-01-01 to 9999-12-31 UTC.
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799


class RowBuilder:
    """Turns a parsed message into the values of :func:`struct_type` (a dict per struct),
    spending at most ``max_items`` repeated items and map entries on it in all
    (:class:`Undecodable` past that: the work per value is bounded whatever its size)."""

    def __init__(self, max_items: int) -> None:
        self.left = max_items

    def row(self, message: Any) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for field in message.DESCRIPTOR.fields:
            value = getattr(message, field.name)
            if _is_map(field):
                self._spend(len(value))
                key_field = field.message_type.fields_by_name["key"]
                value_field = field.message_type.fields_by_name["value"]
                row[field.name] = {
                    self.single(key_field, k): self.single(value_field, v) for k, v in value.items()
                }
            elif _repeated(field):
                self._spend(len(value))
                row[field.name] = [self.single(field, v) for v in value]
            elif field.has_presence and not message.HasField(field.name):
                row[field.name] = None
            else:
                row[field.name] = self.single(field, value)
        return row

    def _spend(self, items: int) -> None:
        self.left -= items
        if self.left < 0:
            raise Undecodable("more repeated items and map entries than allowed")

    def single(self, field: Any, value: Any) -> Any:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.full_name == TIMESTAMP:
                return _timestamp(value)
            return self.row(value)
        if field.type == FieldDescriptor.TYPE_ENUM:
            named = field.enum_type.values_by_number.get(value)
            return named.name if named is not None else str(value)
        if field.type == FieldDescriptor.TYPE_STRING and not isinstance(value, str):
            raise Undecodable(f"field {field.name} is not UTF-8")  # proto2 hands such bytes over
        if field.type in _UNSIGNED_64 and value >= 1 << 63:
            return value - (1 << 64)
        return value


def _timestamp(value: Any) -> dt.datetime:
    if not (_MIN_SECONDS <= value.seconds <= _MAX_SECONDS and 0 <= value.nanos < 1_000_000_000):
        raise Undecodable(f"Timestamp seconds={value.seconds} nanos={value.nanos} is out of range")
    return _EPOCH + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def to_row(message: Any, max_items: int = DEFAULT_MAX_ITEMS) -> dict[str, Any]:
    """``message`` as the values of :func:`struct_type` (a dict per struct); :class:`Undecodable`
    when it is not a value of its type (see there)."""
    return RowBuilder(max_items).row(message)


class FramedDecoder:
    """A framed Protobuf value → the row of its message, or ``None``; picklable for the workers.

    ``None`` whatever is wrong with the value: not framed, an id or message indexes that are not
    the job's, more than ``limits.max_bytes``, a body that does not parse (the ``protobuf``
    runtime also refuses messages nested more than 100 deep) or is :class:`Undecodable`. It
    never raises on a value, and its work is bounded by the value's size and ``limits``.

    Only the descriptor set's bytes travel to the Python workers; each worker builds its pool
    and message classes once (:func:`file_descriptor` caches them).
    """

    def __init__(
        self,
        descriptor_set: bytes,
        file_name: str,
        schema_ids: frozenset[int],
        message_indexes: tuple[int, ...] = (0,),
        limits: ValueLimits | None = None,
    ) -> None:
        self.descriptor_set = descriptor_set
        self.file_name = file_name
        self.schema_ids = schema_ids
        self.message_indexes = message_indexes
        self.limits = limits or ValueLimits()

    def __call__(self, value: bytes | None) -> dict[str, Any] | None:
        if value is None or len(value) > self.limits.max_bytes:
            return None
        frame = framing.split(value, protobuf=True)
        if frame is None or frame.schema_id not in self.schema_ids:
            return None
        if frame.message_indexes != self.message_indexes:  # another message type of the file
            return None
        cls = _message_class(self.descriptor_set, self.file_name, frame.message_indexes)
        if cls is None:
            return None
        try:
            return to_row(cls.FromString(frame.body), self.limits.max_items)
        except (DecodeError, ValueError):  # Undecodable is a ValueError
            return None


@functools.lru_cache(maxsize=64)
def _message_class(descriptor_set: bytes, file_name: str, indexes: tuple[int, ...]) -> Any:
    message = message_descriptor(file_descriptor(descriptor_set, file_name), indexes)
    return None if message is None else message_factory.GetMessageClass(message)
