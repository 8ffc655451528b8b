"""The chapters' parameter checks: a bad value names its knob and what the knob accepts."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.viz.params import check_choice, check_param, check_params


def test_in_range_values_pass():
    check_param("SEED", 0, int, 0, 2**32 - 1)
    check_param("SEED", 2**32 - 1, int, 0, 2**32 - 1)
    check_param("ZIPF_S", 2, float, 0.0, 3.0)  # an int is a fine float
    check_param("TOPIC", "orders", str)
    check_choice("ACKS", "all", [0, 1, "all"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "SEED must be int in [0, 4294967295], got -1"),
        (2**32, "SEED must be int in [0, 4294967295], got 4294967296"),
        (3.0, "SEED must be int in [0, 4294967295], got 3.0"),
        ("7", "SEED must be int in [0, 4294967295], got '7'"),
        (True, "SEED must be int in [0, 4294967295], got True"),
    ],
)
def test_out_of_range_names_knob_and_range(value, message):
    with pytest.raises(ValueError) as err:
        check_param("SEED", value, int, 0, 2**32 - 1)
    assert str(err.value) == message


def test_open_bounds():
    check_param("NUM_RECORDS", 10**9, int, 1)
    with pytest.raises(ValueError, match=r"NUM_RECORDS must be int >= 1, got 0"):
        check_param("NUM_RECORDS", 0, int, 1)
    with pytest.raises(ValueError, match=r"LAG must be float <= 1.5, got 2"):
        check_param("LAG", 2, float, None, 1.5)


def test_choice_refuses_lookalikes():
    with pytest.raises(ValueError, match=r"ACKS must be one of 0, 1, 'all', got True"):
        check_choice("ACKS", True, [0, 1, "all"])
    with pytest.raises(ValueError, match=r"ACKS must be one of 0, 1, 'all', got -1"):
        check_choice("ACKS", -1, [0, 1, "all"])


def test_check_params_takes_both_spec_shapes():
    check_params(SEED=(7, int, 0, 10), ACKS=("all", {"all"}), TOPIC=("t", str))
    with pytest.raises(ValueError, match="SEED"):
        check_params(ACKS=("all", {"all"}), SEED=(11, int, 0, 10))
    with pytest.raises(ValueError, match="ACKS"):
        check_params(ACKS=(2, (0, 1, "all")))
    with pytest.raises(TypeError, match="BAD"):
        check_params(BAD=(1,))


@given(st.integers(), st.integers(-50, 50), st.integers(-50, 50))
def test_accepts_exactly_the_closed_range(value, low, high):
    inside = low <= value <= high
    try:
        check_param("N", value, int, low, high)
    except ValueError as err:
        assert not inside and str(err).startswith(f"N must be int in [{low}, {high}]")
    else:
        assert inside
