"""A compiled Protobuf schema as the runtime's descriptors, and the one walk between message
indexes and a message.

Confluent's framing names the message that wrote a body by its *message indexes*
(:mod:`timesync_wire.framing`): the index of a top-level message of the file, then of a message
nested in it, and so on, each in declaration order — the entry types protoc declares for map
fields included. The sidecar walks indexes to a message to read a body's time; the Spark jobs
walk a message's name to its indexes (``--value-message``) and back to decode. Both walk here.

The set comes from our own protoc run (:mod:`.protoc`) or, through it, from a descriptor a
client registered, so it is read defensively: a set the runtime cannot load, a missing file,
indexes past the messages declared are each a :class:`~timesync_wire.schemas.SchemaError` with a
one-line reason. Each set gets a pool of its own: two versions of one subject define the same
message names with different fields, and one shared pool would refuse the second.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from timesync_wire.schemas import SchemaError

#: Loaded files kept (a set's pool is built once per process for the schemas in use).
LOADED_FILES = 16


@functools.lru_cache(maxsize=LOADED_FILES)
def load_file(descriptor_set: bytes, file_name: str) -> Any:
    """The ``FileDescriptor`` of ``file_name`` in the serialized ``FileDescriptorSet``, in a pool
    of its own; :class:`SchemaError` when the set does not load (whatever the runtime raises: it
    says why) or has no such file. (``Any``: the runtime's descriptors, which the stubs do not
    describe as upb builds them.)"""
    from google.protobuf import descriptor_pb2, descriptor_pool

    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
        pool = descriptor_pool.DescriptorPool()
        for proto in files.file:  # protoc writes dependencies before their dependents
            pool.Add(proto)
    except Exception as e:  # DecodeError, TypeError for a conflict, …: all mean "not loadable"
        raise SchemaError(f"the compiled descriptors do not load: {type(e).__name__}: {_line(e)}") from None
    if not any(proto.name == file_name for proto in files.file):
        raise SchemaError(f"the descriptor set has no file {file_name}")
    try:
        return pool.FindFileByName(file_name)
    except Exception as e:  # a file the pool took but cannot build
        raise SchemaError(f"file {file_name} does not load: {type(e).__name__}: {_line(e)}") from None


def message_at(file: Any, indexes: Sequence[int]) -> Any:
    """The ``Descriptor`` of the message at ``indexes`` in ``file``; :class:`SchemaError` when
    the indexes are empty or point past the messages declared."""
    if not indexes:
        raise SchemaError("empty message index")
    messages: Sequence[Any] = list(file.message_types_by_name.values())
    where = f"file {file.name}"
    message = None
    for index in indexes:
        if not 0 <= index < len(messages):
            raise SchemaError(
                f"message index {list(indexes)} points past the {len(messages)} messages of {where}"
            )
        message = messages[index]
        where = f"message {message.full_name}"
        messages = message.nested_types
    return message


def message_paths(file: Any) -> dict[str, tuple[int, ...]]:
    """Every message of ``file`` a value may be, by full name, with its indexes: in declaration
    order, nested ones after their parent; map entry types count in the indexes but are no
    value's message."""
    paths: dict[str, tuple[int, ...]] = {}
    pending: list[tuple[Iterable[Any], tuple[int, ...]]] = [(file.message_types_by_name.values(), ())]
    while pending:  # a worklist: messages may nest as deep as the set allows
        messages, at = pending.pop()
        nested = []
        for i, message in enumerate(messages):
            if not message.GetOptions().map_entry:
                paths[message.full_name] = (*at, i)
                nested.append((message.nested_types, (*at, i)))
        pending.extend(reversed(nested))
    return dict(sorted(paths.items(), key=lambda item: item[1]))


def message_named(file: Any, name: str | None) -> tuple[tuple[int, ...], str]:
    """The indexes and full name of the message ``name`` (full, or relative to the file's
    package) of ``file``; ``None``: the file's first message. :class:`SchemaError` naming the
    messages the file defines when it defines no such one."""
    paths = message_paths(file)
    if not paths:
        raise SchemaError(f"file {file.name} defines no message")
    if name is None:
        first = next(iter(paths))
        return paths[first], first
    prefix = f"{file.package}." if file.package else ""
    for candidate in (name, f"{prefix}{name}"):
        if candidate in paths:
            return paths[candidate], candidate
    raise SchemaError(f"the schema defines no message {name}; it defines {', '.join(paths)}")


def _line(error: Exception) -> str:
    return " ".join(str(error).split())[:200]
