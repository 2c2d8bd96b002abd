"""The native output encoder writes exactly what the pure-Python stamping path writes.

``Stamper.stamp_into`` filling aiokafka's own ``BatchBuilder`` is the reference: at aiokafka's
compression levels the two must give byte-identical record batches (header, CRC and all), for
any records, any batch size, idempotent or not, transactional or not. At Kafka's levels the
bytes differ only by compression, so there the batches must decode to the reference records.

aiokafka's builder cannot write a header key that is not UTF-8 (read with ``surrogateescape``);
the Python encoder's own batches (``PythonBatch``) can, and are held to aiokafka's builder for
every other key — so with such keys the native encoder is held to the Python encoder, byte for
byte, and the key's bytes come out as they went in, on the output and on the side topics.
"""

from __future__ import annotations

import functools
import gzip
import types
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder, MessageBatch
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.config import load_config
from sidecar.core.records import DeadLetter, Emit, Late
from sidecar.core.stamping import Stamper
from sidecar.kafka._fetched import PartitionReader
from sidecar.output import encoder as output_encoder
from sidecar.output.batches import StampedBatch, compressor, native_stamping_available
from sidecar.output.encoder import NativeEncoder, PythonEncoder, choose_encoder
from sidecar.output.python_batch import PythonBatch
from sidecar.service.supervisor import Supervisor
from timesync_wire.headers import ENFORCED, LATE, SOURCE_OFFSET, STREAM_TIME, WATERMARK, header_key_bytes

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KAFKA_LEVELS = [("lz4", 9), ("lz4", 12), ("gzip", -1), ("zstd", 3), ("zstd", -5)]


@dataclass(frozen=True)
class Rec:
    """What the merge hands over: aiokafka's ConsumerRecord has these attributes."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = 0


@pytest.fixture(autouse=True, scope="module")
def gzip_clock_stands_still() -> Iterator[None]:
    """A gzip member's header holds the second it was written (``gzip`` reads ``time.time()``):
    two builds of one batch either side of a second's edge would differ there alone. The clock
    the ``gzip`` module sees stands still in this module, so only the bytes the encoders choose
    are compared."""
    real = gzip.time
    gzip.time = types.SimpleNamespace(time=lambda: 1_700_000_000.0)  # type: ignore[assignment]
    try:
        yield
    finally:
        gzip.time = real  # type: ignore[assignment]


def reference(emit: Emit, batch_size: int, codec: str, transactional: bool) -> list[BatchBuilder]:
    make = functools.partial(BatchBuilder, batch_size, CODEC_IDS[codec], is_transactional=transactional)
    return Stamper().stamp_into(emit, make)


def native(
    emit: Emit, batch_size: int, codec: str, level: int | None, transactional: bool
) -> list[StampedBatch]:
    return NativeEncoder(compressor(codec, level), transactional, batch_size).encode(emit)


def built(batches: list, producer: tuple[int, int, int] | None) -> list[bytes]:
    out = []
    for b in batches:
        if producer is not None:
            b._set_producer_state(*producer)
        out.append(bytes(b._build()))
    return out


def decoded(batch: bytes) -> list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]]:
    view = DefaultRecordBatch(batch)
    assert view.validate_crc()
    return [(r.key, r.value, r.timestamp, list(r.headers)) for r in view]


header_names = st.sampled_from(["a", "trace-id", "ünï", "timesync.watermark", "timesync.x", "timesync"])
#: Keys as the reader gives them from bytes that are not UTF-8 (``surrogateescape``).
raw_header_names = st.binary(min_size=1, max_size=8).map(
    lambda b: (b + b"\xff").decode("utf-8", "surrogateescape")
)


def records_with(names: st.SearchStrategy[str]) -> st.SearchStrategy[Rec]:
    return st.builds(
        Rec,
        topic=st.sampled_from(["in", "orders-ü", "t" * 200]),
        partition=st.integers(0, 300),
        offset=st.integers(0, 2**62),
        timestamp=st.just(0),
        key=st.none() | st.binary(max_size=40),
        value=st.none() | st.binary(max_size=300),
        headers=st.lists(st.tuples(names, st.none() | st.binary(max_size=20)), max_size=4).map(tuple),
    )


records = records_with(header_names)


@st.composite
def emits(draw: st.DrawFn, names: st.SearchStrategy[str] = header_names) -> Emit:
    recs = draw(st.lists(records_with(names), min_size=1, max_size=60))
    n = len(recs)
    # Output timestamps are never negative: the extractors treat those as invalid. (aiokafka's
    # builder also mistakes a first timestamp of -1 for "none yet".)
    timestamps = draw(st.lists(st.integers(0, 2**45), min_size=n, max_size=n))
    return Emit(
        batch_id=1,
        records=recs,
        timestamps=timestamps,
        watermark=draw(st.integers(-(2**63), 2**45)),
        stream_time_before=draw(st.integers(-(2**63), 2**45)),
        enforced_from=draw(st.integers(0, n)),
        late=sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))),
    )


def test_the_native_encoder_is_built_and_fits_the_installed_aiokafka() -> None:
    # Without it the sidecar still runs (pure Python), at about half the throughput: CI must notice.
    assert native_stamping_available()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    emit=emits(),
    batch_size=st.sampled_from([64, 700, 4096, 512 * 1024]),
    codec=st.sampled_from(CODECS),
    transactional=st.booleans(),
    producer=st.none() | st.tuples(st.integers(0, 2**40), st.integers(0, 300), st.integers(0, 2**30)),
)
def test_at_aiokafkas_levels_batches_are_byte_identical_to_aiokafkas_builder(
    emit: Emit, batch_size: int, codec: str, transactional: bool, producer: tuple[int, int, int] | None
) -> None:
    expected = built(reference(emit, batch_size, codec, transactional), producer)
    assert built(native(emit, batch_size, codec, None, transactional), producer) == expected


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    emit=emits(header_names | raw_header_names),
    batch_size=st.sampled_from([64, 700, 4096]),
    codec=st.sampled_from(CODECS),
    transactional=st.booleans(),
)
def test_with_header_keys_that_are_not_utf8_both_encoders_write_the_same_bytes(
    emit: Emit, batch_size: int, codec: str, transactional: bool
) -> None:
    python = PythonEncoder(compressor(codec, None), transactional, batch_size).encode(emit)
    native_batches = native(emit, batch_size, codec, None, transactional)
    assert built(native_batches, (7, 1, 0)) == built(python, (7, 1, 0))
    got = [h for b in built(python, None) for r in _raw(b) for h in r[3]]
    sent = [
        (header_key_bytes(k), v) for r in emit.records for k, v in r.headers if not k.startswith("timesync.")
    ]
    assert [h for h in got if not h[0].startswith(b"timesync.")] == sent


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(emit=emits(), batch_size=st.sampled_from([64, 700, 4096, 512 * 1024]), codec=st.sampled_from(CODECS))
def test_the_python_encoders_batches_are_aiokafkas_byte_for_byte(
    emit: Emit, batch_size: int, codec: str
) -> None:
    """For UTF-8 keys the reference chain holds: ``PythonBatch`` writes what aiokafka's builder does."""
    python = PythonEncoder(compressor(codec, None), False, batch_size).encode(emit)
    assert built(python, None) == built(reference(emit, batch_size, codec, False), None)


def test_side_records_carry_header_keys_that_are_not_utf8_as_their_bytes() -> None:
    """Dead letters and late records go through the Python batches of either encoder."""
    key = b"\xc3\x28-x".decode("utf-8", "surrogateescape")
    record = Rec("in", 0, 9, 5, b"k", b"v", ((key, b"1"), ("ok", b"2")))
    for encoder in (
        NativeEncoder(compressor("lz4", 9), False),
        PythonEncoder(compressor("lz4", None), False),
    ):
        [dead] = encoder.encode_dead_letters([DeadLetter(record, "bad", "InvalidTimestampError")])
        [late] = encoder.encode_late([Late(record, 5, 3)], 8)
        for batch in (dead, late):
            [(_, _, _, headers)] = _raw(bytes(batch._build()))
            assert headers[:2] == [(b"\xc3\x28-x", b"1"), (b"ok", b"2")]


def _raw(batch: bytes) -> list[tuple[bytes | None, bytes | None, int, list[tuple[bytes, bytes | None]]]]:
    """A batch's records with header keys as bytes (aiokafka's reader wants them UTF-8; the
    sidecar's reads them as aiokafka's does otherwise, ``tests/unit/test_fetch_hook.py``)."""
    reader = PartitionReader(TopicPartition("out", 0), MemoryRecords(batch), [], 0, True, False, batch)
    return [(r.key, r.value, r.timestamp, [(header_key_bytes(k), v) for k, v in r.headers]) for r in reader]


@settings(max_examples=60, deadline=None)
@given(
    emit=emits(),
    codec_level=st.sampled_from([("lz4", 9), ("lz4", 12), ("gzip", -1), ("zstd", 3), ("zstd", -5)]),
)
def test_at_kafkas_levels_batches_decode_to_the_stamped_records(
    emit: Emit, codec_level: tuple[str, int]
) -> None:
    codec, level = codec_level
    batches = built(native(emit, 4096, codec, level, False), None)
    got = [r for b in batches for r in decoded(b)]
    assert got == [(k, v, ts, h) for k, v, ts, h in Stamper().stamp(emit)]


def test_kafkas_default_lz4_level_is_the_fast_compressor_and_other_levels_are_hc() -> None:
    # Kafka's producer maps its default lz4 level to LZ4's fast compressor; aiokafka uses HC 9.
    value = b"".join(b"%d,sensor-%d,%d;" % (i, i % 17, i * 31 % 1000) for i in range(3000))
    emit = Emit(1, [Rec("in", 0, 0, 0, None, value)], [5], 0, 0, 1)
    fast = built(native(emit, 2**20, "lz4", 9, False), None)[0]
    hc = built(native(emit, 2**20, "lz4", 12, False), None)[0]
    aiokafka = built(reference(emit, 2**20, "lz4", False), None)[0]
    assert len(hc) < len(fast)
    assert hc != aiokafka != fast
    assert decoded(fast) == decoded(hc) == decoded(aiokafka)


def test_a_record_larger_than_the_batch_goes_alone_and_the_rest_follow_in_new_batches() -> None:
    recs = [Rec("in", 0, i, 0, None, b"x" * size) for i, size in enumerate([10, 5000, 10, 10])]
    emit = Emit(1, recs, [1, 2, 3, 4], 0, 0, 4)
    batches = native(emit, 1024, "none", None, False)
    assert [b.record_count() for b in batches] == [1, 1, 2]
    assert [len(decoded(b)) for b in built(batches, None)] == [1, 1, 2]


def test_headers_carry_source_watermark_stream_time_and_flags_in_the_reference_order() -> None:
    recs = [Rec("in", 2, 40 + i, 0, b"k", b"v", (("trace", b"t"), ("timesync.late", b"1"))) for i in range(3)]
    emit = Emit(1, recs, [10, 5, 20], watermark=4, stream_time_before=7, enforced_from=2, late=[1])
    (batch,) = built(native(emit, 4096, "none", None, False), None)
    headers = [h for _, _, _, h in decoded(batch)]
    assert [dict(h)[STREAM_TIME] for h in headers] == [b"10", b"10", b"20"]
    assert [dict(h)[SOURCE_OFFSET] for h in headers] == [b"40", b"41", b"42"]
    assert {dict(h)[WATERMARK] for h in headers} == {b"4"}
    assert [LATE in dict(h) for h in headers] == [False, True, False]
    assert [ENFORCED in dict(h) for h in headers] == [False, False, True]
    assert all(h[0] == ("trace", b"t") for h in headers)


def test_bytes_like_keys_and_values_are_taken_as_bytes() -> None:
    emit = Emit(1, [Rec("in", 0, 0, 0, bytearray(b"k"), memoryview(b"v"))], [1], 0, 0, 1)  # type: ignore[arg-type]
    (batch,) = built(native(emit, 4096, "none", None, False), None)
    assert decoded(batch)[0][:2] == (b"k", b"v")


async def test_a_queued_stamped_batch_takes_no_plain_send_records() -> None:
    # aiokafka appends producer.send() records to the last queued batch of their partition;
    # ours must answer "full" so that it starts its own instead.
    (batch,) = native(Emit(1, [Rec("in", 0, 0, 0, None, b"v")], [1], 0, 0, 1), 4096, "none", None, False)
    queued = MessageBatch(TopicPartition("out", 0), batch, ttl=30, linger_time=0)
    assert queued.append(None, b"other", 2) is None
    assert queued.record_count == 1


def test_mismatched_timestamps_and_bad_header_values_are_errors_not_corrupt_batches() -> None:
    short = Emit(1, [Rec("in", 0, 0, 0, None, b"v")] * 2, [1], 0, 0, 2)
    with pytest.raises(ValueError, match="2 records but 1 timestamps"):
        native(short, 4096, "none", None, False)
    bad = Emit(1, [Rec("in", 0, 0, 0, None, b"v", (("h", "text"),))], [1], 0, 0, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="header 'h'"):
        native(bad, 4096, "none", None, False)


def test_the_level_keys_follow_kafka_and_the_chosen_codec_picks_its_own() -> None:
    base = ["bootstrap.servers=b:9092", "input.topics=a", "output.topic=o"]
    cfg = load_config(None, base, environ={})
    assert (cfg.compression_type, cfg.compression_level) == ("lz4", 9)
    zstd = load_config(None, [*base, "compression.type=zstd", "compression.zstd.level=7"], environ={})
    assert zstd.compression_level == 7
    assert load_config(None, [*base, "compression.type=snappy"], environ={}).compression_level is None


def test_without_the_extension_the_sidecar_stamps_in_python_as_aiokafkas_builder_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(output_encoder, "_NATIVE", False)
    encoder = choose_encoder("lz4", 9, transactional=False)
    assert encoder.name == "python"
    emit = Emit(0, [Rec("in", 0, 7, 5, None, b"v")], [5], 0, 0, 1)
    [batch] = encoder.encode(emit)
    assert isinstance(batch, PythonBatch)
    assert batch.append(timestamp=1, key=None, value=b"late", headers=[]) is None, "sealed once handed over"
    assert bytes(batch._build()) == bytes(reference(emit, 512 * 1024, "lz4", False)[0]._build())
    cfg = load_config(None, ["bootstrap.servers=b:9092", "input.topics=a", "output.topic=o"], environ={})
    assert Supervisor(cfg).status()["output_encoder"] == "python"


def test_with_the_extension_the_sidecar_fills_native_batches_with_its_compression() -> None:
    cfg = load_config(
        None,
        ["bootstrap.servers=b:9092", "input.topics=a", "output.topic=o", "compression.type=zstd"],
        environ={},
    )
    assert Supervisor(cfg).status()["output_encoder"] == "native"
    encoder = choose_encoder(cfg.compression_type, cfg.compression_level, transactional=True)
    assert encoder.name == "native"
    [batch] = encoder.encode(Emit(0, [Rec("in", 0, 7, 5, None, b"v")], [5], 0, 0, 1))
    assert isinstance(batch, StampedBatch)
    assert batch._codec[0] == CODEC_IDS["zstd"]
    assert batch._transactional
