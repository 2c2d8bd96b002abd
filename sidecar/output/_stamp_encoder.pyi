from collections.abc import Sequence
from typing import Any

def encode_stamped(
    buffer: bytearray,
    records: Sequence[Any],
    timestamps: Sequence[int],
    start: int,
    watermark: bytes,
    stream_time: int,
    late: set[int] | None,
    enforced_from: int,
    batch_size: int,
) -> tuple[int, int, int, int, int]: ...
