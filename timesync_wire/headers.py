"""The header contract: the ``timesync.*`` headers the sidecar writes and the Spark jobs read.

Every record of the ordered topic keeps its input's key, value and headers, has its event time
as its Kafka timestamp, and carries these headers, their values ASCII decimal (any consumer reads
them without a schema):

=============================  =====================================================================
header                         value
=============================  =====================================================================
``timesync.source.topic``      the input topic (UTF-8)
``timesync.source.partition``  the input partition
``timesync.source.offset``     the input offset (with topic and partition: a dedup key)
``timesync.watermark``         the task watermark at emit, ms (``-1`` until it is known)
``timesync.stream.time``       the task stream time after this record, ms
``timesync.late``              ``1``, only on late records
``timesync.enforced``          ``1``, only on records emitted under enforced processing
``timesync.control``           ``watermark``, only on heartbeats (null key, empty value,
                               timestamp = the watermark)
``timesync.lateness``          how late, ms, only on records sent to ``late.records=topic:…``
=============================  =====================================================================

Input headers named ``timesync.*`` (:data:`PREFIX`) are dropped by the sidecar: when an ordered
topic is merged again, the new coordinates must be the only ones a consumer sees. The sidecar's
``sidecar.core.stamping`` builds records with these names; ``spark_consumer.source`` reads them.

Header keys are text to Kafka's Java clients but only bytes on the wire: a key that is not UTF-8
is read with ``surrogateescape`` and written back through :func:`header_key_bytes`, so it leaves
with the bytes it came with.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "timesync."
SOURCE_TOPIC: Final = "timesync.source.topic"
SOURCE_PARTITION: Final = "timesync.source.partition"
SOURCE_OFFSET: Final = "timesync.source.offset"
WATERMARK: Final = "timesync.watermark"
STREAM_TIME: Final = "timesync.stream.time"
LATE: Final = "timesync.late"
ENFORCED: Final = "timesync.enforced"
CONTROL: Final = "timesync.control"
LATENESS: Final = "timesync.lateness"
#: The value of :data:`CONTROL` on a heartbeat, and of :data:`LATE` and :data:`ENFORCED` when set.
HEARTBEAT: Final = b"watermark"
FLAG: Final = b"1"


def header_key_bytes(key: str) -> bytes:
    """A header key as it goes on the wire: the bytes it was read from (``surrogateescape``
    turns bytes that are not UTF-8 into lone surrogates, and back). Every writer of records
    encodes keys through here or, in C, the same way."""
    return key.encode("utf-8", "surrogateescape")
