"""Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, Protobuf message indexes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.formats.framing import FramingError, encode_message_indexes, frame, message_indexes, schema_id


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
