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


def compile_proto(text: str, references: Mapping[str, str]) -> bytes:
    """The ``FileDescriptorSet`` (with every import) of the schema ``text``, whose imports are
    the ``references`` (import name → text) or well-known types; the schema is file
    ``MAIN_NAME``. :class:`SchemaError` with protoc's message when it does not compile."""
    from grpc_tools import protoc  # ~30 ms to import; only sidecars reading Protobuf pay it

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory(prefix="timesync-proto-") as tmp:
        root = Path(tmp)
        for name, body in {**references, MAIN_NAME: text}.items():
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts:
                raise SchemaError(f"reference name {name!r} is not a relative path")
            target = root / "src" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        out = root / "set.pb"
        errors = root / "errors.txt"
        args = [
            "protoc",
            f"-I{root / 'src'}",
            f"-I{well_known}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            MAIN_NAME,
        ]
        code = _run_quietly(protoc.main, args, errors)
        if code != 0 or not out.is_file():
            text = (
                errors.read_text(errors="replace").replace(f"{root / 'src'}/", "") if errors.exists() else ""
            )
            message = " ".join(text.split())[:300]
            raise SchemaError(f"the Protobuf schema does not compile: {message or f'protoc exit {code}'}")
        return out.read_bytes()


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
