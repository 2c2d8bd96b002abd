"""Fetched record batches, mutated, fed to the sidecar's reader (``sidecar/kafka/_fetched.pyx``).

Each input is a fetch response of one to three Kafka v2 record batches, built valid (every codec,
keys and values null or not, header keys that are not UTF-8, LogAppendTime, extreme timestamps)
and then broken: record bytes mutated before compression, batch bytes flipped, inserted,
deleted or truncated, varints and header fields (length, record count, last offset delta,
attributes, magic) set to extremes, a batch inflating past the bound — and most CRCs fixed
again so that the breakage reaches the decoder rather than stopping at the CRC. The reader must:

* raise nothing but its verdict, :class:`~sidecar.kafka.unreadable.UnreadableRecords`, whose
  offsets are where it stood and past it, with the reader ended and its position after them;
* return within a bound on every call (``--max-call-s``);
* give the records aiokafka's own reader gives, on every input both accept (all of its batches
  in the v2 format: aiokafka 0.14 misreads a response mixing formats).

``python -m testkit.fuzz.batches --inputs N [--seed S] [--jobs J]`` runs a campaign (progress as
plain lines with the rate when not on a terminal, a summary at the end; exit 1 on any failure,
each with the ``--replay S:I`` that shows it again). Most inputs break batches from a corpus built
at the start (building costs more than reading); one in twenty is built afresh.
``tests/unit/test_fetched_fuzz.py`` runs the same generator and checks, a few hundred inputs at a
time, under hypothesis.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
import random
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c, encode_varint
from aiokafka.structs import TopicPartition

from sidecar.kafka._fetched import PartitionReader
from sidecar.kafka.unreadable import UnreadableRecords

TP = TopicPartition("fuzz", 3)
#: The reader's bound on a batch's inflated records, small so that bombs stay cheap to build.
LIMIT = 64 * 1024
_HEADER = struct.Struct(">qiibIhiqqqhii")
_ENCODE: dict[int, Callable[[bytes], bytes]] = {
    1: gzip_encode,
    2: snappy_encode,
    3: lz4_encode,
    4: zstd_encode,
}
_INT64 = 2**63
_EXTREMES = (0, 1, -1, 2, 7, 127, 128, 2**31 - 1, -(2**31), 2**31, 2**62, -(2**62), _INT64 - 1, -_INT64)
_HEADER_KEYS = (b"trace", b"", b"\xff\xfe", b"k\xc3", b"\xed\xa0\x80", b"timesync.x", "ü".encode())


class FuzzFailure(AssertionError):
    """The reader broke one of its promises on this input."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What reading one input gave."""

    records: int
    verdict: str | None
    agreed: bool | None  # with aiokafka: None when not compared (a verdict, aiokafka refused, formats)
    slowest_s: float


def _varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def _field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def _record(rng: random.Random, offset_delta: int, ts_delta: int) -> bytes:
    key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 12))
    if rng.random() < 0.2:
        value: bytes | None = None
    elif rng.random() < 0.5:
        value = b"x" * rng.randrange(0, 200)
    else:
        value = rng.randbytes(rng.randrange(0, 40))
    headers = []
    for _ in range(rng.choice((0, 0, 1, 2, 3))):
        name = rng.choice(_HEADER_KEYS) if rng.random() < 0.8 else rng.randbytes(rng.randrange(0, 6))
        headers.append(_field(name) + _field(None if rng.random() < 0.2 else rng.randbytes(rng.randrange(4))))
    body = (
        b"\x00"
        + _varint(ts_delta)
        + _varint(offset_delta)
        + _field(key)
        + _field(value)
        + _varint(len(headers))
        + b"".join(headers)
    )
    return _varint(len(body)) + body


def _mutate(rng: random.Random, data: bytearray) -> None:
    """One blind mutation of ``data``."""
    if not data:
        data.extend(rng.randbytes(rng.randrange(1, 8)))
        return
    at = rng.randrange(len(data))
    kind = rng.randrange(6)
    if kind == 0:
        data[at] ^= rng.randrange(1, 256)
    elif kind == 1:
        data[at:at] = rng.randbytes(rng.randrange(1, 6))
    elif kind == 2:
        del data[at : at + rng.randrange(1, 8)]
    elif kind == 3:
        del data[at:]
    elif kind == 4:  # an extreme varint over whatever was there
        encoded = _varint(rng.choice(_EXTREMES))
        data[at : at + rng.randrange(1, 4)] = encoded
    else:
        data[at] = rng.choice((0x00, 0x7F, 0x80, 0xFF))


def batch(rng: random.Random, base_offset: int) -> bytes:
    """One v2 batch at ``base_offset``: valid, or broken on the way (records before they are
    compressed, a header field set to an extreme; the CRC fixed after either)."""
    codec = rng.choice((0, 0, 1, 2, 3, 4))
    count = rng.randrange(0, 7)
    first_ts = rng.choice((1_700_000_000_000, 0, -1, _INT64 - 10, -_INT64 + 10))
    records = bytearray()
    for i in range(count):
        records += _record(rng, i, rng.choice((0, 1, 5, -3, 2**40)))
    if rng.random() < 0.02:  # a bomb: one record inflating past the reader's bound
        body = b"\x00\x00\x00\x01" + _field(b"\x00" * (2 * LIMIT)) + b"\x00"
        records = bytearray(_varint(len(body)) + body)
        count, codec = 1, rng.randrange(1, 5)
    if rng.random() < 0.3:
        for _ in range(rng.randrange(1, 3)):
            _mutate(rng, records)
    payload = _ENCODE[codec](bytes(records)) if codec else bytes(records)
    attributes = codec | (0x08 if rng.random() < 0.1 else 0)
    fields = [base_offset, 0, -1, 2, 0, attributes, max(count - 1, 0), first_ts, first_ts, -1, -1, -1, count]
    if rng.random() < 0.15:  # length, magic, attributes, last offset delta, count: an extreme
        index = rng.choice((1, 3, 5, 6, 12))
        value = rng.choice(_EXTREMES)
        limits = {1: 2**31, 3: 2**7, 5: 2**15, 6: 2**31, 12: 2**31}[index]
        fields[index] = value % (2 * limits) - limits
    data = bytearray(_HEADER.pack(*fields) + payload)
    if fields[1] == 0:
        struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def fix_crcs(data: bytearray) -> None:
    """Recompute the CRC of every batch whose framing still holds, so that a mutation reaches
    the decoder."""
    at = 0
    while len(data) - at >= 21:
        (length,) = struct.unpack_from(">i", data, at + 8)
        end = at + 12 + length
        if length < 9 or end > len(data):
            return
        struct.pack_into(">I", data, at + 17, calc_crc32c(bytes(data[at + 21 : end])))
        at = end


class Corpus:
    """Batches built once (each as :func:`batch` builds them), for a campaign to break again and
    again: building costs more than reading."""

    def __init__(self, seed: int, size: int = 4096) -> None:
        self.batches = [batch(random.Random(f"{seed}/{i}"), 0) for i in range(size)]

    def pick(self, rng: random.Random, base_offset: int) -> bytes:
        """One of them, moved to ``base_offset`` (outside the CRC: nothing to recompute)."""
        data = bytearray(rng.choice(self.batches))
        if len(data) >= 8:
            struct.pack_into(">q", data, 0, base_offset)
        return bytes(data)


def response(rng: random.Random, corpus: Corpus | None = None) -> bytes:
    """One fetch response, built (or, mostly, picked from ``corpus``) and broken (see the
    module's docstring)."""
    parts = []
    base = rng.choice((0, 0, 5, 2**40))
    fresh = corpus is None or rng.random() < 0.05
    for _ in range(rng.randrange(1, 4)):
        parts.append(batch(rng, base) if fresh or corpus is None else corpus.pick(rng, base))
        base += 6 + rng.randrange(0, 3)
    data = bytearray(b"".join(parts))
    if rng.random() < 0.6:
        for _ in range(rng.randrange(1, 4)):
            _mutate(rng, data)
        if rng.random() < 0.8:
            fix_crcs(data)
    return bytes(data)


def _comparable(data: bytes) -> bool:
    """Whether aiokafka's reader is the reference for ``data``: every batch in the v2 format,
    each starting after the one before it ends (aiokafka's position goes back otherwise)."""
    at, end = 0, -1
    while len(data) - at >= 61:
        (base, length) = struct.unpack_from(">qi", data, at)
        (last_delta,) = struct.unpack_from(">i", data, at + 23)
        if data[at + 16] != 2 or base < end:
            return False
        if length < 0:
            return True
        end = base + last_delta + 1
        at += 12 + length
    return len(data) - at < 17 or data[at + 16] == 2


def _fields(record: Any) -> tuple[Any, ...]:
    ts = record.timestamp
    return (
        record.offset,
        -1 if ts is None else ts,
        0 if ts is None else record.timestamp_type,
        record.key,
        record.value,
        tuple(tuple(h) for h in record.headers),
    )


def check(data: bytes, rng: random.Random, limit: int = LIMIT, max_call_s: float = 2.0) -> Outcome:
    """Read ``data`` with the reader, in chunks of random sizes, and hold it to its promises
    (the module's docstring); raises :class:`FuzzFailure` if it breaks one."""
    reader = PartitionReader(TP, MemoryRecords(data), [], 0, True, False, data, limit)
    got: list[Any] = []
    verdict: UnreadableRecords | None = None
    slowest = 0.0
    while True:
        began = time.perf_counter()
        try:
            chunk = reader.take(rng.randrange(1, 40))
        except UnreadableRecords as e:
            verdict = e
            chunk = []
        except BaseException as e:
            raise FuzzFailure(f"the reader raised {type(e).__name__}: {e}") from e
        finally:
            slowest = max(slowest, time.perf_counter() - began)
        if slowest > max_call_s:
            raise FuzzFailure(f"one call took {slowest:.3f} s")
        got += chunk
        if verdict is not None or not chunk:
            break
    offsets = [r.offset for r in got]
    if offsets != sorted(set(offsets)):
        raise FuzzFailure(f"records out of offset order: {offsets}")
    if verdict is not None:
        if not (verdict.first_offset < verdict.next_offset == reader.next_fetch_offset and reader.exhausted):
            raise FuzzFailure(f"the verdict {verdict!r} does not move the reader past it")
        if offsets and verdict.first_offset <= offsets[-1]:
            raise FuzzFailure(f"the verdict {verdict} names offsets already handed out")
        return Outcome(len(got), str(verdict.reason), None, slowest)
    if not _comparable(data):
        return Outcome(len(got), None, None, slowest)
    reference = PartitionRecords(TP, MemoryRecords(data), [], 0, None, None, True, 0)
    try:
        expected = list(reference)
    except Exception:
        return Outcome(len(got), None, None, slowest)  # we read more than aiokafka can (raw keys)
    if [_fields(r) for r in got] != [_fields(r) for r in expected]:
        raise FuzzFailure("the reader and aiokafka read different records")
    # aiokafka's position may go back (to the end of a batch that lies about it); ours goes to
    # the furthest of the batches' ends and the records' offsets, never back.
    batches = MemoryRecords(data)
    ends = [0, reference.next_fetch_offset, *(r.offset + 1 for r in expected)]
    while batches.has_next():
        ends.append(batches.next_batch().next_offset)
    furthest = max(ends)
    if reader.next_fetch_offset != furthest:
        raise FuzzFailure(f"positions differ: {reader.next_fetch_offset} != {furthest}")
    return Outcome(len(got), None, True, slowest)


def one(seed: int, index: int, corpus: Corpus | None, max_call_s: float = 2.0) -> Outcome:
    """Input ``index`` of the campaign seeded ``seed``: built, broken and checked."""
    rng = random.Random(seed * 2**32 + index)
    return check(response(rng, corpus), rng, LIMIT, max_call_s)


def _kind(reason: str) -> str:
    """A verdict's reason without its numbers, to count kinds of failure."""
    return " ".join(w for w in reason.split()[:6] if not any(c.isdigit() for c in w))


@dataclasses.dataclass(slots=True)
class Tally:
    """What a stretch of a campaign saw."""

    done: int = 0
    slowest_s: float = 0.0
    counts: Counter[str] = dataclasses.field(default_factory=Counter)
    kinds: Counter[str] = dataclasses.field(default_factory=Counter)
    failures: list[str] = dataclasses.field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.done += other.done
        self.slowest_s = max(self.slowest_s, other.slowest_s)
        self.counts += other.counts
        self.kinds += other.kinds
        self.failures += other.failures


_CORPORA: dict[int, Corpus] = {}
_CHUNK = 5_000


def run_stretch(seed: int, start: int, stop: int, max_call_s: float, corpus_size: int = 4096) -> Tally:
    """Inputs ``start`` … ``stop - 1`` of the campaign seeded ``seed``."""
    corpus = _CORPORA.get(seed)
    if corpus is None or len(corpus.batches) != corpus_size:
        corpus = _CORPORA[seed] = Corpus(seed, corpus_size)
    tally = Tally()
    for index in range(start, stop):
        tally.done += 1
        try:
            outcome = one(seed, index, corpus, max_call_s)
        except FuzzFailure as e:
            tally.failures.append(f"--replay {seed}:{index}: {e}")
            tally.counts["failed"] += 1
            continue
        tally.slowest_s = max(tally.slowest_s, outcome.slowest_s)
        tally.counts["records"] += outcome.records
        if outcome.verdict is not None:
            tally.counts["verdicts"] += 1
            tally.kinds[_kind(outcome.verdict)] += 1
        else:
            tally.counts["agreed" if outcome.agreed else "not compared"] += 1
    return tally


def _stretch(args: tuple[int, int, int, float]) -> Tally:
    return run_stretch(*args)


def campaign(inputs: int, seed: int, max_call_s: float, jobs: int = 1, out: Any = sys.stdout) -> int:
    """Run ``inputs`` inputs on ``jobs`` processes; print progress and a summary; return the
    number of failures."""
    total = Tally()
    started = last = time.monotonic()
    tty = out.isatty()
    stretches = [(seed, a, min(a + _CHUNK, inputs), max_call_s) for a in range(0, inputs, _CHUNK)]
    with contextlib.ExitStack() as stack:
        if jobs > 1:
            pool = stack.enter_context(multiprocessing.get_context("fork").Pool(jobs))
            results: Iterator[Tally] = pool.imap_unordered(_stretch, stretches)
        else:
            results = map(_stretch, stretches)
        for tally in results:
            total.add(tally)
            now = time.monotonic()
            if now - last >= (0.5 if tty else 10.0):
                last = now
                line = _progress(total.done, inputs, now - started, total.counts)
                print(("\r" + line) if tty else line, end="" if tty else "\n", file=out, flush=True)
    if tty:
        print(file=out)
    for line in _summary(inputs, seed, time.monotonic() - started, total):
        print(line, file=out)
    return len(total.failures)


def _progress(done: int, inputs: int, elapsed: float, counts: Counter[str]) -> str:
    rate = done / elapsed if elapsed else 0.0
    return (
        f"{done:,}/{inputs:,} inputs, {rate:,.0f}/s, {counts['verdicts']:,} verdicts, "
        f"{counts['agreed']:,} agreed with aiokafka, {counts['failed']:,} failures"
    )


def _summary(inputs: int, seed: int, elapsed: float, total: Tally) -> Iterator[str]:
    counts = total.counts
    yield (
        f"batches fuzz, seed {seed}: {inputs:,} inputs in {elapsed:,.1f} s "
        f"({inputs / max(elapsed, 1e-9):,.0f}/s); "
        f"{counts['records']:,} records read; {counts['verdicts']:,} verdicts; "
        f"{counts['agreed']:,} read alike by aiokafka; {counts['not compared']:,} read whole but not "
        f"comparable; slowest call {total.slowest_s * 1000:.1f} ms; {len(total.failures)} failures"
    )
    for kind, n in total.kinds.most_common(12):
        yield f"  {n:>10,}  {kind}"
    yield from sorted(total.failures)[:20]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testkit.fuzz.batches", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--inputs", type=int, default=1_000_000, help="how many inputs (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    parser.add_argument("--max-call-s", type=float, default=1.0, help="the bound on one reader call")
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--replay", metavar="SEED:INDEX", help="check one input again and show it")
    args = parser.parse_args(argv)
    if args.replay:
        seed, index = (int(x) for x in args.replay.split(":"))
        rng = random.Random(seed * 2**32 + index)
        data = response(rng, Corpus(seed))
        print(data.hex())
        print(check(data, rng, LIMIT, args.max_call_s))
        return 0
    return 1 if campaign(args.inputs, args.seed, args.max_call_s, args.jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
