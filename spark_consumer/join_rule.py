"""The interval join of two sides, as plain Python: the specification the Spark operator is held to.

``timesync-spark join`` runs this rule inside Spark as a JVM ``StatefulProcessor``
(``operators/join``); a differential test holds the two equal batch for batch, and holds both to
the result of Spark's own stream-stream join. This module needs no Spark: it is the rule,
readable and testable on its own.

Theory of operation. The ordered topic interleaves several input topics; the *left* side is the
records of one of them, the *right* side those of another. A left record ``l`` and a right record
``r`` *pair* when their keys are equal (and not NULL) and ``|l.ts − r.ts| <= within``. Spark runs
micro-batches; each has two watermarks: the *late* watermark (the previous batch's watermark, 0
before the first) and its own, *current* one ``W`` (max event time seen before the batch − the
delay; never decreasing).

- **Late.** A record with ``ts <= late watermark`` is dropped and counted (Spark filters it
  before the operator, as before its own join; ``numRowsDroppedByWatermark``).
- **Held.** Per key and side, the records taken and not yet evicted, with a *matched* mark.
- **Replays.** A record whose replay identity (source partition and offset, within its side's
  topic) its side already holds is dropped, not counted. The replay of a record already evicted
  is always late: it was evicted once some ``W > ts + within >= ts``, and every later batch's
  late watermark is at least that ``W``.
- **Pairs.** Each record of the batch (the key's records in any order: the result does not
  depend on it) pairs with every record the other side holds within ``within``; each pair comes
  out once, at the batch of the later of its two records, with ``ts = max(l.ts, r.ts)``. Both
  are marked matched. The record is then held. A NULL key pairs with nothing; such a record is
  held only on an outer side (below), where it must come out unmatched.
- **Eviction.** After the batch's records, every held record with ``ts + within < W`` leaves
  (Spark's join evicts at the same bound: its state watermark is ``W − within − 1``, inclusive).
  No later record can pair with it: a later record on time has ``ts > W``. On an *outer* side
  (the left one for ``--how left``, both for ``outer``) a record that never matched comes out
  then, unmatched: its own ``ts``, the other side NULL. So an unmatched row comes out at the
  first batch whose watermark passes its time + ``within``, and only then.

What follows (held by the tests): after the watermark has passed every record, the output is
exactly the interval join of the records that were on time, each once — every pair once, every
outer record without a pair once — whatever the micro-batches were and however often records
were replayed. What the ordered topic adds is speed, not meaning: each side's held records are
kept in event-time order, so a record in order is appended, its partners are a range at the
end, and eviction takes a prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

Side = Literal["left", "right"]
How = Literal["inner", "left", "outer"]
LEFT: Side = "left"
RIGHT: Side = "right"
HOW: tuple[How, ...] = ("inner", "left", "outer")

#: (source partition, source offset) within its side's topic: what a replay of a record repeats.
Ident = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a side: its replay identity, event time (epoch ms) and value (opaque here)."""

    side: Side
    ident: Ident
    ts: int
    value: object = None


@dataclass(frozen=True, slots=True)
class Held:
    """A record a key holds, and whether it has paired yet."""

    record: Record
    matched: bool = False


@dataclass(frozen=True, slots=True)
class KeyState:
    """All a key remembers: each side's held records, in event-time order (ties: arrival)."""

    left: tuple[Held, ...] = ()
    right: tuple[Held, ...] = ()

    def side(self, side: Side) -> tuple[Held, ...]:
        return self.left if side == LEFT else self.right

    @property
    def empty(self) -> bool:
        return not self.left and not self.right


@dataclass(frozen=True, slots=True)
class Joined:
    """One output row: a pair, or an unmatched record of an outer side (the other side ``None``)."""

    key: str | None
    ts: int
    left_ts: int | None
    right_ts: int | None
    left: object
    right: object


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What one micro-batch produced: its output rows (those of the keys with records, then those
    of the evictions; the order is not part of the rule) and the records dropped as late."""

    joined: tuple[Joined, ...]
    late: int


@dataclass(frozen=True, slots=True)
class JoinRule:
    """The rule's parameters: the bound (ms, inclusive) and which sides are outer."""

    within_ms: int
    how: How = "inner"

    def __post_init__(self) -> None:
        if self.within_ms < 0 or self.how not in HOW:
            raise ValueError(f"join: within {self.within_ms} ms must be >= 0 and how one of {HOW}")

    def outer(self, side: Side) -> bool:
        """Whether an unmatched record of ``side`` comes out (``left``: the left side; ``outer``: both)."""
        return self.how == "outer" or (self.how == "left" and side == LEFT)

    # --- one key -------------------------------------------------------------------------------

    def on_records(
        self, key: str | None, state: KeyState | None, records: Sequence[Record]
    ) -> tuple[KeyState, list[Joined]]:
        """A key's on-time records of one batch → its state with them held, and the pairs."""
        held = {LEFT: list(state.left if state else ()), RIGHT: list(state.right if state else ())}
        out: list[Joined] = []
        for record in records:
            mine, other = held[record.side], held[RIGHT if record.side == LEFT else LEFT]
            if any(h.record.ident == record.ident for h in mine):
                continue  # a replayed copy
            matched = False
            for i, h in enumerate(other):
                if key is not None and abs(h.record.ts - record.ts) <= self.within_ms:
                    out.append(self._pair(key, record, h.record))
                    other[i] = replace(h, matched=True)
                    matched = True
            if key is not None or self.outer(record.side):
                mine.append(Held(record, matched))
                mine.sort(key=lambda h: h.record.ts)  # stable: ties keep their arrival order
        return KeyState(tuple(held[LEFT]), tuple(held[RIGHT])), out

    def evict(self, key: str | None, state: KeyState, watermark: int) -> tuple[KeyState | None, list[Joined]]:
        """Held records with ``ts + within < watermark`` leave; an outer side's unmatched ones come
        out. ``None``: the key holds nothing any more (it is forgotten)."""
        out: list[Joined] = []
        kept: dict[Side, tuple[Held, ...]] = {}
        for side in (LEFT, RIGHT):
            kept[side] = tuple(h for h in state.side(side) if h.record.ts + self.within_ms >= watermark)
            if self.outer(side):
                out += [
                    self._unmatched(key, h.record)
                    for h in state.side(side)
                    if h.record.ts + self.within_ms < watermark and not h.matched
                ]
        after = KeyState(kept[LEFT], kept[RIGHT])
        return (None if after.empty else after), out

    # --- one micro-batch -----------------------------------------------------------------------

    def run_batch(
        self,
        states: dict[str | None, KeyState],
        batch: Sequence[tuple[str | None, Record]],
        late_watermark: int,
        watermark: int,
    ) -> BatchResult:
        """One micro-batch: ``batch`` is (key, record) in Kafka order; ``late_watermark`` the
        previous batch's watermark, ``watermark`` this one's. Updates ``states`` in place (a key
        absent holds nothing)."""
        by_key: dict[str | None, list[Record]] = {}
        late = 0
        for key, record in batch:
            if record.ts <= late_watermark:
                late += 1
            else:
                by_key.setdefault(key, []).append(record)
        joined: list[Joined] = []
        for key, records in by_key.items():
            states[key], pairs = self.on_records(key, states.get(key), records)
            joined += pairs
        for key in list(states):
            after, unmatched = self.evict(key, states[key], watermark)
            joined += unmatched
            if after is None:
                del states[key]
            else:
                states[key] = after
        return BatchResult(tuple(joined), late)

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _pair(key: str | None, record: Record, partner: Record) -> Joined:
        left, right = (record, partner) if record.side == LEFT else (partner, record)
        return Joined(key, max(left.ts, right.ts), left.ts, right.ts, left.value, right.value)

    @staticmethod
    def _unmatched(key: str | None, record: Record) -> Joined:
        if record.side == LEFT:
            return Joined(key, record.ts, record.ts, None, record.value, None)
        return Joined(key, record.ts, None, record.ts, None, record.value)
