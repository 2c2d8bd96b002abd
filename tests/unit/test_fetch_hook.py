"""The C reader of fetched batches reads exactly what aiokafka's ``PartitionRecords`` reads.

aiokafka 0.14's ``PartitionRecords`` is the reference: over the same fetch response (plain and
compressed batches, transactions committed and aborted with their control batches, a fetch that
starts inside a batch) the reader must give records with the same fields, in the same order, and
the same ``next_fetch_offset`` after each record and at the end — under both isolation levels.
The hook itself reaches into aiokafka's private parts: the pin test below fails when an upgrade
moves them (then ``install`` falls back to aiokafka's own path, see ``test_no_hook_without_...``).
"""

from __future__ import annotations

import struct

import aiokafka
import pytest
from aiokafka.consumer import fetcher as aiokafka_fetcher
from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition

from sidecar.kafka import fetch_hook
from sidecar.kafka._fetched import FetchedRecord, PartitionReader
from sidecar.kafka.unreadable import UnreadableRecords

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")
TP = TopicPartition("clicks", 4)
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_CONTROL = 0x20
_LOG_APPEND_TIME = 0x08
_ABORT, _COMMIT = 0, 1


def batch(
    base_offset: int,
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    *,
    codec: str = "none",
    producer_id: int = -1,
    transactional: bool = False,
    control: int | None = None,
    log_append_time: int | None = None,
) -> bytes:
    """One v2 record batch at ``base_offset``; with ``control`` a transaction marker (abort/commit)."""
    builder = DefaultRecordBatchBuilder(
        2, CODECS[codec], int(transactional), producer_id, 0 if producer_id >= 0 else -1, -1, 1 << 20
    )
    if control is not None:
        records = [(struct.pack(">hh", 0, control), struct.pack(">hi", 0, 0), [])]
    for delta, (key, value, headers) in enumerate(records):
        assert builder.append(delta, 1_700_000_000_000 + base_offset + delta, key, value, headers) is not None
    data = builder.build()
    struct.pack_into(">q", data, 0, base_offset)
    if control is not None:
        (attributes,) = struct.unpack_from(">h", data, 21)
        struct.pack_into(">h", data, 21, attributes | _CONTROL)
    if log_append_time is not None:  # as the broker stamps it: the batch's max timestamp
        (attributes,) = struct.unpack_from(">h", data, 21)
        struct.pack_into(">h", data, 21, attributes | _LOG_APPEND_TIME)
        struct.pack_into(">q", data, 35, log_append_time)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def plain(n: int, tag: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [
        (
            None if i % 5 == 0 else f"{tag}-k{i}".encode(),
            None if i % 7 == 3 else (f'{{"tag":"{tag}","i":{i}}}' * (1 + i % 3)).encode(),
            [] if i % 4 == 0 else [("traceparent", f"00-{tag}-{i}".encode()), ("nil", None)][: 1 + i % 2],
        )
        for i in range(n)
    ]


def response() -> tuple[bytes, list[tuple[int, int]]]:
    """A fetch response from offset 0, and its aborted transactions (producer id, first offset)."""
    parts: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    base = 0

    def add(
        records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]], **kw: object
    ) -> None:
        nonlocal base
        parts.append(batch(base, records, **kw))  # type: ignore[arg-type]
        base += 1 if kw.get("control") is not None else len(records)

    add(plain(5, "a"))
    add(plain(7, "b"), codec="lz4")
    aborted.append((7, base))
    add(plain(4, "aborted"), producer_id=7, transactional=True)
    add(plain(3, "c"), codec="gzip")
    add([], control=_ABORT, producer_id=7, transactional=True)
    add(plain(6, "committed"), producer_id=8, transactional=True, codec="zstd")
    add([], control=_COMMIT, producer_id=8, transactional=True)
    add(plain(9, "d"), codec="snappy")
    add(plain(4, "appended"), log_append_time=1_800_000_000_123)
    add(plain(4, "appended-lz4"), log_append_time=1_800_000_000_456, codec="lz4")
    return b"".join(parts), aborted


def served(data: bytes, start: int) -> bytes:
    """What a broker sends for a fetch at ``start``: from the batch holding it on (aiokafka's
    reader would go back to the end of an earlier batch; a broker never sends one)."""
    at = 0
    while at < len(data):
        (base, length) = struct.unpack_from(">qi", data, at)
        (last_delta,) = struct.unpack_from(">i", data, at + 23)
        if base + last_delta >= start:
            break
        at += 12 + length
    return data[at:]


def fields(record: object) -> tuple[object, ...]:
    return tuple(getattr(record, f) for f in FIELDS)


def reference(data: bytes, aborted: list[tuple[int, int]], start: int, isolation: int) -> PartitionRecords:
    return PartitionRecords(TP, MemoryRecords(data), aborted, start, None, None, True, isolation)


def reader(
    data: bytes, aborted: list[tuple[int, int]], start: int, isolation: int, native: bool = True
) -> PartitionReader:
    """``native``: with the response's bytes, so v2 batches are decoded by the reader itself;
    without them it reads aiokafka's decoded records (the hook's fallback)."""
    # aiokafka's PartitionRecords sorts the aborted transactions; the hook passes them on sorted.
    ordered = sorted(aborted, key=lambda a: a[1])
    raw = data if native else None
    return PartitionReader(TP, MemoryRecords(data), ordered, start, True, isolation == READ_COMMITTED, raw)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("isolation", [READ_UNCOMMITTED, READ_COMMITTED])
@pytest.mark.parametrize("start", [0, 3, 8, 15, 47])
def test_the_reader_reads_what_aiokafka_reads(isolation: int, start: int, native: bool) -> None:
    data, aborted = response()
    data = served(data, start)
    expected = reference(data, aborted, start, isolation)
    ours = reader(data, aborted, start, isolation, native)
    steps = 0
    for want in expected:
        got = next(ours)
        assert fields(got) == fields(want)
        assert [type(v) for v in fields(got)] == [type(v) for v in fields(want)]
        assert ours.next_fetch_offset == expected.next_fetch_offset, f"after offset {want.offset}"
        steps += 1
    assert next(ours, None) is None
    assert ours.exhausted
    assert ours.next_fetch_offset == expected.next_fetch_offset
    assert steps > 20 or start > 40
    if start == 0:
        assert {r.timestamp_type for r in reader(data, aborted, start, isolation, native)} == {0, 1}
    if isolation == READ_COMMITTED:
        assert not any(
            r.key and r.key.startswith(b"aborted") for r in reader(data, aborted, start, isolation)
        )
    elif start <= 15:  # the aborted transaction's records are offsets 12-15
        assert any(r.key and r.key.startswith(b"aborted") for r in reader(data, aborted, start, isolation))


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("limit", [1, 4, 100])
def test_take_gives_the_same_records_in_chunks_and_stops_exactly_at_the_limit(
    limit: int, native: bool
) -> None:
    data, aborted = response()
    expected = list(reference(data, aborted, 0, READ_COMMITTED))
    ours = reader(data, aborted, 0, READ_COMMITTED, native)
    got: list[FetchedRecord] = []
    while chunk := ours.take(limit):
        assert len(chunk) == limit or ours.exhausted
        assert ours.next_fetch_offset == chunk[-1].offset + 1
        got += chunk
    assert [fields(r) for r in got] == [fields(r) for r in expected]


@pytest.mark.parametrize("native", [True, False])
def test_a_corrupt_batch_is_a_verdict_naming_its_offsets_and_the_reader_moves_past_it(native: bool) -> None:
    """aiokafka raises and stays before the batch (every fetch meets it again); the reader's
    verdict names the offsets it cannot read, carries the batch's bytes, and ends the reader
    with the position after them."""
    first, second = batch(0, plain(3, "ok")), bytearray(batch(3, plain(3, "bad")))
    second[-1] ^= 0xFF
    data = first + bytes(second)
    expected = reference(data, [], 0, READ_UNCOMMITTED)
    ours = reader(data, [], 0, READ_UNCOMMITTED, native)
    assert [fields(r) for r in ours.take(3)] == [fields(next(expected)) for _ in range(3)]
    with pytest.raises(CorruptRecordException, match="Invalid CRC"):
        next(expected)
    with pytest.raises(UnreadableRecords, match=r"cannot read clicks\[4\] at offsets 3-5: Invalid CRC") as e:
        ours.take(10)
    assert isinstance(e.value, CorruptRecordException)
    assert (e.value.topic, e.value.partition, e.value.first_offset, e.value.next_offset) == (
        "clicks",
        4,
        3,
        6,
    )
    assert e.value.data == (bytes(second) if native else None)
    assert ours.exhausted
    assert ours.take(10) == []
    assert ours.next_fetch_offset == 6
    assert expected.next_fetch_offset == 3


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("miscount", [-1, 1])
def test_a_batch_whose_record_count_lies_is_corrupt_for_both(miscount: int, native: bool) -> None:
    """The CRC holds (the count was changed before it was computed), the records do not add up."""
    data = bytearray(batch(0, plain(4, "x")))
    (count,) = struct.unpack_from(">i", data, 57)
    struct.pack_into(">i", data, 57, count + miscount)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordException):
        list(reference(bytes(data), [], 0, READ_UNCOMMITTED))
    ours = reader(bytes(data), [], 0, READ_UNCOMMITTED, native)
    handed: list[FetchedRecord] = []

    def take_twice() -> None:  # the verdict at once, or after handing out what came before it
        handed.extend(ours.take(10))
        handed.extend(ours.take(10))

    if native or miscount < 0:
        with pytest.raises(UnreadableRecords) as e:
            take_twice()
        assert e.value.next_offset == ours.next_fetch_offset == 4
    else:  # aiokafka's decoder finds the lie after the batch's every offset: nothing is left of it
        take_twice()
        assert len(handed) == 4
        assert ours.exhausted
        assert ours.next_fetch_offset == 4
    if native:  # the batch's framing is checked before any of it is handed out
        assert handed == []
        assert e.value.first_offset == 0


@pytest.mark.parametrize(
    ("records", "reason"),
    [
        (b"\x16" + b"\xff" * 11, "a varint longer than 64 bits"),
        (b"\x80" * 7, "a record runs past the end of its batch"),
        (b"\x80", "a batch claiming 1 records in 1 bytes"),
    ],
)
def test_a_record_whose_varint_overruns_is_corrupt(records: bytes, reason: str) -> None:
    """The reader's own v2 decoding: a varint of more than 64 bits, or one the batch ends inside
    (the batch's length, count and CRC hold; its records do not)."""
    data = bytearray(batch(0, plain(1, "x"))[:61] + records)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    with pytest.raises(UnreadableRecords, match=reason):
        reader(bytes(data), [], 0, READ_UNCOMMITTED).take(10)


@pytest.mark.parametrize("native", [True, False])
def test_old_message_format_batches_are_read_by_aiokafkas_decoder(native: bool) -> None:
    """Messages written before the v2 format (magic 0/1): the reader leaves them to aiokafka's
    decoder. (aiokafka 0.14 misreads a response mixing them with v2 batches; so does the hook.)"""
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for offset in range(3):
        legacy.append(offset, 1_700_000_000_000 + offset, b"old-%d" % offset, b"value-%d" % offset)
    data = bytes(legacy.build())
    expected = [fields(r) for r in reference(data, [], 0, READ_UNCOMMITTED)]
    assert [fields(r) for r in reader(data, [], 0, READ_UNCOMMITTED, native).take(100)] == expected
    assert len(expected) == 3


def test_take_hands_out_the_records_before_a_corrupt_batch_then_the_verdict() -> None:
    """aiokafka's getall loses them: its position has moved past them when the error comes out.
    Here the consumer gets them, then the verdict, and its position ends after the batch."""
    first, second = batch(0, plain(3, "ok")), bytearray(batch(3, plain(3, "bad")))
    second[-1] ^= 0xFF
    ours = reader(first + bytes(second), [], 0, READ_UNCOMMITTED)
    assert [r.offset for r in ours.take(10)] == [0, 1, 2]
    assert not ours.exhausted
    assert ours.next_fetch_offset == 3
    with pytest.raises(UnreadableRecords, match="Invalid CRC"):
        ours.take(10)
    assert ours.exhausted
    assert ours.take(10) == []
    assert ours.next_fetch_offset == 6


def test_a_fetched_record_has_the_fields_the_merge_reads() -> None:
    record = FetchedRecord("t", 1, 2, 3, 0, b"k", b"v", [("h", b"x")])
    assert fields(record) == ("t", 1, 2, 3, 0, b"k", b"v", (("h", b"x"),))
    assert record == FetchedRecord("t", 1, 2, 3, 0, b"k", b"v", (("h", b"x"),))
    with pytest.raises(AttributeError):
        record.offset = 5  # type: ignore[misc]


def test_the_hook_fits_the_pinned_aiokafka() -> None:
    """pyproject.toml pins aiokafka>=0.14,<0.15; each private part the hook uses is there."""
    assert aiokafka.__version__.startswith("0.14.")
    assert fetch_hook.hook_fits()


class _Fetcher:
    def __init__(self, key_deserializer: object = None) -> None:
        import collections

        self._records: collections.OrderedDict[object, object] = collections.OrderedDict()
        self._key_deserializer = key_deserializer
        self._value_deserializer = None


class _Consumer:
    def __init__(self, fetcher: object) -> None:
        self._fetcher = fetcher


def test_install_hooks_a_fetcher_once_and_keeps_what_it_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiokafka_fetcher, "MemoryRecords", aiokafka_fetcher.MemoryRecords)  # undone after
    fetcher = _Fetcher()
    fetcher._records["x"] = "an error, kept as it is"
    consumer = _Consumer(fetcher)
    assert fetch_hook.install(consumer) == "native"
    hooked = fetcher._records
    assert fetch_hook.install(consumer) == "native"
    assert fetcher._records is hooked
    assert dict(fetcher._records) == {"x": "an error, kept as it is"}
    # The fetcher's partition bytes are kept (for the reader to decode v2 batches itself) and
    # read as before by anyone else.
    assert aiokafka_fetcher.MemoryRecords is fetch_hook._KeptBytes
    data, _ = response()
    kept = aiokafka_fetcher.MemoryRecords(data)
    assert kept.raw is data
    assert kept.size_in_bytes() == len(data)
    assert [fields(r) for r in reference(data, [], 0, READ_UNCOMMITTED)] == [
        fields(r) for r in PartitionRecords(TP, kept, [], 0, None, None, True, READ_UNCOMMITTED)
    ]


def test_no_hook_without_the_parts_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Then getmany stays aiokafka's own, public path."""
    assert fetch_hook.install(_Consumer(None)) == "aiokafka"  # not started
    deserializing = _Fetcher(key_deserializer=bytes.decode)
    assert fetch_hook.install(_Consumer(deserializing)) == "aiokafka"
    assert type(deserializing._records) is not fetch_hook._ReadInC
    monkeypatch.delattr(aiokafka_fetcher.FetchResult, "_update_position")
    assert not fetch_hook.hook_fits()
    assert fetch_hook.install(_Consumer(_Fetcher())) == "aiokafka"
    monkeypatch.undo()
    monkeypatch.setattr(fetch_hook, "PartitionReader", None)
    assert fetch_hook.install(_Consumer(_Fetcher())) == "aiokafka"
