"""A registry's Protobuf schema (.proto text) compiled into descriptors, without a protoc binary.

grpcio-tools runs protoc as a library: the schema's text and the files it references are written
to a private directory and compiled into a serialized ``FileDescriptorSet`` with every import
included, so the set alone describes the message (Google's well-known types, such as
``google/protobuf/timestamp.proto``, come from grpcio-tools' own include directory).
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_consumer.options import UsageError


class ProtoCompileError(UsageError):
    """The registry's .proto text does not compile; the message holds protoc's first error."""


def compile_descriptor_set(main: str, files: Mapping[str, str]) -> bytes:
    """Compile ``files[main]`` (``files``: import name → .proto text) into a ``FileDescriptorSet``,
    with the sidecar's compiler (:func:`sidecar.registry.protoc.compile_files`)."""
    from sidecar.formats.avro import SchemaError
    from sidecar.registry.protoc import ProtocFailed, compile_files

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
