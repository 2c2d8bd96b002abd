from typing import Any

def encode_stamped(
    buffer: bytearray,
    records: list[Any],
    timestamps: list[int],
    start: int,
    watermark: bytes,
    stream_time: int,
    late: set[int] | None,
    enforced_from: int,
    batch_size: int,
) -> tuple[int, int, int, int, int]: ...
