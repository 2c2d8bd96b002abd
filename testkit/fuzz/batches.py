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
from collections.abc import Iterator
from typing import Any

from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from sidecar.kafka._fetched import PartitionReader
from sidecar.kafka.unreadable import UnreadableRecords
from testkit.fuzz.batch_inputs import Corpus, response

TP = TopicPartition("fuzz", 3)
#: The reader's bound on a batch's inflated records, small so that bombs stay cheap to build.
LIMIT = 64 * 1024


class FuzzFailure(AssertionError):
    """The reader broke one of its promises on this input."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What reading one input gave."""

    records: int
    verdict: str | None
    agreed: bool | None  # with aiokafka: None when not compared (a verdict, aiokafka refused, formats)
    slowest_s: float


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


def _past_the_position(records: list[Any]) -> list[Any]:
    """aiokafka's records as a consumer takes them: a record whose offset is not past the one
    before it (a batch whose record offsets lie, CRC and all) is skipped, as Kafka's Java
    consumer skips a record below its fetch position; aiokafka hands it out, going back."""
    out, position = [], -1
    for record in records:
        if record.offset > position:
            out.append(record)
            position = record.offset
    return out


def check(data: bytes, rng: random.Random, limit: int = LIMIT, max_call_s: float = 2.0) -> Outcome:
    """Read ``data`` with the reader, in chunks of random sizes, and hold it to its promises
    (the module's docstring); raises :class:`FuzzFailure` if it breaks one."""
    reader = PartitionReader(TP, MemoryRecords(data), [], 0, True, False, data, limit)
    got: list[Any] = []
    verdict: UnreadableRecords | None = None
    slowest = 0.0
    while True:
        began = time.thread_time()  # CPU time: a loaded machine's scheduling is no finding
        try:
            chunk = reader.take(rng.randrange(1, 40))
        except UnreadableRecords as e:
            verdict = e
            chunk = []
        except BaseException as e:
            raise FuzzFailure(f"the reader raised {type(e).__name__}: {e}") from e
        finally:
            slowest = max(slowest, time.thread_time() - began)
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
        expected = _past_the_position(list(reference))
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
            for failure in tally.failures:  # at once: a long campaign's finding must not wait
                print(f"FOUND {failure}", file=out, flush=True)
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
