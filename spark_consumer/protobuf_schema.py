"""A registry's Protobuf schema compiled into descriptors, without a protoc binary, and the
message of it the values are.

grpcio-tools runs protoc as a library: the schema's text and the files it references are written
to a private directory and compiled into a serialized ``FileDescriptorSet`` with every import
included, so the set alone describes the message (Google's well-known types, such as
``google/protobuf/timestamp.proto``, come from grpcio-tools' own include directory).
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_consumer.options import UsageError
from timesync_wire.schemas import SchemaError
from timesync_wire.schemas.protobuf_files import load_file, message_named


class ProtoCompileError(UsageError):
    """The registry's .proto text does not compile; the message holds protoc's first error."""


def compile_descriptor_set(main: str, files: Mapping[str, str]) -> bytes:
    """Compile ``files[main]`` (``files``: import name → .proto text) into a ``FileDescriptorSet``,
    with the wire layer's compiler (:func:`timesync_wire.schemas.protoc.compile_files`, a bounded
    child process)."""
    from timesync_wire.schemas.protoc import ProtocFailed, compile_files

    try:
        return compile_files(main, files)
    except SchemaError as e:  # a reference name that would leave the temporary folder
        raise ProtoCompileError(f"the registry's Protobuf schema {main!r}: {e}") from None
    except ProtocFailed as e:
        lines = e.details.splitlines()
        first = lines[0] if lines else f"protoc exit status {e.code}"
        raise ProtoCompileError(
            f"the registry's Protobuf schema {main!r} does not compile: {first}"
        ) from None


def message_path(descriptor_set: bytes, file_name: str, message: str | None) -> tuple[tuple[int, ...], str]:
    """Which message of file ``file_name`` the values are: its message indexes (Confluent's
    framing names a message by them) and its full name (the wire layer's walk,
    :func:`timesync_wire.schemas.protobuf_files.message_named`).

    ``message`` is a full name (``shop.Payment``) or one relative to the file's package
    (``Payment``, ``Payment.Meta``); ``None`` is the file's first message. A name the file does not
    define is a :class:`~spark_consumer.options.UsageError` listing the ones it does.
    """
    try:
        return message_named(load_file(descriptor_set, file_name), message)
    except SchemaError as e:
        option = f"--value-message {message}" if message is not None else "--value-format protobuf"
        raise UsageError(f"{option}: {e}") from None


def top_level_messages(descriptor_set: bytes, file_name: str) -> int:
    """How many messages file ``file_name`` defines at its top level."""
    return len(load_file(descriptor_set, file_name).message_types_by_name)
