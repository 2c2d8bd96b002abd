"""The extractor cost phase (bench.extractors): every extractor reads the same records' event
times, and the table and goal come from its results. Tiny sizes: no figure is judged here."""

from __future__ import annotations

from typing import Any

import orjson

from bench import extractors
from bench.goals import extractor_goal, goals
from bench.report import extractors_section
from bench.report_goals import _extractor_rows


def test_every_extractor_reads_the_same_event_times_of_the_same_records() -> None:
    cases = extractors.cases(50)
    assert [c.spec for c in cases] == list(extractors.SPECS)
    expected = [r.timestamp for r in cases[0].records]
    for case in cases:
        assert case.extractor.extract_all(case.records) == expected
    as_json = orjson.loads(cases[1].records[0].value or b"")
    assert 200 <= len(cases[1].records[0].value or b"") <= 300
    assert as_json["meta"]["ts"] == expected[0]


def test_a_run_gives_one_row_per_extractor_and_each_figure_against_record() -> None:
    r = extractors.run(n=200, repeats=1)
    assert set(r["extractors"]) == set(extractors.SPECS)
    base = r["extractors"]["record"]["cpu_us_per_record"]
    for spec in ("json:meta.ts", "avro:meta.ts", "protobuf:meta.ts"):
        assert (
            abs(r["added_us_per_record"][spec] - (r["extractors"][spec]["cpu_us_per_record"] - base)) < 1e-6
        )
    assert r["avro_added_us_per_record"] == r["added_us_per_record"]["avro:meta.ts"]
    assert r["met"] == all(us <= extractors.AVRO_OVER_RECORD_US for us in r["added_us_per_record"].values())


def measured(avro_added: float) -> dict[str, Any]:
    row = {"value_bytes": 250, "cpu_us_per_record": 0.01, "records_per_s": 100_000_000}
    return {
        "records": 1000,
        "repeats": 3,
        "extractors": {spec: dict(row) for spec in extractors.SPECS},
        "added_us_per_record": {"json:meta.ts": 0.2, "avro:meta.ts": avro_added, "protobuf:meta.ts": 0.3},
        "avro_added_us_per_record": avro_added,
        "target_avro_added_us_per_record": 0.5,
        "met": avro_added <= 0.5,
    }


def test_the_table_names_every_extractor_and_the_target() -> None:
    text = "\n".join(extractors_section(measured(0.7)))
    for spec in extractors.SPECS:
        assert f"`{spec}`" in text
    assert "`json:` +0.20, `avro:` +0.70, `protobuf:` +0.30" in text
    assert "**not met**" in text


def test_the_goal_is_read_from_the_results_and_absent_runs_are_not_judged() -> None:
    base: dict[str, Any] = {"throughput": [{"runs": [], "order_checks": {}, "shape": "keyless",
                                           "ceiling": {"records_per_s": 1}}], "workloads": []}  # fmt: skip
    within = goals({**base, "extractors": measured(0.3)})["extractors_over_record"]
    assert within["met"] is True
    assert within["added_us_per_record"] == {
        "json:meta.ts": 0.2,
        "avro:meta.ts": 0.3,
        "protobuf:meta.ts": 0.3,
    }
    assert goals({**base, "extractors": measured(0.7)})["extractors_over_record"]["met"] is False
    assert goals(base)["extractors_over_record"]["met"] is None


def test_the_goal_row_gives_each_extractor_its_figure_and_a_run_of_before_gives_avro_alone() -> None:
    row = "\n".join(
        _extractor_rows({"extractors_over_record": extractor_goal({"extractors": measured(0.7)})})
    )
    assert "`json:`, `avro:`, `protobuf:`: each adds ≤ 0.5 µs/record" in row
    assert "`json:` +0.20, `avro:` +0.70, `protobuf:` +0.30 µs/record | **no** |" in row
    before = {k: v for k, v in measured(0.3).items() if k != "added_us_per_record"}
    row = "\n".join(_extractor_rows({"extractors_over_record": extractor_goal({"extractors": before})}))
    assert "`avro:` +0.30 µs/record | yes |" in row
