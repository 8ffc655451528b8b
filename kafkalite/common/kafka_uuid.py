"""Kafka's ``Uuid`` (topic ids, KIP-516): its string form and how a new one is drawn.

Kafka prints a Uuid as the URL-safe base64 of its 16 bytes without padding (22 characters), in
``partition.metadata``, in the topic znode and in its tools. ``Uuid.randomUuid`` never returns the zero id
(no topic id), nor ``Uuid(0, 1)`` (reserved for ``__cluster_metadata``), nor one whose string starts with
``-`` (a command line would read it as an option).
"""

from __future__ import annotations

import base64
import random
import re
import uuid
from collections.abc import Container

ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)
_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


def uuid_to_str(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; ``ValueError`` unless ``text`` is 22 URL-safe base64 characters."""
    if not _TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 URL-safe base64 characters)")
    u = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    if uuid_to_str(u) != text:  # the last character carries 2 bits the 16 bytes do not use
        raise ValueError(f"{text!r} is not a Kafka Uuid (its unused low bits are set)")
    return u


def random_uuid(rng: random.Random, taken: Container[uuid.UUID] = ()) -> uuid.UUID:
    """A new id drawn as ``Uuid.randomUuid`` draws one, and none in ``taken``. It takes exactly one draw
    from ``rng``; a refused id is drawn again from a generator seeded with it, so whatever else ``rng``
    decides (a controller's replica placement) stays as it was in a seeded run."""
    u = uuid.UUID(int=rng.getrandbits(128))
    again: random.Random | None = None
    while u in (ZERO_UUID, METADATA_TOPIC_ID) or uuid_to_str(u).startswith("-") or u in taken:
        again = again or random.Random(u.int)
        u = uuid.UUID(int=again.getrandbits(128))
    return u


__all__ = ["METADATA_TOPIC_ID", "ZERO_UUID", "random_uuid", "uuid_from_str", "uuid_to_str"]
