"""``ScramControlManager``: AlterUserScramCredentials on the active controller, as SCRAM metadata records.

Kafka's rules, Kafka's codes: a user named twice in one request (two deletions, two upsertions, or one of
each) is DUPLICATE_RESOURCE; an empty user name, or too few (under 4096) or too many (over 16384)
iterations, UNACCEPTABLE_CREDENTIAL; a mechanism other than SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2),
UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist, RESOURCE_NOT_FOUND. Each user
gets one result, and the users that pass are written even when others fail. An upsertion carries the
salted password (KIP-554); the controller keeps only the two keys derived from it, as a ZooKeeper-mode
broker does.
"""

from __future__ import annotations

from kafkalite.common.scram import MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS, ScramCredential
from kafkalite.errors import ResourceNotFoundError, UnacceptableCredentialError, UnsupportedSaslMechanismError
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kafkalite.protocol.security_admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    ScramCredentialUpsertion,
)

DUPLICATE_RESOURCE = 92
MECHANISM_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}
"""Kafka's ``ScramMechanism`` type -> its name: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512."""

_Error = tuple[int, str]


def _check_name_and_mechanism(name: str, mechanism: int) -> _Error | None:
    if not name:
        return UnacceptableCredentialError.code, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return UnsupportedSaslMechanismError.code, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(u: ScramCredentialUpsertion) -> _Error | None:
    bad = _check_name_and_mechanism(u.name, u.mechanism)
    if bad is not None:
        return bad
    if u.iterations < MIN_ITERATIONS:
        return UnacceptableCredentialError.code, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return UnacceptableCredentialError.code, "Too many iterations"
    return None


def alter_credentials(
    image: MetadataImage, req: AlterUserScramCredentialsRequest
) -> tuple[list[MetadataRecord], AlterUserScramCredentialsResponse]:
    deletions: dict[str, int] = {}  # user -> mechanism
    upsertions: dict[str, ScramCredentialUpsertion] = {}
    errors: dict[str, _Error] = {}
    twice = (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in req.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = twice
            continue
        bad = _check_name_and_mechanism(d.name, d.mechanism)
        if bad is None and (d.name, d.mechanism) not in image.scram:
            bad = ResourceNotFoundError.code, "Attempt to delete a user credential that does not exist"
        if bad is not None:
            errors[d.name] = bad
        else:
            deletions[d.name] = d.mechanism
    for u in req.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upsertions.pop(u.name, None) is not None:
            errors[u.name] = twice
            continue
        bad = _check_upsertion(u)
        if bad is not None:
            errors[u.name] = bad
        else:
            upsertions[u.name] = u
    records: list[MetadataRecord] = []
    results: list[AlterUserScramCredentialsResult] = []
    for name, mechanism in deletions.items():
        records.append(RemoveUserScramCredentialRecord(name=name, mechanism=mechanism))
        results.append(AlterUserScramCredentialsResult(user=name))
    for name, u in upsertions.items():
        cred = ScramCredential.from_salted(
            MECHANISM_NAMES[u.mechanism], u.salted_password, u.salt, u.iterations
        )
        records.append(UserScramCredentialRecord.of(name, u.mechanism, cred))
        results.append(AlterUserScramCredentialsResult(user=name))
    for name, (code, msg) in errors.items():
        results.append(AlterUserScramCredentialsResult(user=name, error_code=code, error_message=msg))
    return records, AlterUserScramCredentialsResponse(results=tuple(results))


def credential_record(
    user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> UserScramCredentialRecord:
    """The record of a credential made from a password (what ``storage format --add-scram`` writes)."""
    cred = ScramCredential.create(mechanism, password, iterations, salt)
    return UserScramCredentialRecord.of(user, MECHANISM_TYPES[mechanism], cred)


__all__ = ["MECHANISM_NAMES", "alter_credentials", "credential_record"]
