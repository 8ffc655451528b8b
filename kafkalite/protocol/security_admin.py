"""CreateAcls, DeleteAcls and AlterUserScramCredentials as dataclasses: what a KRaft broker forwards to the
active controller (KIP-590), which turns them into ACL and SCRAM metadata records.

The TCP listener reads and writes these APIs as plain dicts (``codec/messages.py`` declares them); these
classes bind the same field names, so ``from_wire`` / ``to_wire`` go between the two. They are not served
on the wire themselves (``versions`` is None), only carried between a broker and its controller.
"""

from __future__ import annotations

from kafkalite.protocol.api import NO_ERROR, ApiKey, Message, Request, Response, message
from kafkalite.protocol.codec.binding import wire

LITERAL = 3
"""Kafka's ``PatternType.LITERAL``: the pattern of a v0 request, which cannot name one."""

# ----------------------------------------------------------------------------------------- CreateAcls


@message
class AclCreation(Message):
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    resource_pattern_type: int = wire("int8", "1+", LITERAL)
    principal: str = wire("string")
    host: str = wire("string")
    operation: int = wire("int8")
    permission_type: int = wire("int8")


@message
class AclCreationResult(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")


@message
class CreateAclsResponse(Response):
    api_key = ApiKey.CREATE_ACLS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[AclCreationResult, ...] = wire("[]struct", "0+", (), items=AclCreationResult)
    """One per creation, in the request's order."""


@message
class CreateAclsRequest(Request):
    api_key = ApiKey.CREATE_ACLS
    response_type = CreateAclsResponse
    creations: tuple[AclCreation, ...] = wire("[]struct", "0+", (), items=AclCreation)


# ----------------------------------------------------------------------------------------- DeleteAcls


@message
class DeleteAclsFilter(Message):
    """None (or ANY, 1) matches every value of that field."""

    resource_type_filter: int = wire("int8")
    resource_name_filter: str | None = wire("string", "0+", None, nullable="0+")
    pattern_type_filter: int = wire("int8", "1+", LITERAL)
    principal_filter: str | None = wire("string", "0+", None, nullable="0+")
    host_filter: str | None = wire("string", "0+", None, nullable="0+")
    operation: int = wire("int8")
    permission_type: int = wire("int8")


@message
class DeleteAclsMatchingAcl(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    resource_type: int = wire("int8")
    resource_name: str = wire("string")
    pattern_type: int = wire("int8", "1+", LITERAL)
    principal: str = wire("string")
    host: str = wire("string")
    operation: int = wire("int8")
    permission_type: int = wire("int8")


@message
class DeleteAclsFilterResult(Message):
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")
    matching_acls: tuple[DeleteAclsMatchingAcl, ...] = wire("[]struct", "0+", (), items=DeleteAclsMatchingAcl)


@message
class DeleteAclsResponse(Response):
    api_key = ApiKey.DELETE_ACLS
    throttle_time_ms: int = wire("int32", "0+", 0)
    filter_results: tuple[DeleteAclsFilterResult, ...] = wire(
        "[]struct", "0+", (), items=DeleteAclsFilterResult
    )
    """One per filter, in the request's order: the ACLs it removed."""


@message
class DeleteAclsRequest(Request):
    api_key = ApiKey.DELETE_ACLS
    response_type = DeleteAclsResponse
    filters: tuple[DeleteAclsFilter, ...] = wire("[]struct", "0+", (), items=DeleteAclsFilter)


# -------------------------------------------------------------------------- AlterUserScramCredentials


@message
class ScramCredentialDeletion(Message):
    name: str = wire("string")
    mechanism: int = wire("int8")
    """1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (Kafka's ``ScramMechanism`` types); anything else is unknown."""


@message
class ScramCredentialUpsertion(Message):
    name: str = wire("string")
    mechanism: int = wire("int8")
    iterations: int = wire("int32")
    salt: bytes = wire("bytes")
    salted_password: bytes = wire("bytes")
    """The client salts the password itself (KIP-554): the password never reaches a broker."""


@message
class AlterUserScramCredentialsResult(Message):
    user: str = wire("string")
    error_code: int = wire("int16", "0+", NO_ERROR)
    error_message: str | None = wire("string", "0+", None, nullable="0+")


@message
class AlterUserScramCredentialsResponse(Response):
    api_key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    throttle_time_ms: int = wire("int32", "0+", 0)
    results: tuple[AlterUserScramCredentialsResult, ...] = wire(
        "[]struct", "0+", (), items=AlterUserScramCredentialsResult
    )


@message
class AlterUserScramCredentialsRequest(Request):
    api_key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    response_type = AlterUserScramCredentialsResponse
    deletions: tuple[ScramCredentialDeletion, ...] = wire("[]struct", "0+", (), items=ScramCredentialDeletion)
    upsertions: tuple[ScramCredentialUpsertion, ...] = wire(
        "[]struct", "0+", (), items=ScramCredentialUpsertion
    )


def users_of(req: AlterUserScramCredentialsRequest) -> list[str]:
    """Every user a request names, once each, in order (for answers that fail the whole request)."""
    return list(dict.fromkeys([*(d.name for d in req.deletions), *(u.name for u in req.upsertions)]))


__all__ = [
    "AclCreation", "AclCreationResult", "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse",
    "AlterUserScramCredentialsResult", "CreateAclsRequest", "CreateAclsResponse", "DeleteAclsFilter",
    "DeleteAclsFilterResult", "DeleteAclsMatchingAcl", "DeleteAclsRequest", "DeleteAclsResponse",
    "ScramCredentialDeletion", "ScramCredentialUpsertion", "users_of",
]  # fmt: skip
