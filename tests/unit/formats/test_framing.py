"""Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, Protobuf message indexes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.formats.framing import (
    HEADER_SIZE,
    MAX_MESSAGE_INDEXES,
    FramingError,
    encode_message_indexes,
    frame,
    message_indexes,
    read_varint,
    schema_id,
)


def test_the_schema_id_is_the_four_bytes_after_the_magic_byte() -> None:
    assert schema_id(b"\x00\x00\x00\x01\x02body") == 258


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "value is null"),
        (b"\x00\x00\x01", "3 bytes, fewer than the 5"),
        (b"\x02\x00\x00\x00\x01body", "magic byte is 2, not 0"),  # Apicurio's own framing is refused
    ],
)
def test_a_value_not_framed_for_the_registry_says_how(value: bytes | None, reason: str) -> None:
    with pytest.raises(FramingError, match=reason):
        schema_id(value)


def test_the_first_message_of_a_file_is_written_as_one_zero_byte() -> None:
    assert encode_message_indexes((0,)) == b"\x00"
    assert message_indexes(frame(7, b"body", (0,))) == ((0,), 6)


def test_other_message_indexes_are_a_zigzag_count_then_zigzag_indexes() -> None:
    # [1] as Confluent's serializer writes it: count 1 → 2, index 1 → 2.
    assert encode_message_indexes((1,)) == b"\x02\x02"
    assert message_indexes(b"\x00\x00\x00\x00\x07\x02\x02body") == ((1,), 7)


@given(st.integers(0, 2**31 - 1), st.lists(st.integers(0, 10_000), min_size=1, max_size=5), st.binary())
def test_framing_round_trips(sid: int, indexes: list[int], body: bytes) -> None:
    value = frame(sid, body, tuple(indexes))
    assert schema_id(value) == sid
    found, start = message_indexes(value)
    assert found == tuple(indexes)
    assert value[start:] == body


def test_truncated_message_indexes_are_a_framing_error() -> None:
    with pytest.raises(FramingError, match="ends inside a varint"):
        message_indexes(b"\x00\x00\x00\x00\x07\x04\x82")


@pytest.mark.parametrize(
    ("varint", "reason"),
    [
        (b"\x80" * 9 + b"\x02", "varint beyond 64 bits"),
        (b"\xff" * 9 + b"\x7f", "varint beyond 64 bits"),
        (b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
    ],
)
def test_a_message_index_varint_past_64_bits_is_a_framing_error(varint: bytes, reason: str) -> None:
    """Issue 32, item 7: the same rule as the Avro plans — a tenth byte above 1 is refused."""
    with pytest.raises(FramingError, match=reason):
        message_indexes(b"\x00\x00\x00\x00\x07" + varint)
    assert read_varint(b"\xff" * 9 + b"\x01", 0) == (2**64 - 1, 10)


@settings(max_examples=300, deadline=1000)
@given(value=st.binary(max_size=40))
def test_any_bytes_are_framed_or_a_framing_error(value: bytes) -> None:
    try:
        sid = schema_id(value)
        indexes, start = message_indexes(value)
    except FramingError:
        return
    assert 0 <= sid < 2**32
    assert all(i >= 0 for i in indexes)
    assert 0 < len(indexes) <= MAX_MESSAGE_INDEXES
    assert HEADER_SIZE < start <= len(value)
