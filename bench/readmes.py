"""The README blocks: the figures in README.md, bench/README.md and deploy/README.md.

They come from one results.json, never retyped. A block is the text between
``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``; ``python -m bench readme`` rewrites every
block it knows (:func:`update_readmes`) and keeps the run's results, report and figures beside
them in ``bench/figures/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench import idle_auto
from bench.formatting import CURVE_LABELS, GROWTH_WORDS, fmt
from bench.report import markdown
from bench.report_sections import (
    curves_section,
    extractors_e2e_section,
    extractors_section,
    spark_jobs_section,
)

BLOCK = re.compile(r"(<!-- bench:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)
READMES = ("README.md", "bench/README.md", "deploy/README.md")
FIGURES = ("throughput.png", "curves-partitions.png", "curves-record-size.png", "idle-auto.png")
#: The run itself, kept beside the figures so that every README figure can be checked against it.
RUN_FILES = ("results.json", "report.md")
FIGURE_DIR = "bench/figures"
#: Every block the generator writes (each must be in one of ``READMES``).
BLOCKS = ("summary", "results", "sizing", "extractors")


def rewrite_blocks(text: str, blocks: dict[str, str]) -> str:
    """``text`` with the body of every marked block named in ``blocks`` replaced; other text and
    blocks of other names are left as they are."""

    def body(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            return match.group(0)
        return match.group(1) + blocks[name].rstrip("\n") + "\n" + match.group(4)

    return BLOCK.sub(body, text)


def block_names(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def _run(tp: dict[str, Any], label: str) -> dict[str, Any] | None:
    return next((r for r in tp["runs"] if r["system"]["label"] == label), None)


def _provenance(results: dict[str, Any]) -> str:
    m = results["machine"]
    load = m["load_average_at_start"][0]
    end = (results.get("load_average_at_end") or [None])[0]
    return (
        f"Generated from `results.json` of run {results['run_id']} ({results['started_at']}, "
        f"{'quick — not a measurement' if results['quick'] else 'full'}, seed {results['seed']}) by "
        f"`python -m bench readme`: {m['cpus']} CPUs ({m['cpu']}), one local broker on the same machine, "
        f"load average {load:.2f} at start"
        + (f" and {end:.2f} at the end" if end is not None else "")
        + ". "
        + _noise(results)
    )


def round_spread(results: dict[str, Any]) -> tuple[float, str] | None:
    """The widest spread of a repeated throughput system's rounds in this run: (max − min) ÷
    median, and which system; ``None`` when no system ran more than one round."""
    widest: tuple[float, str] | None = None
    for tp in results.get("throughput") or []:
        for run in tp["runs"]:
            rounds = sorted(run.get("records_per_s_runs") or [])
            if len(rounds) < 2 or not rounds[len(rounds) // 2]:
                continue
            spread = (rounds[-1] - rounds[0]) / rounds[len(rounds) // 2]
            if widest is None or spread > widest[0]:
                widest = (spread, f"{run['system']['label']}, {tp['shape']}")
    return widest


def _noise(results: dict[str, Any]) -> str:
    widest = round_spread(results)
    if widest is None:
        return "How noisy: not measured in this run (one round per system): read the ratios within one run."
    spread, where = widest
    return (
        f"How noisy: the repeated throughput rounds of one system spread by up to {spread:.0%} of "
        f"their median ({where}); read the ratios within one run."
    )


def _headline_rows(tp: dict[str, Any]) -> list[str]:
    wanted = [
        "timesync idle 0",
        "timesync/partition idle 0",
        "passthrough",
        "rdkafka-copy",
        *(f"kafka-streams idle 0 {n}" for n in ("defaults", "tuned", "tuned commit 100 ms")),
    ]
    rows = []
    for label in wanted:
        r = _run(tp, label)
        if r is not None:
            rows.append(
                f"| {tp['shape']} | {label} | {fmt(r['records_per_s'])} | {fmt(r.get('vs_ceiling'))} | "
                f"{fmt(r['cpu_us_per_record'])} |"
            )
    top = tp["ceiling"]
    rows.append(
        f"| {tp['shape']} | ceiling: Kafka's own producer / consumer alone | "
        f"{fmt(top['producer']['records_per_s'])} / {fmt(top['consumer']['records_per_s'])} | 1 | – |"
    )
    return rows


def _headline_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| records | system | records/s | × ceiling | µs CPU / record |",
        "|---|---|---:|---:|---:|",
    ]
    for tp in results["throughput"]:
        lines += _headline_rows(tp)
    return lines


def _added_p99(results: dict[str, Any]) -> str:
    st = results["goals"]["steady_idle_0_added_p99_ms"]
    if st["added_p99_ms"] is None:
        return "not measured"
    rounds = len((st.get("p99_rounds_ms") or {}).get("passthrough", [])) or 1
    return (
        f"{st['added_p99_ms']:+d} ms (timesync idle 0 p99 {st['timesync_idle_0_p99_ms']} ms vs the "
        f"passthrough's {st['passthrough_p99_ms']} ms, medians of {rounds} round(s) on `steady`)"
    )


def readme_blocks(results: dict[str, Any]) -> dict[str, str]:
    """Every README block, from one results dict."""
    summary = [
        _provenance(results),
        "",
        *_headline_table(results),
        "",
        "Steady traffic, `max.task.idle.ms=0`: p99 latency added over the raw passthrough "
        + _added_p99(results)
        + ". Details, cost curves and every workload: [bench/README.md](bench/README.md).",
    ]
    # The report's "## Heading" sections by heading (the first part is the title and run line).
    parts = markdown(results).split("\n## ")[1:]
    sections = {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}
    goals_table = sections.get("Goals", "").strip()
    results_block = [
        _provenance(results),
        "",
        "### Goals",
        "",
        goals_table,
        "",
        "### Throughput and the ceiling",
        "",
        *_headline_table(results),
        "",
        f"![throughput]({Path(FIGURE_DIR).name}/throughput.png)",
    ]
    if results.get("curves"):
        results_block += [
            "",
            "### Cost curves",
            "",
            *curves_section(results["curves"]),
            "",
            f"![curves against partitions]({Path(FIGURE_DIR).name}/curves-partitions.png)",
            f"![curves against record size]({Path(FIGURE_DIR).name}/curves-record-size.png)",
        ]
    auto = idle_auto.summary(results)
    if auto:
        results_block += [
            "",
            "### `max.task.idle.ms=auto` against the fixed settings",
            "",
            *_idle_auto_table(auto),
            "",
            f"![auto against the fixed settings]({Path(FIGURE_DIR).name}/idle-auto.png)",
        ]
    if results.get("spark_jobs"):
        results_block += ["", "### The Spark jobs behind it", "", *spark_jobs_section(results["spark_jobs"])]
    sizing = _sizing(results)
    extractor_block = _extractor_block(results)
    return {
        "summary": "\n".join(summary),
        "results": "\n".join(results_block),
        "sizing": "\n".join(sizing),
        "extractors": "\n".join(extractor_block),
    }


def _extractor_block(results: dict[str, Any]) -> list[str]:
    """The extractors' block: what each costs in process, then the sidecar draining with each
    end to end (a run without the end-to-end phase says so)."""
    ex, e2e = results.get("extractors"), results.get("extractors_e2e")
    if not ex:
        return [PENDING]
    lines = [_provenance(results), "", *extractors_section(ex), "", "#### End to end", ""]
    return lines + (extractors_e2e_section(e2e) if e2e else ["Not measured in this run."])


def update_extractor_block(ex: dict[str, Any], e2e: dict[str, Any], repo: Path) -> list[Path]:
    """Rewrite only the extractors block of the READMEs from the two standalone commands' JSON
    (each stamped by ``bench.command.stamp``): a run of the extractor phases alone, at the full
    run's sizes, without the hour of the rest. Returns the files changed."""
    line = (
        f"Generated by `python -m bench readme --extractors` from `python -m bench extractors` and "
        f"`python -m bench extractors-e2e` at their full sizes (ended {ex['measured_at']} and "
        f"{e2e['measured_at']}), alone on the machine: load average {ex['load_average_at_start'][0]:.2f} "
        f"at the start and {e2e['load_average_at_end'][0]:.2f} at the end."
    )
    body = [line, "", *extractors_section(ex), "", "#### End to end", "", *extractors_e2e_section(e2e)]
    changed = []
    for name in READMES:
        path = repo / name
        text = path.read_text() if path.is_file() else ""
        if "extractors" not in block_names(text):
            continue
        new = rewrite_blocks(text, {"extractors": "\n".join(body)})
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def _idle_auto_table(auto: dict[str, dict[str, Any]]) -> list[str]:
    """Per live workload: ``auto``'s point and the fixed settings lower on both axes (the report's
    section "max.task.idle.ms=auto against the fixed settings" has every setting's point)."""
    lines = [
        "Per live workload, single task: `auto`'s p99 added over the passthrough and its records out "
        "of order, and the fixed settings (`-1` … `max`) lower on both (every point: the report and "
        "the plot).",
        "",
        "| workload | auto: added p99 ms | auto: records out of order | fixed settings lower on both |",
        "|---|---:|---:|---|",
    ]
    for name, v in auto.items():
        beaten = ", ".join(f"`{v['fixed'][b]['idle']}`" for b in v["beaten_by"]) or "none"
        lines.append(
            f"| {name} | {fmt(v['auto']['added_p99_ms'])} | {fmt(v['auto']['late_records'])} | {beaten} |"
        )
    return lines


def _sizing(results: dict[str, Any]) -> list[str]:
    """The deploy sizing figures: CPU per record and records/s per core per shape, memory, latency."""
    lines = [_provenance(results), ""]
    for tp in results["throughput"]:
        ts, pt, ks = (
            _run(tp, "timesync idle 0"),
            _run(tp, "passthrough"),
            _run(tp, "kafka-streams idle 0 tuned"),
        )
        if ts is None or not ts["cpu_us_per_record"]:
            continue
        per_core = round(1e6 / ts["cpu_us_per_record"], -3)
        lines.append(
            f"- **CPU, {tp['shape']} records** ({tp['workload'].split(',')[0]}): timesync idle 0 uses "
            f"{fmt(ts['cpu_us_per_record'])} µs of CPU per record — about "
            f"**{per_core:,.0f} records/s per core** — and drained the backlog at "
            f"{fmt(ts['records_per_s'])} records/s ({fmt(ts.get('vs_ceiling'))}× the broker's ceiling here)"
            + (f"; the raw aiokafka passthrough {fmt(pt['cpu_us_per_record'])} µs" if pt else "")
            + (f"; Kafka Streams tuned for throughput {fmt(ks['cpu_us_per_record'])} µs" if ks else "")
            + f"; peak RSS {fmt(ts['peak_rss_mib'])} MiB."
        )
    if results.get("curves"):
        for g in results["curves"]["growth"]:
            if g["system"] == "timesync idle 0" and g["metric"] in ("cpu_us_per_record", "peak_rss_mib"):
                axis = "input partitions" if g["axis"] == "partitions" else "value size"
                lines.append(
                    f"- {CURVE_LABELS[g['metric']]} against {axis}: {GROWTH_WORDS[g['grows']]} "
                    f"({fmt(g['from'][1])} at {g['from'][0]:,} → {fmt(g['to'][1])} at {g['to'][0]:,})."
                )
    lines.append(
        f"- **Latency** added by the merge on steady traffic at `max.task.idle.ms=0`: {_added_p99(results)}."
    )
    sj = results.get("spark_jobs")
    if sj:
        rates = ", ".join(
            f"`{job}` {fmt(r['records_per_s'])}" for job, r in sj["jobs"].items() if r["records_per_s"]
        )
        lines.append(
            f"- **The Spark job, not the sidecar, bounds the pipeline**: in `local[2]` with "
            f"{sj['keys']:,} keys the jobs process {rates} records/s once started (start-up apart); "
            "size the executors for the job, the sidecar for its CPU per record above."
        )
    return lines


PENDING = (
    "No full run of this benchmark version is recorded yet. Run `make bench` on a quiet machine "
    "(load average < 0.5, nothing else running); it rewrites this block from its `results.json`."
)


def update_readmes(results: dict[str, Any] | None, repo: Path, results_dir: Path | None = None) -> list[Path]:
    """Rewrite the blocks of every README under ``repo`` (``results=None``: the pending text) and
    copy the figures the blocks show, with the run's ``results.json`` and ``report.md``, into
    ``bench/figures/``. Returns the files changed."""
    blocks = readme_blocks(results) if results is not None else dict.fromkeys(BLOCKS, PENDING)
    changed = []
    for name in READMES:
        path = repo / name
        text = path.read_text()
        new = rewrite_blocks(text, blocks)
        if new != text:
            path.write_text(new)
            changed.append(path)
    if results is not None and results_dir is not None:
        target = repo / FIGURE_DIR
        target.mkdir(parents=True, exist_ok=True)
        for figure in (*FIGURES, *RUN_FILES):
            source = results_dir / figure
            if source.is_file():
                (target / figure).write_bytes(source.read_bytes())
                changed.append(target / figure)
    return changed
