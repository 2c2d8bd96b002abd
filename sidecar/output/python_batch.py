"""A v2 record batch filled record by record in Python: the reference writer of output records.

aiokafka's ``BatchBuilder`` would be the well-kept choice, and it is what the tests hold this to,
byte for byte, for every record whose header keys are UTF-8. But it encodes header keys as
strict UTF-8 and so cannot write a key Kafka allows and the broker takes — one that is not
UTF-8, read with ``surrogateescape`` (see :mod:`sidecar.core.stamping`). This writes records as
aiokafka's C builder lays them out (the same field order, varints and batch-full rule), with
keys through :func:`~sidecar.core.stamping.header_key_bytes`, into a
:class:`~sidecar.output.batches.StampedBatch`, which adds the header, CRC and compression and is
what aiokafka's producer sends.

It serves the pure-Python encoder (``sidecar.output.encoder.PythonEncoder``, when the C
extension is not built) and the side records of both encoders — heartbeats, late records and
dead letters — so that every record the sidecar writes carries its input's header keys as they
came.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from aiokafka.record.util import encode_varint, size_of_varint

from sidecar.core.stamping import header_key_bytes
from sidecar.output.batches import Compressor, StampedBatch


class PythonBatch(StampedBatch):
    """A batch for one topic-partition; :meth:`append` until it answers ``None`` (full), then
    :meth:`seal` before it is handed to the producer."""

    __slots__ = ("_batch_size", "_open")

    def __init__(self, codec: Compressor, transactional: bool, batch_size: int) -> None:
        super().__init__(codec, transactional)
        self._batch_size = batch_size
        self._open = True

    def append(  # type: ignore[override]
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> PythonBatch | None:
        """Add one record, unless the batch is sealed or this record would take it to
        ``batch_size`` (the first record always goes in, however large, as with aiokafka's
        builder). ``timestamp`` ``None``: now (aiokafka's rule)."""
        if not self._open:
            return None  # handed over: a plain producer.send must start a batch of its own
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        count = self._count
        if count == 0:
            self._first_ts = self._max_ts = timestamp
        body = _record_body(count, timestamp - self._first_ts, key, value, headers)
        size = size_of_varint(len(body)) + len(body)
        if count and len(self._buffer) + size >= self._batch_size:
            return None
        encode_varint(len(body), self._buffer.append)
        self._buffer += body
        self._count = count + 1
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        return self

    def seal(self) -> PythonBatch:
        """No more records: the batch goes to the producer."""
        self._open = False
        return self


def _record_body(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> bytearray:
    body = bytearray(b"\x00")  # attributes: none are defined for records
    write = body.append
    encode_varint(timestamp_delta, write)
    encode_varint(offset_delta, write)
    _field(body, key)
    _field(body, value)
    encode_varint(len(headers), write)
    for name, data in headers:
        if data is not None and type(data) is not bytes:
            raise TypeError(f"header {name!r}: value must be bytes or None, not {type(data).__name__}")
        _field(body, header_key_bytes(name))
        _field(body, data)
    return body


def _field(body: bytearray, data: bytes | bytearray | memoryview | None) -> None:
    """A length-prefixed field; ``None`` is null (length -1)."""
    if data is None:
        body.append(1)  # zigzag(-1)
        return
    data = bytes(data)
    encode_varint(len(data), body.append)
    body += data
