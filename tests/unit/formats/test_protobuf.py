"""Protobuf: descriptors from the registry's schema text and references; one field read."""

from __future__ import annotations

import base64
import time

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from sidecar.formats.protobuf import SchemaError, protobuf_time_reader
from sidecar.formats.timevalues import TimeValueError
from sidecar.registry.protoc import MAIN_NAME, compile_proto, serialized_descriptor
from tests.unit.formats.proto_data import COMMON, SCHEMA, descriptor_set, payment, payment_class


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


def test_protocs_log_lines_are_left_out_of_the_message() -> None:
    # No syntax line: protoc's logging library warns (a banner and a W-line) before the error.
    with pytest.raises(SchemaError) as caught:
        compile_proto("message {", {})
    assert str(caught.value).startswith("the Protobuf schema does not compile: timesync_schema.proto:1:")
    assert "absl" not in str(caught.value)


def test_a_missing_reference_does_not_compile() -> None:
    with pytest.raises(SchemaError, match=r"common/money\.proto"):
        compile_proto('syntax = "proto3"; import "common/money.proto"; message A { int32 a = 1; }', {})


def serialized(compiled: bytes, name: str, as_name: str) -> str:
    """File ``name`` of a compiled set as Confluent's Python client registers a schema: its
    ``FileDescriptorProto`` in base64, under the name its producer gave it."""
    (file,) = [f for f in descriptor_pb2.FileDescriptorSet.FromString(compiled).file if f.name == name]
    file.name = as_name
    return base64.b64encode(file.SerializeToString()).decode()


@pytest.mark.parametrize("main_serialized", [True, False], ids=["schema serialized", "schema as text"])
@pytest.mark.parametrize(
    "reference_serialized", [True, False], ids=["reference serialized", "reference as text"]
)
def test_a_schema_or_reference_registered_as_a_serialized_descriptor_reads_as_its_text_does(
    compiled: bytes, main_serialized: bool, reference_serialized: bool
) -> None:
    main = serialized(compiled, MAIN_NAME, "shop/payment.proto") if main_serialized else SCHEMA
    reference = (
        serialized(compiled, "common/money.proto", "common/money.proto") if reference_serialized else COMMON
    )

    reader = protobuf_time_reader(
        compile_proto(main, {"common/money.proto": reference}), MAIN_NAME, (1,), ["meta", "at"], "ms"
    )

    assert reader.millis(payment(payment_class(compiled), 1_700_000_000_123)) == 1_700_000_000_123


def test_proto_text_and_base64_that_is_no_descriptor_are_not_taken_for_one() -> None:
    assert serialized_descriptor(SCHEMA) is None
    assert serialized_descriptor('syntax="proto3";message A{int32 a=1;}') is None
    assert serialized_descriptor("//x") is None  # base64's alphabet, not base64


NESTED = 'syntax = "proto3"; message N { N next = 1; optional int64 ts = 2; }'


def nested(depth: int) -> bytes:
    body = b"\x10\x06"  # ts = 6, innermost
    for _ in range(depth):
        body = b"\x0a" + encode_varint(len(body)) + body
    return body


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_a_body_nested_past_the_runtimes_depth_limit_is_a_decode_error_not_a_crash() -> None:
    """Issue 32, item 5: protobuf's runtime (upb) parses without recursion in Python and stops at
    100 levels; a body 10,000 deep is a verdict, in microseconds."""
    reader = protobuf_time_reader(compile_proto(NESTED, {}), MAIN_NAME, (0,), ["next", "ts"], "ms")
    assert reader.millis(nested(1)) == 6
    with pytest.raises(DecodeError, match=r"MaxDepth|recursion|depth"):
        reader.millis(nested(10_000))


def test_a_megabyte_of_unknown_fields_is_parsed_in_linear_time() -> None:
    reader = protobuf_time_reader(compile_proto(NESTED, {}), MAIN_NAME, (0,), ["ts"], "ms")
    started = time.perf_counter()
    assert reader.millis(b"\x18\x01" * 500_000 + b"\x10\x07") == 7
    with pytest.raises(DecodeError):
        reader.millis(b"\x1a" + encode_varint(2**40) + b"\x00" * 100)  # a length past the body
    assert time.perf_counter() - started < 2.0


def test_a_schema_defining_its_own_google_protobuf_timestamp_is_refused_at_build_time() -> None:
    """Found by ``python -m testkit.fuzz.protobuf``: the reader met a Timestamp without ``nanos``
    (or with a message for ``seconds``) only when reading, with an AttributeError."""
    text = (
        'syntax = "proto3"; package google.protobuf; message Timestamp { string seconds = 1; }'
        " message E { Timestamp at = 1; }"
    )
    with pytest.raises(SchemaError, match="without int64 seconds and int32 nanos"):
        protobuf_time_reader(compile_proto(text, {}), MAIN_NAME, (1,), ["at"], "ms")
