"""Kafka's ACL model and its decision rule, with Kafka's codes and names.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry: principal, host,
operation, ALLOW or DENY. ``decide`` answers one question, may this principal from this host perform this
operation on this resource, the way Kafka's authorizer does:

1. a super user may do anything;
2. any matching DENY wins (matching: the principal or ``User:*``, the host or ``*``, the operation or
   ALL; the resource by literal name, the wildcard ``*``, or a prefix);
3. otherwise a matching ALLOW grants it, where some operations are implied by others: DESCRIBE by READ,
   WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS;
4. with no ACL at all on the resource, ``allow.everyone.if.no.acl.found`` decides (false by default).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def zk_name(self) -> str:  # "Topic", "TransactionalId", as in Kafka's znode paths
        return "".join(w.capitalize() for w in self.name.split("_"))


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    @property
    def zk_name(self) -> str:  # "Read", "DescribeConfigs"
        return "".join(w.capitalize() for w in self.name.split("_"))


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def zk_name(self) -> str:
        return self.name.capitalize()


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


IMPLIED_BY = {
    Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS},
}


def parse_enum(cls: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """``"Read"``, ``"read"``, ``"DescribeConfigs"`` or ``"DESCRIBE_CONFIGS"`` -> the member."""
    key = text.replace("-", "_").strip()
    for m in cls:
        if (
            key.upper() == m.name
            or key == getattr(m, "zk_name", None)
            or key.lower() == m.name.lower().replace("_", "")
        ):
            return m
    raise ValueError(f"unknown {cls.__name__} {text!r} (one of {', '.join(m.name for m in cls)})")


@dataclass(frozen=True, order=True)
class ResourcePattern:
    type: ResourceType
    name: str
    pattern: PatternType = PatternType.LITERAL

    def matches(self, rtype: ResourceType, name: str) -> bool:
        if self.type != rtype:
            return False
        if self.pattern == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        p, e = self.pattern, self.entry
        return (
            f"{e.permission.name} {e.principal} from {e.host} {e.operation.name} on "
            f"{p.type.name} {p.pattern.name}:{p.name}"
        )


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filters: None or ANY matches everything in that field; pattern MATCH
    finds every pattern that would apply to the literal name (literal, wildcard, prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        p, e = b.pattern, b.entry
        if self.resource_type != ResourceType.ANY and p.type != self.resource_type:
            return False
        if self.pattern == PatternType.MATCH:
            if self.name is not None and not p.matches(p.type, self.name):
                return False
        else:
            if self.pattern != PatternType.ANY and p.pattern != self.pattern:
                return False
            if self.name is not None and p.name != self.name:
                return False
        if self.principal is not None and e.principal != self.principal:
            return False
        if self.host is not None and e.host != self.host:
            return False
        if self.operation != Operation.ANY and e.operation != self.operation:
            return False
        return self.permission == Permission.ANY or e.permission == self.permission


def decide(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    rtype: ResourceType,
    name: str,
    *,
    super_users: Iterable[str] = (),
    allow_if_no_acl: bool = False,
) -> bool:
    """Kafka's rule (see the module docstring)."""
    if principal in set(super_users):
        return True
    matching = [b.entry for b in bindings if b.pattern.matches(rtype, name)]
    if not matching:
        return allow_if_no_acl

    def applies(e: AccessControlEntry) -> bool:
        return e.principal in (principal, WILDCARD_PRINCIPAL) and e.host in (host, WILDCARD)

    for e in matching:
        if e.permission == Permission.DENY and applies(e) and e.operation in (operation, Operation.ALL):
            return False
    allowed_by = {operation, Operation.ALL} | IMPLIED_BY.get(operation, set())
    return any(
        e.permission == Permission.ALLOW and applies(e) and e.operation in allowed_by for e in matching
    )


# ---------------------------------------------------- the wire form (CreateAcls, DescribeAcls, DeleteAcls)


def binding_to_wire(b: AclBinding, pattern_key: str = "pattern_type") -> dict:
    """CreateAcls names the pattern field ``resource_pattern_type``; the answers name it ``pattern_type``."""
    p, e = b.pattern, b.entry
    return {"resource_type": int(p.type), "resource_name": p.name, pattern_key: int(p.pattern),
            "principal": e.principal, "host": e.host, "operation": int(e.operation),
            "permission_type": int(e.permission)}  # fmt: skip


def binding_from_wire(d: dict) -> AclBinding:
    pattern = d.get("resource_pattern_type", d.get("pattern_type", PatternType.LITERAL))
    return AclBinding(
        ResourcePattern(ResourceType(d["resource_type"]), d["resource_name"], PatternType(pattern)),
        AccessControlEntry(
            d["principal"], d["host"], Operation(d["operation"]), Permission(d["permission_type"])
        ),
    )


def filter_to_wire(f: AclBindingFilter) -> dict:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern), "principal_filter": f.principal, "host_filter": f.host,
            "operation": int(f.operation), "permission_type": int(f.permission)}  # fmt: skip


def filter_from_wire(d: dict) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType(d["resource_type_filter"]), d.get("resource_name_filter"),
        PatternType(d.get("pattern_type_filter", PatternType.LITERAL)), d.get("principal_filter"),
        d.get("host_filter"), Operation(d["operation"]), Permission(d["permission_type"]),
    )  # fmt: skip


def validate(b: AclBinding) -> str | None:
    """Why Kafka would refuse to create this binding, or None."""
    p, e = b.pattern, b.entry
    if p.type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "the resource type must be specific"
    if p.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "the pattern type must be LITERAL or PREFIXED"
    if p.type == ResourceType.CLUSTER and (p.name != CLUSTER_NAME or p.pattern != PatternType.LITERAL):
        return f"the cluster resource is the literal name {CLUSTER_NAME!r}"
    if e.operation in (Operation.ANY, Operation.UNKNOWN) or e.permission in (
        Permission.ANY,
        Permission.UNKNOWN,
    ):
        return "the operation and the permission must be specific"
    if ":" not in e.principal:
        return f"a principal looks like TYPE:NAME (User:alice), got {e.principal!r}"
    if not p.name:
        return "the resource name is empty"
    return None


__all__ = [
    "ANONYMOUS", "CLUSTER_NAME", "AccessControlEntry", "AclBinding", "AclBindingFilter", "Operation",
    "PatternType", "Permission", "ResourcePattern", "ResourceType", "binding_from_wire", "binding_to_wire",
    "decide", "filter_from_wire", "filter_to_wire", "parse_enum", "validate",
]  # fmt: skip
