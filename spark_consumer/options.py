"""Job options as values: durations, windows, aggregations — parsed without starting Spark.

Everything a user can get wrong on the command line is checked here, before the 10-second
SparkSession start, and raised as :class:`UsageError` whose message names the option, the value
and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

WindowKind = Literal["tumbling", "hopping", "session"]
AggFunction = Literal["count", "sum", "min", "max"]
AGG_FUNCTIONS: tuple[AggFunction, ...] = ("count", "sum", "min", "max")

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


#: The command's name, as its messages start.
PROG = "timesync-spark"


class UsageError(ValueError):
    """A bad option value; the message is one line meant for the user."""


_SECRET_WORDS = ("password", "secret", "token", "jaas", "credential")
_KEY = re.compile(r"[A-Za-z0-9_.\-]+")


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (``--kafka-option``, ``--conf``) as a pair; ``ValueError`` when there is no
    ``=`` or the key is not a dotted name (letters, digits, ``.``, ``_``, ``-``).

    The message never repeats a value: a pair such as ``kafka.sasl.jaas.config ...password="x";``
    typed without ``=`` would otherwise put a password into the error and the job's log. It names
    the key only when the text starts with one that is no secret's."""
    key, sep, value = text.partition("=")
    if sep and _KEY.fullmatch(key):
        return key, value
    head = re.split(r"[\s:=]", text.strip(), maxsplit=1)[0]
    if _KEY.fullmatch(head) and not any(word in head.lower() for word in _SECRET_WORDS):
        shown = repr(head) + (" followed by a hidden value" if head != text.strip() else "")
    else:
        shown = "a value (hidden: it may hold a secret)"
    raise ValueError(f"{shown} is not key=value")


def parse_duration(text: str, option: str, *, allow_zero: bool = False) -> int:
    """``"250ms"``, ``"5s"``, ``"2m"``, ``"1h"``, ``"1d"`` or a bare integer (ms) → milliseconds."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(
            f"{option}: {text!r} is not a duration; use e.g. 500ms, 5s, 2m, 1h (bare numbers are ms)"
        )
    ms = int(match.group(1)) * _UNITS_MS[match.group(2) or "ms"]
    if ms == 0 and not allow_zero:
        raise UsageError(f"{option}: {text!r} must be greater than zero")
    return ms


def check_field(path: str, option: str) -> str:
    """A dotted field path into the JSON value (``amount``, ``meta.device``)."""
    if not _FIELD.match(path):
        raise UsageError(f"{option}: {path!r} is not a field path; use names like amount or meta.device")
    return path


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A window over event time. ``slide_ms`` only for hopping, ``gap_ms`` only for session."""

    kind: WindowKind
    size_ms: int = 0
    slide_ms: int = 0
    gap_ms: int = 0

    def __post_init__(self) -> None:
        if self.kind == "session":
            if self.gap_ms <= 0:
                raise UsageError("--gap: a session window needs a gap greater than zero")
            return
        if self.size_ms <= 0:
            raise UsageError(f"--size: a {self.kind} window needs a size greater than zero")
        if self.kind == "hopping" and not 0 < self.slide_ms <= self.size_ms:
            raise UsageError(
                f"--slide: a hopping window needs 0 < slide <= size (size {self.size_ms} ms, "
                f"slide {self.slide_ms} ms)"
            )

    @property
    def step_ms(self) -> int:
        """Distance between window starts (the size for tumbling windows)."""
        return self.slide_ms if self.kind == "hopping" else self.size_ms

    def starts(self, ts: int) -> list[int]:
        """Starts of the tumbling/hopping windows containing ``ts``, earliest first.

        Windows are aligned to the epoch, as Spark's ``window()`` aligns them:
        ``[start, start + size)`` with ``start % step == 0``.
        """
        step = self.step_ms
        last = ts - ts % step
        first = last - ((self.size_ms - 1) // step) * step
        return [s for s in range(first, last + 1, step) if s <= ts < s + self.size_ms]


@dataclass(frozen=True, slots=True)
class AggSpec:
    """One aggregation: ``count``, or ``sum``/``min``/``max`` of a numeric value field."""

    function: AggFunction
    field: str | None = None

    @property
    def column(self) -> str:
        """Output column name: ``count``, ``sum_amount``, ``max_meta_temp``."""
        if self.field is None:
            return self.function
        return f"{self.function}_{self.field.replace('.', '_')}"

    @classmethod
    def parse(cls, text: str) -> AggSpec:
        """``count`` | ``count:FIELD`` | ``sum:FIELD`` | ``min:FIELD`` | ``max:FIELD``."""
        name, _, field = text.partition(":")
        if name not in AGG_FUNCTIONS:
            raise UsageError(
                f"--agg: {text!r} is not an aggregation; use count, sum:FIELD, min:FIELD or max:FIELD"
            )
        if name != "count" and not field:
            raise UsageError(f"--agg: {name} needs a field, e.g. {name}:amount")
        return cls(name, check_field(field, "--agg") if field else None)
