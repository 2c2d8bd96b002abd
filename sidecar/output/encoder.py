"""The output encoder: one object that turns what the merge emits into producer batches.

What an output record holds is defined once, in :mod:`sidecar.core.stamping` (the format: the
event time as timestamp, the ``timesync.*`` headers, their order and encoding). How it becomes
bytes has two implementations with the same contract, chosen once per process by
:func:`choose_encoder`:

* ``native`` — :class:`~sidecar.output.batches.StampedBatch` es filled by the C loop in
  :mod:`sidecar.output._stamp_encoder`, compressed at Kafka's levels (``compression.*.level``);
* ``python`` — the reference :class:`~sidecar.core.stamping.Stamper` filling
  :class:`~sidecar.output.python_batch.PythonBatch` es, which write records as aiokafka's own
  ``BatchBuilder`` does (the tests hold them to it byte for byte) and also carry header keys
  that are not UTF-8, which aiokafka's builder cannot: the same records, byte for byte before
  compression, slower; used when the extension is not built (no C compiler at install).

Both make batches that aiokafka's ``send_batch`` accepts for one topic-partition, and both
encode side records (heartbeats, late records, dead letters — rare) as ``PythonBatch`` es.
An encoder is made per producer: batches carry the producer's transactional flag.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal, Protocol, cast

from sidecar.core.records import DeadLetter, Emit, Late
from sidecar.core.stamping import OutputRecord, Stamper, dead_letter, heartbeat
from sidecar.output.batches import Compressor, StampedBatch, compressor, native_stamping_available
from sidecar.output.python_batch import PythonBatch
from sidecar.output.writer import BATCH_BYTES

log = logging.getLogger("timesync")

EncoderName = Literal["native", "python"]


class OutputEncoder(Protocol):
    """Builds producer batches for one producer (transactional or not)."""

    @property
    def name(self) -> EncoderName: ...

    def encode(self, emit: Emit) -> list[Any]:
        """The emitted records, stamped, in order, as batches of at most ``BATCH_BYTES`` (a record
        larger than that goes alone)."""
        ...

    def encode_heartbeat(self, watermark: int) -> list[Any]:
        """A watermark control record (see :func:`sidecar.core.stamping.heartbeat`)."""
        ...

    def encode_late(self, late: Sequence[Late], watermark: int) -> list[Any]:
        """Late records bound for the late topic, stamped as they would have been plus their lateness."""
        ...

    def encode_dead_letters(self, dead: Sequence[DeadLetter]) -> list[Any]:
        """Records bound for the dead letter queue, with Kafka Connect's error headers."""
        ...


class _Encoder:
    """What both encoders share: side records through :class:`PythonBatch` es."""

    __slots__ = ("_batch_bytes", "_codec", "_stamper", "_transactional")

    def __init__(self, codec: Compressor, transactional: bool, batch_bytes: int = BATCH_BYTES) -> None:
        self._codec = codec
        self._transactional = transactional
        self._batch_bytes = batch_bytes
        self._stamper = Stamper()

    def _builder(self) -> PythonBatch:
        return PythonBatch(self._codec, self._transactional, self._batch_bytes)

    def encode_heartbeat(self, watermark: int) -> list[Any]:
        return self._records([heartbeat(watermark)])

    def encode_late(self, late: Sequence[Late], watermark: int) -> list[Any]:
        return self._records([self._stamper.late_record(x, watermark) for x in late])

    def encode_dead_letters(self, dead: Sequence[DeadLetter]) -> list[Any]:
        return self._records([dead_letter(d) for d in dead])

    def _records(self, records: Sequence[OutputRecord]) -> list[Any]:
        batch = self._builder()
        batches = [batch]
        for key, value, timestamp, headers in records:
            if batch.append(key=key, value=value, timestamp=timestamp, headers=headers) is None:
                # Full. A batch always takes its first record, however large, so this fits.
                batch = self._builder()
                batches.append(batch)
                batch.append(key=key, value=value, timestamp=timestamp, headers=headers)
        return [b.seal() for b in batches]


class PythonEncoder(_Encoder):
    """The reference path: :class:`Stamper` into :class:`PythonBatch` es."""

    __slots__ = ()

    @property
    def name(self) -> EncoderName:
        return "python"

    def encode(self, emit: Emit) -> list[Any]:
        if not emit.records:
            return []
        return [cast(PythonBatch, b).seal() for b in self._stamper.stamp_into(emit, self._builder)]


class NativeEncoder(_Encoder):
    """Stamps and encodes whole batches in C (see :mod:`sidecar.output.batches`)."""

    __slots__ = ()

    @property
    def name(self) -> EncoderName:
        return "native"

    def encode(self, emit: Emit) -> list[Any]:
        records, timestamps = emit.records, emit.timestamps
        watermark = b"%d" % emit.watermark
        late = set(emit.late) if emit.late else None
        stream_time = emit.stream_time_before
        batches = []
        i = 0
        while i < len(records):
            batch = StampedBatch(self._codec, self._transactional)
            i, stream_time = batch.fill(
                records, timestamps, i, watermark, stream_time, late, emit.enforced_from, self._batch_bytes
            )
            batches.append(batch)
        return batches


_NATIVE: bool | None = None


def native_available() -> bool:
    """Whether the native encoder can be used, decided once per process (with one warning if not)."""
    global _NATIVE
    if _NATIVE is None:
        _NATIVE = native_stamping_available()
        if not _NATIVE:
            log.warning(
                "the native output encoder is not built (no C compiler at install?): stamping in "
                "Python — the same records, at a fraction of the throughput, compressed at "
                "aiokafka's levels rather than compression.*.level"
            )
    return _NATIVE


def choose_encoder(
    compression_type: str, level: int | None, transactional: bool, native: bool | None = None
) -> OutputEncoder:
    """The encoder for one producer; ``native`` defaults to what this process has."""
    use_native = native_available() if native is None else native
    if use_native:
        return NativeEncoder(compressor(compression_type, level), transactional)
    return PythonEncoder(compressor(compression_type, None), transactional)
