"""``python -m bench ab --baseline REV``: this checkout's sidecar against REV's, in one run.

Why its own command: a change that should not cost speed (a redesign, a dependency bump) is
judged by the throughput phase before and after. Two runs minutes apart on a shared 2-core machine
differ by more than most regressions, so both sidecars drain the same backlog in the same run,
alternating, round after round, and the report gives, per record shape and setting, each side's
median rate, their ratio, and the spread of the per-round ratios — the machine's noise, beside
the figure it qualifies.

**The baseline** is REV's tree (``git archive``) in ``.cache/bench-ab/<sha>`` with its own
``.venv`` (``pip install -e``: its compiled parts built from its own sources), kept for the next
run. Its sidecar runs from that folder by that Python (:class:`testkit.sidecar_process.
SidecarProcess` ``checkout``); the backlog, the broker and the measurement are this checkout's
(:func:`bench.backlog.throughput_run`: records/s while the output grows from 25 % to 75 %).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.backlog import shape_events, throughput_run, write_backlog
from bench.environment import RunClock
from bench.progress import console, track
from bench.systems import SystemSpec

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "bench-ab"
#: What both sides run: the throughput phase's headline timesync settings and idle ``max``.
SETTINGS = (
    SystemSpec("timesync", "0"),
    SystemSpec("timesync", "0", "partition"),
    SystemSpec("timesync", "max"),
)
SHAPES = ("keyless", "json")


class BaselineError(RuntimeError):
    """The baseline cannot be prepared (an unknown revision, a failed install): one line to show."""


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BaselineError(f"git {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def resolve(rev: str) -> str:
    """The commit ``rev`` names (a full sha), or :class:`BaselineError` saying it names none."""
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except BaselineError:
        raise BaselineError(f"--baseline {rev}: not a commit of this repository") from None


def checkout(rev: str) -> Path:
    """REV's tree with an installed ``.venv``, prepared once and kept (see the module docstring)."""
    sha = resolve(rev)
    folder = CACHE / sha[:12]
    stamp = folder / ".venv" / ".installed"
    if stamp.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with track(f"baseline {sha[:12]}: tree and venv (once; kept in {folder.relative_to(REPO)})", total=None):
        with tempfile.TemporaryDirectory() as tmp:
            tar = Path(tmp) / "tree.tar"
            _git("archive", "--format=tar", "-o", str(tar), sha)
            with tarfile.open(tar) as archive:
                archive.extractall(folder, filter="data")
        steps = [
            [sys.executable, "-m", "venv", str(folder / ".venv")],
            [str(folder / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(folder)],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False, cwd=folder)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
                raise BaselineError(f"baseline {sha[:12]}: {' '.join(step[:4])} failed: {' | '.join(tail)}")
    stamp.touch()
    return folder


def schedule(settings: Sequence[SystemSpec], baseline: Path, rounds: int) -> list[tuple[int, SystemSpec]]:
    """Every setting on both sides, ``rounds`` times; each round starts one setting further on,
    and which side goes first alternates, so neither side always drains right after the other."""
    out = []
    for r in range(1, rounds + 1):
        shift = (r - 1) % len(settings)
        for spec in [*settings[shift:], *settings[:shift]]:
            pair = [spec, SystemSpec(spec.kind, spec.idle, spec.grouping, checkout=baseline)]
            out += [(r, s) for s in (pair if r % 2 else pair[::-1])]
    return out


@dataclass(frozen=True)
class Comparison:
    """One record shape and setting: this checkout's rounds against the baseline's."""

    shape: str
    setting: str
    rates: tuple[int | None, ...]  # this checkout, round by round
    baseline_rates: tuple[int | None, ...]
    cpu_us: tuple[float | None, ...]
    baseline_cpu_us: tuple[float | None, ...]

    @staticmethod
    def _median(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    def as_json(self) -> dict[str, Any]:
        rate, base = self._median(self.rates), self._median(self.baseline_rates)
        cpu, base_cpu = self._median(self.cpu_us), self._median(self.baseline_cpu_us)
        per_round = [a / b for a, b in zip(self.rates, self.baseline_rates, strict=True) if a and b]
        return {
            "shape": self.shape,
            "setting": self.setting,
            "records_per_s": rate,
            "baseline_records_per_s": base,
            "ratio": round(rate / base, 3) if rate and base else None,
            "per_round_ratios": [round(r, 3) for r in per_round],
            "cpu_us_per_record": cpu,
            "baseline_cpu_us_per_record": base_cpu,
            "cpu_ratio": round(cpu / base_cpu, 3) if cpu and base_cpu else None,
            "rates": list(self.rates),
            "baseline_rates": list(self.baseline_rates),
        }


def compare(shape: str, results: Sequence[tuple[SystemSpec, dict[str, Any]]]) -> list[Comparison]:
    """Pair each setting's runs on this checkout with its runs on the baseline, in round order."""
    out = []
    for spec in SETTINGS:
        mine = [r for s, r in results if s.label == spec.label]
        theirs = [r for s, r in results if s.checkout is not None and s.label.startswith(f"{spec.label} @")]
        if not mine or len(mine) != len(theirs):
            continue
        out.append(
            Comparison(
                shape,
                spec.label,
                tuple(r["records_per_s"] for r in mine),
                tuple(r["records_per_s"] for r in theirs),
                tuple(r.get("cpu_us_per_record") for r in mine),
                tuple(r.get("cpu_us_per_record") for r in theirs),
            )
        )
    return out


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    """The comparison table: one row per shape and setting, ratios > 1 meaning this checkout is
    faster (records/s) or spends more CPU per record (CPU)."""
    lines = [
        f"# timesync before/after — this checkout ({results['head']}) against {results['baseline']}",
        "",
        f"{results['records']:,} records per backlog, {results['rounds']} rounds alternating; load "
        f"average {results['load_average_at_start'][0]:.2f} at the start, "
        f"{results['load_average_at_end'][0]:.2f} at the end. Ratio = this ÷ baseline of the median "
        "rates; the per-round ratios show the noise.",
        "",
        "| shape | setting | records/s | baseline | ratio | per-round ratios | CPU µs/record | baseline | "
        "CPU ratio |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for c in results["comparisons"]:
        rounds = ", ".join(f"{r:.2f}" for r in c["per_round_ratios"]) or "–"
        lines.append(
            f"| {c['shape']} | {c['setting']} | {_fmt(c['records_per_s'])} | "
            f"{_fmt(c['baseline_records_per_s'])} | {_fmt(c['ratio'], 3)} | {rounds} | "
            f"{_fmt(c['cpu_us_per_record'], 2)} | {_fmt(c['baseline_cpu_us_per_record'], 2)} | "
            f"{_fmt(c['cpu_ratio'], 3)} |"
        )
    return "\n".join(lines) + "\n"


async def run(
    bootstrap: str, baseline: Path, rev: str, records: int, rounds: int, out: Path
) -> dict[str, Any]:
    """Both sidecars on each shape's backlog, ``rounds`` times (see the module docstring)."""
    tag = uuid.uuid4().hex[:6]
    log_dir = out / "ab-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    clock = RunClock()
    comparisons: list[dict[str, Any]] = []
    for shape in SHAPES:
        topics = [f"bench-{tag}-ab-{shape}-a", f"bench-{tag}-ab-{shape}-b"]
        backlog = await write_backlog(
            bootstrap, shape, shape_events(shape, topics, 2, records, 42), topics, 2, f"ab ({shape})"
        )
        plan = schedule(SETTINGS, baseline, rounds)
        done: list[tuple[SystemSpec, dict[str, Any]]] = []
        with track(f"ab ({shape}): drains", total=len(plan)) as bar:
            for i, (round_no, spec) in enumerate(plan):
                result, _ = await throughput_run(
                    bootstrap, f"{tag}-{shape}", spec, backlog, log_dir, False, round_no
                )
                console.print(
                    f"  {shape:<8} {spec.label:<44} {result['records_per_s'] or 0:>9,} records/s  "
                    f"cpu {result['cpu_us_per_record'] or 0:.2f} µs/record  (round {round_no})"
                )
                done.append((spec, result))
                bar.update(i + 1)
        comparisons += [c.as_json() for c in compare(shape, done)]
    return {
        "head": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "baseline": rev,
        "baseline_sha": resolve(rev),
        "records": records,
        "rounds": rounds,
        **clock.stamp(),
        "comparisons": comparisons,
    }
