"""How cost grows: records/s, CPU per record and peak RSS against input partitions and record size.

The curves a user sizes a sidecar with. Each point is one backlog — keyless records on two
topics of ``partitions / 2`` partitions each, written before the systems start — drained by each
curve system (timesync idle 0 and the passthrough) exactly as in the throughput phase
(:func:`bench.backlog.throughput_run`). The partition axis holds the record size at its first
value; the size axis holds the partitions at theirs (the point they share is run once).

:func:`growth` reads the slope of each curve on log–log axes: 0 is flat, 1 grows like the axis
(linear), in between sub-linear. A per-record cost that grows with the partition count is a
per-partition cost (buffers, fetch sessions, bookkeeping) showing through.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.backlog import shape_events, throughput_run, write_backlog
from bench.plan import Plan
from bench.progress import console

METRICS = ("records_per_s", "cpu_us_per_record", "peak_rss_mib")


def points(p: Plan) -> list[tuple[int, int]]:
    """(partitions in total, value bytes) of every point, the shared one once."""
    base_parts, base_size = p.curve_partitions[0], p.curve_value_bytes[0]
    out = [(n, base_size) for n in p.curve_partitions]
    out += [(base_parts, b) for b in p.curve_value_bytes if (base_parts, b) not in out]
    return out


def records_for(p: Plan, value_bytes: int) -> int:
    """The backlog of one point: ``curve_records``, fewer for large records (at most
    ``curve_bytes`` of values), never fewer than 20 per partition of the largest count."""
    return max(20 * max(p.curve_partitions), min(p.curve_records, p.curve_bytes // value_bytes))


async def curves_phase(bootstrap: str, tag: str, p: Plan, log_dir: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for partitions, value_bytes in points(p):
        per_topic = max(1, partitions // 2)
        topics = [
            f"bench-{tag}-cv-{partitions}-{value_bytes}-a",
            f"bench-{tag}-cv-{partitions}-{value_bytes}-b",
        ]
        n = records_for(p, value_bytes)
        events = shape_events("keyless", topics, per_topic, n, p.seed, value_bytes)
        backlog = await write_backlog(
            bootstrap, "curve", events, topics, per_topic, f"curves: {partitions} partitions, {value_bytes} B"
        )
        del events
        for spec in p.curve_systems:
            result, _ = await throughput_run(
                bootstrap, f"{tag}-cv{partitions}-{value_bytes}", spec, backlog, log_dir, False
            )
            console.print(
                f"  curve {spec.label:<18} {partitions:>4} partitions {value_bytes:>6} B: "
                f"{result['records_per_s'] or 0:>9,} records/s  {result['cpu_us_per_record']:.2f} µs/record  "
                f"rss {result['peak_rss_mib']:.0f} MiB"
            )
            runs.append({"partitions": partitions, "value_bytes": value_bytes, **result})
    return {
        "partitions": list(p.curve_partitions),
        "value_bytes": list(p.curve_value_bytes),
        "runs": runs,
        "growth": growth(runs, p.curve_partitions[0], p.curve_value_bytes[0]),
    }


def _slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y against log x (``None`` with fewer than two usable points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    var = sum((x - mx) ** 2 for x, _ in pts)
    return round(sum((x - mx) * (y - my) for x, y in pts) / var, 2) + 0.0 if var else None


def classify(slope: float | None) -> str | None:
    """Words for a log–log slope: flat (|s| < 0.15), linear (0.85–1.15), sub-/super-linear,
    or falling."""
    if slope is None:
        return None
    if abs(slope) < 0.15:
        return "flat"
    if slope < 0:
        return "falls"
    if slope < 0.85:
        return "sub-linear"
    if slope <= 1.15:
        return "linear"
    return "super-linear"


def growth(runs: list[dict[str, Any]], base_partitions: int, base_bytes: int) -> list[dict[str, Any]]:
    """Per system, axis and metric: the log–log slope and its class, with the end points."""
    out = []
    for label in dict.fromkeys(r["system"]["label"] for r in runs):
        mine = [r for r in runs if r["system"]["label"] == label]
        for axis, fixed, held in (
            ("partitions", "value_bytes", base_bytes),
            ("value_bytes", "partitions", base_partitions),
        ):
            line = sorted((r for r in mine if r[fixed] == held), key=lambda r: r[axis])
            if len(line) < 2:
                continue
            for metric in METRICS:
                xs = [float(r[axis]) for r in line]
                ys = [r[metric] for r in line]
                slope = _slope(xs, ys)
                out.append(
                    {
                        "system": label,
                        "axis": axis,
                        "metric": metric,
                        "slope": slope,
                        "grows": classify(slope),
                        "from": [line[0][axis], ys[0]],
                        "to": [line[-1][axis], ys[-1]],
                    }
                )
    return out
