"""Seeded workload generators: what arrives on which partition, with which event time, and when.

Each generator is pure: the same seed gives the same events. An event carries both its event
time (``ts``, what the record says) and its arrival offset (``send_at_ms``, when a live producer
would write it, relative to the start of the run). The skew between the two across partitions is
exactly what timesync has to undo.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import orjson


@dataclass(frozen=True, slots=True)
class Event:
    topic: str
    partition: int
    ts: int
    key: bytes | None
    value: bytes
    send_at_ms: int
    #: the record's own headers (a writer may add its own after them)
    headers: tuple[tuple[str, bytes], ...] = ()


def _value(ts: int, seq: int, **extra: object) -> bytes:
    return orjson.dumps({"ts": ts, "seq": seq, **extra})


def steady(
    topics: list[str], partitions: int, records: int, base_ms: int, seed: int = 1, rate_per_s: float = 1000.0
) -> list[Event]:
    """Equal rates on every partition; event time equals arrival time plus small jitter."""
    rng = random.Random(seed)
    tps = [(t, p) for t in topics for p in range(partitions)]
    step = 1000.0 / rate_per_s * len(tps)
    events = []
    for i in range(records):
        topic, part = tps[i % len(tps)]
        at = int((i // len(tps)) * step + rng.random() * step)
        events.append(
            Event(topic, part, base_ms + at, b"k%d" % rng.randrange(100), _value(base_ms + at, i), at)
        )
    return sorted(events, key=lambda e: e.send_at_ms)


def skewed(
    fast_topic: str,
    slow_topic: str,
    base_ms: int,
    duration_s: float = 10.0,
    fast_rate: float = 10_000.0,
    slow_rate: float = 1.0,
    slow_burst_every_s: float = 2.5,
    seed: int = 1,
) -> list[Event]:
    """KIP-353's case: a fast partition (``fast_rate``/s) beside a slow, bursty one.

    The slow partition's records are written late, in bursts every ``slow_burst_every_s``: a
    plain consumer sees them long after faster records with later timestamps.
    """
    rng = random.Random(seed)
    events: list[Event] = []
    n_fast = int(duration_s * fast_rate)
    for i in range(n_fast):
        ts = int(i * 1000.0 / fast_rate)
        events.append(Event(fast_topic, 0, base_ms + ts, b"f%d" % (i % 50), _value(base_ms + ts, i), ts))
    n_slow = max(1, int(duration_s * slow_rate * 10))  # bursts hold ~10x the nominal rate's share
    burst_ms = int(slow_burst_every_s * 1000)
    for i in range(n_slow):
        ts = int(rng.random() * duration_s * 1000)
        arrive = (ts // burst_ms + 1) * burst_ms  # held back until the next burst
        events.append(Event(slow_topic, 0, base_ms + ts, b"s%d" % (i % 5), _value(base_ms + ts, i), arrive))
    # Within a burst the slow producer writes in timestamp order (Kafka keeps per-partition order).
    events.sort(key=lambda e: (e.send_at_ms, e.topic != fast_topic, e.ts))
    return events


DAY_MS = 86_400_000


def iot_dump(
    topics: list[str],
    partitions: int,
    base_ms: int,
    sensors: int = 16,
    readings: int = 1440,
    dump_every_ms: int = 500,
    seed: int = 1,
) -> list[Event]:
    """The per-key stream-time case: each sensor dumps a whole day of readings at once.

    Sensor *s* lives on one partition (round robin over every topic-partition) and keeps its
    readings until its uplink comes back; then, ``s * dump_every_ms`` after the start, it writes
    the day (``readings`` records over the 24 hours before ``base_ms``, in time order) in one
    burst. Every sensor covers the same day, so each later dump is up to a day behind the records
    already merged: per-partition merging cannot repair per-key disorder.
    """
    rng = random.Random(seed)
    tps = [(t, p) for t in topics for p in range(partitions)]
    day_start = base_ms - DAY_MS
    step = DAY_MS // readings
    events: list[Event] = []
    seq = 0
    for s in range(sensors):
        topic, part = tps[s % len(tps)]
        key = b"sensor-%d" % s
        at = s * dump_every_ms
        for j in range(readings):
            ts = day_start + j * step + rng.randrange(step)
            events.append(Event(topic, part, ts, key, _value(ts, seq, sensor=s), at))
            seq += 1
    return sorted(events, key=lambda e: e.send_at_ms)  # stable: a dump stays in time order


def lagging(
    topics: list[str],
    partitions: int,
    records: int,
    base_ms: int,
    backlog: int,
    seed: int = 1,
    rate_per_s: float = 1000.0,
) -> tuple[list[Event], list[Event]]:
    """KIP-695's case: one partition holds a backlog on the broker while the others are live.

    Returns ``(backlog, live)``. The backlog (``backlog`` records on the last topic's last
    partition, written before the merger starts) carries that partition's older history: event
    times at the partition's own rate, ending at ``base_ms``. ``live`` is :func:`steady` over
    every partition. A merger that emits live records before it has fetched the whole backlog
    makes the rest of the backlog late; KIP-695 waits while the lag on the broker is > 0.
    """
    per_partition_step = 1000.0 / rate_per_s * len(topics) * partitions
    topic, part = topics[-1], partitions - 1
    old = [
        Event(
            topic,
            part,
            base_ms - int((backlog - i) * per_partition_step),
            b"k%d" % (i % 100),
            _value(base_ms - int((backlog - i) * per_partition_step), -1 - i),
            0,
        )
        for i in range(backlog)
    ]
    return old, steady(topics, partitions, records, base_ms, seed=seed, rate_per_s=rate_per_s)


def quiet(
    topics: list[str],
    partitions: int,
    records: int,
    base_ms: int,
    seed: int = 1,
    rate_per_s: float = 1000.0,
    silent_from: float = 0.3,
    silent_until: float = 0.6,
) -> list[Event]:
    """A partition goes silent, then resumes: :func:`steady`, minus the first partition's records
    between ``silent_from`` and ``silent_until`` (shares of the run's duration).

    Nothing is lost or delayed: the partition simply has no data then, so a merger waiting for it
    waits for nothing (``max.task.idle.ms`` decides for how long).
    """
    events = steady(topics, partitions, records, base_ms, seed=seed, rate_per_s=rate_per_s)
    end = events[-1].send_at_ms if events else 0
    lo, hi = silent_from * end, silent_until * end
    first = (topics[0], 0)
    return [e for e in events if not ((e.topic, e.partition) == first and lo <= e.send_at_ms < hi)]


_EVENTS = ("page_view", "search", "add_to_cart", "checkout", "login", "logout")
_PAGES = ("/", "/search", "/products/outdoor/tents/alpine-3p", "/products/kitchen/kettles/steel-17", "/cart")
_DEVICES = ("android", "ios", "web-desktop", "web-mobile")
_COUNTRIES = ("DE", "FR", "US", "GB", "NL", "PL", "ES", "IT", "SE", "JP")
_REFERRERS = ("https://www.google.com/", "https://news.example.org/a/2291", "https://t.co/x1q", "direct")


def clickstream(
    topics: list[str], partitions: int, records: int, base_ms: int, seed: int = 1, users: int = 50_000
) -> list[Event]:
    """A realistic record shape: JSON click events of about 250 bytes, keyed by user, each with
    one header (a W3C ``traceparent``), round robin over every partition, 1 ms apart per
    partition with up to 3 ms of jitter — written all at once (a backlog: ``send_at_ms`` 0).

    Beside the benchmark's 100-byte keyless records this is what a sizing user's traffic looks
    like: keys and a header to copy, values that compress like text, not like padding.
    """
    rng = random.Random(seed)
    tps = [(t, p) for t in topics for p in range(partitions)]
    n = len(tps)
    events = []
    for i in range(records):
        topic, part = tps[i % n]
        ts = base_ms + (i // n) * n + rng.randrange(4)
        user = rng.randrange(users)
        value = orjson.dumps(
            {
                "ts": ts,
                "seq": i,
                "user": f"u-{user:06d}",
                "session": f"{rng.getrandbits(64):016x}",
                "event": rng.choice(_EVENTS),
                "page": rng.choice(_PAGES),
                "device": rng.choice(_DEVICES),
                "country": rng.choice(_COUNTRIES),
                "item": {"sku": f"SKU-{rng.randrange(1_000_000):06d}", "qty": rng.randrange(1, 5)},
                "price_cents": rng.randrange(100, 50_000),
                "referrer": rng.choice(_REFERRERS),
            }
        )
        trace = b"00-%032x-%016x-01" % (rng.getrandbits(128), rng.getrandbits(64))
        events.append(Event(topic, part, ts, b"u-%06d" % user, value, 0, (("traceparent", trace),)))
    return events


WORKLOADS: dict[str, Callable[..., object]] = {
    "steady": steady,
    "skewed": skewed,
    "iot": iot_dump,
    "lagging": lagging,
    "quiet": quiet,
}


def out_of_order(timestamps: list[int]) -> tuple[int, int]:
    """(records below the running max, max lateness in ms) — what a reader in that order sees."""
    late = 0
    worst = 0
    high = -(2**63)
    for ts in timestamps:
        if ts < high:
            late += 1
            worst = max(worst, high - ts)
        else:
            high = ts
    return late, worst


def with_offsets(events: list[Event]) -> list[tuple[Event, int]]:
    """Each event with the offset it gets when written in list order to a fresh topic."""
    seen: dict[tuple[str, int], int] = {}
    out = []
    for e in events:
        offset = seen.get((e.topic, e.partition), 0)
        seen[(e.topic, e.partition)] = offset + 1
        out.append((e, offset))
    return out


def ad_traffic(
    impressions: str,
    clicks: str,
    base_ms: int,
    duration_s: float = 30.0,
    rate: float = 3_000.0,
    click_share: float = 0.1,
    partitions: int = 4,
    lagging_partition: int = 3,
    burst_every_ms: int = 1_000,
    lag_ms: int = 3_000,
    ads: int = 40,
    seed: int = 11,
) -> list[Event]:
    """Ad impressions and the clicks that follow them, keyed by ad, ``partitions`` each.

    One impressions partition is lagging and bursty: its producer runs ``lag_ms`` behind and
    writes every ``burst_every_ms`` the records of the interval that ended ``lag_ms`` earlier
    (its event times start ``lag_ms`` before the others' and it goes on ``lag_ms`` longer) — the
    partition that makes a plain consumer, and Spark reading it, see old impressions after newer
    ones. Clicks come 0.2–5 s after their impression and name it (``imp``), so a join can pair
    them. Event times are ``base_ms`` + the send time for every other partition.
    """
    rng = random.Random(seed)
    events: list[Event] = []
    per_partition = rate / partitions
    impression = 0
    for partition in range(partitions):
        lagging = partition == lagging_partition
        span_ms = duration_s * 1000 + (lag_ms if lagging else 0)
        for n in range(int(span_ms * per_partition / 1000)):
            at = int(n * 1000 / per_partition)
            ad = partition + partitions * rng.randrange(ads // partitions)
            key = b"ad-%d" % ad
            if lagging:
                ts, send_at = base_ms - lag_ms + at, (at // burst_every_ms + 1) * burst_every_ms
            else:
                ts, send_at = base_ms + at, at
            impression += 1
            events.append(Event(impressions, partition, ts, key, _ad_value(impression, ad, ts), send_at))
            if rng.random() < click_share:
                delay = rng.randrange(200, 5_000)
                click_ts = ts + delay
                events.append(
                    Event(
                        clicks,
                        partition,
                        click_ts,
                        key,
                        _ad_value(impression, ad, click_ts),
                        click_ts - base_ms,
                    )
                )
    # Within a partition, records are written in event-time order (Kafka keeps per-partition order).
    events = [e for e in events if e.send_at_ms >= 0]
    events.sort(key=lambda e: (e.send_at_ms, e.ts))
    return events


def _ad_value(impression: int, ad: int, ts: int) -> bytes:
    return orjson.dumps({"imp": f"i{impression}", "ad": f"ad-{ad}", "ts": ts})
