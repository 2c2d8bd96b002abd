"""What ``timestamp.extractor`` costs: CPU per record and records/s of ``record``, ``json:``,
``avro:`` and ``protobuf:`` on the same records, in one process (``python -m bench extractors``,
and a phase of ``bench run``).

**Records**: ``n`` orders, each the same logical record in every format — an id, a customer, an
amount, a currency, a channel, a note, a trace id and ``meta.{source, ts}`` — about 250 B as JSON
(Avro and Protobuf bodies are smaller: no field names). The event time is ``meta.ts`` (epoch ms):
``json:meta.ts``, ``avro:meta.ts`` (``long``, ``timestamp-millis``), ``protobuf:meta.ts``
(``int64``); ``record`` reads the record's own timestamp.

**Path measured**: the core's, as the service drives it — ``parse_extractor(spec)``, then
``extract_all(records)`` over :class:`~sidecar.core.records.Record` objects. Avro and Protobuf
values carry Confluent's framing (schema id 1); their schema is put in the extractor's cache as
:class:`~sidecar.registry.resolver.SchemaResolver` puts it after the registry answered (the
format's ``compile``, then its ``time_reader``: Avro's skip plan, Protobuf's plan), so no
registry and no I/O are in the loop.

**Figure**: the best of ``repeats`` passes over all ``n`` records, timed with
``time.process_time`` (CPU of this process): ``cpu_us_per_record`` = best / n, ``records_per_s``
= n / best. The best pass is the one least disturbed by the rest of the machine. Every pass's
output is checked against the records' event times first.
"""

from __future__ import annotations

import gc
import io
import json
import random
import time
from dataclasses import dataclass
from typing import Any

import fastavro
import orjson

from sidecar.config.extractor import parse_extractor
from sidecar.core.records import Record
from sidecar.extractors.framed import SchemaTimestamp
from timesync_wire.formats.protobuf import protobuf_time_reader
from timesync_wire.framing import frame
from timesync_wire.schemas.protoc import MAIN_NAME, compile_proto

SCHEMA_ID = 1
SPECS = ("record", "json:meta.ts", "avro:meta.ts", "protobuf:meta.ts")
#: The target: each of ``avro:`` (issue 24), ``json:`` and ``protobuf:`` (issue 33) adds at most
#: this much CPU per record over ``record``.
AVRO_OVER_RECORD_US = 0.5

AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "channel", "type": "string"},
        {"name": "note", "type": "string"},
        {"name": "trace", "type": "string"},
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [
                    {"name": "source", "type": "string"},
                    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                ],
            },
        },
    ],
}
PROTO_SCHEMA = """syntax = "proto3";
package bench;

message Order {
  string id = 1;
  string customer = 2;
  double amount = 3;
  string currency = 4;
  string channel = 5;
  string note = 6;
  string trace = 7;
  Meta meta = 8;
  message Meta {
    string source = 1;
    int64 ts = 2;
  }
}
"""


@dataclass(frozen=True)
class Case:
    """One extractor and the records it reads."""

    spec: str
    extractor: Any
    records: list[Record]


def orders(n: int, base_ms: int, seed: int) -> list[dict[str, Any]]:
    """``n`` orders (as dicts), event time ``meta.ts`` ascending from ``base_ms``."""
    rng = random.Random(seed)
    return [
        {
            "id": f"o-{i:09d}",
            "customer": f"c-{rng.randrange(5000):05d}",
            "amount": rng.randrange(100, 50_000) / 100,
            "currency": "EUR",
            "channel": "web",
            "note": "placed by web checkout, standard shipping, no gift wrap",
            "trace": f"{rng.getrandbits(128):032x}",
            "meta": {"source": "checkout", "ts": base_ms + i},
        }
        for i in range(n)
    ]


def avro_bodies(rows: list[dict[str, Any]], schema_id: int = SCHEMA_ID) -> list[bytes]:
    """The orders as Avro bodies of :data:`AVRO_SCHEMA`, framed with ``schema_id``."""
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    out = []
    for row in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(frame(schema_id, buf.getvalue()))
    return out


def protobuf_bodies(rows: list[dict[str, Any]], compiled: bytes, schema_id: int = SCHEMA_ID) -> list[bytes]:
    """The orders as Protobuf messages of :data:`PROTO_SCHEMA` (compiled), framed with ``schema_id``."""
    cls = protobuf_time_reader(compiled, MAIN_NAME, (0,), ["meta", "ts"], "ms")._cls
    out = []
    for row in rows:
        msg = cls(**{k: v for k, v in row.items() if k != "meta"})
        msg.meta.source, msg.meta.ts = row["meta"]["source"], row["meta"]["ts"]
        out.append(frame(schema_id, bytes(msg.SerializeToString()), (0,)))
    return out


def cases(n: int, seed: int = 42) -> list[Case]:
    """The four extractors, each with its ``n`` records, its schema cached as the resolver caches
    it (see the module docstring)."""
    rows = orders(n, 1_700_000_000_000, seed)
    ts = [row["meta"]["ts"] for row in rows]
    compiled = compile_proto(PROTO_SCHEMA, {})
    values: dict[str, list[bytes]] = {
        "record": [orjson.dumps(row) for row in rows],
        "json:meta.ts": [orjson.dumps(row) for row in rows],
        "avro:meta.ts": avro_bodies(rows),
        "protobuf:meta.ts": protobuf_bodies(rows, compiled),
    }
    out = []
    for spec in SPECS:
        extractor = parse_extractor(spec)
        if isinstance(extractor, SchemaTimestamp):
            fmt = extractor.format
            schema = compiled if fmt.message_indexes else fmt.compile(json.dumps(AVRO_SCHEMA), {})
            indexes = (0,) if fmt.message_indexes else ()
            reader = fmt.time_reader(extractor.path, extractor.unit, schema, indexes)
            extractor.schemas.put(SCHEMA_ID, reader, indexes)
        records = [Record("orders", 0, i, timestamp=ts[i], value=v) for i, v in enumerate(values[spec])]
        out.append(Case(spec, extractor, records))
    return out


def best_cpu_s(case: Case, repeats: int) -> float:
    """The least CPU time (``time.process_time``) of ``repeats`` passes of ``extract_all`` over
    the case's records; raises if a pass does not give the records' event times."""
    expected = [r.timestamp for r in case.records]
    if case.extractor.extract_all(case.records) != expected:
        raise RuntimeError(f"extractor {case.spec} does not read the records' event times")
    best = float("inf")
    gc.disable()  # a collection landing in one pass is not the extractor's cost
    try:
        for _ in range(repeats):
            started = time.process_time()
            case.extractor.extract_all(case.records)
            best = min(best, time.process_time() - started)
    finally:
        gc.enable()
    return best


def run(n: int = 200_000, repeats: int = 7, seed: int = 42) -> dict[str, Any]:
    """Measure every extractor (see the module docstring); the ``extractors`` part of results.json."""
    rows: dict[str, dict[str, Any]] = {}
    for case in cases(n, seed):
        best = best_cpu_s(case, repeats)
        rows[case.spec] = {
            "value_bytes": round(sum(len(r.value or b"") for r in case.records) / n),
            "cpu_us_per_record": round(best * 1e6 / n, 3),
            "records_per_s": round(n / best) if best > 0 else None,
        }
    record = rows["record"]["cpu_us_per_record"]
    added = {
        spec: round(row["cpu_us_per_record"] - record, 3) for spec, row in rows.items() if spec != "record"
    }
    return {
        "records": n,
        "repeats": repeats,
        "extractors": rows,
        "added_us_per_record": added,
        "avro_added_us_per_record": added["avro:meta.ts"],
        "target_avro_added_us_per_record": AVRO_OVER_RECORD_US,
        "met": all(us <= AVRO_OVER_RECORD_US for us in added.values()),
    }
