"""Kafka's Uuid string form and ``Uuid.randomUuid``'s rules for a new id."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common.kafka_uuid import METADATA_TOPIC_ID, ZERO_UUID, random_uuid, uuid_from_str, uuid_to_str


@given(st.binary(min_size=16, max_size=16))
def test_string_round_trip(raw: bytes) -> None:
    u = uuid.UUID(bytes=raw)
    text = uuid_to_str(u)
    assert len(text) == 22 and "=" not in text
    assert uuid_from_str(text) == u


@pytest.mark.parametrize("text", ["", "AAAA", "A" * 23, "AAAAAAAAAAAAAAAAAAAAA+", "AAAAAAAAAAAAAAAAAAAAAB"])
def test_bad_strings_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kafka Uuid"):
        uuid_from_str(text)


def test_random_uuid_skips_the_reserved_ids_a_leading_dash_and_taken_ones() -> None:
    dash = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64 of 0xf8... starts with '-'
    assert uuid_to_str(dash).startswith("-")
    for bad in (ZERO_UUID, METADATA_TOPIC_ID, dash):
        rng = random.Random(7)
        rng.getrandbits = lambda k, bad=bad: bad.int  # type: ignore[method-assign]
        got = random_uuid(rng)
        assert got not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_str(got).startswith("-")
    taken = uuid.UUID(int=random.Random(3).getrandbits(128))
    assert random_uuid(random.Random(3), {taken}) != taken


@given(st.integers(0, 2**32))
def test_random_uuid_takes_one_draw(seed: int) -> None:
    # a controller's later draws (replica placement) do not depend on whether an id was refused
    a, b = random.Random(seed), random.Random(seed)
    random_uuid(a, {uuid.UUID(int=b.getrandbits(128))})
    assert a.random() == b.random()
