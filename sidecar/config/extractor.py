"""``timestamp.extractor``: the one place that turns its value into the core's extractor.

``record`` is the Kafka record's own timestamp (CreateTime as the producer set it, or the
broker's LogAppendTime). Any other value is ``<format>:<dotted.path>[:<unit>]``, the format one
of the table of value formats (:data:`timesync_wire.formats.FORMATS`: ``json``, ``avro``,
``protobuf``) and the unit one of its units (``ms`` by default; ``s``, ``us``, ``iso``). A format
read as it is (JSON) gets a :class:`~sidecar.extractors.plain.ValueTimestamp`; a registry format
a :class:`~sidecar.extractors.framed.SchemaTimestamp`, whose schemas the service resolves before
each push. A name the table does not hold is refused, never read as another format.

The core only receives the extractor (in :class:`~sidecar.core.config.TaskConfig`): it never
imports a format.
"""

from __future__ import annotations

from sidecar.core.timestamps import RecordTimestamp, TimestampExtractor
from sidecar.extractors.framed import SchemaTimestamp
from sidecar.extractors.plain import ValueTimestamp
from timesync_wire import formats
from timesync_wire.formats import UnknownFormatError, ValueFormat, value_format


def extractor_format(spec: str) -> ValueFormat | None:
    """The value format ``spec`` reads (``None`` for ``record``); ``ValueError`` saying what is
    allowed when it names no format of the table."""
    if spec == "record":
        return None
    try:
        return value_format(spec.partition(":")[0])
    except UnknownFormatError:
        raise ValueError(f"expected 'record' or {_forms()}, got {spec!r}") from None


def parse_extractor(spec: str) -> TimestampExtractor:
    """The extractor ``spec`` names (see the module); ``ValueError`` saying why not."""
    fmt = extractor_format(spec)
    if fmt is None:
        return RecordTimestamp()
    rest = spec.partition(":")[2]
    if not rest:
        raise ValueError(f"expected 'record' or {_forms()}, got {spec!r}")
    path, _, unit = rest.partition(":")
    unit = unit or "ms"
    if unit not in fmt.units:
        raise ValueError(f"unknown unit {unit!r} in {spec!r}; allowed: {', '.join(fmt.units)}")
    parts = path.split(".")
    if any(not p for p in parts):
        raise ValueError(f"empty field name in path {path!r} of {spec!r}")
    if fmt.schema_type is None:
        return ValueTimestamp(fmt, parts, unit)  # the unit is one of fmt.units
    return SchemaTimestamp(fmt, parts, unit)


def _forms() -> str:
    return " or ".join(
        f"'{name}:<dotted.path>[:{'|'.join(fmt.units)}]'" for name, fmt in formats.FORMATS.items()
    )
