"""Kafka v2 record batches built by hand, and sent to a broker as they are.

For the bytes no Kafka client writes but the broker takes: header keys that are not UTF-8 (Java
clients encode keys as UTF-8, confluent-kafka's Python API too, aiokafka's builder refuses
them), compressed records that inflate far past their size, lengths that lie. :func:`batch`
lays records out as Kafka's protocol does (``DefaultRecordBatch``); :class:`Prebuilt` hands such
a batch to aiokafka's producer, which sends what it is given (``send_batch``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.record.util import calc_crc32c, encode_varint

#: A v2 batch's header: base offset, length, leader epoch, magic, CRC, attributes, last offset
#: delta, first and max timestamp, producer id and epoch, base sequence, record count.
HEADER = struct.Struct(">qiibIhiqqqhii")
CODECS: dict[str, tuple[int, Callable[[bytes], bytes] | None]] = {
    "none": (0, None),
    "gzip": (1, gzip_encode),
    "snappy": (2, snappy_encode),
    "lz4": (3, lz4_encode),
    "zstd": (4, zstd_encode),
}

Header = tuple[bytes, bytes | None]


def varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def field(data: bytes | None) -> bytes:
    """A length-prefixed field; ``None`` is null."""
    return varint(-1) if data is None else varint(len(data)) + data


def record(
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
    timestamp_delta: int = 0,
) -> bytes:
    """One record of a batch; header keys are bytes, whatever they hold."""
    body = b"".join(
        [
            b"\x00",  # attributes
            varint(timestamp_delta),
            varint(offset_delta),
            field(key),
            field(value),
            varint(len(headers)),
            *(field(k) + field(v) for k, v in headers),
        ]
    )
    return varint(len(body)) + body


def batch(records: Sequence[bytes], first_timestamp: int, codec: str = "none", base_offset: int = 0) -> bytes:
    """A v2 batch of ``records`` (each from :func:`record`, offset deltas 0, 1, …), its CRC set."""
    codec_id, encode = CODECS[codec]
    payload = b"".join(records)
    if encode is not None:
        payload = encode(payload)
    fields = (base_offset, 0, -1, 2, 0, codec_id, len(records) - 1, first_timestamp, first_timestamp)
    data = bytearray(HEADER.pack(*fields, -1, -1, -1, len(records)) + payload)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


class Prebuilt:
    """A finished batch, as aiokafka's producer drives its ``BatchBuilder``: nothing more goes in,
    and an idempotent producer's id, epoch and sequence are written in when it is sent."""

    def __init__(self, data: bytes, count: int) -> None:
        self._data = bytearray(data)
        self._count = count

    def record_count(self) -> int:
        return self._count

    def closed(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def append(self, **_: object) -> None:
        return None

    def size(self) -> int:
        return len(self._data)

    def _set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        struct.pack_into(">qhi", self._data, 43, producer_id, producer_epoch, base_sequence)
        struct.pack_into(">I", self._data, 17, calc_crc32c(bytes(self._data[21:])))

    def _build(self) -> bytearray:
        return self._data


async def send(bootstrap: str, topic: str, partition: int, data: bytes, count: int) -> int:
    """Send one hand-built batch of ``count`` records; the offset the broker gave its first."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=8 * 1024 * 1024)
    await producer.start()
    try:
        future = await producer.send_batch(Prebuilt(data, count), topic, partition=partition)
        return int((await future).offset)
    finally:
        await producer.stop()
