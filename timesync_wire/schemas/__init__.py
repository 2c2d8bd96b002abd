"""Schemas as the registry gives them, compiled: Avro schemas walked without recursion
(:mod:`.avro_schema`) and made standalone (:mod:`.avro_references`), Protobuf schemas compiled by
protoc in a bounded child process (:mod:`.protoc`) and walked from message indexes to a message
(:mod:`.protobuf_files`). A schema comes from anyone who may register one: every walk is bounded
and every refusal is a :class:`SchemaError` with a one-line reason.
"""

from __future__ import annotations


class SchemaError(ValueError):
    """A schema that cannot give what is asked of it (not valid, no such field, no time at the
    path, does not compile); the message says why, on one line.

    The message often quotes the schema (a type's name, a field's), which is text we do not
    control: it becomes a dead letter's header and the sidecar's one-line error, so characters
    that are not printable (a line break, a control byte, a lone surrogate) are written escaped.
    """

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def one_line(text: str) -> str:
    """``text`` with every character that is not printable written as its escape (``\\n``)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii") for c in text
    )
