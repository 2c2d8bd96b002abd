"""Resolving a batch's schema ids before the push: wait for the registry, never dead-letter for it."""

from __future__ import annotations

import pytest

from sidecar.core import parse_extractor
from sidecar.core.records import Record
from sidecar.formats.extractor import INVALID, SchemaTimestamp
from sidecar.formats.framing import frame
from sidecar.registry import resolver as resolver_module
from sidecar.registry.client import RegisteredSchema, RegistryUnavailableError, SchemaNotFoundError
from sidecar.registry.resolver import UNREADABLE_TTL_S, SchemaResolver
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


# -- issue 32, item 4: budgets, failures kept as reasons for a while -----------------------------


def clocked(
    client: object, max_new: int = 500, missing_ttl_s: float = 10.0
) -> tuple[SchemaResolver, list[float], Waits]:
    now = [100.0]
    waits = Waits()
    resolver = SchemaResolver(
        client,  # type: ignore[arg-type]
        waits.waiting,
        waits.stopped,
        max_new=max_new,
        missing_ttl_s=missing_ttl_s,
        clock=lambda: now[0],
    )
    return resolver, now, waits


async def test_ids_past_the_per_fetch_budget_are_invalid_for_this_fetch_only_and_asked_later() -> None:
    client = FakeClient({sid: RegisteredSchema(text(ORDER_V1)) for sid in range(1, 31)})
    resolver, now, _ = clocked(client, max_new=10)
    extractor = avro_extractor()
    values = [frame(sid, encode(ORDER_V1, order(sid))) for sid in range(1, 31)]
    records = [Record("t", 0, i, 1, value=v) for i, v in enumerate(values)]
    assert await resolver.resolve(extractor, values)
    assert client.asked == list(range(1, 11)), "the first ten ids the batch names, nothing more"
    assert extractor.extract_all(records) == [*range(1, 11), *[INVALID] * 20]
    assert extractor.explain(records[10]) == (
        "schema id 11, field meta.ts: not looked up: this fetch named 30 schema ids or message paths "
        "not seen before, more than schema.registry.max.new.ids.per.fetch=10; a later fetch asks again"
    )
    now[0] += 0.001  # the next fetch
    assert await resolver.resolve(extractor, values)
    assert client.asked == list(range(1, 21))
    assert extractor.extract_all(records)[:20] == list(range(1, 21))


async def test_protobuf_message_paths_count_against_the_budget_and_are_bounded() -> None:
    client = FakeClient({4: RegisteredSchema(SCHEMA, "PROTOBUF", REFERENCES)})
    resolver, now, _ = clocked(client, max_new=3)
    extractor = parse_extractor("protobuf:meta.at")
    assert isinstance(extractor, SchemaTimestamp)
    values = [frame(4, b"", (i,)) for i in range(8)]  # eight message paths of one id
    assert await resolver.resolve(extractor, values)
    reasons = [extractor.explain(Record("t", 0, i, 1, value=v)) for i, v in enumerate(values)]
    assert sum("not looked up" in r for r in reasons) == 5
    assert len(extractor.schemas) == 8
    extractor.schemas.capacity = 2
    now[0] += 1
    extractor.schemas.trim(now[0])
    assert len(extractor.schemas) == 2, "the over-budget marks expired, the rest trimmed to capacity"


@pytest.mark.parametrize(
    "error", [KeyError("type"), RecursionError("maximum recursion depth"), IsADirectoryError(21, "x")]
)
async def test_any_exception_while_compiling_caches_the_id_as_unreadable_with_its_reason_for_a_while(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise error

    monkeypatch.setattr(resolver_module, "avro_time_reader", broken)
    client = FakeClient({1: RegisteredSchema(text(ORDER_V1))})
    resolver, now, waits = clocked(client)
    extractor = avro_extractor()
    value = frame(1, encode(ORDER_V1, order(5)))
    assert await resolver.resolve(extractor, [value])
    record = Record("t", 0, 0, 1, value=value)
    assert extractor.extract_all([record]) == [INVALID]
    assert extractor.explain(record).startswith(
        f"schema id 1, field meta.ts: the schema does not compile: {type(error).__name__}: "
    )
    assert waits.reasons == []
    now[0] += UNREADABLE_TTL_S - 1
    assert await resolver.resolve(extractor, [value])
    assert client.asked == [1], "believed for a while"
    monkeypatch.undo()
    now[0] += 2
    assert await resolver.resolve(extractor, [value])
    assert extractor.extract_all([record]) == [5], "then compiled again"


async def test_a_404_expires_after_the_missing_id_ttl() -> None:
    client = FakeClient({})
    resolver, now, _ = clocked(client, missing_ttl_s=10)
    extractor = avro_extractor()
    value = frame(1, encode(ORDER_V1, order(5)))
    assert await resolver.resolve(extractor, [value])
    client.schemas[1] = RegisteredSchema(text(ORDER_V1))  # registered after it was first read
    now[0] += 9
    assert await resolver.resolve(extractor, [value])
    assert extractor.extract_all([Record("t", 0, 0, 1, value=value)]) == [INVALID]
    now[0] += 2
    assert await resolver.resolve(extractor, [value])
    assert extractor.extract_all([Record("t", 0, 0, 1, value=value)]) == [5]
    assert client.asked == [1, 1]


async def test_a_registry_that_answers_again_clears_the_wait_it_reported() -> None:
    client = FakeClient({1: RegisteredSchema(text(ORDER_V1)), 2: RegisteredSchema(text(ORDER_V1))}, down=1)
    resolver, _, waits = clocked(client)
    extractor = avro_extractor()
    assert await resolver.resolve(extractor, [frame(1, b"")])
    assert await resolver.resolve(extractor, [frame(2, b"")])
    assert waits.reasons[0] is not None
    assert waits.reasons[1:] == [None], "cleared once, not on every later batch"
