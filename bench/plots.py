"""The PNG plots of a run, made from its results dict (``results.json``).

matplotlib with the Agg backend, so no display is needed:

* ``latency-disorder-<workload>.png`` — one point per system/setting: p99 end-to-end latency
  against the share of records out of order;
* ``throughput.png`` — records/s per system draining the same backlog;
* ``curves-partitions.png``, ``curves-record-size.png`` — the cost curves;
* ``latency-cdf.png`` — the latency CDF of every system on each workload;
* ``idle-auto.png`` — per workload that ran ``max.task.idle.ms=auto``: added p99 against
  records out of order for every single-task timesync setting, ``auto`` highlighted.

Each numeric axis is linear or symlog as its values need, with plain tick labels
(:mod:`bench.axes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker

from bench import idle_auto
from bench.axes import plain_number, plain_ticks, set_axis
from bench.formatting import CURVE_LABELS

COLOURS = {
    "passthrough": "#7f7f7f",
    "rdkafka-copy": "#8c564b",
    "timesync": "#1f77b4",
    "kafka-streams": "#d62728",
    "optimum": "#2ca02c",
}
MARKERS = {
    "-1": "v",
    "0": "o",
    "100": "s",
    "500": "p",
    "1000": "D",
    "2000": "h",
    "max": "^",
    "auto": "P",
    None: "*",
}


def _colour(system: dict[str, Any]) -> str:
    if system["kind"] == "timesync" and system.get("grouping") == "partition":
        return "#17becf"
    return COLOURS.get(system["kind"], "black")


def plots(results: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write every plot; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        latency_disorder_plot(w, out_dir / f"latency-disorder-{w['name']}.png") for w in results["workloads"]
    ]
    auto = idle_auto.summary(results)
    if auto:
        written.append(idle_auto_plot(auto, out_dir / "idle-auto.png"))
    written.append(throughput_plot(results["throughput"], out_dir / "throughput.png"))
    if results.get("curves"):
        written += curve_plots(results["curves"], out_dir)
    if results["workloads"]:  # none with --no-live
        written.append(latency_cdf_plot(results["workloads"], out_dir / "latency-cdf.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_disorder_plot(w: dict[str, Any], path: Path) -> Path:
    """One live workload: a point per system/setting, p99 end-to-end latency against the share of
    records out of order."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    points = [r for r in w["runs"] if r["latency"]["p99_ms"] is not None]
    for r in points:
        system = r["system"]
        ax.scatter(
            [r["disorder"]["late_share"] * 100],
            [r["latency"]["p99_ms"]],
            color=_colour(system),
            marker=MARKERS.get(system["idle"], "o"),
            s=60,
            label=system["label"],
            edgecolors="black",
            linewidths=0.4,
        )
    set_axis(ax, "x", [r["disorder"]["late_share"] * 100 for r in points], resolution=0.01, nonnegative=True)
    set_axis(ax, "y", [r["latency"]["p99_ms"] for r in points], nonnegative=True)
    ax.set_xlabel("records out of event-time order (%)")
    ax.set_ylabel("p99 end-to-end latency (ms)")
    ax.set_title(f"{w['name']}: latency vs disorder ({w['records']:,} records)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best", ncol=2)
    fig.tight_layout()
    return _save(fig, path)


def latency_cdf_plot(workloads: list[dict[str, Any]], path: Path) -> Path:
    """The latency CDF of every system, one panel per live workload."""
    n = len(workloads)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, w in zip(axes.flat, workloads, strict=False):
        latencies: list[float] = []
        for r in w["runs"]:
            cdf = r["latency"]["cdf"]
            if not cdf:
                continue
            xs = [max(1, v) for _, v in cdf]
            latencies += xs
            ax.plot(
                xs,
                [p for p, _ in cdf],
                color=_colour(r["system"]),
                marker=MARKERS.get(r["system"]["idle"], "o"),
                markersize=3,
                linewidth=1,
                label=r["system"]["label"],
            )
        set_axis(ax, "x", latencies, nonnegative=True)
        plain_ticks(ax, "y")
        ax.set_title(w["name"])
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("percentile")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=7)
    fig.suptitle("End-to-end latency CDF (produce → visible in the output)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    return _save(fig, path)


def idle_auto_plot(auto: dict[str, dict[str, Any]], path: Path) -> Path:
    """One panel per workload (bench.idle_auto.summary): added p99 (ms) against records out of
    order, a point per fixed setting labelled by its idle, ``auto`` a large orange cross; each
    axis linear or symlog as its values need (:mod:`bench.axes`)."""
    n = len(auto)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    for ax, (name, v) in zip(axes.flat, auto.items(), strict=False):
        for label, p in v["fixed"].items():
            beats = label in v["beaten_by"]
            ax.scatter(
                [p["late_records"]],
                [p["added_p99_ms"]],
                color="#d62728" if beats else COLOURS["timesync"],
                marker=MARKERS.get(p["idle"], "o"),
                s=45,
                edgecolors="black",
                linewidths=0.4,
            )
            ax.annotate(str(p["idle"]), (p["late_records"], p["added_p99_ms"]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")  # fmt: skip
        a = v["auto"]
        ax.scatter([a["late_records"]], [a["added_p99_ms"]], color="#ff7f0e", marker="P", s=160,
                   edgecolors="black", linewidths=0.8, zorder=3, label="auto")  # fmt: skip
        points = [*v["fixed"].values(), a]
        set_axis(ax, "x", [p["late_records"] for p in points], nonnegative=True, integer=True)
        set_axis(ax, "y", [p["added_p99_ms"] for p in points])
        ax.set_xlabel("records out of order")
        ax.set_ylabel("added p99 over passthrough (ms)")
        ax.set_title(name + ("" if not v["beaten_by"] else " (auto beaten)"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle("max.task.idle.ms: auto against the fixed settings (lower left is better)")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return _save(fig, path)


def throughput_plot(shapes: list[dict[str, Any]], path: Path) -> Path:
    """records/s per system, one panel per record shape, the ceiling as a dashed line."""
    rows = max(len(tp["runs"]) for tp in shapes)
    fig, axes = plt.subplots(
        1, len(shapes), figsize=(7 * len(shapes), 0.45 * max(4, rows) + 1.5), squeeze=False
    )
    for ax, tp in zip(axes.flat, shapes, strict=True):
        runs = [r for r in tp["runs"] if r["records_per_s"]]
        ax.barh(
            [r["system"]["label"] for r in runs],
            [r["records_per_s"] for r in runs],
            color=[_colour(r["system"]) for r in runs],
        )
        for y, r in enumerate(runs):
            ratio = f" ({r['vs_ceiling']:.2f}×)" if r.get("vs_ceiling") else ""
            ax.text(r["records_per_s"], y, f" {r['records_per_s']:,}{ratio}", va="center", fontsize=7)
        top = tp["ceiling"]["records_per_s"]
        ax.set_xlim(0, 1.3 * max([top, *(r["records_per_s"] for r in runs)]))  # room for the labels
        ax.axvline(top, color="black", linestyle="--", linewidth=1)
        ax.text(top, 1.01, f"ceiling {top:,}", fontsize=7, ha="center", transform=ax.get_xaxis_transform())
        plain_ticks(ax, "x")
        ax.invert_yaxis()
        ax.set_xlabel("records/s (steady, same backlog; × = ratio to the ceiling)")
        ax.set_title(
            f"{tp['shape']}: {tp['records']:,} records, {tp['value_bytes']:g} B values", fontsize=9, pad=14
        )
    fig.tight_layout()
    return _save(fig, path)


def curve_plots(curves: dict[str, Any], out_dir: Path) -> list[Path]:
    """``curves-partitions.png`` and ``curves-record-size.png``: records/s, CPU per record and
    peak RSS of each curve system against the axis (log x)."""
    written = []
    runs = curves["runs"]
    for axis, fixed, held, name, xlabel in (
        ("partitions", "value_bytes", curves["value_bytes"][0], "curves-partitions.png", "input partitions"),
        ("value_bytes", "partitions", curves["partitions"][0], "curves-record-size.png", "value bytes"),
    ):
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
        for label in dict.fromkeys(r["system"]["label"] for r in runs):
            line = sorted(
                (r for r in runs if r["system"]["label"] == label and r[fixed] == held), key=lambda r: r[axis]
            )
            if not line:
                continue
            system = line[0]["system"]
            for ax, metric in zip(axes, CURVE_LABELS, strict=True):
                ax.plot(
                    [r[axis] for r in line],
                    [r[metric] for r in line],
                    marker="o",
                    color=_colour(system),
                    label=label,
                )
        ticks = sorted({r[axis] for r in runs if r[fixed] == held})
        for ax, metric in zip(axes, CURVE_LABELS, strict=True):
            ax.set_xscale("log")
            ax.set_xticks(ticks, [plain_number(t) for t in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            plain_ticks(ax, "y")
            ax.set_xlabel(xlabel)
            ax.set_title(CURVE_LABELS[metric])
            ax.grid(True, which="both", alpha=0.3)
            ax.set_ylim(bottom=0)
        axes[0].legend(fontsize=8)
        fixed_text = f"{held:,} B values" if fixed == "value_bytes" else f"{held} input partitions"
        fig.suptitle(f"Cost against {xlabel} ({fixed_text}, backlog drained as fast as possible)")
        fig.tight_layout()
        written.append(_save(fig, out_dir / name))
    return written
