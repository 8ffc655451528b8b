"""Group coordinator placement must hash exactly like Java's String.hashCode / Kafka's partitionFor."""

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common.utils import coordinator_partition, java_string_hash, kafka_abs

INT_MIN = -(2**31)


def _reference_hash(s: str) -> int:
    # Java's definition, written independently: sum of c[i]*31^(n-1-i) over UTF-16 units, reduced to int32.
    data = s.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


def test_hand_computed_vectors() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("ab") == 97 * 31 + 98 == 3105
    assert java_string_hash("abc") == 96354  # the javadoc-style worked example
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112  # the classic Java collision


def test_supplementary_characters_hash_as_two_utf16_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in Java's char[].
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_integer_min_value_string() -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE (well-known Java fact, checked by the reference).
    assert _reference_hash("polygenelubricants") == INT_MIN
    assert java_string_hash("polygenelubricants") == INT_MIN
    assert kafka_abs(INT_MIN) == 0
    assert coordinator_partition("polygenelubricants") == 0


def test_kafka_abs_is_abs_not_mask() -> None:
    assert kafka_abs(-1) == 1  # Utils.toPositive(-1) would be 2147483647
    assert kafka_abs(-(2**31) + 1) == 2**31 - 1
    assert kafka_abs(5) == 5


def test_coordinator_partition_vectors() -> None:
    assert coordinator_partition("") == 0
    assert coordinator_partition("a") == 97 % 50 == 47
    assert coordinator_partition("hello") == 99162322 % 50 == 22
    # "my-group".hashCode() computed by hand from the definition is negative: abs before modulo.
    h = _reference_hash("my-group")
    assert coordinator_partition("my-group") == abs(h) % 50
    assert coordinator_partition("hello", 1) == 0


@given(st.text(max_size=40))
def test_matches_reference_definition(s: str) -> None:
    assert java_string_hash(s) == _reference_hash(s)
    assert INT_MIN <= java_string_hash(s) < 2**31


@given(st.text(max_size=20), st.integers(1, 200))
def test_partition_in_range(s: str, n: int) -> None:
    assert 0 <= coordinator_partition(s, n) < n
