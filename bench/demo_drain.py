"""The demo's drain: how long after the producers stopped its last record came out (issue 34).

When the producers stop, the ordered topic still lacks the records the sidecar holds back for a
partition that might deliver something earlier. Counted from each partition's last arrival, the
wait is one ``max.task.idle.ms`` at most; under the rule it replaced (Kafka Streams': from when
each partition's buffer ran dry) the demo's eight partitions ran dry one after another and the
tail took 17.8 s at 2.5 s. The demo prints the drain and holds it to :data:`BOUND_S` over the
idle: the idle itself, plus a fetch and a write on a machine that may be busy.
"""

from __future__ import annotations

from collections.abc import Sequence

#: How far past the idle the drain may end: a fetch, a batch written, the reader's fetch.
BOUND_S = 2.0


def drain_s(producers_stopped_ms: float, arrivals_ms: Sequence[float]) -> float | None:
    """Seconds from the producers' stop to the last record a reader of the ordered topic received
    (both in ms on one clock); ``None`` when nothing came."""
    if not arrivals_ms:
        return None
    return max(0.0, (max(arrivals_ms) - producers_stopped_ms) / 1000)


def line(drain: float | None, idle_ms: int) -> str:
    """The demo's line about its drain, green within ``idle + BOUND_S``, red past it."""
    if drain is None:
        return "[red]drain: no record reached the ordered topic[/]"
    bound = idle_ms / 1000 + BOUND_S
    colour = "green" if drain <= bound else "red"
    return (
        f"[{colour}]drain: the last record came out {drain:.1f} s after the producers stopped[/] "
        f"(max.task.idle.ms={idle_ms}: at most one idle, counted from each partition's last arrival, "
        f"+ {BOUND_S:.0f} s; Kafka Streams' rule, from when each buffer ran dry, took 17.8 s here)"
    )
