"""``AclControlManager``: CreateAcls and DeleteAcls on the active controller, as ACL metadata records.

As Kafka's: each new ACL becomes an ``AccessControlEntryRecord`` under a fresh random id; an ACL that
already exists (or comes twice in one request) succeeds without a record; a refused one is
INVALID_REQUEST with the reason and the others in the request still go ahead. DeleteAcls writes a
``RemoveAccessControlEntryRecord`` for every ACL any filter matches (once, however many filters match
it) and answers each filter with the ACLs it matched. The records of one request go into one batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kafkalite.common.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    validate,
)
from kafkalite.errors import InvalidRequestError
from kafkalite.metadata.image import MetadataImage
from kafkalite.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from kafkalite.protocol.security_admin import (
    AclCreation,
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)


def acl_binding(r: AccessControlEntryRecord) -> AclBinding:
    """The binding an ACL record holds."""
    return AclBinding(
        ResourcePattern(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type)),
        AccessControlEntry(r.principal, r.host, Operation(r.operation), Permission(r.permission_type)),
    )


def _binding(c: AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType(c.resource_type), c.resource_name, PatternType(c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, Operation(c.operation), Permission(c.permission_type)),
    )


def _filter(f: DeleteAclsFilter) -> AclBindingFilter:
    flt = AclBindingFilter(
        ResourceType(f.resource_type_filter), f.resource_name_filter, PatternType(f.pattern_type_filter),
        f.principal_filter, f.host_filter, Operation(f.operation), Permission(f.permission_type),
    )  # fmt: skip
    if flt.pattern == PatternType.UNKNOWN or flt.resource_type == ResourceType.UNKNOWN:
        raise InvalidRequestError("Unknown patternFilter.")
    if flt.operation == Operation.UNKNOWN or flt.permission == Permission.UNKNOWN:
        raise InvalidRequestError("Unknown entryFilter.")
    return flt


def create_acls(
    image: MetadataImage, req: CreateAclsRequest, new_id: Callable[[], uuid.UUID]
) -> tuple[list[AccessControlEntryRecord], CreateAclsResponse]:
    """The records for ``req`` against ``image``; ``new_id`` draws a random id (the controller's rng)."""
    existing = {acl_binding(r) for r in image.acls.values()}
    records: list[AccessControlEntryRecord] = []
    results: list[AclCreationResult] = []
    for c in req.creations:
        try:
            b = _binding(c)
        except ValueError as e:
            results.append(
                AclCreationResult(error_code=InvalidRequestError.code, error_message=f"invalid ACL: {e}")
            )
            continue
        why = validate(b)
        if why is not None:
            results.append(AclCreationResult(error_code=InvalidRequestError.code, error_message=why))
            continue
        if b not in existing:
            existing.add(b)
            acl_id = new_id()
            while acl_id in image.acls or any(r.id == acl_id for r in records):
                acl_id = new_id()
            p, e = b.pattern, b.entry
            records.append(
                AccessControlEntryRecord(
                    id=acl_id,
                    resource_type=int(p.type),
                    resource_name=p.name,
                    pattern_type=int(p.pattern),
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission),
                )  # fmt: skip
            )
        results.append(AclCreationResult())
    return records, CreateAclsResponse(results=tuple(results))


def delete_acls(
    image: MetadataImage, req: DeleteAclsRequest
) -> tuple[list[RemoveAccessControlEntryRecord], DeleteAclsResponse]:
    acls = sorted(image.acls.items(), key=lambda kv: acl_binding(kv[1]))
    removed: dict[uuid.UUID, None] = {}
    results: list[DeleteAclsFilterResult] = []
    for f in req.filters:
        try:
            flt = _filter(f)
        except ValueError as e:
            results.append(DeleteAclsFilterResult(error_code=InvalidRequestError.code, error_message=str(e)))
            continue
        except InvalidRequestError as e:
            results.append(DeleteAclsFilterResult(error_code=e.code, error_message=e.message))
            continue
        matched = []
        for acl_id, r in acls:
            b = acl_binding(r)
            if flt.matches(b):
                removed[acl_id] = None
                matched.append(
                    DeleteAclsMatchingAcl(
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        pattern_type=r.pattern_type,
                        principal=r.principal,
                        host=r.host,
                        operation=r.operation,
                        permission_type=r.permission_type,
                    )  # fmt: skip
                )
        results.append(DeleteAclsFilterResult(matching_acls=tuple(matched)))
    records = [RemoveAccessControlEntryRecord(id=i) for i in removed]
    return records, DeleteAclsResponse(filter_results=tuple(results))


__all__ = ["acl_binding", "create_acls", "delete_acls"]
