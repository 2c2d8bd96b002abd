"""``avro:``/``protobuf:`` extractors in the core: cached schemas only, reasons that name the id and field."""

from __future__ import annotations

import pytest

from sidecar.config.extractor import parse_extractor
from sidecar.core.records import Record
from sidecar.extractors.framed import INVALID, SchemaTimestamp, Unreadable, UnresolvedSchemaError
from tests.unit.wire.avro_data import ORDER_V1, ORDER_V2, encode, order, text
from tests.unit.wire.proto_data import descriptor_set, payment, payment_class
from timesync_wire.formats.avro import avro_time_reader
from timesync_wire.formats.protobuf import protobuf_time_reader
from timesync_wire.framing import frame
from timesync_wire.schemas.protoc import MAIN_NAME


def rec(value: bytes | None, offset: int = 0) -> Record:
    return Record("t", 0, offset, timestamp=1, value=value)


@pytest.fixture
def avro() -> SchemaTimestamp:
    extractor = parse_extractor("avro:meta.ts")
    assert isinstance(extractor, SchemaTimestamp)
    extractor.schemas.put(1, avro_time_reader(text(ORDER_V1), ["meta", "ts"], "ms"))
    extractor.schemas.put(2, avro_time_reader(text(ORDER_V2), ["meta", "ts"], "ms"))
    extractor.schemas.put(9, Unreadable("the registry does not know schema id 9 (404)"))
    return extractor


def test_records_of_two_schema_versions_interleaved_each_read_with_their_own(avro: SchemaTimestamp) -> None:
    values = [
        frame(1, encode(ORDER_V1, order(30))),
        frame(2, encode(ORDER_V2, order(10, 2))),
        frame(1, encode(ORDER_V1, order(20))),
    ]
    assert avro.extract_all([rec(v) for v in values]) == [30, 10, 20]
    assert avro.uses_record_time is False


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            b"\x01\x00\x00\x00\x01rest",
            "avro framing: magic byte is 1, not 0 (Confluent's wire format); field meta.ts not read",
        ),
        (None, "avro framing: value is null; field meta.ts not read"),
        (frame(9, b"whatever"), "schema id 9, field meta.ts: the registry does not know schema id 9 (404)"),
        (frame(1, encode(ORDER_V1, order(5))[:-4]), "schema id 1, field meta.ts: body ends inside a value"),
    ],
)
def test_an_unreadable_value_is_invalid_and_its_reason_names_the_schema_id_and_field(
    avro: SchemaTimestamp, value: bytes | None, reason: str
) -> None:
    assert avro.extract_all([rec(value)]) == [INVALID]
    assert avro.explain(rec(value)).startswith(reason)


def test_an_id_the_service_did_not_resolve_is_a_bug_not_an_invalid_record(avro: SchemaTimestamp) -> None:
    with pytest.raises(UnresolvedSchemaError, match="schema id 3"):
        avro.extract_all([rec(frame(3, b""))])


def test_missing_lists_the_framed_ids_not_cached_yet(avro: SchemaTimestamp) -> None:
    values = [frame(1, b""), frame(3, b""), b"\x05junk", None, frame(4, b""), frame(3, b"x")]
    assert avro.schemas.missing(values) == {3: {()}, 4: {()}}


def test_protobuf_readers_are_kept_per_schema_id_and_message_index() -> None:
    extractor = parse_extractor("protobuf:meta.at")
    assert isinstance(extractor, SchemaTimestamp)
    compiled = descriptor_set()
    value = frame(5, payment(payment_class(compiled), 1234), (1,))
    assert extractor.schemas.missing([value, frame(5, b"", (0,))]) == {5: {(1,), (0,)}}
    extractor.schemas.put(5, protobuf_time_reader(compiled, MAIN_NAME, (1,), ["meta", "at"], "ms"), (1,))
    assert extractor.schemas.missing([value]) == {}
    assert extractor.extract_all([rec(value)]) == [1234]


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("avro:", "or 'avro:<dotted.path>\\[:ms\\|s\\|us\\|iso\\]' or 'protobuf:.*, got 'avro:'"),
        ("protobuf:a..b", "empty field name"),
        ("avro:ts:ns", "unknown unit 'ns'"),
    ],
)
def test_bad_specs_say_what_is_allowed(spec: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_extractor(spec)


def test_a_spec_names_format_path_and_unit() -> None:
    assert repr(parse_extractor("protobuf:meta.at:us")) == "protobuf:meta.at:us"
