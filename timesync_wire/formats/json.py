"""JSON values: event time at a dotted path of the value, read as it is (no registry framing).

``json:meta.ts`` reads ``{"meta": {"ts": …}}``. The time is found by a scanner that builds
nothing but the leaf (:mod:`.json_scan`, in C when built, held to its Python specification and
to orjson's rules), and converted by the time rules every format shares (:mod:`..timevalues`):
``ms`` (default), ``s`` (a fraction allowed) and ``us`` take a number or a string holding one;
``iso`` takes an ISO-8601 string with a zone (a naive time is invalid: guessing its zone would
shift events by hours). Any readable time in Kafka's range is valid here, however far from the
record's own timestamp; whether the output topic's broker accepts it is judged at emit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from timesync_wire import timevalues
from timesync_wire.formats.base import ValueFormat
from timesync_wire.formats.json_scan import JsonTimeScan
from timesync_wire.timevalues import Unit


class JsonTimeReader:
    """Event time of JSON values at one path: :meth:`millis_all` for a batch (the scan in C),
    :meth:`millis` and :meth:`explain` for one value (the specification, with its reason)."""

    __slots__ = ("_millis_all", "scan")

    def __init__(self, path: Sequence[str], unit: Unit) -> None:
        self.scan = JsonTimeScan(path, unit, timevalues)
        self._millis_all = self.scan.millis_all

    def millis(self, value: bytes | None, start: int = 0) -> int:
        """Event time of the value at ``value[start:]``; ``ValueError`` saying why it has none."""
        return self.scan.millis(value[start:] if start and value is not None else value)

    def millis_all(self, values: Sequence[bytes | None], prefix: bytes = b"") -> list[int]:
        """Event times of ``values``, ``INVALID`` (-1) where one has none; a JSON value has no
        framing, so ``prefix`` is always empty."""
        return self._millis_all(values)

    def explain(self, value: bytes | None) -> str:
        return self.scan.explain(value)


class JsonFormat(ValueFormat):
    """JSON text, read as it is."""

    name: ClassVar[str] = "json"
    schema_type: ClassVar[str | None] = None

    def time_reader(
        self, path: Sequence[str], unit: Unit, schema: Any = None, indexes: Sequence[int] = ()
    ) -> JsonTimeReader:
        return JsonTimeReader(path, unit)
