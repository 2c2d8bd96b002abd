"""Fuzz the Protobuf side of ``protobuf:`` extractors: ``python -m testkit.fuzz.protobuf --inputs N``.

What it feeds, each input one of:

* **bodies** — valid messages of a few schemas (a ``google.protobuf.Timestamp`` under a nested
  message, a message that contains itself, maps, oneofs, packed repeated fields), mutated
  (:func:`testkit.fuzz.payloads.mutate`), into the reader (protobuf's upb runtime: its depth limit
  of 100, its linear parse) and, framed with message indexes, into the core's extractor: an event
  time in Kafka's range, or a ``DecodeError`` / ``TimeValueError`` / framing verdict;
* **descriptor sets** — the compiled ``FileDescriptorSet`` of those schemas, mutated as bytes,
  into :func:`protobuf_time_reader`: a reader or a :class:`SchemaError`;
* **.proto text** (one input in 2,000: each runs protoc in a child process, ~0.1 s) — the
  schemas' text mutated, with references, into :func:`compile_proto`: a descriptor set or a
  :class:`SchemaError`.

Every call must return within :data:`testkit.fuzz.payloads.MAX_CALL_S`; a crash of the runtime
stops the campaign, which is the finding. The suite runs the same checks a few hundred times.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from sidecar.core.records import Record
from sidecar.formats.avro_schema import SchemaError
from sidecar.formats.extractor import INVALID, SchemaTimestamp, Unreadable
from sidecar.formats.framing import frame
from sidecar.formats.protobuf import ProtobufTimeReader, protobuf_time_reader
from sidecar.formats.timevalues import MAX_TIMESTAMP, TimeValueError, Unit
from sidecar.registry.protoc import MAIN_NAME, compile_proto
from testkit.fuzz.payloads import Finding, campaign, mutate, timed

COMMON = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
SCHEMA = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common/money.proto";

message Node { int64 n = 1; Node next = 2; repeated Node kids = 3; }

message Payment {
  string id = 1;
  common.Money amount = 2;
  Meta meta = 3;
  message Meta {
    string source = 1;
    google.protobuf.Timestamp at = 2;
    int64 at_ms = 3;
    optional double at_s = 4;
    oneof when { string iso = 5; sint64 at_us = 6; }
  }
  repeated int64 history = 4 [packed = true];
  map<string, Node> index = 5;
  Node tree = 6;
}
"""
REFERENCES = {"common/money.proto": COMMON}
#: (message indexes, path, unit): the readers the bodies go through.
READERS: list[tuple[tuple[int, ...], list[str], Unit]] = [
    ((1,), ["meta", "at"], "ms"),
    ((1,), ["meta", "at_ms"], "ms"),
    ((1,), ["meta", "at_s"], "s"),
    ((1,), ["meta", "iso"], "iso"),
    ((1,), ["meta", "at_us"], "us"),
    ((1, 0), ["at_ms"], "ms"),
    ((0,), ["next", "next", "n"], "ms"),
]


@dataclass
class Seeds:
    compiled: bytes
    readers: list[tuple[tuple[int, ...], ProtobufTimeReader]]
    bodies: list[tuple[tuple[int, ...], bytes]]


_SEEDS: list[Seeds] = []


def _node(cls: Any, rng: random.Random, depth: int) -> Any:
    node = cls(n=rng.randrange(-(2**63), 2**63))
    if depth < 4 and rng.random() < 0.6:
        node.next.CopyFrom(_node(cls, rng, depth + 1))
    for _ in range(rng.randrange(3) if depth < 3 else 0):
        node.kids.add().CopyFrom(_node(cls, rng, depth + 1))
    return node


def seeds() -> Seeds:
    """The compiled schema, its readers and valid bodies, built once."""
    if _SEEDS:
        return _SEEDS[0]
    compiled = compile_proto(SCHEMA, REFERENCES)
    readers = [(ix, protobuf_time_reader(compiled, MAIN_NAME, ix, path, unit)) for ix, path, unit in READERS]
    payment = readers[0][1]._cls
    node = type(payment().tree)  # the same pool as Payment's
    rng = random.Random("seeds")
    bodies: list[tuple[tuple[int, ...], bytes]] = []
    for i in range(12):
        msg = payment(id=f"p{i}")
        msg.amount.cents = rng.randrange(10**6)
        msg.meta.source = "pos"
        msg.meta.at.seconds = rng.randrange(0, 2**40)
        msg.meta.at.nanos = rng.randrange(10**9)
        msg.meta.at_ms = rng.randrange(-(2**63), 2**63)
        if rng.random() < 0.5:
            msg.meta.at_s = rng.uniform(0, 2e9)
        if rng.random() < 0.5:
            msg.meta.iso = "2023-11-14T22:13:20.250+00:00"
        else:
            msg.meta.at_us = rng.randrange(-(2**62), 2**62)
        msg.history.extend(rng.randrange(-(2**63), 2**63) for _ in range(rng.randrange(5)))
        msg.index["a"].CopyFrom(_node(node, rng, 2))
        msg.tree.CopyFrom(_node(node, rng, 0))
        bodies.append(((1,), msg.SerializeToString()))
        bodies.append(((1, 0), msg.meta.SerializeToString()))
        bodies.append(((0,), msg.tree.SerializeToString()))
    _SEEDS.append(Seeds(compiled, readers, bodies))
    return _SEEDS[0]


def check_body(reader: ProtobufTimeReader, body: bytes) -> None:
    """The reader gives an event time in Kafka's range, or a verdict."""
    try:
        ms = timed("the reader", lambda: reader.millis(body))
    except (DecodeError, TimeValueError):
        return
    except Exception as e:
        raise Finding(f"the reader ({reader.field}) raised {type(e).__name__}: {e} on {body.hex()}") from None
    if type(ms) is not int or not 0 <= ms <= MAX_TIMESTAMP:
        raise Finding(f"the reader ({reader.field}) gave {ms!r}, not a Kafka time, on {body.hex()}")


def check_extractor(path: list[str], unit: Unit, values: list[bytes | None]) -> None:
    """The core's extractor on framed values: a time or -1 each, and a reason, never a raise."""
    found = seeds()
    extractor = SchemaTimestamp("protobuf", path, unit)
    for ix, ix_path, ix_unit in READERS:
        if ix_path == path and ix_unit == unit:
            extractor.schemas.put(7, protobuf_time_reader(found.compiled, MAIN_NAME, ix, path, unit), ix)
    for sid, wanted in extractor.schemas.missing(values).items():  # as the service resolves them
        for ix in wanted:
            extractor.schemas.put(sid, Unreadable(f"schema id {sid} has no message {list(ix)}"), ix)
    records = [Record("t", 0, i, timestamp=1, value=v) for i, v in enumerate(values)]
    try:
        times = timed("extract_all", lambda: extractor.extract_all(records))
        reasons = [extractor.explain(r) for r in records]
    except Exception as e:
        raise Finding(f"the extractor raised {type(e).__name__}: {e} on {values!r}") from None
    assert isinstance(times, list)
    for t, reason in zip(times, reasons, strict=True):
        if not (t == INVALID or 0 <= t <= MAX_TIMESTAMP) or (t == INVALID) == (reason == "valid"):
            raise Finding(f"the extractor gave {t} with reason {reason!r}")


def mutated_body(rng: random.Random) -> None:
    found = seeds()
    ix, body = rng.choice(found.bodies)
    body = mutate(body, rng)
    for reader_ix, reader in found.readers:
        if reader_ix == ix or rng.random() < 0.1:
            check_body(reader, body)
    if rng.random() < 0.2:
        index, path, unit = rng.choice(READERS)
        value = frame(7, body, index)
        check_extractor(path, unit, [value if rng.random() < 0.7 else mutate(value, rng), None])


def mutated_descriptors(rng: random.Random) -> None:
    found = seeds()
    compiled = mutate(found.compiled, rng, rng.choice((1, 2, 4)))
    ix, path, unit = rng.choice(READERS)
    try:
        reader = timed(
            "protobuf_time_reader", lambda: protobuf_time_reader(compiled, MAIN_NAME, ix, path, unit)
        )
    except SchemaError:
        return
    except Exception as e:
        raise Finding(f"protobuf_time_reader raised {type(e).__name__}: {e} on {compiled.hex()}") from None
    assert isinstance(reader, ProtobufTimeReader)
    for _, body in rng.sample(found.bodies, 3):
        check_body(reader, mutate(body, rng, rng.randrange(3)))


def mutated_text(rng: random.Random) -> None:
    text = mutate(SCHEMA.encode(), rng).decode(errors="replace")
    references = dict(REFERENCES)
    if rng.random() < 0.3:
        references[rng.choice(("common/money.proto", "b.proto", "timesync_schema.proto"))] = mutate(
            COMMON.encode(), rng
        ).decode(errors="replace")
    try:
        timed("compile_proto", lambda: compile_proto(text, references))
    except SchemaError as e:
        if "\n" in str(e):
            raise Finding(f"a SchemaError of several lines: {e!r}") from None
    except Exception as e:
        raise Finding(f"compile_proto raised {type(e).__name__}: {e} on {text[:300]!r}") from None


STEPS = [(1800, mutated_body), (199, mutated_descriptors), (1, mutated_text)]


def main(argv: list[str] | None = None) -> int:
    return campaign("protobuf", STEPS, argv)


if __name__ == "__main__":
    sys.exit(main())
