"""Fuzz the Avro side of ``avro:`` extractors: ``python -m testkit.fuzz.avro --inputs N``.

What it feeds, each input one of:

* **bodies** — valid bodies of a few writer schemas (every kind of value, a linked list, a tree
  through arrays and maps, named records, records of no bytes, a path through an optional),
  mutated (:func:`testkit.fuzz.payloads.mutate`: flipped, cut, grown, ten-byte varints…), into
  the Python plan, the C plan, the reader and the core's extractor. The two plans must give the
  same value or the same :class:`PlanError`; the reader an event time in Kafka's range or a
  ``PlanError`` / ``TimeValueError``; the extractor a time or ``-1`` and a reason.
* **schemas** — those writer schemas with a node of their JSON replaced (a number, a name
  defined nowhere or a keyword, a field without a type, a wrapper, a deep nesting, …) or their
  text mutated as bytes, into :func:`avro_time_reader` and :func:`standalone`: a reader (then
  its two plans are held equal on mutated bodies) or a :class:`SchemaError`, nothing else.

Every call must return within :data:`testkit.fuzz.payloads.MAX_CALL_S`. The suite runs the same
checks a few hundred times (``tests/unit/formats/test_fuzz.py``).
"""

from __future__ import annotations

import io
import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastavro
import orjson

from sidecar.core.records import Record
from sidecar.formats._avro_plan import CompiledPlan
from sidecar.formats.avro import PlannedAvroReader, avro_time_reader
from sidecar.formats.avro_plan import PlanError, run_plan
from sidecar.formats.avro_references import standalone
from sidecar.formats.avro_schema import SchemaError
from sidecar.formats.extractor import INVALID, SchemaTimestamp, Unreadable
from sidecar.formats.framing import frame
from sidecar.formats.timevalues import MAX_TIMESTAMP, TimeValueError, Unit
from testkit.fuzz.payloads import Finding, campaign, mutate, timed


def _record(name: str, **fields: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": k, "type": v} for k, v in fields.items()]}


NODE = _record("Node", n="long", next=["null", "Node"])
TREE = _record("Tree", kids={"type": "array", "items": "Tree"}, tag="string")
FOUR = {"type": "fixed", "name": "Four", "size": 4}
WIDE = _record(
    "Wide",
    b="boolean",
    i="int",
    f="float",
    d="double",
    s="string",
    raw="bytes",
    fx=FOUR,
    e={"type": "enum", "name": "Color", "symbols": ["R", "G", "B"]},
    u=["null", "long", "string", "Four"],
    nums={"type": "array", "items": {"type": "array", "items": "long"}},
    tags={"type": "map", "values": ["null", "double"]},
    nulls={"type": "array", "items": "null"},
    meta=["null", _record("Meta", again="Four", ts={"type": "long", "logicalType": "timestamp-micros"})],
)
#: (writer schema, path, unit): between them, every opcode of the plan.
SEEDS: list[tuple[dict[str, Any], list[str], Unit]] = [
    (WIDE, ["meta", "ts"], "ms"),
    (_record("E", list=["null", NODE], nulls={"type": "array", "items": "null"}, ts="long"), ["ts"], "ms"),
    (_record("E", tree=TREE, index={"type": "map", "values": "Tree"}, ts="long"), ["ts"], "us"),
    (NODE, ["next", "n"], "ms"),
    (
        _record(
            "E",
            e=_record("Empty"),
            first=_record("P", x="int", e="Empty"),
            ps={"type": "array", "items": "P"},
            when=["null", {"type": "string"}],
        ),
        ["when"],
        "iso",
    ),
    (
        _record(
            "E", f={"type": "fixed", "name": "F", "size": 3}, m={"type": "map", "values": "F"}, t="double"
        ),
        ["t"],
        "s",
    ),
    (_record("E", x="float", t="float"), ["t"], "s"),
]


def datum(schema: Any, named: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A random value of ``schema`` for fastavro's writer (recursion stops by depth 6)."""
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        branch = "null" if depth > 5 and "null" in schema else rng.choice(schema)
        return datum(branch, named, rng, depth + 1)
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(kind, dict | list):
        return datum(kind, named, rng, depth)
    few = 0 if depth > 5 else rng.randrange(4)
    simple: dict[str, Callable[[], Any]] = {
        "null": lambda: None,
        "boolean": lambda: rng.random() < 0.5,
        "int": lambda: rng.randrange(-(2**31), 2**31),
        "long": lambda: rng.choice((rng.randrange(-(2**63), 2**63), rng.randrange(0, 2**45))),
        "float": lambda: rng.uniform(-1e9, 1e9),
        "double": lambda: rng.uniform(0, 2e9),
        "string": lambda: rng.choice(("", "x", "2023-11-14T22:13:20.250+00:00", "naïve")),
        "bytes": lambda: rng.randbytes(rng.randrange(6)),
    }
    if kind in simple:
        return simple[kind]()
    assert isinstance(schema, dict)
    if kind in ("record", "error"):
        named.setdefault(schema["name"], schema)
        return {f["name"]: datum(f["type"], named, rng, depth + 1) for f in schema["fields"]}
    if kind == "fixed":
        named.setdefault(schema["name"], schema)
        return rng.randbytes(schema["size"])
    if kind == "enum":
        named.setdefault(schema["name"], schema)
        return rng.choice(schema["symbols"])
    if kind == "array":
        return [datum(schema["items"], named, rng, depth + 1) for _ in range(few)]
    if kind == "map":
        return {f"k{i}": datum(schema["values"], named, rng, depth + 1) for i in range(few)}
    raise ValueError(f"no datum for {kind!r}")


def encode(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


@dataclass
class Case:
    """A writer schema with its reader and valid bodies to mutate."""

    schema: Any
    path: list[str]
    unit: Unit
    reader: PlannedAvroReader
    bodies: list[bytes] = field(default_factory=list)


def case(schema: Any, path: list[str], unit: Unit, rng: random.Random, bodies: int = 8) -> Case:
    reader = avro_time_reader(json.dumps(schema), path, unit)
    made = Case(schema, path, unit, reader)
    for _ in range(bodies):
        made.bodies.append(encode(schema, datum(schema, {}, rng)))
    return made


_CASES: list[Case] = []


def cases() -> list[Case]:
    """The seed cases, built once (fastavro writes their valid bodies)."""
    if not _CASES:
        rng = random.Random("seeds")
        _CASES.extend(case(s, p, u, rng) for s, p, u in SEEDS)
    return _CASES


def _outcome(read: Callable[[], object]) -> tuple[str, object]:
    try:
        value = read()
    except PlanError as e:
        return "PlanError", str(e)
    except Exception as e:
        raise Finding(f"a plan raised {type(e).__name__}: {e}") from None
    if isinstance(value, float) and math.isnan(value):
        return "nan", None
    return "value", value


def check_body(reader: PlannedAvroReader, body: bytes, start: int = 0) -> None:
    """The C and Python plans agree on ``body``; the reader gives a time or a verdict."""
    plan = reader._plan
    python = _outcome(lambda: timed("the Python plan", lambda: run_plan(plan, body, start)))
    native = _outcome(lambda: timed("the C plan", lambda: CompiledPlan(plan).read(body, start)))
    if python != native:
        raise Finding(f"the plans disagree on {body.hex()}: Python {python}, C {native}; plan {plan}")
    try:
        ms = timed("the reader", lambda: reader.millis(body, start))
    except (PlanError, TimeValueError):
        return
    except Exception as e:
        raise Finding(f"the reader raised {type(e).__name__}: {e} on {body.hex()}") from None
    if type(ms) is not int or not 0 <= ms <= MAX_TIMESTAMP:
        raise Finding(f"the reader gave {ms!r}, not a Kafka time, on {body.hex()}")


def check_extractor(made: Case, values: list[bytes | None]) -> None:
    """The core's extractor on framed values: a time or -1 each, and a reason, never a raise."""
    extractor = SchemaTimestamp("avro", made.path, made.unit)
    extractor.schemas.put(7, made.reader)
    for sid in extractor.schemas.missing(values):  # as the service resolves them before a push
        extractor.schemas.put(sid, Unreadable(f"the registry does not know schema id {sid} (404)"))
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
    made = rng.choice(cases())
    body = mutate(rng.choice(made.bodies), rng)
    check_body(made.reader, body)
    if rng.random() < 0.2:
        value = frame(7, body) if rng.random() < 0.8 else mutate(frame(7, body)[:5], rng)
        check_extractor(made, [value, None, frame(7, rng.choice(made.bodies))])


def _junk(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value to put where a type was."""
    choices: list[Callable[[], Any]] = [
        lambda: rng.choice((1, -1, 0.5, True, None, "", "record", "array", "Nowhere", "Node", "null")),
        lambda: {"type": _junk(rng, depth + 1)} if depth < 3 else "long",
        lambda: [_junk(rng, depth + 1) for _ in range(rng.randrange(3))] if depth < 3 else [],
        lambda: {"type": rng.choice(("record", "error", "enum", "fixed", "array", "map"))},
        lambda: {
            "type": "record",
            "name": rng.choice(("record", "Node", "X", 5)),
            "fields": rng.choice(([], [1], {}, [{"name": "a"}])),
        },
        lambda: {"type": "fixed", "name": "F", "size": rng.choice((-1, 0, 2**40, "4", 1.5))},
        lambda: {"type": "map", "values": {"type": "array", "items": "Node"}},
    ]
    return rng.choice(choices)()


def _deep_text(rng: random.Random) -> str:
    """A schema whose skipped field nests arrays 300 to 1,100 deep (past JSON's 1,024 too)."""
    levels = rng.randrange(300, 1100)
    deep = '{"type":"array","items":' * levels + '"long"' + "}" * levels
    return (
        '{"type":"record","name":"E","fields":[{"name":"a","type":' + deep + '},{"name":"ts","type":"long"}]}'
    )


def _replace_somewhere(node: Any, rng: random.Random) -> Any:
    """``node`` (a JSON tree, changed in place) with one random place replaced by junk."""
    holders: list[tuple[Any, Any]] = []
    stack = [node]
    while stack:
        here = stack.pop()
        items = (
            list(enumerate(here))
            if isinstance(here, list)
            else list(here.items())
            if isinstance(here, dict)
            else []
        )
        for key, child in items:
            holders.append((here, key))
            stack.append(child)
    if not holders or rng.random() < 0.05:
        return _junk(rng)
    holder, key = rng.choice(holders)
    if isinstance(holder, dict) and rng.random() < 0.3:
        del holder[key]
    else:
        holder[key] = _junk(rng)
    return node


def mutated_schema(rng: random.Random) -> None:
    schema, path, unit = rng.choice(SEEDS)
    roll = rng.random()
    if roll < 0.05:
        text, path = _deep_text(rng), ["ts"]
    elif roll < 0.7:
        text = orjson.dumps(_replace_somewhere(orjson.loads(orjson.dumps(schema)), rng)).decode()
    else:
        text = mutate(json.dumps(schema).encode(), rng).decode(errors="replace")
    if rng.random() < 0.3:
        references = {
            "Node": json.dumps(NODE),
            "x": mutate(json.dumps(TREE).encode(), rng).decode(errors="replace"),
        }
        try:
            text = timed("standalone", lambda: standalone(text, references))  # type: ignore[assignment]
        except SchemaError:
            return
        except Exception as e:
            raise Finding(f"standalone raised {type(e).__name__}: {e} on {text[:300]!r}") from None
    try:
        reader = timed("avro_time_reader", lambda: avro_time_reader(text, path, unit))
    except SchemaError as e:
        if "\n" in str(e):
            raise Finding(f"a SchemaError of several lines: {e!r}") from None
        return
    except Exception as e:
        raise Finding(f"avro_time_reader raised {type(e).__name__}: {e} on {text[:300]!r}") from None
    assert isinstance(reader, PlannedAvroReader)
    seed_bodies = next(c.bodies for c in cases() if c.schema is schema)
    for _ in range(4):
        check_body(reader, mutate(rng.choice(seed_bodies), rng, rng.randrange(4)))


STEPS = [(90, mutated_body), (10, mutated_schema)]


def main(argv: list[str] | None = None) -> int:
    return campaign("avro", STEPS, argv)


if __name__ == "__main__":
    sys.exit(main())
