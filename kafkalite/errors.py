"""Kafka's error codes as typed exceptions.

Each exception carries the numeric code and name Kafka uses on the wire, so a broker can turn any of
them into a response field unchanged and a reader of the book sees the same names Kafka's logs print.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base class: ``code`` and ``name`` are Kafka's (see Kafka's Errors enum)."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(f"{self.name}: {message}" if message else self.name)
        self.message = message


class UnknownServerError(KafkaError):
    """The broker failed in a way no other code describes."""

    code, name = -1, "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(KafkaError):
    code, name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(KafkaError):
    """A batch failed validation: bad CRC, bad sizes, unknown magic, truncated bytes."""

    code, name, retriable = 2, "CORRUPT_MESSAGE", True


class UnknownTopicOrPartitionError(KafkaError):
    code, name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True


class LeaderNotAvailableError(KafkaError):
    """The partition has no leader right now, typically mid-election."""

    code, name, retriable = 5, "LEADER_NOT_AVAILABLE", True


class NotLeaderOrFollowerError(KafkaError):
    """The broker is not the leader (or, for follower fetches, not a replica) of the partition."""

    code, name, retriable = 6, "NOT_LEADER_OR_FOLLOWER", True


class RequestTimedOutError(KafkaError):
    code, name, retriable = 7, "REQUEST_TIMED_OUT", True


class BufferExhaustedError(RequestTimedOutError):
    """The producer's ``buffer.memory`` stayed full for ``max.block.ms`` (Kafka's BufferExhaustedException, a
    TimeoutException: client-side, it has no code of its own on the wire)."""

    name = "BufferExhaustedException"


class BrokerNotAvailableError(KafkaError):
    code, name = 8, "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(KafkaError):
    """A replica the request names is not hosted, or is offline, on this broker."""

    code, name, retriable = 9, "REPLICA_NOT_AVAILABLE", True


class MessageTooLargeError(KafkaError):
    code, name = 10, "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(KafkaError):
    """A request came from a controller whose epoch is older than one already seen."""

    code, name = 11, "STALE_CONTROLLER_EPOCH"


class NetworkError(KafkaError):
    """The connection closed before a response arrived."""

    code, name, retriable = 13, "NETWORK_EXCEPTION", True


class CoordinatorLoadInProgressError(KafkaError):
    """The coordinator is still loading its state from the log."""

    code, name, retriable = 14, "COORDINATOR_LOAD_IN_PROGRESS", True


class CoordinatorNotAvailableError(KafkaError):
    code, name, retriable = 15, "COORDINATOR_NOT_AVAILABLE", True


class NotCoordinatorError(KafkaError):
    """This broker is not the coordinator for the group or transactional id."""

    code, name, retriable = 16, "NOT_COORDINATOR", True


class InvalidTopicError(KafkaError):
    """A bad topic name, or a write to an internal topic that does not allow it."""

    code, name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(KafkaError):
    code, name = 18, "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(KafkaError):
    """The ISR is smaller than min.insync.replicas, so an acks=all write was refused."""

    code, name, retriable = 19, "NOT_ENOUGH_REPLICAS", True


class NotEnoughReplicasAfterAppendError(KafkaError):
    """Written to the leader, but the ISR shrank below min.insync.replicas before it was acknowledged."""

    code, name, retriable = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True


class InvalidRequiredAcksError(KafkaError):
    """acks was not 0, 1 or -1."""

    code, name = 21, "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(KafkaError):
    """The member's group generation is not the current one."""

    code, name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(KafkaError):
    """The member's protocol type or protocols share nothing with the group's."""

    code, name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(KafkaError):
    code, name = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(KafkaError):
    code, name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(KafkaError):
    """The session timeout is outside the broker's group min/max session timeout."""

    code, name = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing: the member must rejoin."""

    code, name = 27, "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(KafkaError):
    code, name = 28, "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(KafkaError):
    code, name = 29, "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(KafkaError):
    code, name = 30, "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(KafkaError):
    code, name = 31, "CLUSTER_AUTHORIZATION_FAILED"


class UnsupportedSaslMechanismError(KafkaError):
    """SaslHandshake named a mechanism the listener does not enable (``sasl.enabled.mechanisms``)."""

    code, name = 33, "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(KafkaError):
    """A request that the SASL exchange does not allow at this point (e.g. before authenticating)."""

    code, name = 34, "ILLEGAL_SASL_STATE"


class InvalidTimestampError(KafkaError):
    code, name = 32, "INVALID_TIMESTAMP"


class TopicAlreadyExistsError(KafkaError):
    code, name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(KafkaError):
    """A partition count below 1."""

    code, name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(KafkaError):
    """A replication factor below 1, or above the number of brokers available."""

    code, name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(KafkaError):
    code, name = 39, "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(KafkaError):
    code, name = 40, "INVALID_CONFIG"


class NotControllerError(KafkaError):
    code, name, retriable = 41, "NOT_CONTROLLER", True


class InvalidRequestError(KafkaError):
    """A malformed request, or one that is invalid in this broker's state."""

    code, name = 42, "INVALID_REQUEST"


class PolicyViolationError(KafkaError):
    """A request breaks a rule of the topic, e.g. DeleteRecords on a compacted topic."""

    code, name = 44, "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(KafkaError):
    """An idempotent producer's batch skipped a sequence number."""

    code, name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(KafkaError):
    """An idempotent producer resent a batch the broker has already written."""

    code, name = 46, "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(KafkaError):
    """A producer wrote with an epoch older than the current one for its producer id."""

    code, name = 47, "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(KafkaError):
    """A transactional call that the transaction's current state does not allow."""

    code, name = 48, "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(KafkaError):
    """The producer id is not the one the coordinator assigned to this transactional id."""

    code, name = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(KafkaError):
    """The requested transaction timeout is above the broker's transaction.max.timeout.ms."""

    code, name = 50, "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(KafkaError):
    """The previous transaction for this transactional id is still completing."""

    code, name, retriable = 51, "CONCURRENT_TRANSACTIONS", True


class TransactionCoordinatorFencedError(KafkaError):
    """A WriteTxnMarkers from a transaction coordinator whose epoch is older than the latest one seen."""

    code, name = 52, "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(KafkaError):
    code, name = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(KafkaError):
    """A security request (ACLs, ...) reached a broker with no authorizer configured."""

    code, name = 54, "SECURITY_DISABLED"


class KafkaStorageError(KafkaError):
    code, name, retriable = 56, "KAFKA_STORAGE_ERROR", True


class LogDirNotFoundError(KafkaError):
    """AlterReplicaLogDirs named a directory that is not one of the broker's ``log.dirs``."""

    code, name = 57, "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(KafkaError):
    code, name = 58, "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(KafkaError):
    """The broker has no state for the producer id (e.g. retention removed its last batch)."""

    code, name = 59, "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(KafkaError):
    code, name = 60, "REASSIGNMENT_IN_PROGRESS"


class NonEmptyGroupError(KafkaError):
    """DeleteGroups on a group that still has members."""

    code, name = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(KafkaError):
    code, name = 69, "GROUP_ID_NOT_FOUND"


class TopicDeletionDisabledError(KafkaError):
    """DeleteTopics on a cluster with ``delete.topic.enable=false``."""

    code, name = 73, "TOPIC_DELETION_DISABLED"


class FetchSessionIdNotFoundError(KafkaError):
    """The fetch names a fetch session this broker does not have (evicted, or from before a restart)."""

    code, name, retriable = 70, "FETCH_SESSION_ID_NOT_FOUND", True


class InvalidFetchSessionEpochError(KafkaError):
    """The fetch's session epoch is not the one the session expects next (a fetch was lost or repeated)."""

    code, name, retriable = 71, "INVALID_FETCH_SESSION_EPOCH", True


class FencedLeaderEpochError(KafkaError):
    """The request's leader epoch is older than the broker's: the sender's metadata is stale."""

    code, name, retriable = 74, "FENCED_LEADER_EPOCH", True


class UnknownLeaderEpochError(KafkaError):
    """The request's leader epoch is newer than the broker's: the broker has not caught up yet."""

    code, name, retriable = 75, "UNKNOWN_LEADER_EPOCH", True


class StaleBrokerEpochError(KafkaError):
    """A request from (or for) an earlier life of a broker that has since restarted."""

    code, name = 77, "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(KafkaError):
    """A new leader's high watermark has not caught up yet, so the offset cannot be served."""

    code, name, retriable = 78, "OFFSET_NOT_AVAILABLE", True


class MemberIdRequiredError(KafkaError):
    """A first JoinGroup: rejoin with the member id carried in the response."""

    code, name = 79, "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(KafkaError):
    code, name, retriable = 80, "PREFERRED_LEADER_NOT_AVAILABLE", True


class GroupMaxSizeReachedError(KafkaError):
    code, name = 81, "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(KafkaError):
    """Another member joined with the same group.instance.id (static membership)."""

    code, name = 82, "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(KafkaError):
    """No replica that the requested election may choose is alive."""

    code, name, retriable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True


class ElectionNotNeededError(KafkaError):
    """The partition already has the leader the election would pick."""

    code, name, retriable = 84, "ELECTION_NOT_NEEDED", True


class NoReassignmentInProgressError(KafkaError):
    code, name = 85, "NO_REASSIGNMENT_IN_PROGRESS"


class InvalidRecordError(KafkaError):
    code, name = 87, "INVALID_RECORD"


class UnstableOffsetCommitError(KafkaError):
    """Offsets of a transaction still open were asked for with require_stable."""

    code, name, retriable = 88, "UNSTABLE_OFFSET_COMMIT", True


class ProducerFencedError(KafkaError):
    """A newer producer with the same transactional id has taken over."""

    code, name = 90, "PRODUCER_FENCED"


class InvalidUpdateVersionError(KafkaError):
    """An ISR change quoting a partition epoch the controller has moved past."""

    code, name = 95, "INVALID_UPDATE_VERSION"


class ResourceNotFoundError(KafkaError):
    """The named resource (e.g. a user's SCRAM credential) does not exist."""

    code, name = 91, "RESOURCE_NOT_FOUND"


class UnacceptableCredentialError(KafkaError):
    """A SCRAM credential Kafka refuses: empty user name, too few or too many iterations."""

    code, name = 93, "UNACCEPTABLE_CREDENTIAL"


class IneligibleReplicaError(KafkaError):
    """An ISR change adding a replica that may not join (offline, or fenced) (KIP-841)."""

    code, name = 107, "INELIGIBLE_REPLICA"


class UnknownTopicIdError(KafkaError):
    """A request names a topic by an id no topic has (any more)."""

    code, name = 100, "UNKNOWN_TOPIC_ID"
    retriable = True


class InconsistentTopicIdError(KafkaError):
    """A replica's log belongs to another topic id than the one the request names: its
    ``partition.metadata`` holds the id of an older topic of the same name (KIP-516)."""

    code, name = 103, "INCONSISTENT_TOPIC_ID"
    retriable = True


class SnapshotNotFoundError(KafkaError):
    """A FetchSnapshot for a snapshot the leader does not have (any more): fetch again from the log."""

    code, name = 98, "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(KafkaError):
    """A FetchSnapshot position outside the snapshot's bytes."""

    code, name = 99, "POSITION_OUT_OF_RANGE"


class DuplicateBrokerRegistrationError(KafkaError):
    """A broker registers with an id a live broker of another incarnation holds (KRaft)."""

    code, name = 101, "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(KafkaError):
    """A heartbeat or request from a broker id the controller has no registration for (KRaft)."""

    code, name = 102, "BROKER_ID_NOT_REGISTERED"


class InconsistentClusterIdError(KafkaError):
    """A node formatted for another cluster (its cluster id is not the quorum's)."""

    code, name = 104, "INCONSISTENT_CLUSTER_ID"


class NewLeaderElectedError(KafkaError):
    """An AlterPartition that the controller applied, but the partition's leader changed with it (KIP-903)."""

    code, name = 108, "NEW_LEADER_ELECTED"


class FencedMemberEpochError(KafkaError):
    """A consumer group member's epoch is not the coordinator's: it must drop its partitions and rejoin."""

    code, name = 110, "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(KafkaError):
    """A static member joins with an instance id another member still holds (it has not left with -2)."""

    code, name = 111, "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(KafkaError):
    """The server assignor a consumer group member asked for is not one of ``group.consumer.assignors``."""

    code, name = 112, "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(KafkaError):
    """An OffsetCommit from a consumer group member carries a member epoch that is not its current one."""

    code, name = 113, "STALE_MEMBER_EPOCH"


class InvalidRegularExpressionError(KafkaError):
    """A consumer group member's subscription regex does not compile."""

    code, name = 128, "INVALID_REGULAR_EXPRESSION"


_BY_CODE = {cls.code: cls for cls in KafkaError.__subclasses__()}


def error_for_code(code: int) -> type[KafkaError] | None:
    """The exception class for a Kafka error code, ``None`` for 0 (no error), ``KafkaError`` itself for a code
    not listed here."""
    if code == 0:
        return None
    return _BY_CODE.get(code, KafkaError)


def error_name(code: int) -> str:
    """Kafka's name for an error code: ``"NONE"`` for 0, ``"UNKNOWN_SERVER_ERROR"`` for a code not listed here
    (what Kafka's ``Errors.forCode`` falls back to)."""
    if code == 0:
        return "NONE"
    cls = _BY_CODE.get(code)
    return cls.name if cls is not None else KafkaError.name
