"""``python -m bench run --quick`` end to end: it finishes, and what it writes is complete.

One run of the whole harness against the session's broker — every system type (raw
passthrough, timesync, Kafka Streams, the offline optimum) and the Spark part — checked for
shape, not speed: results.json follows bench/results.schema.json, the plots are PNG files and
the report has its tables. Timing figures are the benchmark's output, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from bench import readmes

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "bench" / "results.schema.json"
# The quick run targets < 3 minutes; this bound leaves room for a cold Maven build of the Kafka
# Streams peer and a loaded machine.
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def quick_run(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench-quick")
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "CI": "true"}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--quick", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, f"bench run --quick failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_quick_run_writes_results_plots_and_report(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text())
    jsonschema.validate(results, json.loads(SCHEMA.read_text()))

    kinds = {r["system"]["kind"] for w in results["workloads"] for r in w["runs"]}
    assert kinds == {"passthrough", "timesync", "kafka-streams", "optimum"}
    shapes = {tp["shape"]: tp for tp in results["throughput"]}
    assert set(shapes) == {"keyless", "json"}
    assert {r["system"]["kind"] for r in shapes["keyless"]["runs"]} == {
        "passthrough",
        "rdkafka-copy",
        "timesync",
        "kafka-streams",
    }
    for tp in shapes.values():
        # Kafka's own tools ran on this broker and every drain finished; ratios exist.
        assert tp["ceiling"]["producer"]["records_per_s"] > 0
        assert tp["ceiling"]["consumer"]["records"] >= tp["records"]
        for run in tp["runs"]:
            assert run["complete"], f"{tp['shape']} / {run['system']['label']} did not drain the backlog"
            assert run["vs_ceiling"] is not None
    (ks,) = [r for r in shapes["keyless"]["runs"] if r["system"]["kind"] == "kafka-streams"]
    assert ks["system"]["profile"]["name"] == "tuned"
    assert ks["warmup_records"] > 0
    curve_points = {(r["partitions"], r["value_bytes"]) for r in results["curves"]["runs"]}
    assert curve_points == {(4, 100), (32, 100), (4, 1000)}
    for w in results["workloads"]:
        for r in w["runs"]:
            assert r["missing"] == 0, (
                f"{w['name']} / {r['system']['label']}: records never reached the output"
            )
    assert set(results["spark"]["jobs"]) == {"aggregate", "join"}
    # Every Spark job ran as the CLI runs it over the whole ordered backlog, in several batches.
    rates = results["spark_jobs"]
    assert set(rates["jobs"]) == {"aggregate", "join", "suppress"}
    for job, r in rates["jobs"].items():
        assert r["records"] == rates["records"], f"spark {job} read {r['records']} of {rates['records']}"
        assert r["micro_batches"] >= 2
        assert r["records_per_s"] is not None
        assert r["time_split_ms"]["batches"] >= 1, f"spark {job}: no batch after the first was split"

    # The sidecar drained the same records with each extractor of the quick plan, and stamped
    # the time each extractor reads (bench.extractors_e2e checks the output's edges).
    assert set(results["extractors_e2e"]["extractors"]) == {"record", "json:meta.ts"}

    plots = [quick_run / f"latency-disorder-{w['name']}.png" for w in results["workloads"]]
    plots += [quick_run / "throughput.png", quick_run / "latency-cdf.png"]
    plots += [quick_run / "curves-partitions.png", quick_run / "curves-record-size.png"]
    for plot in plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{plot.name} is not a PNG"

    report = (quick_run / "report.md").read_text()
    for heading in (
        "## Goals",
        "## Throughput",
        "### keyless",
        "### json",
        "## Cost curves",
        "## Spark",
        "## Spark jobs: records/s",
        "Where those batches spent their time",
        "## Timestamp extractors end to end",
        *(f"## {w['name']}" for w in results["workloads"]),
    ):
        assert heading in report

    # Every generated README block can be written from these results (not written here: a quick
    # run's figures are not measurements).
    blocks = readmes.readme_blocks(results)
    for readme in readmes.READMES:
        for name in readmes.block_names((REPO / readme).read_text()):
            assert blocks[name].strip(), f"{readme}: block {name} came out empty"
    assert "| timesync throughput ≥" in blocks["results"], (
        "the goals table is missing from bench/README's block"
    )
    assert "| suppress |" in blocks["results"], "the Spark jobs' rates are missing from the block"
    assert "bounds the pipeline" in blocks["sizing"]
    assert "| `json:meta.ts` |" in blocks["extractors"].split("#### End to end")[1]
