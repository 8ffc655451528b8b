"""``ProducerIdControlManager``: hands brokers blocks of producer ids (KIP-730), each block recorded as a
ProducerIdsRecord so a new active controller continues after the last block any broker got."""

from __future__ import annotations

from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import ProducerIdsRecord

BLOCK_SIZE = 1000
"""Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``."""


def allocate(image: MetadataImage, broker_id: int, broker_epoch: int) -> tuple[ProducerIdsRecord, int, int]:
    """The record and the block ``(first id, size)`` it gives ``broker_id``."""
    start = image.next_producer_id
    rec = ProducerIdsRecord(
        broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=start + BLOCK_SIZE
    )
    return rec, start, BLOCK_SIZE
