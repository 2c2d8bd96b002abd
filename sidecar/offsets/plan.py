"""Where a reset moves each input partition's committed offset: pure, no Kafka.

The rules are those of Kafka's ``kafka-consumer-groups --reset-offsets``, so an operator who knows
that tool gets no surprise:

- ``earliest``: the log start offset; ``latest``: the end offset (nothing is replayed);
- ``datetime T`` and ``duration D`` (``T = now - D``): the first offset whose record timestamp is
  at or after ``T`` (Kafka's ListOffsets by time), or the end offset when every record is older;
- ``offset N``: ``N`` on every partition, clamped into ``[log start, end]`` (an offset outside the
  log would be reset again by ``auto.offset.reset`` at start, silently).

Every record whose timestamp is at or after ``T`` lies at or after the new offset (the offset is
the *first* such record), so a replay from a time loses nothing from ``T`` on; records before
``T`` that were written after it (late ones) are replayed too.

:func:`plan` takes what the adapter read (:class:`PartitionFacts`) and returns one
:class:`Move` per partition; :func:`table` turns the moves into rows to print.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Mode = Literal["earliest", "latest", "datetime", "duration", "offset"]


class PlanError(ValueError):
    """A reset target that cannot be understood; the message says what is accepted."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the operator asked for. ``at_ms`` is set for ``datetime`` and ``duration`` (resolved
    against the clock by :func:`target`), ``offset`` for ``offset``."""

    mode: Mode
    at_ms: int | None = None
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionFacts:
    """One input partition as the broker sees it: the group's committed offset (``None``: never
    committed), the log start and end offsets, and, for a reset by time, the first offset at or
    after the time (``None``: every record is older)."""

    topic: str
    partition: int
    committed: int | None
    earliest: int
    end: int
    by_time: int | None = None


@dataclass(frozen=True, slots=True)
class Move:
    topic: str
    partition: int
    current: int | None
    new: int

    @property
    def change(self) -> int | None:
        """Records the group will read again (negative: skip); ``None`` if it never committed."""
        return None if self.current is None else self.current - self.new


_DURATION = re.compile(
    r"P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


def parse_duration(text: str) -> timedelta:
    """An ISO-8601 duration of days, hours, minutes and seconds (``PT2H``, ``P1DT30M``,
    ``PT0.5S``). Months and years are refused: their length depends on the calendar."""
    match = _DURATION.fullmatch(text.strip().upper())
    if match is None or not any(match.groupdict().values()) or text.strip().upper().endswith("T"):
        raise PlanError(f"--by-duration {text!r} is not an ISO-8601 duration like PT2H, PT30M or P1DT12H")
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    try:
        return timedelta(
            days=parts.get("d", 0.0),
            hours=parts.get("h", 0.0),
            minutes=parts.get("m", 0.0),
            seconds=parts.get("s", 0.0),
        )
    except OverflowError:
        raise PlanError(
            f"--by-duration {text!r} is longer than any log (at most {timedelta.max.days} days); "
            "--to-earliest replays everything"
        ) from None


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 time with a zone (``2026-11-25T12:00:00Z``,
    ``...+01:00``). A time without a zone is refused rather than guessed (local? UTC?): a replay
    from the wrong hour is the mistake this command exists to avoid."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise PlanError(f"--to-datetime {text!r} is not an ISO-8601 time like 2026-11-25T12:00:00Z") from None
    if at.tzinfo is None:
        raise PlanError(f"--to-datetime {text!r} has no time zone: add Z (UTC) or an offset like +01:00")
    return int(at.timestamp() * 1000)


def target(mode: Mode, value: str | None, now_ms: int) -> Target:
    """The operator's choice as a :class:`Target`, times resolved against ``now_ms``."""
    if mode == "datetime":
        return Target(mode, at_ms=parse_datetime(value or ""))
    if mode == "duration":
        span = parse_duration(value or "")
        return Target(mode, at_ms=now_ms - int(span.total_seconds() * 1000))
    if mode == "offset":
        try:
            offset = int(value or "")
        except ValueError:
            raise PlanError(f"--to-offset {value!r} is not a whole number") from None
        if offset < 0:
            raise PlanError(f"--to-offset {offset} is negative: offsets start at 0")
        return Target(mode, offset=offset)
    return Target(mode)


def new_offset(facts: PartitionFacts, goal: Target) -> int:
    """Where one partition goes (see the module's rules)."""
    if goal.mode == "earliest":
        return facts.earliest
    if goal.mode == "latest":
        return facts.end
    if goal.mode in ("datetime", "duration"):
        return facts.end if facts.by_time is None else min(max(facts.by_time, facts.earliest), facts.end)
    assert goal.offset is not None
    return min(max(goal.offset, facts.earliest), facts.end)


def plan(partitions: Sequence[PartitionFacts], goal: Target) -> list[Move]:
    """One move per partition, in topic and partition order."""
    ordered = sorted(partitions, key=lambda f: (f.topic, f.partition))
    return [Move(f.topic, f.partition, f.committed, new_offset(f, goal)) for f in ordered]


HEADER = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "REPLAYED")


def table(moves: Sequence[Move]) -> list[tuple[str, ...]]:
    """The plan as rows of text under :data:`HEADER`; ``-`` where the group never committed.
    ``REPLAYED`` is how many records the group reads again (negative: how many it skips)."""
    return [
        (
            m.topic,
            str(m.partition),
            "-" if m.current is None else str(m.current),
            str(m.new),
            "-" if m.change is None else f"{m.change:+d}" if m.change else "0",
        )
        for m in moves
    ]


def plain(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Rows as aligned plain-text lines under the header (for logs, pipes and CI)."""
    everything = [HEADER, *rows]
    widths = [max(len(r[i]) for r in everything) for i in range(len(HEADER))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in everything]
