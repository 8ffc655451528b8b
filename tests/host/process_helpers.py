"""What the tests of broker processes (ZooKeeper mode and KRaft) share: reading leaders, waiting."""

from __future__ import annotations

import time

from kafkalite.host.admin_client import AdminClient


def leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Fresh Metadata: each partition of ``topic`` -> (leader id, ISR)."""
    with AdminClient(bootstrap) as a:
        (t,) = a.metadata([topic])["topics"]
        return {p["partition_index"]: (p["leader_id"], p["isr_nodes"]) for p in t["partitions"]}


def wait_for(cond, timeout_s: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
