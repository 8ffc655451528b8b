"""``bootstrap.servers``: the comma-separated ``HOST:PORT`` list a client starts from.

Its own module, free of the protocol tables, so that what only parses the setting (the Spark source's
option checks, in every short-lived planning process Spark starts) does not import a client to do it.
"""

from __future__ import annotations

__all__ = ["parse_bootstrap"]


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` -> [(h1, 9092), (h2, 9093)], with a clear error for a malformed entry."""
    out = []
    for entry in servers.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"--bootstrap-server entries look like HOST:PORT, got {entry.strip()!r}")
        out.append((host, int(port)))
    return out
