"""Mutated record batches into the C reader: records or one verdict, in bounded time, and the
records aiokafka's own reader gives wherever both read an input whole.

The generator and the checks are ``testkit/fuzz/batches.py``'s, which says what they break and
what they hold the reader to; here hypothesis drives them a few hundred inputs at a time. The
long campaign runs outside the suite: ``python -m testkit.fuzz.batches --inputs 10000000``.
"""

from __future__ import annotations

import random
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.fuzz import batches

CORPUS = batches.Corpus(seed=32, size=64)


@settings(max_examples=150, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_fresh_batches_broken_anywhere_end_in_records_or_one_verdict(rng: random.Random) -> None:
    batches.check(batches.response(rng), rng)


@settings(max_examples=150, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_corpus_batches_broken_again_end_in_records_or_one_verdict(rng: random.Random) -> None:
    batches.check(batches.response(rng, CORPUS), rng)


def test_a_short_campaign_reads_every_codec_and_meets_every_kind_of_verdict() -> None:
    """The campaign itself works: it reads records, agrees with aiokafka, finds verdicts."""
    tally = batches.run_stretch(seed=7, start=0, stop=300, max_call_s=5.0, corpus_size=64)
    assert tally.failures == []
    assert tally.counts["records"] > 100
    assert tally.counts["agreed"] > 20
    assert tally.counts["verdicts"] > 50
