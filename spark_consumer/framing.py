"""Confluent's wire format, as the jobs accept it: which schema wrote a value, and where its body starts.

    byte 0      magic byte, always 0
    bytes 1-4   the schema id, a 32-bit big-endian integer the registry assigned
    Protobuf:   the message indexes (which message of the .proto file wrote the body) as zigzag
                varints, a count then the path through nested messages; the common ``[0]``
                (the file's first message) is written as the single byte 0
    then        the body: Avro binary, or the Protobuf message

This is the framing Confluent's serializers write and Apicurio's ``/apis/ccompat`` clients use.
Apicurio's native serdes can put the id in a Kafka header or use another magic byte; such
values are not guessed at: they do not decode (their ``data`` is NULL).

:func:`split` is the rule in plain Python. The Avro path runs it as Spark expressions
(:func:`spark_consumer.value_decoding.avro_value`), which the Spark tests hold to the same cases.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC = 0
#: Magic byte and schema id.
HEADER_SIZE = 5
#: Beyond this many message indexes a Protobuf header is taken as corrupt.
MAX_MESSAGE_INDEXES = 32


@dataclass(frozen=True, slots=True)
class Frame:
    """A framed value taken apart: the schema id, the message indexes (Protobuf), the body."""

    schema_id: int
    message_indexes: tuple[int, ...]
    body: bytes


def split(value: bytes | None, protobuf: bool = False) -> Frame | None:
    """``value`` taken apart, or ``None`` when it is not framed (too short, wrong magic byte,
    Protobuf indexes that do not parse)."""
    if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC:
        return None
    schema_id = int.from_bytes(value[1:HEADER_SIZE], "big")
    if not protobuf:
        return Frame(schema_id, (), value[HEADER_SIZE:])
    parsed = _message_indexes(value, HEADER_SIZE)
    if parsed is None:
        return None
    indexes, start = parsed
    return Frame(schema_id, indexes, value[start:])


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    result = shift = 0
    while pos < len(data) and shift <= 63:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zigzag
        shift += 7
    return None


def _message_indexes(data: bytes, pos: int) -> tuple[tuple[int, ...], int] | None:
    first = _varint(data, pos)
    if first is None:
        return None
    count, pos = first
    if count == 0:  # the single 0 byte: the file's first message
        return (0,), pos
    if count < 0 or count > MAX_MESSAGE_INDEXES:
        return None
    indexes = []
    for _ in range(count):
        item = _varint(data, pos)
        if item is None or item[0] < 0:
            return None
        index, pos = item
        indexes.append(index)
    return tuple(indexes), pos


def frame(schema_id: int, body: bytes, message_indexes: tuple[int, ...] | None = None) -> bytes:
    """A value framed as a serializer writes it (``message_indexes`` for Protobuf)."""
    header = bytes([MAGIC]) + schema_id.to_bytes(4, "big")
    if message_indexes is None:
        return header + body
    if message_indexes == (0,):
        return header + b"\x00" + body
    return header + b"".join(_zigzag_varint(n) for n in (len(message_indexes), *message_indexes)) + body


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7
