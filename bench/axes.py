"""How an axis of a bench plot reads: linear or symlog, chosen from its values, with plain ticks.

Every figure the bench draws (:mod:`bench.plots`, the demo's :mod:`bench.demo_arrivals`) sets
its numeric axes through :func:`set_axis`, so that each reads at a glance:

* **Linear** unless the values span a decade or more (the largest magnitude at least 10× the
  smallest one that is not noise): then **symlog**, linear within ``linthresh`` of 0 so that 0 and
  negative values still show, with ``linthresh`` the power of ten at or above the smallest such
  magnitude (the smallest values sit in the linear part, not on a decade of their own).
  ``resolution`` is the smallest difference that means something on that axis (1 ms, one record,
  0.01 %): magnitudes below it count as 0, so noise never turns an axis logarithmic.
* **Plain tick labels**: ``0``, ``25``, ``1,000``, ``−10``, ``0.05`` — never ``10^1``,
  ``3.55×10^0`` or an offset above the axis. Symlog ticks sit at 0 and the powers of ten (and at
  their doubles and fives when the values span two decades or less, so a short axis has ticks).
* **A sensible range when every value is the same** (a panel where no record was out of order):
  a unit either side of it (from 0 up, for a quantity that cannot be negative), instead of
  matplotlib's ±5 % of nothing.

Pure functions of the values (:func:`choose_scale`, :func:`plain_number`) hold the rules and are
tested without drawing; :func:`set_axis` applies them to a matplotlib axis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import matplotlib.ticker

#: Symlog when the magnitudes span at least this ratio (a decade).
SYMLOG_SPAN = 10.0
#: Up to this many decades of symlog, ticks at 1, 2 and 5 times each power of ten; beyond, at 1.
FINE_DECADES = 2.0
#: Major ticks on a symlog axis at most: more decades are thinned.
SYMLOG_TICKS = 8
#: Margin either side of the values on a linear axis, as a share of their span.
MARGIN = 0.05
#: Significant digits a tick label keeps (at least: whole numbers keep every digit).
SIGNIFICANT = 4
MINUS = "\N{MINUS SIGN}"  # as matplotlib's own formatters write it


@dataclass(frozen=True, slots=True)
class Scale:
    """An axis' scale: ``linear`` or ``symlog`` (with its ``linthresh`` and the multiples of each
    power of ten it ticks, ``subs``), and the limits to set (``None``: matplotlib's autoscaling
    around the values will do)."""

    kind: Literal["linear", "symlog"]
    linthresh: float | None = None
    limits: tuple[float, float] | None = None
    subs: tuple[float, ...] = (1.0,)


def choose_scale(values: Iterable[float | None], resolution: float = 1.0, nonnegative: bool = False) -> Scale:
    """The scale for an axis showing ``values`` (``None`` and non-finite ones ignored).

    ``nonnegative``: the quantity cannot be below 0 (a count, a share), so a range chosen here
    starts at 0 rather than below it.
    """
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return Scale("linear", limits=(0.0, 1.0))
    lo, hi = min(finite), max(finite)
    if lo == hi:
        return Scale("linear", limits=_around(lo, resolution, nonnegative))
    meaningful = [abs(v) for v in finite if abs(v) >= resolution]
    if not meaningful or max(meaningful) / min(meaningful) < SYMLOG_SPAN:
        return Scale("linear")
    linthresh = 10.0 ** math.ceil(math.log10(min(meaningful)))
    decades = math.log10(max(meaningful) / linthresh)
    return Scale("symlog", linthresh=linthresh, subs=(1.0, 2.0, 5.0) if decades <= FINE_DECADES else (1.0,))


def _around(value: float, resolution: float, nonnegative: bool) -> tuple[float, float]:
    """Limits for an axis whose values are all ``value``: a unit either side (the value's own
    power of ten, at least ``resolution``), from 0 up for a quantity that cannot be negative."""
    unit = max(resolution, 10.0 ** math.floor(math.log10(abs(value)))) if value else max(resolution, 1.0)
    lo, hi = value - unit, value + unit
    if nonnegative and lo < 0 <= value:
        lo = 0.0
    pad = MARGIN * (hi - lo)
    return lo - pad, hi + pad


def plain_number(value: float, _position: Any = None) -> str:
    """A tick label as a reader writes the number: thousands separated, no exponent, no trailing
    zeros, a true minus sign (``1,000``, ``2.5``, ``0.125``, ``−10``); ``SIGNIFICANT`` digits."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = abs(value)
    decimals = max(0, SIGNIFICANT - 1 - math.floor(math.log10(magnitude)))
    text = f"{magnitude:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return MINUS + text if value < 0 else text


def set_axis(
    ax: Any,
    which: Literal["x", "y"],
    values: Iterable[float | None],
    resolution: float = 1.0,
    nonnegative: bool = False,
    integer: bool = False,
) -> Scale:
    """Set the scale, limits, ticks and tick labels of ``ax``'s ``which`` axis for ``values``
    (see the module docstring); ``integer``: a count, ticked at whole numbers only."""
    scale = choose_scale(values, resolution, nonnegative)
    axis = ax.xaxis if which == "x" else ax.yaxis
    if scale.kind == "symlog":
        assert scale.linthresh is not None
        (ax.set_xscale if which == "x" else ax.set_yscale)("symlog", linthresh=scale.linthresh)
        locator = matplotlib.ticker.SymmetricalLogLocator(base=10, linthresh=scale.linthresh, subs=scale.subs)
        locator.set_params(numticks=SYMLOG_TICKS)
        axis.set_major_locator(locator)
        axis.set_minor_locator(matplotlib.ticker.NullLocator())
    else:
        (ax.set_xscale if which == "x" else ax.set_yscale)("linear")
        axis.set_major_locator(
            matplotlib.ticker.MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=integer)
        )
    if scale.limits is not None:
        (ax.set_xlim if which == "x" else ax.set_ylim)(*scale.limits)
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(plain_number))
    return scale


def plain_ticks(ax: Any, which: Literal["x", "y", "both"] = "both") -> None:
    """Plain labels (:func:`plain_number`) on an axis whose scale the caller chose itself."""
    axes = (ax.xaxis, ax.yaxis) if which == "both" else ((ax.xaxis,) if which == "x" else (ax.yaxis,))
    for axis in axes:
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(plain_number))
