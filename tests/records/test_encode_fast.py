"""encode_fast.encode_values must equal the exact encoder byte for byte, or decline (None)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.records import build_batch, build_values_batch
from kafkalite.records.encode_fast import encode_values
from kafkalite.records.record import encode_plain_records

values = st.one_of(
    st.binary(max_size=130),
    st.sampled_from([b"", b"x" * 63, b"y" * 64, b"z" * 100, b"w" * 8150, b"v" * 9000]),
)


@st.composite
def batches(draw):
    n = draw(st.integers(1, 300))
    same = draw(st.booleans())  # one value size: the cached-glue path
    vals = [draw(values)] * n if same else draw(st.lists(values, min_size=n, max_size=n))
    if draw(st.booleans()):
        vals[draw(st.integers(0, n - 1))] = None  # a tombstone: the fast encoder declines
    base = draw(st.integers(-(2**62), 2**62 - 1))  # base ± 2**62 stays within int64
    kind = draw(st.sampled_from(["equal", "runs", "random", "huge"]))
    if kind == "equal":
        stamps = [base] * n
    elif kind == "runs":
        stamps = sorted(base + draw(st.integers(0, 5)) for _ in range(n))
    elif kind == "random":
        stamps = [base + d for d in draw(st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n))]
    else:
        stamps = [base, *(base + (2**62 if i % 2 else -(2**62)) for i in range(n - 1))]
    return vals, stamps


@settings(max_examples=300, deadline=None)
@given(batches())
def test_encode_values_matches_the_exact_encoder(case) -> None:
    vals, stamps = case
    fast = encode_values(vals, stamps, stamps[0])
    exact = encode_plain_records([(None, v, None) for v in vals], stamps, stamps[0])
    if fast is not None:
        assert fast == exact


@settings(max_examples=100, deadline=None)
@given(batches(), st.sampled_from([0, 1]))
def test_build_values_batch_matches_build_batch(case, compression) -> None:
    vals, stamps = case
    fast = build_values_batch(vals, stamps, compression)
    if fast is not None:
        assert fast == build_batch([(None, v) for v in vals], timestamp=stamps, compression=compression)


def test_common_batch_takes_the_fast_path() -> None:
    vals = [bytes(range(100))] * 147
    stamps = [1_700_000_000_000] * 140 + [1_700_000_000_001] * 7
    body = encode_values(vals, stamps, stamps[0])
    assert body is not None
    assert body == encode_plain_records([(None, v) for v in vals], stamps, stamps[0])
    mixed = [bytes(i % 90) for i in range(147)]
    assert encode_values(mixed, stamps, stamps[0]) == encode_plain_records(
        [(None, v) for v in mixed], stamps, stamps[0]
    )


def test_declines_what_it_does_not_handle() -> None:
    assert encode_values([], [], 0) is None
    assert encode_values([b"a", None], [0, 0], 0) is None
    assert encode_values([b"a", bytearray(b"b")], [0, 0], 0) is None
    assert encode_values([b"a"], [1.5], 0) is None
    assert encode_values([b"a" * 9000], [0], 0) is None
