"""Bytes the sidecar does not control, read without a crash: header keys that are not UTF-8 pass
through; lengths, counts and codecs that lie end in one verdict naming the offsets.

The C reader (``sidecar/kafka/_fetched.pyx``) against hand-built v2 batches, aiokafka's reader
beside it where it is the reference, and the guard the hook puts around aiokafka's reader when
the extension is not built. The mutated batches of ``tests/unit/test_fetched_fuzz.py`` cover the
rest; these are the cases the issue names, each one an exception out of the fetch path before.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.errors import CorruptRecordException
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c, encode_varint
from aiokafka.structs import TopicPartition

from sidecar.core.records import Emit
from sidecar.core.stamping import header_key_bytes
from sidecar.kafka import codecs, fetch_hook
from sidecar.kafka._fetched import PartitionReader
from sidecar.kafka.unreadable import UnreadableRecords
from sidecar.output.batches import compressor
from sidecar.output.encoder import NativeEncoder, PythonEncoder

TP = TopicPartition("clicks", 4)
RAW_KEY = b"\xff\xfe-trace"
ENCODE = {1: gzip_encode, 2: snappy_encode, 3: lz4_encode, 4: zstd_encode}
BIG = 2**63 - 1  # pos + BIG overflowed before: the check passed and the read asked for BIG bytes


def varint(n: int) -> bytes:
    out = bytearray()
    encode_varint(n, out.append)
    return bytes(out)


def field(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(
    delta: int,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: tuple[tuple[bytes, bytes | None], ...] = (),
    *,
    raw_fields: bytes | None = None,
) -> bytes:
    """One record; ``raw_fields`` replaces everything after the offset delta (to make it lie)."""
    body = b"\x00" + varint(0) + varint(delta)
    if raw_fields is not None:
        body += raw_fields
    else:
        body += field(key) + field(value) + varint(len(headers))
        body += b"".join(field(k) + field(v) for k, v in headers)
    return varint(len(body)) + body


def batch(base: int, records: list[bytes], codec: int = 0, count: int | None = None) -> bytes:
    payload = b"".join(records)
    if codec:
        payload = ENCODE[codec](payload)
    n = len(records) if count is None else count
    head = struct.pack(
        ">qiibIhiqqqhii", base, 0, -1, 2, 0, codec, max(len(records) - 1, 0), 1000, 1000, -1, -1, -1, n
    )
    data = bytearray(head + payload)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def read(data: bytes, limit: int = codecs.DEFAULT_MAX_BATCH_BYTES) -> list[Any]:
    """Everything the reader hands out, the verdict included (last): the reader then ended,
    its position after the offsets the verdict names."""
    reader = PartitionReader(TP, MemoryRecords(data), [], 0, True, False, data, limit)
    out: list[Any] = []
    while True:
        try:
            chunk = reader.take(100)
        except UnreadableRecords as verdict:
            out.append(verdict)
            break
        if not chunk:
            return out
        out += chunk
    assert reader.exhausted
    assert reader.next_fetch_offset == out[-1].next_offset
    return out


# -- item 1: header keys that are not UTF-8 ------------------------------------------------------


def test_a_header_key_that_is_not_utf8_is_read_and_written_back_as_its_bytes() -> None:
    data = batch(7, [record(0, headers=((RAW_KEY, b"x"), (b"ok", b"y")))])
    with pytest.raises(UnicodeDecodeError):  # aiokafka's reader: strict UTF-8
        list(PartitionRecords(TP, MemoryRecords(data), [], 0, None, None, True, 0))
    [got] = read(data)
    (key, value), plain = got.headers
    assert header_key_bytes(key) == RAW_KEY
    assert (value, plain) == (b"x", ("ok", b"y"))
    emit = Emit(1, [got], [1000], 0, 0, 1)
    for encoder in (NativeEncoder(compressor("none"), False), PythonEncoder(compressor("none"), False)):
        [out] = encoder.encode(emit)
        written = bytes(out._build())
        assert RAW_KEY in written
        assert written.count(b"\xff\xfe") == 1


def test_without_the_extension_the_guard_turns_aiokafkas_refusal_into_a_verdict() -> None:
    """aiokafka's reader cannot carry such a key: its batch is dead-lettered, not fatal."""
    good = batch(0, [record(0), record(1)])
    bad = batch(2, [record(0), record(1, headers=((RAW_KEY, b"x"),))])
    after = batch(4, [record(0)])
    result = _Result(good + bad + after)
    getall = fetch_hook._GuardedGetall(result, result._partition_records)
    got = getall(100)
    assert [r.offset for r in got[:-1]] == [0, 1, 2]
    verdict = got[-1]
    assert isinstance(verdict, UnreadableRecords)
    assert (verdict.first_offset, verdict.next_offset) == (3, 4)
    assert "UnicodeDecodeError" in verdict.reason
    assert result.position == 4
    assert getall(100) == []


class _Result:
    """aiokafka's ``FetchResult`` as the guard sees it: one partition, always assigned."""

    def __init__(self, data: bytes) -> None:
        kept = fetch_hook._KeptBytes.__new__(fetch_hook._KeptBytes)
        kept.raw, kept.batches, kept.last, kept.at = data, MemoryRecords(data), None, 0
        self._topic_partition = TP
        self._partition_records: Any = PartitionRecords(TP, kept, [], 0, None, None, True, 0)
        self.position = 0

    def check_assignment(self, tp: TopicPartition) -> bool:
        return self._partition_records is not None

    def has_more(self) -> bool:
        return self._partition_records is not None

    def _update_position(self) -> None:
        self.position = self._partition_records.next_fetch_offset


# -- item 8: lengths that overflow, sizes that inflate, every failure one verdict -----------------


@pytest.mark.parametrize(
    "fields",
    [
        varint(BIG) + b"k",  # key length
        field(None) + varint(BIG) + b"v",  # value length
        field(None) + field(None) + varint(1) + varint(BIG) + b"h" + field(None),  # header key
        field(None) + field(None) + varint(1) + field(b"h") + varint(BIG),  # header value
        field(None) + field(None) + varint(BIG),  # header count
    ],
    ids=["key", "value", "header key", "header value", "header count"],
)
def test_a_length_far_past_the_batch_is_a_verdict_not_an_overflow(fields: bytes) -> None:
    data = batch(20, [record(0), record(1, raw_fields=fields), record(2)])
    first, verdict = read(data)
    assert first.offset == 20
    assert isinstance(verdict, UnreadableRecords)
    assert isinstance(verdict, CorruptRecordException)
    assert (verdict.topic, verdict.partition, verdict.first_offset, verdict.next_offset) == (
        "clicks",
        4,
        21,
        23,
    )
    assert str(verdict).startswith("cannot read clicks[4] at offsets 21-22: ")
    assert verdict.data == data


def test_a_record_length_or_count_far_past_the_batch_is_a_verdict() -> None:
    long_record = varint(BIG) + b"\x00" * 10
    assert "claims" in read(batch(0, [record(0), long_record]))[-1].reason
    assert "claiming 2147483647 records" in read(batch(0, [record(0)], count=2**31 - 1))[-1].reason


@pytest.mark.parametrize("codec", sorted(ENCODE), ids=["gzip", "snappy", "lz4", "zstd"])
def test_a_batch_inflating_past_the_bound_is_a_verdict_and_within_it_reads(codec: int) -> None:
    bomb = batch(3, [record(0, value=b"\x00" * (1 << 20))], codec)
    assert len(bomb) < 64 * 1024
    [verdict] = read(bomb, limit=256 * 1024)
    assert isinstance(verdict, UnreadableRecords)
    assert "inflate past 262144 bytes" in verdict.reason
    assert (verdict.first_offset, verdict.next_offset) == (3, 4)
    [whole] = read(bomb)  # within fetch.max.bytes (the default bound): an ordinary big record
    assert whole.value == b"\x00" * (1 << 20)


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00" * 7, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xfcabcd"],
    ids=["empty", "zeros", "xerial negative block"],
)
@pytest.mark.parametrize("codec", sorted(ENCODE), ids=["gzip", "snappy", "lz4", "zstd"])
def test_records_that_do_not_decompress_are_a_verdict(codec: int, payload: bytes) -> None:
    head = struct.pack(">qiibIhiqqqhii", 9, 0, -1, 2, 0, codec, 0, 1000, 1000, -1, -1, -1, 1)
    data = bytearray(head + payload)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    [verdict] = read(bytes(data))
    assert isinstance(verdict, UnreadableRecords)
    assert (verdict.first_offset, verdict.next_offset) == (9, 10)
    # Nothing may decompress to nothing; then the record it claims is not there.
    assert (
        verdict.reason.startswith("DecompressionFailed: ")
        or "claiming 1 records in 0 bytes" in verdict.reason
    )


def test_a_v2_batch_shorter_than_its_header_is_refused_before_aiokafka_reads_past_it() -> None:
    """aiokafka's decoder reads a 61-byte header whatever the batch's length says."""
    short = bytearray(batch(5, [record(0)])[:40])
    struct.pack_into(">i", short, 8, len(short) - 12)
    [verdict] = read(bytes(short) + batch(6, [record(0)]))
    assert "shorter than its header" in verdict.reason
    assert (verdict.first_offset, verdict.next_offset) == (5, 6)


def test_records_before_a_verdict_come_first_and_the_position_waits_for_it() -> None:
    """Handed out in two calls: if the consumer drops the rest unread (a pause, a seek), its
    position is still before the unreadable offsets, which are fetched — and judged — again."""
    bad = batch(3, [record(0, raw_fields=varint(BIG))])
    data = batch(0, [record(0), record(1), record(2)]) + bad
    reader = PartitionReader(TP, MemoryRecords(data), [], 0, True, False, data)
    assert [r.offset for r in reader.take(100)] == [0, 1, 2]
    assert reader.next_fetch_offset == 3
    with pytest.raises(UnreadableRecords) as verdict:
        reader.take(100)
    assert reader.next_fetch_offset == verdict.value.next_offset == 4


def test_the_hook_hands_the_verdict_over_as_the_partitions_last_item() -> None:
    """``getmany`` never raises it: aiokafka would lose the other partitions' records."""
    data = batch(0, [record(0)]) + batch(1, [record(0, raw_fields=varint(BIG))])
    reader = PartitionReader(TP, MemoryRecords(data), [], 0, True, False, data)
    result = _Result(data)
    getall = fetch_hook._Getall(result, reader)
    result._partition_records = reader
    assert [r.offset for r in getall(100)] == [0]
    [verdict] = getall(100)
    assert isinstance(verdict, UnreadableRecords)
    assert result.position == 2
    assert getall(100) == []
