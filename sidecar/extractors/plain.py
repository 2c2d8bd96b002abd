"""``<format>:<dotted.path>[:unit]`` for a format read as it is (``json:``): event time from the
whole value, no registry, no schema.

:class:`ValueTimestamp` is a core timestamp extractor over the format's time reader
(:meth:`timesync_wire.formats.base.ValueFormat.time_reader`): a batch goes to the reader's
``millis_all`` when it has one (the JSON scan, in C), else value by value; a value that has no
time is ``INVALID``, and :meth:`ValueTimestamp.explain` gives the reader's one-line reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.records import InputRecord
from timesync_wire.formats.base import BatchRead, ValueFormat
from timesync_wire.timevalues import Unit

INVALID = -1


class ValueTimestamp:
    """Event time at a path of values read as they are."""

    uses_record_time = False

    def __init__(self, fmt: ValueFormat, path: Sequence[str], unit: Unit = "ms") -> None:
        if fmt.schema_type is not None:
            raise ValueError(f"the {fmt.name} format reads registry schemas")
        self.format = fmt
        self.path = tuple(path)
        self.unit: Unit = unit
        self.reader = fmt.time_reader(self.path, unit)
        self._batch: BatchRead | None = getattr(self.reader, "millis_all", None)

    def __repr__(self) -> str:
        return f"{self.format.name}:{'.'.join(self.path)}:{self.unit}"

    def extract_all(self, records: Sequence[InputRecord]) -> list[int]:
        values = [r.value for r in records]
        if self._batch is not None:
            return self._batch(values, b"")
        return [self._one(v) for v in values]

    def _one(self, value: bytes | None) -> int:
        if value is None:
            return INVALID
        try:
            return self.reader.millis(value)
        except Exception:
            return INVALID

    def explain(self, record: InputRecord) -> str:
        if record.value is None:
            return "value is null"
        try:
            self.reader.millis(record.value)
        except Exception as e:
            return str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        return "valid"
