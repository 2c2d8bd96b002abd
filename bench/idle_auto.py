"""``max.task.idle.ms=auto`` against the fixed settings, per live workload (issue 26).

On each workload of the live phase, every single-task timesync run is a point: **added p99**
(its p99 end-to-end latency − the passthrough's on the same workload, ms) against **records out
of order** (``disorder.late_records``: records emitted below the running maximum of event time).
A fixed setting *beats* ``auto`` when it is strictly lower on both axes; ``auto`` is then not on
the trade-off's frontier for that workload. The workloads the issue names map to the live ones:
steady → ``steady``, bursty → ``skewed``, one lagging partition → ``lagging``, a producer that
stops → ``quiet``; the others (``iot``, ``log-append``) are judged the same way.
"""

from __future__ import annotations

from typing import Any

AUTO = "timesync idle auto"


def points(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Label → ``{idle, added_p99_ms, late_records}`` of every single-task timesync run of a
    workload that has a p99; empty without a passthrough run (nothing to add latency over)."""
    runs = {r["system"]["label"]: r for r in workload["runs"]}
    base = (runs.get("passthrough") or {}).get("latency", {}).get("p99_ms")
    if base is None:
        return {}
    out = {}
    for label, r in runs.items():
        system = r["system"]
        if system["kind"] != "timesync" or system.get("grouping", "single") != "single":
            continue
        if system.get("lz4_level") is not None or r["latency"]["p99_ms"] is None:
            continue
        out[label] = {
            "idle": system["idle"],
            "added_p99_ms": r["latency"]["p99_ms"] - base,
            "late_records": r["disorder"]["late_records"],
        }
    return out


def versus_fixed(workload: dict[str, Any]) -> dict[str, Any] | None:
    """``auto``'s point on a workload and the fixed settings that beat it on both axes; ``None``
    when the workload has no ``auto`` run."""
    pts = points(workload)
    auto = pts.get(AUTO)
    if auto is None:
        return None
    beaten_by = [
        label
        for label, p in pts.items()
        if label != AUTO
        and p["added_p99_ms"] < auto["added_p99_ms"]
        and p["late_records"] < auto["late_records"]
    ]
    return {
        "auto": auto,
        "fixed": {label: p for label, p in pts.items() if label != AUTO},
        "beaten_by": beaten_by,
    }


def summary(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """:func:`versus_fixed` of every workload that ran ``auto``, by workload name."""
    out = {}
    for w in results.get("workloads") or []:
        v = versus_fixed(w)
        if v is not None:
            out[w["name"]] = v
    return out
