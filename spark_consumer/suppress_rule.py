"""The per-key suppression rule, as plain Python: the specification the Spark operator is held to.

``timesync-spark suppress`` runs this rule inside Spark as a JVM ``StatefulProcessor``
(``operators/suppress``); a differential test holds the two equal record for record. This
module needs no Spark: it is the rule, readable and testable on its own.

Theory of operation. Spark groups each micro-batch's records by key and hands every key its
records (in Kafka order of the ordered topic: the order the sidecar decided, which a replay
repeats); after all keys with records, it fires every event-time timer at or below the batch's
watermark (Spark 4.2 fires a timer when ``expiry <= watermark``). Per key:

- **Stream time** is the largest timestamp seen for that key; it never decreases.
- **Late.** A record is late for a window once the window's end + grace is at or below the
  key's stream time (taken after the record itself). A record late for every window it falls
  in is dropped and counted.
- **Final once.** At the end of the key's records in a batch, every window whose end + grace is
  at or below the key's stream time is emitted (``closed_by = "stream-time"``) and deleted.
- **Replays.** A record whose (source topic, partition, offset) the key has already taken is
  dropped, not counted. Identities are kept while a copy could still land in an open window.
- **TTL.** Each key holds one timer. A new key arms it at stream time + TTL. When it fires and
  the key's stream time has moved on (or the key had records in this batch), it is re-armed;
  otherwise the key is *evicted*: its open windows are emitted (``closed_by = "ttl"``), its
  windows and identities deleted, and its stream time moved up to the last emitted window's
  end + grace (the *closed horizon*), so a straggler for an emitted window is late.
- **Retention.** An evicted key's timer is armed at horizon + TTL + retention; when it fires
  the key is *forgotten* (counted), and a later record for it starts afresh. A record for an
  evicted key before then brings it back (its timer becomes a TTL timer again).
- A NULL key (a record without one) is a key like any other.
- A timer is never armed at or below the current watermark (Spark would fire it at once):
  it goes to watermark + 1 instead, so a key far behind expires at the next advance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from spark_consumer.options import AggSpec, WindowSpec

CLOSED_BY_STREAM_TIME = "stream-time"
CLOSED_BY_TTL = "ttl"

#: (source topic, source partition, source offset): what a replay of a record repeats.
Ident = tuple[str, int, int]
Aggregate = int | float | None


@dataclass(frozen=True, slots=True)
class Record:
    """One data record of a key: its replay identity, event time and one input per aggregation
    (``None`` when the field is absent; a ``count`` without field ignores its input)."""

    ident: Ident
    ts: int
    values: tuple[float | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Window:
    """An open window of a key: its end, the largest timestamp in it, one accumulator per
    aggregation (an ``int`` count, or a ``float`` that stays ``None`` until a value comes)."""

    end: int
    ts: int
    accs: tuple[Aggregate, ...]


@dataclass(frozen=True, slots=True)
class KeyState:
    """All a key remembers. ``timer`` is its one event-time timer; ``evicted`` is set while the
    key holds only its closed horizon (then ``windows`` and ``seen`` are empty)."""

    stream_time: int
    timer: int
    windows: Mapping[int, Window] = field(default_factory=dict)
    seen: Mapping[Ident, int] = field(default_factory=dict)
    evicted: bool = False


@dataclass(frozen=True, slots=True)
class Final:
    """A window's final result for a key, emitted once."""

    key: str | None
    window_start: int
    window_end: int
    aggregates: tuple[Aggregate, ...]
    ts: int
    closed_by: str


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What one micro-batch produced: finals (those of the keys with records first, then those
    of fired timers; the order across keys is not part of the rule), records dropped as late,
    keys forgotten."""

    finals: tuple[Final, ...]
    late: int
    forgotten: int


@dataclass(frozen=True, slots=True)
class SuppressRule:
    """The rule's parameters: the window, the grace, the TTL and the closed retention (ms)."""

    window: WindowSpec
    grace_ms: int
    ttl_ms: int
    retention_ms: int
    aggs: tuple[AggSpec, ...] = (AggSpec("count"),)

    # --- one key -------------------------------------------------------------------------------

    def on_records(
        self, key: str | None, state: KeyState | None, records: Sequence[Record], watermark: int
    ) -> tuple[KeyState, list[Final], int]:
        """A key's records of one batch (Kafka order, at least one) → its new state, the
        finals they close and how many records were late."""
        size, grace = self.window.size_ms, self.grace_ms
        stream_time = state.stream_time if state is not None else None
        windows = dict(state.windows) if state is not None else {}
        seen = dict(state.seen) if state is not None else {}
        late = 0
        for record in records:
            if record.ident in seen:
                continue  # a replayed copy: already counted
            seen[record.ident] = record.ts
            stream_time = record.ts if stream_time is None else max(stream_time, record.ts)
            accepted = False
            for start in self.window.starts(record.ts):
                if start + size + grace <= stream_time:
                    continue  # this window has closed for the key
                window = windows.get(start) or Window(start + size, -(2**63), self._empty())
                windows[start] = self._fold(window, record)
                accepted = True
            if not accepted:
                late += 1
        assert stream_time is not None  # a key's records are never an empty list

        finals = [
            self._final(key, start, windows.pop(start), CLOSED_BY_STREAM_TIME)
            for start in sorted(windows)
            if windows[start].end + grace <= stream_time
        ]
        horizon = stream_time - grace - size
        seen = {ident: ts for ident, ts in seen.items() if ts > horizon}
        if state is None or state.evicted:
            # New (or forgotten, or back from eviction): a TTL timer replaces any other.
            timer = self._arm(stream_time + self.ttl_ms, watermark)
        else:
            # The TTL timer stays at or before what the new stream time asks for; when it
            # fires early, on_timer moves it on.
            timer = state.timer
        return KeyState(stream_time, timer, windows, seen), finals, late

    def on_timer(
        self, key: str | None, state: KeyState, watermark: int, had_records: bool
    ) -> tuple[KeyState | None, list[Final]]:
        """The key's timer fired (it was at or below ``watermark``) → its new state (``None``:
        forgotten) and the finals an eviction emits. ``had_records``: the key had records in
        this batch, so it is not idle (it expires at the next watermark advance at the earliest)."""
        if state.evicted:
            return None, []
        if had_records or state.stream_time + self.ttl_ms > watermark:
            return replace(state, timer=self._arm(state.stream_time + self.ttl_ms, watermark)), []
        finals = [
            self._final(key, start, state.windows[start], CLOSED_BY_TTL) for start in sorted(state.windows)
        ]
        closed = max([state.stream_time, *(f.window_end + self.grace_ms for f in finals)])
        timer = self._arm(closed + self.ttl_ms + self.retention_ms, watermark)
        return KeyState(closed, timer, evicted=True), finals

    # --- one micro-batch -----------------------------------------------------------------------

    def run_batch(
        self, states: dict[str | None, KeyState], batch: Sequence[tuple[str | None, Record]], watermark: int
    ) -> BatchResult:
        """One micro-batch: ``batch`` is (key, record) in Kafka order, ``watermark`` the batch's
        event-time watermark. Updates ``states`` in place (a key absent is unknown)."""
        by_key: dict[str | None, list[Record]] = {}
        for key, record in batch:
            by_key.setdefault(key, []).append(record)
        finals: list[Final] = []
        late = forgotten = 0
        for key, records in by_key.items():
            states[key], emitted, dropped = self.on_records(key, states.get(key), records, watermark)
            finals += emitted
            late += dropped
        for key in [k for k, s in states.items() if s.timer <= watermark]:
            after, emitted = self.on_timer(key, states[key], watermark, key in by_key)
            finals += emitted
            if after is None:
                del states[key]
                forgotten += 1
            else:
                states[key] = after
        return BatchResult(tuple(finals), late, forgotten)

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _arm(expiry: int, watermark: int) -> int:
        return max(expiry, watermark + 1)

    def _empty(self) -> tuple[Aggregate, ...]:
        return tuple(0 if a.function == "count" else None for a in self.aggs)

    def _fold(self, window: Window, record: Record) -> Window:
        accs = list(window.accs)
        for i, spec in enumerate(self.aggs):
            v = record.values[i] if i < len(record.values) else None
            present = v is not None and not math.isnan(v)
            current = accs[i]
            if spec.function == "count":
                if spec.field is None or present:
                    accs[i] = int(current or 0) + 1
            elif present:
                assert v is not None
                if current is None:
                    accs[i] = float(v)
                elif spec.function == "sum":
                    accs[i] = float(current) + float(v)
                elif spec.function == "min":
                    accs[i] = min(float(current), float(v))
                else:
                    accs[i] = max(float(current), float(v))
        return Window(window.end, max(window.ts, record.ts), tuple(accs))

    @staticmethod
    def _final(key: str | None, start: int, window: Window, closed_by: str) -> Final:
        return Final(key, start, window.end, window.accs, window.ts, closed_by)
