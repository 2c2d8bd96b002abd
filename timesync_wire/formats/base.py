"""The value-format contract: what a format of record values gives both halves.

A format is chosen once, by name, from the table :data:`timesync_wire.formats.FORMATS`: the
sidecar's ``timestamp.extractor=<name>:<dotted.path>[:unit]`` and the Spark jobs'
``--value-format <name>`` both look it up there, and a name the table does not hold is an error
(:func:`timesync_wire.formats.value_format`), never a fallback to another format. Like the
delivery guarantees and the Spark jobs, a format is a class with every abstract member filled:

* :attr:`ValueFormat.name` — its name in the config and on the command line;
* :attr:`ValueFormat.schema_type` — the registry's ``schemaType`` of its schemas, or ``None``
  for a format whose values carry no registry framing and are read as they are (JSON);
* :attr:`ValueFormat.message_indexes` — whether its framing names a message of the schema's
  file (Protobuf), so that a schema id alone does not say what wrote a body;
* :meth:`ValueFormat.compile` — a registry schema (text and references) made ready to read,
  once per schema id (blocking; bounded by the compilers of :mod:`timesync_wire.schemas`);
* :meth:`ValueFormat.time_reader` — what reads event time at a path, in a unit, from a body
  (from the compiled schema and the message indexes, for a registry format).

What Spark decodes a format's values with is the jobs' own (a JVM ``from_avro``, a Python row
decoder, ``from_json``): ``spark_consumer.value_decoders.DECODERS`` holds one decoder per name of
this table, and a test holds the two tables to the same names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from timesync_wire.timevalues import UNITS, Unit


class TimeReader(Protocol):
    """What reads event time from the bodies of one schema (or of every value, for a format
    without schemas)."""

    def millis(self, value: bytes, start: int = 0) -> int:
        """Event time in ms of the body at ``value[start:]``; ``ValueError`` (one line: why)
        when it has none."""
        ...


#: A reader's batch method, where it has one: ``millis_all(values, prefix)`` reads every value
#: framed with ``prefix`` (``b""``: a format without framing), INVALID (-1) where one has no time
#: and OTHER (-2) where one is not framed with ``prefix``.
BatchRead = Callable[[Sequence[bytes | None], bytes], list[int]]


class ValueFormat(ABC):
    """A format of record values (see the module): its name, its registry schemas, its time
    readers."""

    #: The name in ``timestamp.extractor=<name>:…`` and ``--value-format <name>``.
    name: ClassVar[str]
    #: The registry's ``schemaType`` of its schemas; ``None``: values are read as they are.
    schema_type: ClassVar[str | None]
    #: Its framing writes message indexes after the schema id (Protobuf's does).
    message_indexes: ClassVar[bool] = False
    #: The units its time readers take (a type that says what it is is read as that).
    units: ClassVar[tuple[Unit, ...]] = UNITS

    def compile(self, text: str, references: Mapping[str, str]) -> Any:
        """A registry schema (its text and its references' texts by import name) made ready for
        :meth:`time_reader`; a :class:`~timesync_wire.schemas.SchemaError` when it cannot be.
        Only formats with a :attr:`schema_type` are asked."""
        raise NotImplementedError(f"the {self.name} format has no registry schemas")

    @abstractmethod
    def time_reader(
        self, path: Sequence[str], unit: Unit, schema: Any = None, indexes: Sequence[int] = ()
    ) -> TimeReader:
        """What reads event time at ``path`` in ``unit``: from values as they are, or, for a
        registry format, from bodies of the ``schema`` :meth:`compile` gave (and of its message
        at ``indexes``). :class:`~timesync_wire.schemas.SchemaError` when the schema has no time
        at the path."""

    def __repr__(self) -> str:
        return f"<value format {self.name}>"
