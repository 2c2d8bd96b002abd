"""A fetched batch's records decompressed with a bound on what they may inflate to.

aiokafka's codec helpers (``aiokafka.codec``) decompress whatever they are given in full: a
batch of a few kilobytes that inflates to gigabytes (a *decompression bomb*; the broker streams
through compressed batches when it validates them, so one gets in) would take the process's
memory, on the event loop. Here each codec is the same library aiokafka uses, driven through a
bounded call:

* gzip — the standard library's ``GzipFile``, read with a size (``read(limit + 1)``: it
  inflates at most that much, and checks each member's CRC and length as ``read()`` does);
* snappy — ``cramjam.snappy`` raw blocks, alone or in xerial framing (aiokafka's two forms):
  each block states its decompressed length up front, so the total is checked before anything
  is decompressed (and a block length that is negative or runs past the end is refused — a
  negative one would step aiokafka's own loop backwards);
* lz4 (frame format) and zstd — ``cramjam``'s ``decompress_into`` a buffer of fixed size,
  which stops with an error once the buffer is full; the buffer starts at a few times the
  compressed size and grows eightfold up to the limit (each try starts over, so the work is at
  most a little more than one pass at the final size).

The bound, :data:`DEFAULT_MAX_BATCH_BYTES`, is the consumer's ``fetch.max.bytes`` (aiokafka's
default, 50 MiB, which the sidecar keeps): a batch may inflate to no more than one whole fetch
response may hold, which is what the consumer is sized for. Batches written by real producers
stay far below it — a producer's batch holds ``batch.size`` (16 KiB by default) or one record of
at most ``max.request.size`` (1 MiB by default) before compression. :mod:`sidecar.kafka.fetch_hook`
passes the consumer's own ``fetch_max_bytes``. Anything past it, and every codec error, is a
:class:`DecompressionFailed`, which the reader turns into its one verdict.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib

import cramjam

#: aiokafka's ``fetch_max_bytes`` default (the sidecar does not change it).
DEFAULT_MAX_BATCH_BYTES = 52_428_800

#: Codec ids in a batch's attributes (bits 0-2).
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

#: The xerial snappy framing aiokafka reads: marker, "SNAPPY", pad, version 1, compat 1.
_XERIAL_HEADER = struct.pack("!bccccccBii", -126, b"S", b"N", b"A", b"P", b"P", b"Y", 0, 1, 1)
#: cramjam's message when a ``decompress_into`` buffer is full (cramjam 2.x).
_FULL = "failed to write whole buffer"
_FIRST_GUESS_MIN = 64 * 1024


class DecompressionFailed(ValueError):
    """A batch's records could not be decompressed, or would inflate past the limit."""


def decompress(codec: int, body: bytes, limit: int = DEFAULT_MAX_BATCH_BYTES) -> bytes | bytearray:
    """The decompressed records of a batch compressed with ``codec``, at most ``limit`` bytes."""
    if codec == GZIP:
        return _gzip(body, limit)
    if codec == SNAPPY:
        return _snappy(body, limit)
    if codec == LZ4:
        return _into(cramjam.lz4.decompress_into, "lz4", body, limit)
    if codec == ZSTD:
        return _into(cramjam.zstd.decompress_into, "zstd", body, limit)
    raise DecompressionFailed(f"unknown compression codec {codec}")


def _too_big(name: str, limit: int) -> DecompressionFailed:
    return DecompressionFailed(
        f"{name} records inflate past {limit} bytes (fetch.max.bytes): a decompression bomb, or a "
        "producer far outside Kafka's batch limits"
    )


def _gzip(body: bytes, limit: int) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(body), mode="rb") as reader:
            data = reader.read(limit + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise DecompressionFailed(f"gzip: {e}") from e
    if len(data) > limit:
        raise _too_big("gzip", limit)
    return data


def _snappy(body: bytes, limit: int) -> bytes:
    if len(body) > len(_XERIAL_HEADER) and body.startswith(_XERIAL_HEADER):
        blocks = []
        view = memoryview(body)[len(_XERIAL_HEADER) :]
        cursor = 0
        while cursor < len(view):
            if len(view) - cursor < 4:
                raise DecompressionFailed("snappy: a xerial block length runs past the end")
            (size,) = struct.unpack_from("!i", view, cursor)
            cursor += 4
            if size < 0 or size > len(view) - cursor:
                raise DecompressionFailed(f"snappy: a xerial block of {size} bytes in {len(view) - cursor}")
            blocks.append(view[cursor : cursor + size])
            cursor += size
    else:
        blocks = [memoryview(body)]
    try:
        total = 0
        for block in blocks:
            total += cramjam.snappy.decompress_raw_len(block)
            if total > limit:
                raise _too_big("snappy", limit)
        return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)
    except cramjam.DecompressionError as e:
        raise DecompressionFailed(f"snappy: {e}") from e


def _into(decompress_into: object, name: str, body: bytes, limit: int) -> bytearray:
    size = min(limit + 1, max(_FIRST_GUESS_MIN, 4 * len(body)))
    while True:
        out = bytearray(size)
        try:
            written = int(decompress_into(body, out))  # type: ignore[operator]
        except cramjam.DecompressionError as e:
            if _FULL not in str(e):
                raise DecompressionFailed(f"{name}: {e}") from e
            if size > limit:
                raise _too_big(name, limit) from None
            size = min(limit + 1, size * 8)
            continue
        if written > limit:
            raise _too_big(name, limit)
        del out[written:]
        return out
