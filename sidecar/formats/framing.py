"""Confluent's wire format: how a Schema Registry payload says which schema wrote it.

    byte 0      magic byte, always 0
    bytes 1-4   schema id, a 32-bit big-endian integer assigned by the registry
    Protobuf:   message indexes — which message of the schema's file wrote the body — as
                zigzag varints: a count, then the path of indexes through nested messages;
                the common ``[0]`` (the file's first message) is written as a single 0 byte
    then        the body (Avro binary, or the Protobuf message)

Only this framing is accepted. Apicurio's own serdes can also put the id in a Kafka header or
write a different magic byte (its ``0x02``-style mode); such values are refused here as
wrong framing rather than guessed at.
"""

from __future__ import annotations

MAGIC = 0
#: Magic byte and schema id.
HEADER_SIZE = 5


class FramingError(ValueError):
    """The value is not framed as Confluent's wire format; the message says how."""


def schema_id(value: bytes | None) -> int:
    """The schema id of a framed value; :class:`FramingError` if it is not framed."""
    if value is None:
        raise FramingError("value is null")
    if len(value) < HEADER_SIZE:
        raise FramingError(f"value has {len(value)} bytes, fewer than the 5 of a registry header")
    if value[0] != MAGIC:
        raise FramingError(f"magic byte is {value[0]}, not 0 (Confluent's wire format)")
    return int.from_bytes(value[1:HEADER_SIZE], "big")


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned base-128 varint of 64 bits at most at ``pos``: (value, position after it).
    Ten bytes at most, the tenth 0 or 1 (the Avro plan's rule, ``avro_plan._varint``): a value
    a 64-bit reader would have to truncate is refused."""
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise FramingError("value ends inside a varint")
        byte = data[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise FramingError("varint longer than 10 bytes" if byte & 0x80 else "varint beyond 64 bits")
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


#: Beyond this many message indexes the framing is taken as corrupt (real files nest a few deep).
MAX_MESSAGE_INDEXES = 100


def message_indexes(value: bytes, pos: int = HEADER_SIZE) -> tuple[tuple[int, ...], int]:
    """The Protobuf message indexes after the header: (indexes, position of the body).

    ``(0,)`` is the first message of the file; ``(2, 1)`` the second message nested in the third.
    """
    count, pos = read_varint(value, pos)
    count = _zigzag(count)
    if count == 0:
        return (0,), pos
    if count < 0 or count > MAX_MESSAGE_INDEXES:
        raise FramingError(f"message index count {count} is out of range")
    indexes = []
    for _ in range(count):
        index, pos = read_varint(value, pos)
        index = _zigzag(index)
        if index < 0:
            raise FramingError(f"negative message index {index}")
        indexes.append(index)
    return tuple(indexes), pos


def encode_message_indexes(indexes: tuple[int, ...]) -> bytes:
    """The inverse of :func:`message_indexes` (tests and producers of test data use it)."""
    if indexes == (0,):
        return b"\x00"
    out = bytearray()
    for n in (len(indexes), *indexes):
        z = (n << 1) ^ (n >> 63)
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
    return bytes(out)


def frame(schema: int, body: bytes, indexes: tuple[int, ...] | None = None) -> bytes:
    """A framed value: header, message indexes (Protobuf only), body."""
    head = bytes([MAGIC]) + schema.to_bytes(4, "big")
    return head + (encode_message_indexes(indexes) if indexes is not None else b"") + body
