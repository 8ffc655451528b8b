"""Kafka's error codes: codes, names and retriable flags as in Kafka's ``Errors`` enum, and the lookups."""

from __future__ import annotations

import pytest

from kafkalite import errors
from kafkalite.errors import KafkaError, error_for_code, error_name

# code -> (name, retriable), checked against org.apache.kafka.common.protocol.Errors and whether each
# error's exception extends RetriableException.
EXPECTED: dict[int, tuple[str, bool]] = {
    -1: ("UNKNOWN_SERVER_ERROR", False),
    1: ("OFFSET_OUT_OF_RANGE", False),
    2: ("CORRUPT_MESSAGE", True),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True),
    5: ("LEADER_NOT_AVAILABLE", True),
    6: ("NOT_LEADER_OR_FOLLOWER", True),
    7: ("REQUEST_TIMED_OUT", True),
    8: ("BROKER_NOT_AVAILABLE", False),
    9: ("REPLICA_NOT_AVAILABLE", True),
    10: ("MESSAGE_TOO_LARGE", False),
    11: ("STALE_CONTROLLER_EPOCH", False),
    13: ("NETWORK_EXCEPTION", True),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", True),
    16: ("NOT_COORDINATOR", True),
    17: ("INVALID_TOPIC_EXCEPTION", False),
    18: ("RECORD_LIST_TOO_LARGE", False),
    19: ("NOT_ENOUGH_REPLICAS", True),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
    21: ("INVALID_REQUIRED_ACKS", False),
    22: ("ILLEGAL_GENERATION", False),
    23: ("INCONSISTENT_GROUP_PROTOCOL", False),
    24: ("INVALID_GROUP_ID", False),
    25: ("UNKNOWN_MEMBER_ID", False),
    26: ("INVALID_SESSION_TIMEOUT", False),
    27: ("REBALANCE_IN_PROGRESS", False),
    28: ("INVALID_COMMIT_OFFSET_SIZE", False),
    29: ("TOPIC_AUTHORIZATION_FAILED", False),
    30: ("GROUP_AUTHORIZATION_FAILED", False),
    31: ("CLUSTER_AUTHORIZATION_FAILED", False),
    32: ("INVALID_TIMESTAMP", False),
    33: ("UNSUPPORTED_SASL_MECHANISM", False),
    34: ("ILLEGAL_SASL_STATE", False),
    36: ("TOPIC_ALREADY_EXISTS", False),
    37: ("INVALID_PARTITIONS", False),
    38: ("INVALID_REPLICATION_FACTOR", False),
    39: ("INVALID_REPLICA_ASSIGNMENT", False),
    40: ("INVALID_CONFIG", False),
    41: ("NOT_CONTROLLER", True),
    42: ("INVALID_REQUEST", False),
    44: ("POLICY_VIOLATION", False),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    46: ("DUPLICATE_SEQUENCE_NUMBER", False),
    47: ("INVALID_PRODUCER_EPOCH", False),
    48: ("INVALID_TXN_STATE", False),
    49: ("INVALID_PRODUCER_ID_MAPPING", False),
    50: ("INVALID_TRANSACTION_TIMEOUT", False),
    51: ("CONCURRENT_TRANSACTIONS", True),
    52: ("TRANSACTION_COORDINATOR_FENCED", False),
    53: ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False),
    54: ("SECURITY_DISABLED", False),
    56: ("KAFKA_STORAGE_ERROR", True),
    57: ("LOG_DIR_NOT_FOUND", False),
    58: ("SASL_AUTHENTICATION_FAILED", False),
    59: ("UNKNOWN_PRODUCER_ID", False),
    60: ("REASSIGNMENT_IN_PROGRESS", False),
    68: ("NON_EMPTY_GROUP", False),
    69: ("GROUP_ID_NOT_FOUND", False),
    70: ("FETCH_SESSION_ID_NOT_FOUND", True),
    71: ("INVALID_FETCH_SESSION_EPOCH", True),
    73: ("TOPIC_DELETION_DISABLED", False),
    74: ("FENCED_LEADER_EPOCH", True),
    75: ("UNKNOWN_LEADER_EPOCH", True),
    77: ("STALE_BROKER_EPOCH", False),
    78: ("OFFSET_NOT_AVAILABLE", True),
    79: ("MEMBER_ID_REQUIRED", False),
    80: ("PREFERRED_LEADER_NOT_AVAILABLE", True),
    81: ("GROUP_MAX_SIZE_REACHED", False),
    82: ("FENCED_INSTANCE_ID", False),
    83: ("ELIGIBLE_LEADERS_NOT_AVAILABLE", True),
    84: ("ELECTION_NOT_NEEDED", True),
    85: ("NO_REASSIGNMENT_IN_PROGRESS", False),
    87: ("INVALID_RECORD", False),
    88: ("UNSTABLE_OFFSET_COMMIT", True),
    90: ("PRODUCER_FENCED", False),
    91: ("RESOURCE_NOT_FOUND", False),
    93: ("UNACCEPTABLE_CREDENTIAL", False),
    95: ("INVALID_UPDATE_VERSION", False),
    98: ("SNAPSHOT_NOT_FOUND", False),
    99: ("POSITION_OUT_OF_RANGE", False),
    100: ("UNKNOWN_TOPIC_ID", True),
    101: ("DUPLICATE_BROKER_REGISTRATION", False),
    102: ("BROKER_ID_NOT_REGISTERED", False),
    103: ("INCONSISTENT_TOPIC_ID", True),
    104: ("INCONSISTENT_CLUSTER_ID", False),
    108: ("NEW_LEADER_ELECTED", False),
    107: ("INELIGIBLE_REPLICA", False),
    110: ("FENCED_MEMBER_EPOCH", False),
    111: ("UNRELEASED_INSTANCE_ID", False),
    112: ("UNSUPPORTED_ASSIGNOR", False),
    113: ("STALE_MEMBER_EPOCH", False),
    128: ("INVALID_REGULAR_EXPRESSION", False),
}

ALL = KafkaError.__subclasses__()


def test_every_code_is_unique_and_listed() -> None:
    codes = [cls.code for cls in ALL]
    assert len(codes) == len(set(codes))
    names = [cls.name for cls in ALL]
    assert len(names) == len(set(names))
    assert {cls.code: (cls.name, cls.retriable) for cls in ALL} == EXPECTED


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_round_trip(cls: type[KafkaError]) -> None:
    assert error_for_code(cls.code) is cls
    assert error_name(cls.code) == cls.name
    assert cls.__name__.endswith("Error")
    assert getattr(errors, cls.__name__) is cls
    assert issubclass(cls, KafkaError)


def test_no_error_and_unknown_codes() -> None:
    assert error_for_code(0) is None
    assert error_name(0) == "NONE"
    assert error_for_code(9999) is KafkaError  # unchanged fallback: Kafka maps it to UNKNOWN_SERVER_ERROR
    assert error_name(9999) == "UNKNOWN_SERVER_ERROR"
    assert error_for_code(-1) is errors.UnknownServerError


@pytest.mark.parametrize(
    ("cls", "retriable"),
    [
        (errors.NotLeaderOrFollowerError, True),
        (errors.LeaderNotAvailableError, True),
        (errors.NotEnoughReplicasError, True),
        (errors.NotEnoughReplicasAfterAppendError, True),
        (errors.NotCoordinatorError, True),
        (errors.CoordinatorLoadInProgressError, True),
        (errors.ConcurrentTransactionsError, True),
        (errors.FencedLeaderEpochError, True),
        (errors.NotControllerError, True),
        (errors.NetworkError, True),
        (errors.RequestTimedOutError, True),
        (errors.StaleControllerEpochError, False),
        (errors.RebalanceInProgressError, False),
        (errors.IllegalGenerationError, False),
        (errors.ProducerFencedError, False),
        (errors.OutOfOrderSequenceNumberError, False),
        (errors.TopicAuthorizationFailedError, False),
        (errors.BrokerNotAvailableError, False),
        (errors.OffsetOutOfRangeError, False),
    ],
)
def test_retriable_flags(cls: type[KafkaError], retriable: bool) -> None:
    assert cls.retriable is retriable


def test_exceptions_carry_code_and_message() -> None:
    e = errors.NotLeaderOrFollowerError("broker 2 leads t-0")
    assert str(e) == "NOT_LEADER_OR_FOLLOWER: broker 2 leads t-0"
    assert (e.code, e.message) == (6, "broker 2 leads t-0")
    assert str(errors.RebalanceInProgressError()) == "REBALANCE_IN_PROGRESS"
    with pytest.raises(KafkaError):
        raise errors.ProducerFencedError("epoch 3 < 4")
