"""The extractor cost phase (bench.extractors): every extractor reads the same records' event
times, and the table and goal come from its results. Tiny sizes: no figure is judged here."""

from __future__ import annotations

from typing import Any

import orjson

from bench import extractors
from bench.goals import goals
from bench.report import extractors_section


def test_every_extractor_reads_the_same_event_times_of_the_same_records() -> None:
    cases = extractors.cases(50)
    assert [c.spec for c in cases] == list(extractors.SPECS)
    expected = [r.timestamp for r in cases[0].records]
    for case in cases:
        assert case.extractor.extract_all(case.records) == expected
    as_json = orjson.loads(cases[1].records[0].value or b"")
    assert 200 <= len(cases[1].records[0].value or b"") <= 300
    assert as_json["meta"]["ts"] == expected[0]


def test_a_run_gives_one_row_per_extractor_and_the_avro_figure_against_record() -> None:
    r = extractors.run(n=200, repeats=1)
    assert set(r["extractors"]) == set(extractors.SPECS)
    added = (
        r["extractors"]["avro:meta.ts"]["cpu_us_per_record"] - r["extractors"]["record"]["cpu_us_per_record"]
    )
    assert abs(r["avro_added_us_per_record"] - added) < 1e-6
    assert r["met"] == (r["avro_added_us_per_record"] <= extractors.AVRO_OVER_RECORD_US)


def measured(avro_added: float) -> dict[str, Any]:
    row = {"value_bytes": 250, "cpu_us_per_record": 0.01, "records_per_s": 100_000_000}
    return {
        "records": 1000,
        "repeats": 3,
        "extractors": {spec: dict(row) for spec in extractors.SPECS},
        "avro_added_us_per_record": avro_added,
        "target_avro_added_us_per_record": 0.5,
        "met": avro_added <= 0.5,
    }


def test_the_table_names_every_extractor_and_the_target() -> None:
    text = "\n".join(extractors_section(measured(0.7)))
    for spec in extractors.SPECS:
        assert f"`{spec}`" in text
    assert "adds 0.70 µs/record" in text
    assert "**not met**" in text


def test_the_goal_is_read_from_the_results_and_absent_runs_are_not_judged() -> None:
    base: dict[str, Any] = {"throughput": [{"runs": [], "order_checks": {}, "shape": "keyless",
                                           "ceiling": {"records_per_s": 1}}], "workloads": []}  # fmt: skip
    assert goals({**base, "extractors": measured(0.3)})["extractor_avro_over_record"]["met"] is True
    assert goals(base)["extractor_avro_over_record"]["met"] is None
