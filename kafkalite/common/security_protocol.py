"""Kafka's security protocols and ``listener.security.protocol.map``: below both the broker's config
(which checks the map) and the listeners (which use it)."""

from __future__ import annotations

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def protocol_map(text: str | None) -> dict[str, str]:
    """Listener name -> security protocol; every protocol also names a listener of its own."""
    out = {p: p for p in PROTOCOLS}
    for entry in filter(None, (e.strip() for e in (text or "").split(","))):
        name, sep, proto = entry.partition(":")
        if not sep or proto.upper() not in PROTOCOLS:
            raise ValueError(
                f"listener.security.protocol.map entries look like NAME:{'|'.join(PROTOCOLS)}, got {entry!r}"
            )
        out[name.upper()] = proto.upper()
    return out


__all__ = ["PROTOCOLS", "protocol_map"]
