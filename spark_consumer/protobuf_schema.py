"""A registry's Protobuf schema compiled into descriptors, without a protoc binary, and the
message of it the values are.

grpcio-tools runs protoc as a library: the schema's text and the files it references are written
to a private directory and compiled into a serialized ``FileDescriptorSet`` with every import
included, so the set alone describes the message (Google's well-known types, such as
``google/protobuf/timestamp.proto``, come from grpcio-tools' own include directory).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_consumer.options import UsageError


class ProtoCompileError(UsageError):
    """The registry's .proto text does not compile; the message holds protoc's first error."""


def compile_descriptor_set(main: str, files: Mapping[str, str]) -> bytes:
    """Compile ``files[main]`` (``files``: import name → .proto text) into a ``FileDescriptorSet``,
    with the sidecar's compiler (:func:`timesync_wire.schemas.protoc.compile_files`)."""
    from timesync_wire.schemas import SchemaError
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
    framing names a message by them) and its full name.

    ``message`` is a full name (``shop.Payment``) or one relative to the file's package
    (``Payment``, ``Payment.Meta``); ``None`` is the file's first message. A name the file does not
    define is a :class:`~spark_consumer.options.UsageError` listing the ones it does.
    """
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file
    (file,) = [f for f in files if f.name == file_name]
    prefix = f"{file.package}." if file.package else ""
    paths: dict[str, tuple[int, ...]] = {}

    def walk(messages: Iterable[descriptor_pb2.DescriptorProto], scope: str, at: tuple[int, ...]) -> None:
        for i, m in enumerate(messages):  # a map field's entry type counts in the indexes
            if not m.options.map_entry:
                paths[f"{scope}{m.name}"] = (*at, i)
                walk(m.nested_type, f"{scope}{m.name}.", (*at, i))

    walk(file.message_type, prefix, ())
    if not paths:
        raise UsageError(f"the registry's Protobuf schema {file_name!r} defines no message")
    if message is None:
        first = next(iter(paths))
        return paths[first], first
    for name in (message, f"{prefix}{message}"):
        if name in paths:
            return paths[name], name
    raise UsageError(
        f"--value-message {message}: the schema defines no such message; it defines {', '.join(paths)}"
    )


def top_level_messages(descriptor_set: bytes, file_name: str) -> int:
    """How many messages file ``file_name`` defines at its top level."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file
    return sum(len(f.message_type) for f in files if f.name == file_name)
