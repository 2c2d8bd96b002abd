"""Resolving a batch's schema ids before the push: wait for the registry, never dead-letter for it."""

from __future__ import annotations

import pytest

from sidecar.core import parse_extractor
from sidecar.core.records import Record
from sidecar.formats.extractor import INVALID, SchemaTimestamp
from sidecar.formats.framing import frame
from sidecar.registry.client import RegisteredSchema, RegistryUnavailableError, SchemaNotFoundError
from sidecar.registry.resolver import SchemaResolver
from tests.unit.formats.avro_data import ORDER_V1, encode, order, text
from tests.unit.formats.proto_data import REFERENCES, SCHEMA, descriptor_set, payment, payment_class


class FakeClient:
    """Schemas by id; ``down`` answers unavailable that many times first."""

    def __init__(self, schemas: dict[int, RegisteredSchema], down: int = 0) -> None:
        self.schemas = schemas
        self.down = down
        self.asked: list[int] = []

    async def schema(self, sid: int) -> RegisteredSchema:
        self.asked.append(sid)
        if self.down:
            self.down -= 1
            raise RegistryUnavailableError("http://registry/schemas/ids: ClientConnectorError")
        if sid not in self.schemas:
            raise SchemaNotFoundError(f"the registry does not know schema id {sid} (404)")
        return self.schemas[sid]


class Waits:
    def __init__(self, stop_after: int | None = None) -> None:
        self.reasons: list[str | None] = []
        self.slept: list[float] = []
        self.stop_after = stop_after

    def waiting(self, reason: str | None) -> None:
        self.reasons.append(reason)

    async def stopped(self, seconds: float) -> bool:
        self.slept.append(seconds)
        return self.stop_after is not None and len(self.slept) >= self.stop_after


def avro_extractor() -> SchemaTimestamp:
    extractor = parse_extractor("avro:meta.ts")
    assert isinstance(extractor, SchemaTimestamp)
    return extractor


async def test_an_unavailable_registry_is_waited_for_with_backoff_and_then_read() -> None:
    client = FakeClient({1: RegisteredSchema(text(ORDER_V1))}, down=3)
    waits = Waits()
    extractor = avro_extractor()
    value = frame(1, encode(ORDER_V1, order(77)))
    assert await SchemaResolver(client, waits.waiting, waits.stopped).resolve(extractor, [value])  # type: ignore[arg-type]
    assert waits.slept == [0.2, 0.4, 0.8]
    assert str(waits.reasons[0]).startswith("schema registry unavailable (")
    assert waits.reasons[-1] is None  # health back to normal
    assert extractor.extract_all([Record("t", 0, 0, 1, value=value)]) == [77]


async def test_a_stop_while_waiting_leaves_the_batch_unresolved() -> None:
    waits = Waits(stop_after=2)
    extractor = avro_extractor()
    resolver = SchemaResolver(FakeClient({}, down=100), waits.waiting, waits.stopped)  # type: ignore[arg-type]
    assert not await resolver.resolve(extractor, [frame(1, b"")])
    assert extractor.schemas.missing([frame(1, b"")]) == {1: {()}}  # nothing cached as unreadable


async def test_an_unknown_id_and_a_schema_without_the_field_are_cached_as_unreadable() -> None:
    no_meta = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]}
    client = FakeClient({2: RegisteredSchema(text(no_meta)), 3: RegisteredSchema("syntax...", "PROTOBUF")})
    extractor = avro_extractor()
    values = [frame(9, b"\x00"), frame(2, b"\x02"), frame(3, b"")]
    waits = Waits()
    assert await SchemaResolver(client, waits.waiting, waits.stopped).resolve(extractor, values)  # type: ignore[arg-type]
    records = [Record("t", 0, i, 1, value=v) for i, v in enumerate(values)]
    assert extractor.extract_all(records) == [INVALID] * 3
    assert [extractor.explain(r) for r in records] == [
        "schema id 9, field meta.ts: the registry does not know schema id 9 (404)",
        "schema id 2, field meta.ts: record Other has no field meta",
        "schema id 3, field meta.ts: schema id 3 is PROTOBUF, not AVRO",
    ]
    assert waits.reasons == []  # nothing to wait for: these are answers
    assert await SchemaResolver(client, waits.waiting, waits.stopped).resolve(extractor, values)  # type: ignore[arg-type]
    assert sorted(client.asked) == [2, 3, 9]  # asked once each


async def test_protobuf_schemas_are_compiled_with_their_references() -> None:
    client = FakeClient({4: RegisteredSchema(SCHEMA, "PROTOBUF", REFERENCES)})
    extractor = parse_extractor("protobuf:meta.at")
    assert isinstance(extractor, SchemaTimestamp)
    value = frame(4, payment(payment_class(descriptor_set()), 5_000), (1,))
    ping = frame(4, b"", (0,))  # shop.Ping has no meta.at
    waits = Waits()
    assert await SchemaResolver(client, waits.waiting, waits.stopped).resolve(extractor, [value, ping])  # type: ignore[arg-type]
    records = [Record("t", 0, 0, 1, value=value), Record("t", 0, 1, 1, value=ping)]
    assert extractor.extract_all(records) == [5_000, INVALID]
    assert extractor.explain(records[1]) == "schema id 4, field meta.at: message shop.Ping has no field meta"


async def test_avro_schemas_are_read_with_their_references() -> None:
    from tests.unit.formats.test_avro_references import ORDER, RECORD, REFERENCES, written

    client = FakeClient({5: RegisteredSchema(text(ORDER), "AVRO", REFERENCES)})
    extractor = avro_extractor()
    value = frame(5, written(ORDER, RECORD))
    waits = Waits()
    assert await SchemaResolver(client, waits.waiting, waits.stopped).resolve(extractor, [value])  # type: ignore[arg-type]
    assert extractor.extract_all([Record("t", 0, 0, 1, value=value)]) == [1_700_000_000_123]


@pytest.mark.parametrize("fmt", ["avro", "protobuf"])
def test_unframed_values_need_no_schema(fmt: str) -> None:
    extractor = parse_extractor(f"{fmt}:ts")
    assert isinstance(extractor, SchemaTimestamp)
    assert extractor.schemas.missing([b"\x01\x00\x00\x00\x01", None, b""]) == {}
