"""``.proto`` text from the registry → a serialized ``FileDescriptorSet``.

Python's protobuf runtime builds descriptors only from ``FileDescriptorProto`` values; it cannot
parse ``.proto`` text. The registry gives text (Apicurio's ccompat ``?format=serialized`` answers
a descriptor whose bytes above 0x7F are replaced by U+FFFD — every descriptor longer than 127
bytes comes back corrupt, so it cannot be used). This module runs protoc as a library
(grpcio-tools bundles libprotoc and the well-known ``google/protobuf/*.proto`` files) on the
schema and its references, written to a private temporary folder.

Blocking (file I/O and a compile of a few ms): the registry client runs it in a worker thread,
once per schema id.
"""

from __future__ import annotations

import importlib.resources
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from sidecar.formats.avro import SchemaError

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
    names to ``.proto`` text, and the well-known types need no entry. A name that is absolute or
    climbs out (``..``) is refused with :class:`SchemaError` before anything is written; a schema
    protoc refuses raises :class:`ProtocFailed`. Shared by the sidecar and the Spark job."""
    from grpc_tools import protoc  # ~30 ms to import; only users of Protobuf values pay it

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(prefix="timesync-proto-") as tmp:
        root = Path(tmp)
        src = root / "src"
        for name, body in files.items():
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts:
                raise SchemaError(f"reference name {name!r} is not a relative path")
            target = src / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        out = root / "set.pb"
        errors = root / "errors.txt"
        args = [
            "protoc",
            f"-I{src}",
            f"-I{well_known}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            main,
        ]
        code = _run_quietly(protoc.main, args, errors)
        if code != 0 or not out.is_file():
            details = errors.read_text(errors="replace").replace(f"{src}/", "") if errors.exists() else ""
            raise ProtocFailed(code, details.strip())
        return out.read_bytes()


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
