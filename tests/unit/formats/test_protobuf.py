"""Protobuf: descriptors from the registry's schema text and references; one field read."""

from __future__ import annotations

import pytest

from sidecar.formats.protobuf import SchemaError, protobuf_time_reader
from sidecar.formats.timevalues import TimeValueError
from sidecar.registry.protoc import MAIN_NAME, compile_proto
from tests.unit.formats.proto_data import descriptor_set, payment, payment_class


@pytest.fixture(scope="module")
def compiled() -> bytes:
    return descriptor_set()


def test_a_timestamp_is_read_as_seconds_and_nanos_whatever_the_unit(compiled: bytes) -> None:
    reader = protobuf_time_reader(compiled, MAIN_NAME, (1,), ["meta", "at"], "s")
    assert reader.millis(payment(payment_class(compiled), 1_700_000_000_123)) == 1_700_000_000_123


def test_an_integer_field_takes_the_unit(compiled: bytes) -> None:
    reader = protobuf_time_reader(compiled, MAIN_NAME, (1,), ["meta", "at_ms"], "s")
    assert (
        reader.millis(payment(payment_class(compiled), None, at_ms_field=1_700_000_000)) == 1_700_000_000_000
    )


def test_an_unset_message_on_the_path_is_invalid_not_1970(compiled: bytes) -> None:
    reader = protobuf_time_reader(compiled, MAIN_NAME, (1,), ["meta", "at"], "ms")
    with pytest.raises(TimeValueError, match=r"field meta\.at is not set"):
        reader.millis(payment(payment_class(compiled), None))


def test_an_optional_scalar_that_is_absent_is_invalid(compiled: bytes) -> None:
    reader = protobuf_time_reader(compiled, MAIN_NAME, (1,), ["meta", "maybe_ms"], "ms")
    with pytest.raises(TimeValueError, match="not set"):
        reader.millis(payment(payment_class(compiled), 5))


@pytest.mark.parametrize(
    ("indexes", "path", "reason"),
    [
        ((0,), ["meta", "at"], "message shop.Ping has no field meta"),
        ((1,), ["history"], "field history is repeated"),
        ((1,), ["amount"], "not a number, a string or a google.protobuf.Timestamp"),
        ((1,), ["id", "x"], "id is not a message, so it has no field x"),
        ((5,), ["meta", "at"], r"message index \[5\] points past the 2 messages"),
    ],
)
def test_a_message_without_a_time_at_the_path_says_why(
    compiled: bytes, indexes: tuple[int, ...], path: list[str], reason: str
) -> None:
    with pytest.raises(SchemaError, match=reason):
        protobuf_time_reader(compiled, MAIN_NAME, indexes, path, "ms")


def test_nested_messages_are_reached_by_their_index_path(compiled: bytes) -> None:
    # [1, 0]: the first message nested in the second top-level one (Payment.Meta).
    reader = protobuf_time_reader(compiled, MAIN_NAME, (1, 0), ["at_ms"], "ms")
    meta = payment_class(compiled)(meta={"at_ms": 42}).meta
    assert reader.millis(meta.SerializeToString()) == 42


def test_text_that_does_not_compile_gives_protocs_message_without_temporary_paths() -> None:
    with pytest.raises(SchemaError, match=r"does not compile: timesync_schema.proto:1:\d+: ") as caught:
        compile_proto('syntax = "proto3"; message {', {})
    assert "/tmp" not in str(caught.value)


def test_a_missing_reference_does_not_compile() -> None:
    with pytest.raises(SchemaError, match=r"common/money\.proto"):
        compile_proto('syntax = "proto3"; import "common/money.proto"; message A { int32 a = 1; }', {})
