"""How a figure reads in the bench's tables and plots: :func:`fmt`, and the words for the cost curves'
metrics and growth. Shared by the report (:mod:`bench.report`), the README blocks
(:mod:`bench.readmes`) and the plots (:mod:`bench.plots`).
"""

from __future__ import annotations

from typing import Any


def fmt(value: Any, unit: str = "") -> str:
    """A figure for a table: thousands separated, a float under 100 to 3 significant digits, – for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3g}{unit}" if abs(value) < 100 else f"{value:,.0f}{unit}"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value}{unit}"


#: What each cost-curve metric is called, in the tables and on the plots.
CURVE_LABELS = {
    "records_per_s": "records/s",
    "cpu_us_per_record": "CPU µs / record",
    "peak_rss_mib": "peak RSS MiB",
}


GROWTH_WORDS = {
    "flat": "stays flat",
    "linear": "grows linearly",
    "sub-linear": "grows sub-linearly",
    "super-linear": "grows faster than linearly",
    "falls": "falls",
    None: "could not be fitted",
}
