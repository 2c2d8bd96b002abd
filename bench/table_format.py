"""How a figure is written in the report's and the READMEs' tables."""

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
