"""Hostile bytes into every Avro and Protobuf extractor and schema compiler: a verdict each time.

The same inputs as the long campaigns (``python -m testkit.fuzz.avro`` / ``.protobuf``), a few
hundred here: mutated bodies, schemas, descriptor sets and ``.proto`` text. No crash, no call
past its time bound, every failure a verdict (``PlanError``, ``TimeValueError``, ``DecodeError``
for bodies; ``SchemaError`` for schemas), and the C and Python plans agree on every body.
"""

from __future__ import annotations

import random
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.fuzz import avro as avro_fuzz
from testkit.fuzz import protobuf as protobuf_fuzz

BOUNDED = timedelta(seconds=10)  # each call is held to 2 s inside; this catches the rest
seeded = st.randoms(use_true_random=False)


@settings(max_examples=300, deadline=BOUNDED)
@given(rng=seeded)
def test_mutated_avro_bodies_get_one_verdict_from_both_plans_the_reader_and_the_extractor(
    rng: random.Random,
) -> None:
    avro_fuzz.mutated_body(rng)


@settings(max_examples=200, deadline=BOUNDED)
@given(which=st.integers(0, len(avro_fuzz.SEEDS) - 1), body=st.binary(max_size=80))
def test_any_bytes_as_an_avro_body_get_one_verdict_from_both_plans(which: int, body: bytes) -> None:
    avro_fuzz.check_body(avro_fuzz.cases()[which].reader, body)


@settings(max_examples=200, deadline=BOUNDED)
@given(rng=seeded)
def test_mutated_avro_schemas_give_a_reader_or_a_schema_error(rng: random.Random) -> None:
    avro_fuzz.mutated_schema(rng)


@settings(max_examples=200, deadline=BOUNDED)
@given(rng=seeded)
def test_mutated_protobuf_bodies_give_a_time_or_a_verdict(rng: random.Random) -> None:
    protobuf_fuzz.mutated_body(rng)


@settings(max_examples=100, deadline=BOUNDED)
@given(rng=seeded)
def test_mutated_descriptor_sets_give_a_reader_or_a_schema_error(rng: random.Random) -> None:
    protobuf_fuzz.mutated_descriptors(rng)


@settings(max_examples=8, deadline=timedelta(seconds=40))
@given(rng=seeded)
def test_mutated_proto_text_compiles_or_is_a_schema_error(rng: random.Random) -> None:
    protobuf_fuzz.mutated_text(rng)  # each runs protoc in a child process: few examples
