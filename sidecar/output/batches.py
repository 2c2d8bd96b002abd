"""Output batches stamped and encoded in C, handed to aiokafka's producer as they are.

The sidecar spends most of its own time (beyond the Kafka client's) on the output side: the
``timesync.*`` headers of every record, then aiokafka's per-record ``append``. With the native
encoder (:mod:`sidecar.output._stamp_encoder`, built from Cython at install) a whole batch is
stamped and encoded in one C loop, and :class:`StampedBatch` turns it into a Kafka v2 record
batch — compressed, with its header and CRC — when the producer drains it.

aiokafka's ``send_batch`` takes any object that behaves as its ``BatchBuilder`` does towards the
producer: ``record_count``, ``closed``, ``size``, ``close``, ``_set_producer_state`` (the
idempotent producer fills in its id, epoch and sequence at drain time) and ``_build``. Two of
those are private, so :func:`native_stamping_available` checks them against the installed aiokafka
(pinned to 0.14.x) and the sidecar falls back to the pure-Python path — same bytes, slower — if
either the extension or that protocol is missing. The tests compare both paths byte for byte.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.util import calc_crc32c

try:
    from sidecar.output._stamp_encoder import encode_stamped
except ImportError:  # built at install when a C compiler is present
    encode_stamped = None  # type: ignore[assignment]

#: Kafka's v2 record batch header: base offset, length, leader epoch, magic, CRC, attributes,
#: last offset delta, first and max timestamp, producer id and epoch, base sequence, count.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_AT = 17  # byte offset of the CRC; it covers everything from the attributes on
_CRC_FROM = 21
_LENGTH_AFTER = 12  # the length field counts the bytes after itself
_TRANSACTIONAL = 0x10

#: Codec ids in the batch attributes.
_CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: Kafka's default lz4 level; its producer then uses LZ4's fast compressor, not HC (see below).
KAFKA_LZ4_DEFAULT = 9

Compressor = tuple[int, Callable[[bytes], bytes] | None]


def compressor(compression_type: str, level: int | None = None) -> Compressor:
    """The codec id and compress function for ``compression.type`` at a Kafka-style ``level``.

    Levels mean what they mean to Kafka's Java producer (KIP-390), not to aiokafka: for lz4 the
    default level (9) selects LZ4's *fast* compressor — Kafka keeps it for compatibility — and
    only another level selects LZ4 HC. aiokafka compresses every lz4 batch with HC level 9:
    about four times the CPU for 17 % fewer bytes on the benchmark's records, which alone cost
    the sidecar a sixth of its throughput. ``None`` is aiokafka's own choice (what the tests compare against).
    """
    codec = _CODEC_IDS[compression_type]
    if compression_type == "none":
        return codec, None
    if compression_type == "snappy":
        return codec, snappy_encode
    if level is None:
        encode = {"gzip": gzip_encode, "lz4": lz4_encode, "zstd": zstd_encode}[compression_type]
        return codec, encode
    if compression_type == "gzip":
        return codec, functools.partial(gzip_encode, compresslevel=level)
    if compression_type == "zstd":
        return codec, functools.partial(zstd_encode, level=level)
    # The LZ4 frame format's level 0 is its fast compressor; 3 and above are HC.
    return codec, functools.partial(lz4_encode, level=0 if level == KAFKA_LZ4_DEFAULT else level)


#: What aiokafka's producer calls on a batch it was given (``BatchBuilder``'s side of it).
_PRODUCER_PROTOCOL = ("record_count", "closed", "size", "close", "append", "_set_producer_state", "_build")


def native_stamping_available() -> bool:
    """The extension is built and aiokafka still drives batches the way ``StampedBatch`` expects."""
    return encode_stamped is not None and all(hasattr(BatchBuilder, name) for name in _PRODUCER_PROTOCOL)


class StampedBatch:
    """One v2 record batch for one output partition, filled once by :meth:`fill`."""

    __slots__ = (
        "_buffer",
        "_built",
        "_codec",
        "_count",
        "_first_ts",
        "_max_ts",
        "_producer",
        "_transactional",
    )

    def __init__(self, codec: Compressor, transactional: bool) -> None:
        self._codec = codec
        self._transactional = transactional
        self._buffer = bytearray(_HEADER.size)
        self._count = 0
        self._first_ts = self._max_ts = 0
        # aiokafka's defaults for a producer without idempotence (no id, no epoch).
        self._producer = (-1, -1, 0)
        # ``_build`` compresses and writes the header in place, once.
        self._built = False

    def fill(
        self,
        records: Sequence[Any],
        timestamps: Sequence[int],
        start: int,
        watermark: bytes,
        stream_time: int,
        late: set[int] | None,
        enforced_from: int,
        batch_size: int,
    ) -> tuple[int, int]:
        """Encode records from ``start`` until the batch is full; return (next index, stream time)."""
        assert encode_stamped is not None
        nxt, self._count, self._first_ts, self._max_ts, stream_time = encode_stamped(
            self._buffer, records, timestamps, start, watermark, stream_time, late, enforced_from, batch_size
        )
        return nxt, stream_time

    # -- what aiokafka's producer calls ------------------------------------------------------

    def record_count(self) -> int:
        return self._count

    def closed(self) -> bool:
        # Nothing is ever added after the batch is handed over, so there is no point lingering.
        return True

    def close(self) -> None:
        pass

    def append(self, **_: object) -> None:
        """Full, always: should a plain ``producer.send`` meet this batch still queued for its
        partition, aiokafka then waits for it to go out and starts a batch of its own."""
        return None

    def size(self) -> int:
        return len(self._buffer)

    def _set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        self._producer = (producer_id, producer_epoch, base_sequence)

    def _build(self) -> bytearray:
        """Compress the records (when it pays, as aiokafka does), then write the header and CRC."""
        buffer = self._buffer
        if self._built:
            return buffer
        attributes = _TRANSACTIONAL if self._transactional else 0
        codec, encode = self._codec
        if encode is not None:
            plain = bytes(memoryview(buffer)[_HEADER.size :])
            compressed = encode(plain)
            if len(compressed) < len(plain):
                del buffer[_HEADER.size :]
                buffer += compressed
                attributes |= codec
        producer_id, producer_epoch, base_sequence = self._producer
        _HEADER.pack_into(
            buffer,
            0,
            0,  # base offset: the broker assigns it
            len(buffer) - _LENGTH_AFTER,
            -1,  # partition leader epoch: the broker's
            2,  # magic
            0,  # CRC, below
            attributes,
            self._count - 1,
            self._first_ts,
            self._max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            self._count,
        )
        struct.pack_into(">I", buffer, _CRC_AT, calc_crc32c(memoryview(buffer)[_CRC_FROM:]))
        self._built = True
        return buffer
