"""Between the wire's dicts and kafkalite's request and response dataclasses.

Every served request and response class declares its wire fields (``kafkalite.protocol.codec.binding``),
so both directions are the same generic walk: ``to_request`` turns a decoded request body into its
dataclass, ``to_body`` a response dataclass into the dict the codec writes for the version asked.
ApiVersions, SASL, ACL and SCRAM bodies stay dicts end to end (``messages.py`` declares them).
"""

from __future__ import annotations

from kafkalite.protocol import REQUEST_TYPES, Request, Response
from kafkalite.protocol.codec.binding import from_wire, to_wire
from kafkalite.protocol.codec.messages import supported_versions


def to_request(api_key: int, version: int, body: dict) -> Request:
    """The request dataclass a decoded body describes."""
    return from_wire(REQUEST_TYPES[api_key], body, version)  # type: ignore[index]


def to_body(response: Response, version: int) -> dict:
    """The wire dict of a response dataclass, for the version the request came in."""
    return to_wire(response, version)


def api_versions_body(error_code: int = 0, *, kraft: bool = False) -> dict:
    """A broker's ApiVersions answer; ``kraft``: a KRaft-mode broker's (see ``supported_versions``)."""
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported_versions(kraft)
        ],
        "throttle_time_ms": 0,
    }


__all__ = ["api_versions_body", "supported_versions", "to_body", "to_request"]
