"""A registry's Protobuf schema (.proto text) compiled into descriptors, without a protoc binary.

grpcio-tools runs protoc as a library: the schema's text and the files it references are written
to a private directory and compiled into a serialized ``FileDescriptorSet`` with every import
included, so the set alone describes the message (Google's well-known types, such as
``google/protobuf/timestamp.proto``, come from grpcio-tools' own include directory).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from spark_consumer.options import UsageError


class ProtoCompileError(UsageError):
    """The registry's .proto text does not compile; the message holds protoc's first error."""


def compile_descriptor_set(main: str, files: Mapping[str, str]) -> bytes:
    """Compile ``files[main]`` (``files``: import name → .proto text) into a ``FileDescriptorSet``."""
    import grpc_tools
    from grpc_tools import protoc

    includes = Path(grpc_tools.__file__).resolve().parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="timesync-proto-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        out = root / "descriptors.pb"
        errors = root / "errors.txt"
        code = _run_protoc(
            protoc,
            [
                "protoc",
                f"-I{root}",
                f"-I{includes}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                main,
            ],
            errors,
        )
        if code != 0 or not out.is_file():
            detail = errors.read_text(errors="replace").strip().splitlines() if errors.is_file() else []
            first = detail[0].replace(f"{root}/", "") if detail else f"protoc exit status {code}"
            raise ProtoCompileError(f"the registry's Protobuf schema {main!r} does not compile: {first}")
        return out.read_bytes()


def _run_protoc(protoc: object, argv: list[str], errors: Path) -> int:
    """Run protoc in-process with its stderr (file descriptor 2) sent to ``errors``."""
    import os

    saved = os.dup(2)
    try:
        with errors.open("wb") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                return int(protoc.main(argv))  # type: ignore[attr-defined]
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
