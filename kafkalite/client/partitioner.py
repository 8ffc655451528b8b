"""Producer partitioning, bit-compatible with Kafka's Java client.

A key always lands on the partition the Java producer would pick: ``murmur2`` reproduces
``Utils.murmur2`` (signed 32-bit result), and ``partition_for_key`` is
``to_positive(murmur2(key)) % num_partitions``.

Partitioners share one call shape::

    partition(topic, key, value, num_partitions, available) -> int

``key`` is the serialized key (``None`` for no key), ``available`` lists the partitions that have a
leader, in metadata order (``None`` means all of ``range(num_partitions)``; an empty list means none,
and Kafka then picks among all partitions). An explicit partition on a record is the producer's
business and never reaches a partitioner (see ``choose_partition``). Any object with a matching
``partition`` method can serve as a user partitioner.

The classes, named after Kafka's:

* ``DefaultPartitioner``: what the modern client does when ``partitioner.class`` is unset (KIP-794).
  A key is hashed unless ``partitioner.ignore.keys``; otherwise the per-topic ``BuiltInPartitioner``
  sticks to a partition until ``batch.size`` bytes went to it, then switches uniformly at random, or
  weighted by queue sizes when ``partitioner.adaptive.partitioning.enable`` is on.
* ``StickyPartitioner``: KIP-480 (Kafka 2.4 to 3.2 default, ``internals.DefaultPartitioner``): key
  hash, else stick to a partition until ``on_new_batch``, then move to a different random one.
* ``UniformStickyPartitioner``: KIP-480 stickiness for every record, keys ignored.
* ``RoundRobinPartitioner``: a per-topic counter over the available partitions.
* ``KeyHashPartitioner``: key hash only; null keys go to an optional fallback.

All randomness comes from an injected ``random.Random`` so runs can be replayed.
"""

from __future__ import annotations

import bisect
import importlib
import random
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kafkalite.errors import InvalidConfigError

__all__ = [
    "BATCH_SIZE_CONFIG",
    "DEFAULT_BATCH_SIZE",
    "PARTITIONER_ADAPTIVE_PARTITIONING_ENABLE_CONFIG",
    "PARTITIONER_AVAILABILITY_TIMEOUT_MS_CONFIG",
    "PARTITIONER_CLASS_CONFIG",
    "PARTITIONER_IGNORE_KEYS_CONFIG",
    "BuiltInPartitioner",
    "DefaultPartitioner",
    "KeyHashPartitioner",
    "Partitioner",
    "RoundRobinPartitioner",
    "StickyPartitionCache",
    "StickyPartitioner",
    "UniformStickyPartitioner",
    "choose_partition",
    "create_partitioner",
    "murmur2",
    "partition_for_key",
    "to_positive",
]

PARTITIONER_CLASS_CONFIG = "partitioner.class"
BATCH_SIZE_CONFIG = "batch.size"
PARTITIONER_IGNORE_KEYS_CONFIG = "partitioner.ignore.keys"
PARTITIONER_ADAPTIVE_PARTITIONING_ENABLE_CONFIG = "partitioner.adaptive.partitioning.enable"
PARTITIONER_AVAILABILITY_TIMEOUT_MS_CONFIG = "partitioner.availability.timeout.ms"
DEFAULT_BATCH_SIZE = 16384

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


# --------------------------------------------------------------------------------------------------
# Hashing
# --------------------------------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32-bit) of ``data`` as Kafka computes it: a signed 32-bit int."""
    length = len(data)
    # Work on unsigned 32-bit values and mask after every multiply: Java's int arithmetic wraps.
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length % 4
    if tail:
        # The Java switch falls through from 3 to 1; the multiply happens once, after the last byte.
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which fails on ``MIN_VALUE``)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's producer picks for a serialized key."""
    _check_num_partitions(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


def _check_num_partitions(num_partitions: int) -> None:
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")


def _random_int(rng: random.Random) -> int:
    # Kafka draws toPositive(nextInt()): uniform over [0, 2**31).
    return rng.getrandbits(31)


# --------------------------------------------------------------------------------------------------
# Interface
# --------------------------------------------------------------------------------------------------


@runtime_checkable
class Partitioner(Protocol):
    """What a producer needs from a partitioner; ``on_new_batch`` and ``close`` are optional hooks."""

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: object,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int: ...


class _Base:
    """No-op hooks, so subclasses only override what they use (as Kafka's interface defaults do)."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Receive the producer config (Kafka's ``Configurable``)."""

    def on_new_batch(
        self, topic: str, num_partitions: int, available: Sequence[int] | None, prev_partition: int
    ) -> None:
        """Called when the record for ``prev_partition`` would start a new batch."""

    def close(self) -> None:
        """Release resources."""


def choose_partition(
    partitioner: Partitioner,
    topic: str,
    key: bytes | None,
    value: object,
    num_partitions: int,
    available: Sequence[int] | None = None,
    *,
    explicit_partition: int | None = None,
) -> int:
    """The producer's rule: an explicit partition wins, else ask the partitioner and reject negatives."""
    if explicit_partition is not None:
        return explicit_partition
    chosen = partitioner.partition(topic, key, value, num_partitions, available)
    if chosen < 0:
        raise ValueError(f"partitioner returned an invalid partition number: {chosen}")
    return chosen


# --------------------------------------------------------------------------------------------------
# Simple partitioners
# --------------------------------------------------------------------------------------------------


class KeyHashPartitioner(_Base):
    """murmur2 of the key; records without a key go to ``fallback`` (an error when there is none)."""

    def __init__(self, fallback: Partitioner | None = None) -> None:
        self.fallback = fallback

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: object,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        if self.fallback is None:
            raise ValueError(f"record for topic {topic!r} has no key and no fallback partitioner is set")
        return self.fallback.partition(topic, key, value, num_partitions, available)

    def on_new_batch(
        self, topic: str, num_partitions: int, available: Sequence[int] | None, prev_partition: int
    ) -> None:
        hook = getattr(self.fallback, "on_new_batch", None)
        if hook is not None:
            hook(topic, num_partitions, available, prev_partition)


class RoundRobinPartitioner(_Base):
    """Kafka's ``RoundRobinPartitioner``: keys ignored, one counter per topic.

    The counter indexes the available partitions when there are any, all partitions otherwise. The
    producer asks a configured partitioner a second time when a record would open a new batch; since
    Kafka 4.0 (KAFKA-17632) ``on_new_batch`` remembers the partition just chosen and the second call
    returns it without moving the counter, so every partition gets its turn.
    """

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}
        self._previous: tuple[str, int] | None = None

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: object,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        _check_num_partitions(num_partitions)
        previous, self._previous = self._previous, None
        if previous is not None and previous[0] == topic:
            return previous[1]
        value_ = self._counters.get(topic, 0)
        # Kafka's AtomicInteger wraps at 2**32; to_positive keeps the index non-negative after that.
        self._counters[topic] = (value_ + 1) & _MASK32
        candidates = _available(num_partitions, available)
        if candidates:
            return candidates[to_positive(value_) % len(candidates)]
        return to_positive(value_) % num_partitions

    def on_new_batch(
        self, topic: str, num_partitions: int, available: Sequence[int] | None, prev_partition: int
    ) -> None:
        self._previous = (topic, prev_partition)


def _available(num_partitions: int, available: Sequence[int] | None) -> Sequence[int]:
    return range(num_partitions) if available is None else available


# --------------------------------------------------------------------------------------------------
# KIP-480: sticky until a new batch
# --------------------------------------------------------------------------------------------------


class StickyPartitionCache:
    """Kafka's ``StickyPartitionCache``: the current sticky partition of each topic."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int, available: Sequence[int] | None = None) -> int:
        """The topic's sticky partition, choosing one on first use."""
        current = self._current.get(topic)
        if current is None:
            return self.next_partition(topic, num_partitions, available, -1)
        return current

    def next_partition(
        self, topic: str, num_partitions: int, available: Sequence[int] | None, prev_partition: int
    ) -> int:
        """Move off ``prev_partition`` if it is still the sticky one; a stale ``prev`` changes nothing."""
        _check_num_partitions(num_partitions)
        old = self._current.get(topic)
        if old is not None and old != prev_partition:
            return old
        candidates = _available(num_partitions, available)
        if not candidates:
            new = _random_int(self._rng) % num_partitions
        elif len(candidates) == 1:
            new = candidates[0]
        else:
            new = None
            while new is None or new == old:
                new = candidates[_random_int(self._rng) % len(candidates)]
        self._current[topic] = new
        return new


class StickyPartitioner(_Base):
    """KIP-480 partitioner: key hash for keyed records, else the sticky partition.

    With ``ignore_keys`` every record is sticky (Kafka's ``UniformStickyPartitioner``); without it this
    is Kafka's pre-3.3 default (``internals.DefaultPartitioner``).
    """

    def __init__(self, rng: random.Random | None = None, *, ignore_keys: bool = False) -> None:
        self.ignore_keys = ignore_keys
        self.cache = StickyPartitionCache(rng)

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: object,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        if key is not None and not self.ignore_keys:
            return partition_for_key(key, num_partitions)
        return self.cache.partition(topic, num_partitions, available)

    def on_new_batch(
        self, topic: str, num_partitions: int, available: Sequence[int] | None, prev_partition: int
    ) -> None:
        self.cache.next_partition(topic, num_partitions, available, prev_partition)


class UniformStickyPartitioner(StickyPartitioner):
    """Kafka's ``UniformStickyPartitioner``: KIP-480 stickiness for all records, keys ignored."""

    def __init__(self, rng: random.Random | None = None) -> None:
        super().__init__(rng, ignore_keys=True)


# --------------------------------------------------------------------------------------------------
# KIP-794: the built-in uniform sticky partitioner
# --------------------------------------------------------------------------------------------------


class BuiltInPartitioner:
    """One topic's KIP-794 sticky state: switch after ``sticky_batch_size`` bytes went to a partition.

    The next partition is uniform over the available ones (the current one included, as in Kafka), or,
    once queue sizes were reported through ``update_partition_load_stats``, weighted so that partitions
    with shorter queues (faster brokers) are picked more often.
    """

    def __init__(self, topic: str, sticky_batch_size: int, rng: random.Random | None = None) -> None:
        if sticky_batch_size < 1:
            raise ValueError(f"sticky_batch_size must be >= 1, got {sticky_batch_size}")
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self._rng = rng if rng is not None else random.Random()
        self._current: int | None = None
        self._produced_bytes = 0
        # Cumulative frequency table and the partition ids it indexes; None means uniform.
        self._cft: list[int] | None = None
        self._cft_ids: list[int] = []

    def random_partition(self) -> int:
        """A non-negative random int (overridable, as Kafka's tests do, to make choices sequential)."""
        return _random_int(self._rng)

    @property
    def current_partition(self) -> int | None:
        """The sticky partition, ``None`` before the first choice."""
        return self._current

    @property
    def produced_bytes(self) -> int:
        """Bytes appended to the current sticky partition so far."""
        return self._produced_bytes

    def next_partition(self, num_partitions: int, available: Sequence[int] | None = None) -> int:
        """Draw the next sticky partition (without switching to it)."""
        _check_num_partitions(num_partitions)
        r = self.random_partition()
        if self._cft is None:
            candidates = _available(num_partitions, available)
            if candidates:
                return candidates[r % len(candidates)]
            return r % num_partitions
        weighted = r % self._cft[-1]
        # The first entry strictly greater than the draw; entries are strictly increasing.
        return self._cft_ids[bisect.bisect_right(self._cft, weighted)]

    def peek_current_partition(self, num_partitions: int, available: Sequence[int] | None = None) -> int:
        """The sticky partition, choosing one if there is none yet."""
        if self._current is None:
            self._current = self.next_partition(num_partitions, available)
            self._produced_bytes = 0
        return self._current

    def update_partition_info(
        self,
        appended_bytes: int,
        num_partitions: int,
        available: Sequence[int] | None = None,
        *,
        enable_switch: bool = True,
    ) -> None:
        """Count bytes appended to the sticky partition and switch once it had ``batch.size`` of them.

        The producer passes ``enable_switch=False`` while the partition's last batch is not full, so a
        switch does not leave a small tail batch behind; at twice the batch size it switches anyway.
        """
        if self._current is None:
            return
        self._produced_bytes += appended_bytes
        if (enable_switch and self._produced_bytes >= self.sticky_batch_size) or (
            self._produced_bytes >= 2 * self.sticky_batch_size
        ):
            self._current = self.next_partition(num_partitions, available)
            self._produced_bytes = 0

    def update_partition_load_stats(
        self,
        queue_sizes: Sequence[int] | None,
        partition_ids: Sequence[int] | None = None,
        length: int | None = None,
    ) -> None:
        """Adaptive partitioning input: queued batches per partition that has a leader.

        Only the first ``length`` entries count (partitions past it were excluded for being slow, see
        ``partitioner.availability.timeout.ms``). ``None``, fewer than two partitions in total, or
        equal queues with nothing excluded fall back to uniform choice, as in Kafka.
        """
        if queue_sizes is None:
            self._cft = None
            return
        ids = list(range(len(queue_sizes))) if partition_ids is None else list(partition_ids)
        if len(ids) != len(queue_sizes):
            raise ValueError("queue_sizes and partition_ids differ in length")
        n = len(queue_sizes) if length is None else length
        if n > len(queue_sizes):
            raise ValueError(f"length {n} exceeds the {len(queue_sizes)} queue sizes")
        if n < 1 or len(queue_sizes) < 2:
            self._cft = None
            return
        sizes = list(queue_sizes[:n])
        max_plus_1 = max(sizes) + 1
        if len(set(sizes)) == 1 and n == len(queue_sizes):
            self._cft = None
            return
        # Invert sizes into frequencies (an empty queue weighs most) and accumulate them.
        cft, running = [], 0
        for size in sizes:
            running += max_plus_1 - size
            cft.append(running)
        self._cft = cft
        self._cft_ids = ids[:n]

    def load_stats_range_end(self) -> int:
        """The sum of all weights (the exclusive end of the weighted draw); needs load stats."""
        if self._cft is None:
            raise ValueError("no partition load stats")
        return self._cft[-1]


class DefaultPartitioner(_Base):
    """The modern Java client's default (``partitioner.class`` unset, KIP-794).

    Keyed records are hashed unless ``ignore_keys``; the rest go to the topic's ``BuiltInPartitioner``.
    The producer reports each append of such a record with ``on_append`` (that is where the switch after
    ``batch.size`` bytes happens) and, when ``adaptive`` is on, queue sizes with
    ``update_partition_load_stats``.
    """

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        ignore_keys: bool = False,
        adaptive: bool = True,
        availability_timeout_ms: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        if batch_size < 0:
            raise ValueError(f"batch_size must be >= 0, got {batch_size}")
        # Kafka accepts batch.size=0 (batching off) and then switches after every record.
        self.sticky_batch_size = max(1, batch_size)
        self.ignore_keys = ignore_keys
        self.adaptive = adaptive
        self.availability_timeout_ms = availability_timeout_ms
        self._rng = rng if rng is not None else random.Random()
        self._topics: dict[str, BuiltInPartitioner] = {}

    def built_in(self, topic: str) -> BuiltInPartitioner:
        """The topic's sticky state, created on first use."""
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = BuiltInPartitioner(topic, self.sticky_batch_size, self._rng)
        return state

    def uses_key(self, key: bytes | None) -> bool:
        """Whether a record with this key is placed by hash rather than by the sticky partitioner."""
        return key is not None and not self.ignore_keys

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: object,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        if key is not None and not self.ignore_keys:
            return partition_for_key(key, num_partitions)
        return self.built_in(topic).peek_current_partition(num_partitions, available)

    def on_append(
        self,
        topic: str,
        key: bytes | None,
        partition: int,
        appended_bytes: int,
        num_partitions: int,
        available: Sequence[int] | None = None,
        *,
        enable_switch: bool = True,
    ) -> None:
        """Account for a record this partitioner placed; keyed records never move the sticky partition."""
        if self.uses_key(key):
            return
        state = self._topics.get(topic)
        if state is None or state.current_partition != partition:
            return
        state.update_partition_info(appended_bytes, num_partitions, available, enable_switch=enable_switch)

    def update_partition_load_stats(
        self,
        topic: str,
        queue_sizes: Sequence[int] | None,
        partition_ids: Sequence[int] | None = None,
        length: int | None = None,
    ) -> None:
        """Feed queue sizes to the topic's adaptive logic; ignored when adaptive partitioning is off."""
        if self.adaptive:
            self.built_in(topic).update_partition_load_stats(queue_sizes, partition_ids, length)


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------

_JAVA_NAMES: dict[str, type] = {
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": RoundRobinPartitioner,
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": UniformStickyPartitioner,
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": StickyPartitioner,
}
_TAKES_RNG = (StickyPartitioner,)


def _bool_config(config: Mapping[str, Any], name: str, default: bool) -> bool:
    value = config.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidConfigError(f"{name} must be true or false, got {value!r}")


def _int_config(config: Mapping[str, Any], name: str, default: int) -> int:
    value = config.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or number < 0:
        raise InvalidConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return number


def _resolve_class(name: str) -> Any:
    if name in _JAVA_NAMES:
        return _JAVA_NAMES[name]
    module_name, sep, attr = name.replace(":", ".").rpartition(".")
    if not sep:
        raise InvalidConfigError(f"{PARTITIONER_CLASS_CONFIG}: not a class path: {name!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidConfigError(f"{PARTITIONER_CLASS_CONFIG}: cannot load {name!r}: {exc}") from None


def create_partitioner(config: Mapping[str, Any], rng: random.Random | None = None) -> Partitioner:
    """Build the partitioner a producer with this config uses.

    ``partitioner.class`` may be unset (the default partitioner), one of Kafka's Java class names, a
    Python ``module.Class`` / ``module:Class`` path, a class, or a ready instance. Classes are
    instantiated without arguments (ours receive ``rng``) and ``configure(config)`` is called on them
    when present. Adaptive partitioning only applies to the default partitioner, as in Kafka.
    """
    batch_size = _int_config(config, BATCH_SIZE_CONFIG, DEFAULT_BATCH_SIZE)
    ignore_keys = _bool_config(config, PARTITIONER_IGNORE_KEYS_CONFIG, False)
    adaptive = _bool_config(config, PARTITIONER_ADAPTIVE_PARTITIONING_ENABLE_CONFIG, True)
    timeout_ms = _int_config(config, PARTITIONER_AVAILABILITY_TIMEOUT_MS_CONFIG, 0)
    chosen = config.get(PARTITIONER_CLASS_CONFIG)
    if chosen is None or chosen == "":
        return DefaultPartitioner(
            batch_size=batch_size,
            ignore_keys=ignore_keys,
            adaptive=adaptive,
            availability_timeout_ms=timeout_ms,
            rng=rng,
        )
    if isinstance(chosen, str):
        chosen = _resolve_class(chosen)
    if isinstance(chosen, type):
        instance = chosen(rng) if issubclass(chosen, _TAKES_RNG) else chosen()
        configure = getattr(instance, "configure", None)
        if callable(configure):
            configure(config)
    else:
        instance = chosen
    if not callable(getattr(instance, "partition", None)):
        raise InvalidConfigError(f"{PARTITIONER_CLASS_CONFIG}: {chosen!r} has no partition method")
    return instance
