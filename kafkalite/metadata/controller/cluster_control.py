"""``ClusterControlManager``: broker registrations, heartbeats and sessions, on the active controller.

A broker's epoch is the offset of its RegisterBrokerRecord. It registers fenced; it is unfenced when a
heartbeat shows it has replayed the log up to its own registration (so it knows every partition it
hosts), and fenced again when no heartbeat came for ``broker.session.timeout.ms``. Heartbeat times are
the active controller's soft state, as in Kafka's ``BrokerHeartbeatManager``: a newly active controller
gives every registered broker a fresh session instead of trusting times it never saw.
"""

from __future__ import annotations

from kafkalite.errors import (
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    StaleBrokerEpochError,
)
from kafkalite.metadata.image import BrokerRegistration, MetadataImage
from kafkalite.metadata.records import BrokerEndpoint, RegisterBrokerRecord
from kafkalite.protocol.broker_lifecycle import BrokerRegistrationRequest


class ClusterControlManager:
    def __init__(self, cluster_id: str, session_timeout_ms: int) -> None:
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.last_contact: dict[int, int] = {}

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        self.last_contact = {b: now_ms for b in image.brokers}

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        t = self.last_contact.get(broker_id)
        return t is not None and now_ms - t < self.session_timeout_ms

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_contact[broker_id] = now_ms

    def register(
        self, image: MetadataImage, req: BrokerRegistrationRequest, new_epoch: int, now_ms: int
    ) -> RegisterBrokerRecord:
        if req.cluster_id != self.cluster_id:
            raise InconsistentClusterIdError(f"expected cluster id {self.cluster_id}, got {req.cluster_id}")
        existing = image.brokers.get(req.broker_id)
        if (
            existing is not None
            and existing.incarnation_id != req.incarnation_id
            and not existing.fenced  # a fenced broker has no session (a clean shutdown ends fenced)
            and self.has_valid_session(req.broker_id, now_ms)
        ):
            raise DuplicateBrokerRegistrationError(f"another broker is registered with id {req.broker_id}")
        self.touch(req.broker_id, now_ms)
        return RegisterBrokerRecord(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
            broker_epoch=new_epoch,
            end_points=tuple(
                BrokerEndpoint(name=x.name, host=x.host, port=x.port, security_protocol=x.security_protocol)
                for x in req.listeners
            ),
            rack=req.rack,
            fenced=True,
            log_dirs=tuple(sorted(req.log_dirs)),
        )

    @staticmethod
    def check_broker_epoch(image: MetadataImage, broker_id: int, epoch: int) -> BrokerRegistration:
        b = image.brokers.get(broker_id)
        if b is None:
            raise StaleBrokerEpochError(f"no broker registration found for broker {broker_id}")
        if b.epoch != epoch:
            raise StaleBrokerEpochError(f"expected broker epoch {b.epoch}, got {epoch}")
        return b

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session ran out."""
        return [
            b.id
            for b in sorted(image.brokers.values(), key=lambda b: b.id)
            if not b.fenced and not self.has_valid_session(b.id, now_ms)
        ]

    def next_expiry_ms(self, image: MetadataImage) -> int | None:
        times = [self.last_contact.get(b.id, 0) for b in image.brokers.values() if not b.fenced]
        return min(times) + self.session_timeout_ms if times else None
