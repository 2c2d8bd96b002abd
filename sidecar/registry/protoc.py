"""A Protobuf schema from the registry → a serialized ``FileDescriptorSet``.

Python's protobuf runtime builds descriptors only from ``FileDescriptorProto`` values; it cannot
parse ``.proto`` text. The registry gives text (Apicurio's ccompat ``?format=serialized`` answers
a descriptor whose bytes above 0x7F are replaced by U+FFFD — every descriptor longer than 127
bytes comes back corrupt, so it cannot be used). This module runs protoc as a library
(grpcio-tools bundles libprotoc and the well-known ``google/protobuf/*.proto`` files) on the
schema and its references, written to a private temporary folder.

A schema may also be a *serialized* ``FileDescriptorProto`` in base64: that is what Confluent's
own Python client (``confluent_kafka``'s ``ProtobufSerializer``) registers. Confluent's registry
turns it into ``.proto`` text; Apicurio keeps and answers it as it was sent. Such a file is handed
to protoc as a compiled descriptor (``--descriptor_set_in``), so its imports resolve the same way
and text and serialized files can reference each other.

Blocking (file I/O and a compile of a few ms): the registry client runs it in a worker thread,
once per schema id.
"""

from __future__ import annotations

import base64
import binascii
import importlib.resources
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from sidecar.formats.avro import SchemaError

if TYPE_CHECKING:
    from google.protobuf.descriptor_pb2 import FileDescriptorProto

MAIN_NAME = "timesync_schema.proto"


class ProtocFailed(Exception):
    """protoc refused the files: ``details`` is what it wrote to stderr (temporary paths removed),
    ``code`` its exit status."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details or f"protoc exit {code}")
        self.code = code
        self.details = details


def compile_files(main: str, files: Mapping[str, str]) -> bytes:
    """The ``FileDescriptorSet`` (with every import) of ``files[main]``; ``files`` maps import
    names to ``.proto`` text or a base64 ``FileDescriptorProto`` (:func:`serialized_descriptor`),
    and the well-known types need no entry. A name that is absolute or
    climbs out (``..``) is refused with :class:`SchemaError` before anything is written; a schema
    protoc refuses raises :class:`ProtocFailed`. Shared by the sidecar and the Spark job."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc  # ~30 ms to import; only users of Protobuf values pay it

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(prefix="timesync-proto-") as tmp:
        root = Path(tmp)
        src = root / "src"
        src.mkdir()
        serialized = descriptor_pb2.FileDescriptorSet()
        for name, body in files.items():
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts:
                raise SchemaError(f"reference name {name!r} is not a relative path")
            descriptor = serialized_descriptor(body)
            if descriptor is not None:
                descriptor.name = name  # imported, and looked up, by the name it is known by here
                serialized.file.append(descriptor)
                continue
            target = src / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        out = root / "set.pb"
        errors = root / "errors.txt"
        args = ["protoc", f"-I{src}", f"-I{well_known}", "--include_imports", f"--descriptor_set_out={out}"]
        if serialized.file:
            compiled_in = root / "in.pb"
            compiled_in.write_bytes(serialized.SerializeToString())
            args.append(f"--descriptor_set_in={compiled_in}")
        args.append(main)
        code = _run_quietly(protoc.main, args, errors)
        if code != 0 or not out.is_file():
            details = errors.read_text(errors="replace").replace(f"{src}/", "") if errors.exists() else ""
            raise ProtocFailed(code, _without_log_noise(details))
        return out.read_bytes()


#: What protoc's logging library writes to stderr beside the errors: its banner, and its own
#: info and warning lines (``W1127 09:26:26.929793 26235 parser.cc:659] …``).
_LOG_NOISE = re.compile(r"WARNING: All log messages before absl::InitializeLog\(\)|[IW]\d{4} \d\d:\d\d:\d\d")


def _without_log_noise(details: str) -> str:
    """protoc's own messages, without the lines its logging library adds."""
    return "\n".join(line for line in details.splitlines() if not _LOG_NOISE.match(line)).strip()


#: A schema that is nothing but base64 (no space, ``;`` or quote, as every ``.proto`` file has).
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def serialized_descriptor(body: str) -> FileDescriptorProto | None:
    """``body`` as the ``FileDescriptorProto`` it encodes in base64, or ``None`` when it is
    ``.proto`` text (or anything else: protoc then says what is wrong with it)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    compact = "".join(body.split())
    if not _BASE64.fullmatch(compact):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(compact, validate=True))
    except (binascii.Error, DecodeError):
        return None


def compile_proto(text: str, references: Mapping[str, str]) -> bytes:
    """The ``FileDescriptorSet`` (with every import) of the schema ``text``, whose imports are
    the ``references`` (import name → text) or well-known types; the schema is file
    ``MAIN_NAME``. :class:`SchemaError` with protoc's message when it does not compile."""
    try:
        return compile_files(MAIN_NAME, {**references, MAIN_NAME: text})
    except ProtocFailed as e:
        message = " ".join(e.details.split())[:300]
        raise SchemaError(
            f"the Protobuf schema does not compile: {message or f'protoc exit {e.code}'}"
        ) from None


def _run_quietly(main: object, args: list[str], errors: Path) -> int:
    """Run protoc with its stderr (file descriptor 2, written by C++) sent to ``errors``."""
    import os

    assert callable(main)
    saved = os.dup(2)
    try:
        with open(errors, "wb") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                return int(main(args))
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
