"""What the benchmark results share: rates from a count and a wall time, and JSON output."""

from __future__ import annotations

import json

MB = 1_000_000


def per_s(amount: float, seconds: float) -> float:
    """``amount`` per second; infinite when the clock read zero."""
    return amount / seconds if seconds > 0 else float("inf")


class JsonResult:
    """``to_json``: the result's ``to_dict`` as indented JSON."""

    def to_dict(self) -> dict:
        raise NotImplementedError

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


class Throughput:
    """Records/s and MB/s (value bytes, 10^6, as Kafka's benchmark counts them) of a timed case."""

    records: int
    record_size: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return per_s(self.records, self.seconds)

    @property
    def mb_per_s(self) -> float:
        """Value bytes per second in MB (10^6), as Kafka's benchmark counts them."""
        return per_s(self.records * self.record_size / MB, self.seconds)
