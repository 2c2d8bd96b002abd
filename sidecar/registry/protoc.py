"""A Protobuf schema from the registry → a serialized ``FileDescriptorSet``.

Python's protobuf runtime builds descriptors only from ``FileDescriptorProto`` values; it cannot
parse ``.proto`` text. The registry gives text (Apicurio's ccompat ``?format=serialized`` answers
a descriptor whose bytes above 0x7F are replaced by U+FFFD — every descriptor longer than 127
bytes comes back corrupt, so it cannot be used). This module runs protoc (grpcio-tools bundles
libprotoc and the well-known ``google/protobuf/*.proto`` files) on the schema and its
references, written to a private temporary folder.

A schema may also be a *serialized* ``FileDescriptorProto`` in base64: that is what Confluent's
own Python client (``confluent_kafka``'s ``ProtobufSerializer``) registers. Confluent's registry
turns it into ``.proto`` text; Apicurio keeps and answers it as it was sent. Such a file is handed
to protoc as a compiled descriptor (``--descriptor_set_in``), so its imports resolve the same way
and text and serialized files can reference each other.

**protoc runs in a child process** (``python -I -S``, grpcio-tools' compiler module, nothing
else imported), never in ours: its diagnostics go to the child's own stderr, captured through a
file and cut at :data:`MAX_DIAGNOSTICS` bytes. Before, protoc ran in a worker thread of the
sidecar with the *process's* file descriptor 2 pointed at a file meanwhile, so every other
thread's log lines of that moment vanished into a schema error (and from there into a DLQ
reason). The child also bounds a hostile ``.proto`` (huge, deeply nested, importing itself):
sources of at most :data:`MAX_SOURCE_BYTES`, :data:`TIMEOUT_S` of wall time, CPU, memory and
file-size limits set in the child, and protoc's own limits (32 levels of nested messages, import
cycles refused). Cost: one short-lived process per schema id, paid once per id: measured on a
loaded 2-core machine (load average 7–12), alternating with the in-process compile on the same
schema, a median of 129 ms (83 ms at best) against 12 ms (5 ms) — most of it starting Python
and loading libprotoc.

Blocking (a child process, file I/O): the registry client runs it in a worker thread, once per
schema id. Every refusal is a :class:`SchemaError` or :class:`ProtocFailed` with a reason.
"""

from __future__ import annotations

import base64
import binascii
import importlib.resources
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from sidecar.formats.avro import SchemaError

if TYPE_CHECKING:
    from google.protobuf.descriptor_pb2 import FileDescriptorProto

MAIN_NAME = "timesync_schema.proto"
#: The schema and its references, together (a registry's largest real schemas take a few KB).
MAX_SOURCE_BYTES = 1 << 20
#: Files one schema may bring (itself and its references).
MAX_FILES = 1000
#: Wall time of one compile; protoc compiles a real schema in milliseconds.
TIMEOUT_S = 30.0
#: protoc's diagnostics kept (the rest is cut).
MAX_DIAGNOSTICS = 64 << 10
#: The child's limits: CPU seconds, address space and largest file it may write.
_CHILD_CPU_S, _CHILD_MEMORY, _CHILD_FILE = 20, 2 << 30, 64 << 20

#: The child: limits first, then protoc — grpc_tools.protoc.main without its ~100 ms of imports.
_CHILD = """
import resource, sys
cpu, memory, size = (int(v) for v in sys.argv[2:5])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
sys.path.insert(0, sys.argv[1])
try:
    from grpc_tools._protoc_compiler import run_main
except ImportError:  # a grpcio-tools that moved it: its public entry point
    from grpc_tools.protoc import main as run_main
    sys.exit(run_main(["protoc", *sys.argv[5:]]))
sys.exit(run_main([b"protoc", *(a.encode() for a in sys.argv[5:])]))
"""
#: A reference name protoc can import and we can write: a relative path of plain parts.
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f\\]|^/|/$|//|(^|/)\.\.?(/|$)")


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
    and the well-known types need no entry. Names that are not plain relative paths (absolute,
    empty, ``.``, ``..``, a trailing ``/``), or sources too large or too many, are refused with
    :class:`SchemaError` before anything is written; a schema protoc refuses, or a compile past
    its bounds, raises :class:`ProtocFailed`. Shared by the sidecar and the Spark job."""
    from google.protobuf import descriptor_pb2

    _check_sources(files)
    with tempfile.TemporaryDirectory(prefix="timesync-proto-") as tmp:
        root = Path(tmp)
        src = root / "src"
        src.mkdir()
        serialized = descriptor_pb2.FileDescriptorSet()
        for name, body in files.items():
            descriptor = serialized_descriptor(body)
            if descriptor is not None:
                descriptor.name = name  # imported, and looked up, by the name it is known by here
                serialized.file.append(descriptor)
            else:
                _write(src, name, body)
        out = root / "set.pb"
        args = [f"-I{src}", f"-I{_well_known()}", "--include_imports", f"--descriptor_set_out={out}"]
        if serialized.file:
            compiled_in = root / "in.pb"
            compiled_in.write_bytes(serialized.SerializeToString())
            args.append(f"--descriptor_set_in={compiled_in}")
        code, details = _run_protoc([*args, main], root / "errors.txt")
        if code != 0 or not out.is_file():
            raise ProtocFailed(code, _without_log_noise(details.replace(f"{src}/", "")))
        return out.read_bytes()


def _check_sources(files: Mapping[str, str]) -> None:
    if len(files) > MAX_FILES:
        raise SchemaError(f"the Protobuf schema brings {len(files)} files; at most {MAX_FILES} are compiled")
    size = sum(len(name) + len(body) for name, body in files.items())
    if size > MAX_SOURCE_BYTES:
        raise SchemaError(
            f"the Protobuf schema and its references take {size} characters; at most {MAX_SOURCE_BYTES}"
        )
    for name in files:
        if not name or _UNSAFE_NAME.search(name) or PurePosixPath(name).is_absolute():
            raise SchemaError(f"reference name {name!r} is not a relative path of plain parts")


def _write(src: Path, name: str, body: str) -> None:
    target = src / name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8", errors="replace")
    except (OSError, UnicodeError) as e:  # "a" and "a/b" both named; a name too long; …
        reason = getattr(e, "strerror", None) or type(e).__name__
        raise SchemaError(f"reference name {name!r} cannot be written as a file: {reason}") from None


def _well_known() -> str:
    return str(importlib.resources.files("grpc_tools") / "_proto")


def _run_protoc(args: list[str], errors: Path) -> tuple[int, str]:
    """protoc's exit status and its diagnostics (stderr, at most :data:`MAX_DIAGNOSTICS` bytes),
    run in a child process with its limits; the process's own stderr is never touched."""
    import grpc_tools

    site = str(Path(grpc_tools.__file__).resolve().parent.parent)
    limits = [str(_CHILD_CPU_S), str(_CHILD_MEMORY), str(_CHILD_FILE)]
    with open(errors, "w+b") as sink:
        try:
            code = subprocess.run(
                [sys.executable, "-I", "-S", "-c", _CHILD, site, *limits, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=sink,
                timeout=TIMEOUT_S,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            return -9, f"protoc took longer than {TIMEOUT_S:g} s; stopped"
        sink.seek(0)
        details = sink.read(MAX_DIAGNOSTICS).decode(errors="replace")
    if code < 0:
        details = f"protoc was stopped by signal {-code} (past its CPU, memory or file limits)\n{details}"
    return code, details


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
