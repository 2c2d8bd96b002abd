"""How the batch fuzzer's inputs are made: valid Kafka v2 record batches (every codec, keys and
values null or not, header keys that are not UTF-8, LogAppendTime, extreme timestamps), then broken
(see :mod:`testkit.fuzz.batches`, which feeds them to the reader and checks what it does)."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.record.util import calc_crc32c, encode_varint

#: The reader's bound on a batch's inflated records, small so that bombs stay cheap to build.
LIMIT = 64 * 1024
_HEADER = struct.Struct(">qiibIhiqqqhii")
_ENCODE: dict[int, Callable[[bytes], bytes]] = {
    1: gzip_encode,
    2: snappy_encode,
    3: lz4_encode,
    4: zstd_encode,
}
_INT64 = 2**63
_EXTREMES = (0, 1, -1, 2, 7, 127, 128, 2**31 - 1, -(2**31), 2**31, 2**62, -(2**62), _INT64 - 1, -_INT64)
_HEADER_KEYS = (b"trace", b"", b"\xff\xfe", b"k\xc3", b"\xed\xa0\x80", b"timesync.x", "ü".encode())


def _varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def _field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def _record(rng: random.Random, offset_delta: int, ts_delta: int) -> bytes:
    key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 12))
    if rng.random() < 0.2:
        value: bytes | None = None
    elif rng.random() < 0.5:
        value = b"x" * rng.randrange(0, 200)
    else:
        value = rng.randbytes(rng.randrange(0, 40))
    headers = []
    for _ in range(rng.choice((0, 0, 1, 2, 3))):
        name = rng.choice(_HEADER_KEYS) if rng.random() < 0.8 else rng.randbytes(rng.randrange(0, 6))
        headers.append(_field(name) + _field(None if rng.random() < 0.2 else rng.randbytes(rng.randrange(4))))
    body = (
        b"\x00"
        + _varint(ts_delta)
        + _varint(offset_delta)
        + _field(key)
        + _field(value)
        + _varint(len(headers))
        + b"".join(headers)
    )
    return _varint(len(body)) + body


def _mutate(rng: random.Random, data: bytearray) -> None:
    """One blind mutation of ``data``."""
    if not data:
        data.extend(rng.randbytes(rng.randrange(1, 8)))
        return
    at = rng.randrange(len(data))
    kind = rng.randrange(6)
    if kind == 0:
        data[at] ^= rng.randrange(1, 256)
    elif kind == 1:
        data[at:at] = rng.randbytes(rng.randrange(1, 6))
    elif kind == 2:
        del data[at : at + rng.randrange(1, 8)]
    elif kind == 3:
        del data[at:]
    elif kind == 4:  # an extreme varint over whatever was there
        encoded = _varint(rng.choice(_EXTREMES))
        data[at : at + rng.randrange(1, 4)] = encoded
    else:
        data[at] = rng.choice((0x00, 0x7F, 0x80, 0xFF))


def batch(rng: random.Random, base_offset: int) -> bytes:
    """One v2 batch at ``base_offset``: valid, or broken on the way (records before they are
    compressed, a header field set to an extreme; the CRC fixed after either)."""
    codec = rng.choice((0, 0, 1, 2, 3, 4))
    count = rng.randrange(0, 7)
    first_ts = rng.choice((1_700_000_000_000, 0, -1, _INT64 - 10, -_INT64 + 10))
    records = bytearray()
    for i in range(count):
        records += _record(rng, i, rng.choice((0, 1, 5, -3, 2**40)))
    if rng.random() < 0.02:  # a bomb: one record inflating past the reader's bound
        body = b"\x00\x00\x00\x01" + _field(b"\x00" * (2 * LIMIT)) + b"\x00"
        records = bytearray(_varint(len(body)) + body)
        count, codec = 1, rng.randrange(1, 5)
    if rng.random() < 0.3:
        for _ in range(rng.randrange(1, 3)):
            _mutate(rng, records)
    payload = _ENCODE[codec](bytes(records)) if codec else bytes(records)
    attributes = codec | (0x08 if rng.random() < 0.1 else 0)
    fields = [base_offset, 0, -1, 2, 0, attributes, max(count - 1, 0), first_ts, first_ts, -1, -1, -1, count]
    if rng.random() < 0.15:  # length, magic, attributes, last offset delta, count: an extreme
        index = rng.choice((1, 3, 5, 6, 12))
        value = rng.choice(_EXTREMES)
        limits = {1: 2**31, 3: 2**7, 5: 2**15, 6: 2**31, 12: 2**31}[index]
        fields[index] = value % (2 * limits) - limits
    data = bytearray(_HEADER.pack(*fields) + payload)
    if fields[1] == 0:
        struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def fix_crcs(data: bytearray) -> None:
    """Recompute the CRC of every batch whose framing still holds, so that a mutation reaches
    the decoder."""
    at = 0
    while len(data) - at >= 21:
        (length,) = struct.unpack_from(">i", data, at + 8)
        end = at + 12 + length
        if length < 9 or end > len(data):
            return
        struct.pack_into(">I", data, at + 17, calc_crc32c(bytes(data[at + 21 : end])))
        at = end


class Corpus:
    """Batches built once (each as :func:`batch` builds them), for a campaign to break again and
    again: building costs more than reading."""

    def __init__(self, seed: int, size: int = 4096) -> None:
        self.batches = [batch(random.Random(f"{seed}/{i}"), 0) for i in range(size)]

    def pick(self, rng: random.Random, base_offset: int) -> bytes:
        """One of them, moved to ``base_offset`` (outside the CRC: nothing to recompute)."""
        data = bytearray(rng.choice(self.batches))
        if len(data) >= 8:
            struct.pack_into(">q", data, 0, base_offset)
        return bytes(data)


def response(rng: random.Random, corpus: Corpus | None = None) -> bytes:
    """One fetch response, built (or, mostly, picked from ``corpus``) and broken (see the
    module's docstring)."""
    parts = []
    base = rng.choice((0, 0, 5, 2**40))
    fresh = corpus is None or rng.random() < 0.05
    for _ in range(rng.randrange(1, 4)):
        parts.append(batch(rng, base) if fresh or corpus is None else corpus.pick(rng, base))
        base += 6 + rng.randrange(0, 3)
    data = bytearray(b"".join(parts))
    if rng.random() < 0.6:
        for _ in range(rng.randrange(1, 4)):
            _mutate(rng, data)
        if rng.random() < 0.8:
            fix_crcs(data)
    return bytes(data)
