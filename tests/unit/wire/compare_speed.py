"""How much the plans save, in process: ``python -m tests.unit.wire.compare_speed [--records N]``.

Not a test (pytest does not collect it) and no published figure: the comparison issue 33 asks
for until the plans are wired into ``python -m bench extractors``. It reads the bench's own
records (``bench.extractors.cases``: the same ~250 B orders as JSON and as framed Protobuf) with
today's extractors and with the plans, alternating in one process, and prints the best CPU time
per record of each (``time.process_time``), what each adds over ``record``, and the load average,
without which a figure measured on a shared machine means little.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable

from bench.extractors import SCHEMA_ID, cases
from sidecar.formats import timevalues
from sidecar.formats.framing import frame
from timesync_wire.formats.json_scan import JsonTimeScan
from timesync_wire.formats.protobuf_compile import compile_plan
from timesync_wire.formats.protobuf_plan import ProtobufTimePlan


def contenders(n: int) -> dict[str, Callable[[], list[int]]]:
    """Each way of reading the bench's ``n`` records, as a call that reads them all once."""
    by_spec = {case.spec: case for case in cases(n)}
    record, json, proto = by_spec["record"], by_spec["json:meta.ts"], by_spec["protobuf:meta.ts"]
    scan = JsonTimeScan(["meta", "ts"], "ms", timevalues)
    reader = proto.extractor.schemas._by_message[(SCHEMA_ID, (0,))]
    plan = ProtobufTimePlan(compile_plan(reader._cls.DESCRIPTOR, ["meta", "ts"]), "ms", timevalues)
    prefix = frame(SCHEMA_ID, b"", (0,))
    expected = [r.timestamp for r in record.records]
    runs: dict[str, Callable[[], list[int]]] = {
        "record": lambda: record.extractor.extract_all(record.records),
        "json: today": lambda: json.extractor.extract_all(json.records),
        "json: plan": lambda: scan.millis_all([r.value for r in json.records]),
        "protobuf: today": lambda: proto.extractor.extract_all(proto.records),
        "protobuf: plan": lambda: plan.millis_all([r.value for r in proto.records], prefix),
    }
    for name, run in runs.items():
        if run() != expected:
            raise RuntimeError(f"{name} does not read the records' event times")
    return runs


def compare(n: int, rounds: int) -> dict[str, float]:
    """The best µs per record of each contender over ``rounds`` alternating rounds."""
    runs = contenders(n)
    best = dict.fromkeys(runs, float("inf"))
    gc.disable()
    try:
        for _ in range(rounds):
            for name, run in runs.items():
                started = time.process_time()
                run()
                best[name] = min(best[name], (time.process_time() - started) * 1e6 / n)
    finally:
        gc.enable()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.unit.wire.compare_speed")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    load = os.getloadavg()
    best = compare(args.records, args.rounds)
    for name, us in best.items():
        added = us - best["record"]
        print(f"{name:16s} {us:6.3f} µs/record   +{added:6.3f} over record")
    for fmt in ("json", "protobuf"):
        today, plan = best[f"{fmt}: today"] - best["record"], best[f"{fmt}: plan"] - best["record"]
        print(
            f"{fmt}: the plan adds {plan / today:.2f}× what today's extractor adds ({today / plan:.1f}× less)"
        )
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
