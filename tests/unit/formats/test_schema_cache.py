"""The core's schema cache is bounded: least recently used ids go, known failures expire, and
nothing leaves it between the resolve of a batch and its push (only ``trim`` drops entries)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.formats.extractor import SchemaCache, Unreadable
from sidecar.formats.framing import frame

READER = Unreadable("stands for a reader")

ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 30), st.none() | st.floats(0, 50)),
        st.tuples(st.just("use"), st.lists(st.integers(0, 30), max_size=5), st.none()),
        st.tuples(st.just("trim"), st.floats(0, 10), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=1000)
@given(ops=ops, capacity=st.integers(1, 8))
def test_a_trim_keeps_the_most_recently_used_unexpired_entries_within_capacity(
    ops: list[tuple[str, object, object]], capacity: int
) -> None:
    cache = SchemaCache("avro", capacity)
    model: dict[int, float | None] = {}  # id → expiry, in use order (the reference)
    now = 0.0
    for op, arg, expires in ops:
        if op == "put":
            assert isinstance(arg, int)
            model.pop(arg, None)
            model[arg] = None if expires is None else now + float(expires)  # type: ignore[arg-type]
            cache.put(arg, READER, expires=model[arg])
        elif op == "use":
            assert isinstance(arg, list)
            missing = cache.missing([frame(sid, b"") for sid in arg])
            assert set(missing) == {sid for sid in arg if sid not in model}
            for sid in dict.fromkeys(arg):
                if sid in model:
                    model[sid] = model.pop(sid)
        else:
            assert isinstance(arg, float)
            now += arg
            cache.trim(now)
            model = {k: v for k, v in model.items() if v is None or v > now}
            model = dict(list(model.items())[-capacity:])
        # Between trims nothing leaves: every entry put or used since is still there.
        assert set(cache._by_id) == set(model)
        assert list(cache._by_id) == list(model), "use order"


def test_protobuf_message_paths_are_bounded_like_ids() -> None:
    cache = SchemaCache("protobuf", capacity=3)
    for i in range(10):
        cache.put(7, READER, (i,))
    assert len(cache) == 10, "a batch may add more than capacity until the next trim"
    cache.trim(0.0)
    assert sorted(cache._by_message) == [(7, (7,)), (7, (8,)), (7, (9,))]


def test_stale_expiry_rows_do_not_pile_up() -> None:
    cache = SchemaCache("avro", capacity=10)
    for round_ in range(1000):
        cache.put(1, READER, expires=float(round_ + 100))  # put again and again, before it expires
    cache.trim(0.0)
    assert len(cache._due) < 100
