"""protoc compiles the registry's .proto text in a child process, bounded, and never takes the
process's stderr; every refusal is a SchemaError (or ProtocFailed) with a reason."""

from __future__ import annotations

import os
import threading
import time

import pytest

from sidecar.formats.avro import SchemaError
from sidecar.registry import protoc
from sidecar.registry.protoc import MAX_SOURCE_BYTES, ProtocFailed, compile_files, compile_proto

A_MESSAGE = 'syntax = "proto3"; message A { int64 t = 1; }'


def test_protocs_diagnostics_never_take_the_processs_stderr_from_other_threads(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Issue 32, item 9: protoc ran in-process with file descriptor 2 pointed at a file, so what
    other threads wrote meanwhile vanished into the schema error (and from there a DLQ reason)."""
    stop, written = threading.Event(), []

    def log() -> None:
        while not stop.is_set():
            os.write(2, b"another thread's line %d\n" % len(written))
            written.append(len(written))
            time.sleep(0.0002)

    thread = threading.Thread(target=log)
    thread.start()
    try:
        for _ in range(5):
            with pytest.raises(SchemaError) as caught:
                compile_proto('syntax = "proto3"; message {', {})
            assert "another thread" not in str(caught.value)
    finally:
        stop.set()
        thread.join()
    assert capfd.readouterr().err.splitlines() == [f"another thread's line {i}" for i in written]


@pytest.mark.parametrize(
    "name", [".", "", "a/", "/etc/passwd", "../up.proto", "a/./b.proto", "a//b.proto", "a\\b.proto", "a\x00b"]
)
def test_a_reference_name_that_is_no_plain_relative_path_is_refused_before_anything_is_written(
    name: str,
) -> None:
    """Issue 32, item 3: a reference named "." raised IsADirectoryError past the resolver."""
    with pytest.raises(SchemaError, match="is not a relative path of plain parts"):
        compile_proto(A_MESSAGE, {name: A_MESSAGE})


def test_names_that_collide_as_file_and_folder_are_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="cannot be written as a file"):
        compile_proto(A_MESSAGE, {"common.proto": A_MESSAGE, "common.proto/inner.proto": A_MESSAGE})


def test_sources_past_the_size_bound_are_refused_without_running_protoc() -> None:
    huge = "// " + "x" * MAX_SOURCE_BYTES + "\n" + A_MESSAGE
    with pytest.raises(SchemaError, match=f"at most {MAX_SOURCE_BYTES}"):
        compile_proto(huge, {})


@pytest.mark.parametrize(
    ("text", "references", "reason"),
    [
        ('syntax = "proto3"; ' + "message M { " * 200 + "}" * 200, {}, "maximum recursion limit"),
        (
            'syntax = "proto3"; import "b.proto";',
            {"b.proto": 'syntax = "proto3"; import "timesync_schema.proto";'},
            "recursively imports itself",
        ),
        (
            'syntax = "proto3"; message M { int32 a = 1 [default = ' + "(" * 5000 + "];}",
            {},
            "does not compile",
        ),
    ],
    ids=["nested 200 deep", "an import cycle", "5,000 brackets"],
)
def test_a_hostile_proto_is_refused_by_protocs_own_limits(
    text: str, references: dict[str, str], reason: str
) -> None:
    with pytest.raises(SchemaError, match=reason):
        compile_proto(text, references)


def test_a_compile_past_its_time_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protoc, "TIMEOUT_S", 0.001)
    with pytest.raises(ProtocFailed, match="took longer than"):
        compile_files("a.proto", {"a.proto": A_MESSAGE})


def test_a_good_schema_still_compiles_with_its_references() -> None:
    b = 'syntax = "proto3"; package c; message B { int64 t = 1; }'
    compiled = compile_proto(
        'syntax = "proto3"; import "c/b.proto"; message A { c.B b = 1; }', {"c/b.proto": b}
    )
    assert b"c/b.proto" in compiled
