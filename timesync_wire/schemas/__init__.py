"""Schemas as the registry gives them, compiled: Avro schemas walked without recursion
(:mod:`.avro_schema`) and made standalone (:mod:`.avro_references`), Protobuf schemas compiled by
protoc in a bounded child process (:mod:`.protoc`) and walked from message indexes to a message
(:mod:`.protobuf_files`). A schema comes from anyone who may register one: every walk is bounded
and every refusal is a :class:`SchemaError` with a one-line reason.
"""

from __future__ import annotations


class SchemaError(ValueError):
    """A schema that cannot give what is asked of it (not valid, no such field, no time at the
    path, does not compile); the message says why, on one line."""
