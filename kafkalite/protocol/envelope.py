"""What travels between nodes: a request with the header fields that match it to its response.

Kafka's request header carries a correlation id and a client id; the response echoes the id. The
simulator delivers these envelopes as they are, and a wire codec would write the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.protocol.api import Request, Response, fast_frozen_init


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class RequestEnvelope:
    correlation_id: int
    client_id: str
    request: Request
    zero_copy: bool = False
    """The sender writes fetched data to a socket itself: it may get file slices instead of bytes, and
    copes with a slice that the log truncates before it is sent (a TCP connection; never a simulated
    link, whose delivery is later and must see the bytes as they were)."""

    def reply(self, response: Response) -> ResponseEnvelope:
        """The envelope answering this request."""
        return ResponseEnvelope(self.correlation_id, response)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ResponseEnvelope:
    correlation_id: int
    response: Response
