"""The records of ``__cluster_metadata``, as Kafka's ``metadata/src/main/resources/common/metadata/*.json``.

Each record type is declared once, as a frozen dataclass whose fields carry their wire binding (Kafka's
field names, version ranges, nullability and tags); the schema and both conversions derive from that
(``kafkalite.protocol.codec.binding``). ``api_key`` is the record's type id in Kafka; ``version`` is the
version kafkalite writes (the highest whose every non-tagged field kafkalite fills). Every metadata record
version is flexible. ``MetadataRecordSerde`` frames them in the log.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, ClassVar

from kafkalite.protocol.api import Message, message
from kafkalite.protocol.codec.binding import wire

if TYPE_CHECKING:
    from kafkalite.common.scram import ScramCredential

ZERO_UUID = uuid.UUID(int=0)
DIR_MIGRATING = uuid.UUID(int=0)
"""A replica's directory when nothing is known of it (Kafka's ``DirectoryId.MIGRATING``: a record from
before KIP-858, or a broker that registered no dirs); it counts as online."""
DIR_UNASSIGNED = uuid.UUID(int=1)
"""A replica not placed in a dir yet (``DirectoryId.UNASSIGNED``): the broker will say where it put it
(AssignReplicasToDirs); it counts as online."""
DIR_LOST = uuid.UUID(int=2)
"""``DirectoryId.LOST``: the replica's dir is gone; never online."""
NO_LEADER = -1
NO_LEADER_CHANGE = -2
"""PartitionChangeRecord's ``leader`` when the leader did not change (Kafka's ``NO_LEADER_CHANGE``)."""


class MetadataRecord(Message):
    """Base of the record types: ``api_key`` names the type, ``version`` the version written."""

    __slots__ = ()
    api_key: ClassVar[int]
    version: ClassVar[int] = 0
    valid_versions: ClassVar[tuple[int, int]] = (0, 0)

    def write_version(self) -> int:
        """The version this record is written in: ``version``, unless it carries fields only a later
        version has."""
        return self.version


# ------------------------------------------------------------------------------------------------ brokers


@message
class BrokerEndpoint(Message):
    """One listener of a registered broker."""

    name: str = wire("string")
    host: str = wire("string")
    port: int = wire("uint16")
    security_protocol: int = wire("int16")
    """Kafka's ``SecurityProtocol`` id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL."""


@message
class BrokerFeature(Message):
    name: str = wire("string")
    min_supported_version: int = wire("int16")
    max_supported_version: int = wire("int16")


@message
class RegisterBrokerRecord(MetadataRecord):
    api_key = 0
    version = 3
    valid_versions = (0, 3)
    broker_id: int = wire("int32")
    is_migrating_zk_broker: bool = wire("bool", "2+", False)
    incarnation_id: uuid.UUID = wire("uuid", "0+", ZERO_UUID)
    broker_epoch: int = wire("int64", "0+", -1)
    end_points: tuple[BrokerEndpoint, ...] = wire("[]struct", "0+", (), items=BrokerEndpoint)
    features: tuple[BrokerFeature, ...] = wire("[]struct", "0+", (), items=BrokerFeature)
    rack: str | None = wire("string", "0+", None, nullable="0+")
    fenced: bool = wire("bool", "0+", True)
    """A broker registers fenced; the controller unfences it once it has caught up with the log."""
    in_controlled_shutdown: bool = wire("bool", "1+", False)
    log_dirs: tuple[uuid.UUID, ...] = wire("[]uuid", "3+", (), tag=0)


@message
class FenceBrokerRecord(MetadataRecord):
    api_key = 7
    id: int = wire("int32")
    epoch: int = wire("int64")


@message
class UnfenceBrokerRecord(MetadataRecord):
    api_key = 8
    id: int = wire("int32")
    epoch: int = wire("int64")


@message
class UnregisterBrokerRecord(MetadataRecord):
    api_key = 1
    broker_id: int = wire("int32")
    broker_epoch: int = wire("int64")


@message
class BrokerRegistrationChangeRecord(MetadataRecord):
    api_key = 17
    version = 2
    valid_versions = (0, 2)
    broker_id: int = wire("int32")
    broker_epoch: int = wire("int64")
    fenced: int = wire("int8", "0+", 0, tag=0)
    """-1 unfenced, 0 no change, 1 fenced (Kafka's ``BrokerRegistrationFencingChange``)."""
    in_controlled_shutdown: int = wire("int8", "1+", 0, tag=1)
    log_dirs: tuple[uuid.UUID, ...] = wire("[]uuid", "2+", (), tag=2)
    """The broker's online dirs now (KIP-858: some went offline); empty is no change."""


# ------------------------------------------------------------------------------------ topics, partitions


@message
class TopicRecord(MetadataRecord):
    api_key = 2
    name: str = wire("string")
    topic_id: uuid.UUID = wire("uuid")


@message
class RemoveTopicRecord(MetadataRecord):
    api_key = 9
    topic_id: uuid.UUID = wire("uuid")


@message
class PartitionRecord(MetadataRecord):
    """A new partition. ``partition_epoch`` counts every change to it; ``leader_epoch`` only leader
    changes (and, in Kafka, ISR shrinks that remove the leader's followers are not leader changes)."""

    api_key = 3
    version = 1
    valid_versions = (0, 2)
    partition_id: int = wire("int32", "0+", -1)
    topic_id: uuid.UUID = wire("uuid", "0+", ZERO_UUID)
    replicas: tuple[int, ...] = wire("[]int32", "0+", ())
    isr: tuple[int, ...] = wire("[]int32", "0+", ())
    removing_replicas: tuple[int, ...] = wire("[]int32", "0+", ())
    adding_replicas: tuple[int, ...] = wire("[]int32", "0+", ())
    leader: int = wire("int32", "0+", NO_LEADER)
    leader_recovery_state: int = wire("int8", "0+", 0, tag=0)
    leader_epoch: int = wire("int32", "0+", -1)
    partition_epoch: int = wire("int32", "0+", -1)
    directories: tuple[uuid.UUID, ...] = wire("[]uuid", "1+", ())
    """The log dir holding each replica, in replica order (KIP-858); empty reads as all DIR_MIGRATING."""
    eligible_leader_replicas: tuple[int, ...] | None = wire("[]int32", "2+", None, nullable="2+", tag=1)
    last_known_elr: tuple[int, ...] | None = wire("[]int32", "2+", None, nullable="2+", tag=2)

    def write_version(self) -> int:
        return _elr_version(self)


@message
class PartitionChangeRecord(MetadataRecord):
    """A change to a partition: a None field (a ``leader`` of -2) did not change."""

    api_key = 5
    version = 1
    valid_versions = (0, 2)
    partition_id: int = wire("int32", "0+", -1)
    topic_id: uuid.UUID = wire("uuid", "0+", ZERO_UUID)
    isr: tuple[int, ...] | None = wire("[]int32", "0+", None, nullable="0+", tag=0)
    leader: int = wire("int32", "0+", NO_LEADER_CHANGE, tag=1)
    replicas: tuple[int, ...] | None = wire("[]int32", "0+", None, nullable="0+", tag=2)
    removing_replicas: tuple[int, ...] | None = wire("[]int32", "0+", None, nullable="0+", tag=3)
    adding_replicas: tuple[int, ...] | None = wire("[]int32", "0+", None, nullable="0+", tag=4)
    leader_recovery_state: int = wire("int8", "0+", -1, tag=5)
    directories: tuple[uuid.UUID, ...] | None = wire("[]uuid", "1+", None, nullable="1+", tag=8)
    eligible_leader_replicas: tuple[int, ...] | None = wire("[]int32", "2+", None, nullable="2+", tag=6)
    last_known_elr: tuple[int, ...] | None = wire("[]int32", "2+", None, nullable="2+", tag=7)

    def write_version(self) -> int:
        return _elr_version(self)


def _elr_version(r: PartitionRecord | PartitionChangeRecord) -> int:
    """KIP-966's fields exist from version 2 on (Kafka writes 2 once ELR is supported): a record that
    carries them is written in 2, any other in the version kafkalite writes."""
    if r.eligible_leader_replicas is not None or r.last_known_elr is not None:
        return 2
    return r.version


# ------------------------------------------------------------------------------------ configs, features


@message
class ConfigRecord(MetadataRecord):
    """One config key of a resource (``resource_type``: Kafka's ``ConfigResource.Type``, 2 topic, 4
    broker); a null ``value`` deletes the key."""

    api_key = 4
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    name: str = wire("string")
    value: str | None = wire("string", "0+", None, nullable="0+")


@message
class FeatureLevelRecord(MetadataRecord):
    api_key = 12
    name: str = wire("string")
    feature_level: int = wire("int16")


@message
class NoOpRecord(MetadataRecord):
    """Written by the active controller now and then so the log (and every observer's lag) moves."""

    api_key = 20


# ------------------------------------------------------------------------------- producer ids, security


@message
class ProducerIdsRecord(MetadataRecord):
    """The controller handed ``broker_id`` a block: the next block starts at ``next_producer_id``."""

    api_key = 15
    broker_id: int = wire("int32")
    broker_epoch: int = wire("int64", "0+", -1)
    next_producer_id: int = wire("int64")


@message
class AccessControlEntryRecord(MetadataRecord):
    api_key = 18
    id: uuid.UUID = wire("uuid")
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    pattern_type: int = wire("int8")
    principal: str = wire("string")
    host: str = wire("string")
    operation: int = wire("int8")
    permission_type: int = wire("int8")


@message
class RemoveAccessControlEntryRecord(MetadataRecord):
    api_key = 19
    id: uuid.UUID = wire("uuid")


@message
class UserScramCredentialRecord(MetadataRecord):
    api_key = 11
    name: str = wire("string")
    mechanism: int = wire("int8")
    """1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (Kafka's ``ScramMechanism`` ids)."""
    salt: bytes = wire("bytes")
    stored_key: bytes = wire("bytes")
    server_key: bytes = wire("bytes")
    iterations: int = wire("int32")

    @classmethod
    def of(cls, name: str, mechanism: int, cred: ScramCredential) -> UserScramCredentialRecord:
        """The record of ``name``'s credential ``cred`` for ``mechanism`` (a ``ScramMechanism`` id)."""
        return cls(name=name, mechanism=mechanism, salt=cred.salt, stored_key=cred.stored_key,
                   server_key=cred.server_key, iterations=cred.iterations)  # fmt: skip


@message
class RemoveUserScramCredentialRecord(MetadataRecord):
    api_key = 22
    name: str = wire("string")
    mechanism: int = wire("int8")


RECORD_TYPES: dict[int, type[MetadataRecord]] = {
    cls.api_key: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        UserScramCredentialRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        RemoveUserScramCredentialRecord,
        BrokerRegistrationChangeRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        NoOpRecord,
    )
}
"""Every record type kafkalite reads, by Kafka's api key."""
