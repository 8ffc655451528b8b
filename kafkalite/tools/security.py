"""``kafkalite acls`` and ``kafkalite configs --entity-type users``: kafka-acls and kafka-configs for ACLs
and SCRAM users, over Kafka's protocol (CreateAcls, DescribeAcls, DeleteAcls, AlterUserScramCredentials,
DescribeUserScramCredentials)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kafkalite.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    parse_enum,
)


def resources(
    topics: Sequence[str], groups: Sequence[str], txn_ids: Sequence[str], cluster: bool
) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in topics] + [(ResourceType.GROUP, g) for g in groups]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in txn_ids]
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def bindings_to_add(
    res: list[tuple[ResourceType, str]],
    pattern: str,
    allow: Sequence[str],
    deny: Sequence[str],
    operations: Sequence[str],
    allow_hosts: Sequence[str],
    deny_hosts: Sequence[str],
) -> list[AclBinding]:
    """kafka-acls --add: every (resource, principal, host, operation) combination."""
    ptype = parse_enum(PatternType, pattern)
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("--add takes --resource-pattern-type literal or prefixed")
    if not res:
        raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not (allow or deny):
        raise ValueError("name a principal: --allow-principal or --deny-principal")
    ops = [parse_enum(Operation, o) for o in operations] or [Operation.ALL]
    out = []
    for rtype, name in res:
        rp = ResourcePattern(rtype, name, ptype)  # type: ignore[arg-type]
        for perm, principals, hosts in (
            (Permission.ALLOW, allow, allow_hosts),
            (Permission.DENY, deny, deny_hosts),
        ):
            for p in principals:
                for h in hosts or ["*"]:
                    out.extend(AclBinding(rp, AccessControlEntry(p, h, op, perm)) for op in ops)  # type: ignore[arg-type]
    return out


def filters(
    res: list[tuple[ResourceType, str]], pattern: str, principal: str | None = None
) -> list[AclBindingFilter]:
    ptype = parse_enum(PatternType, pattern)
    if not res:
        return [AclBindingFilter(principal=principal)]
    return [AclBindingFilter(rt, name, ptype, principal) for rt, name in res]  # type: ignore[arg-type]


def format_acls(bindings: Sequence[AclBinding]) -> str:
    """kafka-acls --list: one block per resource pattern, one line per entry."""
    lines: list[str] = []
    current = None
    for b in sorted(bindings, key=lambda x: (x.pattern, x.entry)):
        if b.pattern != current:
            current = b.pattern
            if lines:
                lines.append("")
            p = b.pattern
            lines.append(f"Current ACLs for resource `ResourcePattern(resourceType={p.type.name}, name={p.name}, "
                         f"patternType={p.pattern.name})`: ")  # fmt: skip
        e = b.entry
        lines.append(f" \t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
                     f"permissionType={e.permission.name})")  # fmt: skip
    return "\n".join(lines)


_SCRAM = re.compile(r"(SCRAM-SHA-(?:256|512))=\[([^\]]*)\]")


def parse_scram_config(text: str) -> list[tuple[str, str, int]]:
    """``SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[iterations=8192,password=y]`` -> (mechanism, password,
    iterations) triples; a clear error for anything else."""
    out = []
    rest = _SCRAM.sub("", text).strip(", ")
    if rest:
        raise ValueError(
            f"--add-config understands SCRAM-SHA-256=[password=...] and SCRAM-SHA-512=[...], not {rest!r}"
        )
    for mech, inner in _SCRAM.findall(text):
        kv = dict(p.split("=", 1) for p in inner.split(",") if "=" in p)
        if "password" not in kv:
            raise ValueError(f"{mech} needs password=...")
        out.append((mech, kv["password"], int(kv.get("iterations", 4096))))
    return out


def describe_users(admin: Any, users: Sequence[str] | None) -> str:
    got = admin.describe_scram(users)
    return "\n".join(
        f"SCRAM credential configs for user-principal '{u}' are "
        + ", ".join(f"{m}=iterations={i}" for m, i in creds)
        for u, creds in sorted(got.items())
    )


__all__ = ["bindings_to_add", "describe_users", "filters", "format_acls", "parse_scram_config", "resources"]
