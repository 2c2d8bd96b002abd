"""The extractors end to end (bench.extractors_e2e): what a drain's samples make of its row, what
each sidecar is told, where the rows appear (report, README block, results schema) and which
extractors a run drains. No broker: ``bench run --quick`` drains ``record`` and ``json:`` for
real (tests/bench/test_bench_quick.py); sizes here are tiny, and no figure is judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from bench import extractors, extractors_e2e, readmes
from bench.plan import RunFlags, plan
from bench.report_sections import extractors_e2e_section
from bench.systems import CpuSampler

SCHEMA = Path(__file__).resolve().parents[2] / "bench" / "results.schema.json"
#: The full run the READMEs show (before this phase existed): the rest of a results dict.
RECORDED = SCHEMA.parent / "figures" / "results.json"


def sampler(samples: list[tuple[int, float]]) -> CpuSampler:
    cpu = CpuSampler(pid=0)
    cpu.samples = samples
    return cpu


def test_the_figures_cover_the_middle_half_of_the_drain_alone() -> None:
    # 1,000 records: 0 until t=1000 ms (start-up), then 1 record/ms; the CPU runs at 0.5 s/s
    # throughout, start-up included.
    samples = [(0, 0), (1000, 0), (1250, 250), (1750, 750), (2000, 1000)]
    cpu = sampler([(0, 0.0), (2000, 1.0)])
    row = extractors_e2e.figures(samples, cpu, 1000, [b"x" * 250] * 1000)
    assert row == {"value_bytes": 250, "records_per_s": 1000, "cpu_us_per_record": 500.0}


def test_a_drain_too_short_to_time_is_refused_not_reported() -> None:
    done_at_once = [(0, 0), (10, 1000)]
    row = extractors_e2e.figures(done_at_once, sampler([(0, 0.0), (10, 0.01)]), 1000, [b"x"] * 1000)
    assert row["records_per_s"] == 100_000  # interpolated within one step: still a figure
    with pytest.raises(ValueError, match="drained too fast to time the middle of the drain"):
        extractors_e2e.figures([(10, 1000)], sampler([]), 1000, [b"x"] * 1000)


@pytest.mark.parametrize(
    ("spec", "registry"),
    [("record", False), ("json:meta.ts", False), ("avro:meta.ts", True), ("protobuf:meta.ts", True)],
)
def test_each_sidecar_reads_the_registry_only_for_a_format_with_schemas(spec: str, registry: bool) -> None:
    settings = extractors_e2e.sidecar_settings(spec, "t1", "http://registry:8080")
    assert settings["timestamp.extractor"] == spec
    assert settings["watermark.heartbeat.ms"] == 0  # the output holds the data alone
    assert ("schema.registry.url" in settings) is registry


def test_without_a_registry_record_and_json_read_the_same_json_and_avro_is_refused() -> None:
    ts, values = extractors_e2e.values_by_spec(20, ("record", "json:meta.ts"), None, "t1", seed=3)
    assert values["record"] is values["json:meta.ts"]
    assert [orjson.loads(v)["meta"]["ts"] for v in values["record"]] == ts
    with pytest.raises(ValueError, match=r"avro:meta\.ts reads its schemas from a registry"):
        extractors_e2e.values_by_spec(20, ("record", "avro:meta.ts"), None, "t1", seed=3)


def measured() -> dict[str, Any]:
    rows = {
        spec: {
            "value_bytes": 200,
            "records_per_s": 400_000,
            "cpu_us_per_record": 2.0 + i,
            "cpu_s_whole_run": 9.0,
        }
        for i, spec in enumerate(extractors.SPECS)
    }
    return extractors_e2e.summary(1_000_000, rows)


def test_the_rows_give_each_extractors_cpu_over_records() -> None:
    text = "\n".join(extractors_e2e_section(measured()))
    assert "draining 1,000,000 records per extractor" in text
    assert "| `record` | 200 | 400,000 | 2.00 | – |" in text
    assert "| `protobuf:meta.ts` | 200 | 400,000 | 5.00 | +3.00 |" in text


def test_the_readme_block_shows_the_end_to_end_rows_of_a_full_run() -> None:
    results = json.loads(RECORDED.read_text())
    results["extractors_e2e"] = measured()
    block = readmes.readme_blocks(results)["extractors"]
    assert "#### End to end" in block
    assert "| `avro:meta.ts` | 200 | 400,000 | 4.00 | +2.00 |" in block
    del results["extractors_e2e"]
    assert readmes.readme_blocks(results)["extractors"].endswith(
        "#### End to end\n\nNot measured in this run."
    )


def test_the_results_schema_takes_the_phase_and_refuses_a_row_without_its_rate() -> None:
    schema = json.loads(SCHEMA.read_text())
    phase = {**schema["properties"]["extractors_e2e"], "$defs": schema["$defs"]}
    jsonschema.validate(measured(), phase)
    jsonschema.validate(None, phase)  # a plan without the phase
    broken = measured()
    del broken["extractors"]["json:meta.ts"]["records_per_s"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, phase)


def test_a_full_run_drains_every_extractor_and_quick_only_those_without_a_registry() -> None:
    full, quick = plan(RunFlags()), plan(RunFlags(quick=True))
    assert full.extractor_e2e_specs == extractors.SPECS
    assert full.extractor_e2e_records == 1_000_000
    assert quick.extractor_e2e_specs == ("record", "json:meta.ts")
    assert not any(map(extractors_e2e.needs_registry, quick.extractor_e2e_specs))


def test_the_extractors_block_alone_comes_from_the_two_commands_and_leaves_the_rest(tmp_path: Path) -> None:
    """``python -m bench readme --extractors DIR`` rewrites that one block from the standalone
    commands' JSON; another block of the same README is left as it was."""
    from tests.bench.test_extractors import measured as in_process

    readme = tmp_path / "bench" / "README.md"
    readme.parent.mkdir()
    readme.write_text(
        "<!-- bench:extractors -->\nold\n<!-- /bench:extractors -->\n"
        "<!-- bench:results -->\nkept\n<!-- /bench:results -->\n"
    )
    stamp = {
        "quick": False,
        "measured_at": "2026-11-28T05:00:00+00:00",
        "load_average_at_start": [1.5],
        "load_average_at_end": [1.25],
    }
    changed = readmes.update_extractor_block({**in_process(0.4), **stamp}, {**measured(), **stamp}, tmp_path)
    assert changed == [readme]
    text = readme.read_text()
    assert "old" not in text
    assert "kept" in text
    assert "load average 1.50 at the start and 1.25 at the end" in text
    assert "| `avro:meta.ts` | 200 | 400,000 | 4.00 | +2.00 |" in text
