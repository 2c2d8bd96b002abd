"""``python -m bench idle-backlog``: a restarted sidecar draining a backlog, per idle rule (issue 34).

A backlog sits on N input partitions (records interleaved in time, so the partitions run dry one
after another) when a sidecar starts. The drain — from its first record out to its last — is
measured at ``max.task.idle.ms=-1`` (no waiting: the floor) and at each idle, for both rules:

* ``last-arrival`` — timesync's: a caught-up partition passes once it has been quiet for the
  idle, counted from its last arrival; expected to add about one idle, whatever N;
* ``run-dry`` — Kafka Streams' (and timesync's before issue 34): counted from when its buffer
  ran dry; expected to add about (N − 1) × idle, as the partitions run dry in turn.

The old rule runs as a bench-only strategy object (:mod:`bench.idle_rules`, which says why it is
no config key). Each backlog is written once and drained by every case in turn, each from its own
consumer group into its own LogAppendTime output topic, so the last record's append time is when
a consumer could first read it. Rounds alternate the two rules' order.

``--quick`` (4 and 8 partitions, idles 0 and 300, 40 records a partition) checks that the case
works, in about a minute; its figures are not measurements. The full size (8, 64, 256 partitions;
idles 0, 500, 2000; 200 records a partition) takes about 15 minutes, most of it the old rule at
256 partitions (255 × 2.5 s). Writes ``idle-backlog.json``, ``idle-backlog.md`` (the table) and
``idle-backlog.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testkit.sidecar_process import SidecarProcess

COMMAND = "idle-backlog"
#: The rules, in the order of the table's columns.
RULES = ("last-arrival", "run-dry")
RULE_LABELS = {
    "last-arrival": "from the last arrival (timesync)",
    "run-dry": "from when the buffer ran dry (Kafka Streams; timesync before)",
}
#: The floor every case is measured against.
NO_IDLE = -1


@dataclass(frozen=True)
class Size:
    partitions: tuple[int, ...]
    idles: tuple[int, ...]
    records_per_partition: int


FULL = Size((8, 64, 256), (0, 500, 2000), 200)
QUICK = Size((4, 8), (0, 300), 40)


@dataclass(frozen=True)
class Case:
    round: int
    idle: int
    rule: str

    @property
    def slug(self) -> str:
        return f"r{self.round}-{self.rule}-idle{self.idle}"


def schedule(idles: Sequence[int], rounds: int) -> list[Case]:
    """The runs on one backlog: per round, the floor first, then each idle under both rules, their
    order alternating from one idle and one round to the next (drift in the machine's load then
    falls on both rules alike)."""
    cases = []
    for r in range(1, rounds + 1):
        cases.append(Case(r, NO_IDLE, RULES[0]))
        for k, idle in enumerate(idles):
            rules = RULES if (r + k) % 2 else RULES[::-1]
            cases += [Case(r, idle, rule) for rule in rules]
    return cases


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per partitions and idle: the median drain at -1, and each rule's median drain and what it
    adds over that (``None`` where a run did not finish), beside (N − 1) × idle."""

    def median(rows: list[dict[str, Any]]) -> float | None:
        done = [row["drain_s"] for row in rows if row["drain_s"] is not None]
        return round(statistics.median(done), 2) if done and len(done) == len(rows) else None

    out = []
    for n in dict.fromkeys(row["partitions"] for row in runs):
        mine = [row for row in runs if row["partitions"] == n]
        floor = median([row for row in mine if row["idle"] == NO_IDLE])
        for idle in dict.fromkeys(row["idle"] for row in mine if row["idle"] != NO_IDLE):
            entry: dict[str, Any] = {"partitions": n, "idle_ms": idle, "drain_at_minus_one_s": floor}
            for rule in RULES:
                drain = median([row for row in mine if (row["idle"], row["rule"]) == (idle, rule)])
                entry[f"{rule}_drain_s"] = drain
                entry[f"{rule}_added_s"] = None if drain is None or floor is None else round(drain - floor, 2)
            entry["serial_idles_s"] = round((n - 1) * idle / 1000, 2)
            out.append(entry)
    return out


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def markdown(results: dict[str, Any]) -> str:
    """The table: per partitions and idle, the drain at -1 and what each rule adds to it."""
    size = results["size"]
    lines = [
        "## A restarted sidecar draining a backlog: one idle, or one per partition",
        "",
        f"{size['records_per_partition']} records on each input partition before the sidecar starts; "
        "the drain is the time from its first record out to its last (median of "
        f"{results['rounds']} round(s); the start-up before it is the same under every setting), and what "
        "each idle rule adds to the time at `max.task.idle.ms=-1`. Load average "
        f"{_load(results['load_average_at_start'])} at the start, {_load(results['load_average_at_end'])} "
        "at the end"
        + (" — a `--quick` run: the figures show that it works, not how fast." if results["quick"] else "."),
        "",
        f"| partitions | idle (ms) | drain at -1 (s) | added, {RULE_LABELS['last-arrival']} (s) "
        f"| added, {RULE_LABELS['run-dry']} (s) | (N − 1) × idle (s) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for e in results["summary"]:
        lines.append(
            f"| {e['partitions']} | {e['idle_ms']} | {_seconds(e['drain_at_minus_one_s'])} "
            f"| {_seconds(e['last-arrival_added_s'])} | {_seconds(e['run-dry_added_s'])} "
            f"| {_seconds(e['serial_idles_s'])} |"
        )
    return "\n".join(lines) + "\n"


def _load(values: Sequence[float]) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def plot(results: dict[str, Any], path: Path) -> Path:
    """One panel per idle: added drain time (s, linear) against input partitions (8, 64, 256
    spaced evenly), a line per rule, the expectations dashed: one idle, (N − 1) × idle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]
    idles = list(dict.fromkeys(e["idle_ms"] for e in summary))
    fig, axes = plt.subplots(1, len(idles), figsize=(4.2 * len(idles), 4.4), squeeze=False)
    for ax, idle in zip(axes[0], idles, strict=True):
        rows = [e for e in summary if e["idle_ms"] == idle]
        xs = list(range(len(rows)))
        for rule, marker in zip(RULES, ("o", "s"), strict=True):
            ys = [e[f"{rule}_added_s"] for e in rows]
            ax.plot(
                xs, [float("nan") if y is None else y for y in ys], marker=marker, label=RULE_LABELS[rule]
            )
            for x, y in zip(xs, ys, strict=True):
                if y is not None:
                    label = f"{y:.2f}" if abs(y) < 10 else f"{y:.0f}"
                    ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.plot(xs, [e["serial_idles_s"] for e in rows], ":", color="grey", label="(N − 1) × idle")
        ax.axhline(idle / 1000, linestyle="--", color="grey", linewidth=0.8, label="one idle")
        ax.set_xticks(xs, [str(e["partitions"]) for e in rows])
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_xlabel("input partitions")
        ax.set_title(f"max.task.idle.ms={idle}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("drain time added over idle -1 (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle("A backlog after a restart: what each idle rule adds to the drain")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- the runs ---------------------------------------------------------------------------------------


async def write_backlog(bootstrap: str, topic: str, partitions: int, per_partition: int) -> int:
    """``per_partition`` records on each of ``partitions``, record j of partition q at time
    ``base + j·N + q``: every partition's last record is a different one, so they run dry in turn."""
    import numpy as np

    from bench import collect
    from testkit.workloads import Event

    await collect.create(bootstrap, [topic], partitions, False, {})
    base = collect.now_ms() - per_partition * partitions
    events = [
        Event(topic, q, base + j * partitions + q, None, b"x" * 64, 0)
        for j in range(per_partition)
        for q in range(partitions)
    ]
    await collect.produce_tagged(bootstrap, events, 0, np.zeros(len(events), dtype=np.int64), paced=False)
    return len(events)


async def drain_once(
    bootstrap: str, topic: str, partitions: int, records: int, case: Case, logs: Path
) -> dict[str, Any]:
    """Start a sidecar on the backlog under ``case``, wait for its last record, stop it."""
    from bench import collect
    from testkit.sidecar_process import SidecarProcess

    output = f"{topic}-out-{case.slug}"
    await collect.create(bootstrap, [], 0, False, {output: 1})
    settings = {"max.task.idle.ms": case.idle, "watermark.heartbeat.ms": 0}
    start = old_rule_sidecar if case.rule == "run-dry" else SidecarProcess
    process = start(bootstrap, [topic], output, settings, log_dir=logs)
    # Generous: the old rule's serial waits, plus start-up and the drain itself on a loaded machine.
    timeout_s = 120 + 1.5 * (partitions - 1) * max(case.idle, 0) / 1000 + records / 1000
    spawned = collect.now_ms()
    await process.start()
    try:
        samples = await collect.wait_for_count(bootstrap, output, 1, records, timeout_s)
    finally:
        await process.stop()
    row: dict[str, Any] = {"partitions": partitions, **asdict(case), "records": records}
    if samples is None:
        return {**row, "complete": False, "drain_s": None, "first_output_s": None, "last_output_s": None}
    first, last = await collect.edge_append_times(bootstrap, output, 1)
    return {
        **row,
        "complete": True,
        # From the first record out, not from the spawn: the process's start-up (seconds on a
        # loaded machine, and as noisy) comes before it under every setting. Both rules let the
        # records before the first partition to run dry go out at once, so every idle wait
        # falls between the first record out and the last.
        "drain_s": round((last - first) / 1000, 3),
        "first_output_s": round((first - spawned) / 1000, 3),
        "last_output_s": round((last - spawned) / 1000, 3),
    }


async def run(bootstrap: str, size: Size, rounds: int, out: Path, quick: bool) -> dict[str, Any]:
    """Every backlog, every case of :func:`schedule` on it; the runs and their summary."""
    from bench.environment import RunClock
    from bench.progress import console, track

    clock = RunClock()
    runs: list[dict[str, Any]] = []
    tag = uuid.uuid4().hex[:8]
    for n in size.partitions:
        topic = f"bench-idle-backlog-{n}p-{tag}"
        records = await write_backlog(bootstrap, topic, n, size.records_per_partition)
        cases = schedule(size.idles, rounds)
        with track(f"idle-backlog: {n} partitions, {records:,} records", total=len(cases)) as bar:
            for i, case in enumerate(cases):
                row = await drain_once(bootstrap, topic, n, records, case, out / "logs")
                runs.append(row)
                console.print(
                    f"  {n} partitions, idle {case.idle}, {case.rule}: drained in {row['drain_s']} s"
                )
                bar.update(i + 1)
    return {
        "command": COMMAND,
        "quick": quick,
        "size": asdict(size),
        "rounds": rounds,
        **clock.stamp(),
        "runs": runs,
        "summary": summarize(runs),
    }


# -- the command ------------------------------------------------------------------------------------


def old_rule_sidecar(*args: Any, **kwargs: Any) -> SidecarProcess:
    """A ``SidecarProcess`` (same arguments) whose sidecar runs Kafka Streams' idle rule: started
    through :mod:`bench.idle_rules` instead of ``python -m sidecar``, otherwise the same."""
    from testkit.sidecar_process import SidecarProcess

    class OldRuleSidecar(SidecarProcess):
        def args(self) -> list[str]:
            python, _, module, *rest = super().args()
            assert module == "sidecar", f"SidecarProcess runs -m {module}: update bench.idle_backlog"
            return [python, "-m", "bench.idle_rules", *rest]

    return OldRuleSidecar(*args, **kwargs)


HELP = "a restarted sidecar draining backlogs on 8/64/256 partitions, old idle rule vs new"
DESCRIPTION = (
    "A restarted sidecar draining backlogs on 8, 64 and 256 partitions at max.task.idle.ms 0, 500 "
    "and 2000, under timesync's idle rule (from the last arrival) and Kafka Streams' (from when the "
    "buffer ran dry), against the same backlog at -1, on one broker (KAFKA_BOOTSTRAP_SERVERS, else "
    "a local one). Writes idle-backlog.json, .md and .png."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``idle-backlog`` command's arguments (``python -m bench`` gives it its subparser)."""
    p.add_argument("--quick", action="store_true", help="4 and 8 partitions, idles 0 and 300: a smoke run")
    p.add_argument("--rounds", type=int, default=1, help="rounds of every case (default 1)")
    p.add_argument("--out", type=Path, default=Path("results"), help="where idle-backlog.json/.md/.png go")


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the case on one broker; write the JSON, the table and the plot into ``--out``."""
    import asyncio
    import logging

    from bench.progress import console
    from testkit.local_broker import kafka

    if args.rounds < 1:
        parser.error("idle-backlog: --rounds must be at least 1")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    size = QUICK if args.quick else FULL
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        results = asyncio.run(run(bootstrap, size, args.rounds, out, args.quick))
    (out / f"{COMMAND}.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (out / f"{COMMAND}.md").write_text(table)
    figure = plot(results, out / f"{COMMAND}.png")
    console.print(table)
    console.print(f"written: {out / f'{COMMAND}.json'}, {out / f'{COMMAND}.md'}, {figure}")
    return 0
