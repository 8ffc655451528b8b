"""The ACL authorizer: ACLs kept in the coordination store where Kafka's ZooKeeper authorizer keeps them,
cached by every broker, refreshed by change notifications.

Znodes, as in Kafka: a literal pattern's ACLs in ``/kafka-acl/<Type>/<name>``, a prefixed pattern's in
``/kafka-acl-extended/prefixed/<Type>/<name>``, each ``{"version":1,"acls":[{"principal":...,
"permissionType":"Allow","operation":"Read","host":"*"}]}``. A change writes a sequential notification
(``/kafka-acl-changes/acl_changes_...`` for literal, ``/kafka-acl-extended-changes/...`` for prefixed);
each broker watches both and reloads. Nothing is kept only in memory, so ACLs survive restarts.

Enabled when ``authorizer.class.name`` is set (any value: kafkalite has one authorizer); ``super.users``
(``User:admin;User:ops``) and ``allow.everyone.if.no.acl.found`` as in Kafka.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.coordination.store import NodeExists, NoNode
from kafkalite.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    decide,
    parse_enum,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
PREFIXED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
_TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID]


def enabled(props: Mapping[str, Any]) -> bool:
    return bool(str(props.get("authorizer.class.name") or "").strip())


def _root(pattern: PatternType) -> str:
    return PREFIXED_ROOT if pattern == PatternType.PREFIXED else LITERAL_ROOT


def _path(p: ResourcePattern) -> str:
    return f"{_root(p.pattern)}/{p.type.zk_name}/{p.name}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {"principal": e.principal, "permissionType": e.permission.zk_name, "operation": e.operation.zk_name,
         "host": e.host}
        for e in sorted(entries)
    ]  # fmt: skip
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> list[AccessControlEntry]:
    obj = json.loads(data or b'{"acls":[]}')
    return [
        AccessControlEntry(
            a["principal"], a["host"], parse_enum(Operation, a["operation"]),  # type: ignore[arg-type]
            parse_enum(Permission, a["permissionType"]),  # type: ignore[arg-type]
        )
        for a in obj.get("acls", [])
    ]  # fmt: skip


class AclDecisions:
    """Kafka's decision rule over ``bindings``, with ``super.users`` and ``allow.everyone.if.no.acl.found``
    from ``props``: what the ZooKeeper-mode ``AclAuthorizer`` and KRaft's ``StandardAuthorizer`` share;
    they differ only in where the bindings come from."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.super_users = tuple(
            s.strip() for s in str(props.get("super.users") or "").split(";") if s.strip()
        )
        self.allow_if_no_acl = str(props.get("allow.everyone.if.no.acl.found", "false")).lower() == "true"
        self.bindings: list[AclBinding] = []
        self.decisions = 0

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        self.decisions += 1
        return decide(
            self.bindings, principal, host, op, rtype, name,
            super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl,
        )  # fmt: skip

    def may_write_some_topic(self, principal: str, host: str) -> bool:
        """Kafka 3's alternative to IDEMPOTENT_WRITE on the cluster: WRITE allowed on at least one topic
        pattern (and not denied there)."""
        if principal in self.super_users:
            return True
        names = {b.pattern.name for b in self.bindings if b.pattern.type == ResourceType.TOPIC
                 and b.entry.permission == Permission.ALLOW and b.entry.operation in (Operation.WRITE, Operation.ALL)}  # fmt: skip
        return any(self.authorize(principal, host, Operation.WRITE, ResourceType.TOPIC, n) for n in names)


class AclAuthorizer(AclDecisions):
    """ACL decisions for one broker. ``zk`` is the broker's link to the store (``ZkLink`` or its remote
    twin); ``load()`` reads every ACL and arms the change watches."""

    def __init__(
        self, zk: Any, props: Mapping[str, Any], on_error: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(props)
        self.zk = zk
        self.on_error = on_error or (lambda _msg: None)

    # ---------------------------------------------------------------------------------- the store

    def load(self, _event: Any = None) -> None:
        """(Re)read every ACL; the watches on both change paths call this again on the next change."""
        zk = self.zk
        out: list[AclBinding] = []
        try:
            for changes in (LITERAL_CHANGES, PREFIXED_CHANGES):
                zk.create(changes, b"", make_parents=True) if zk.exists(changes) is None else None
                zk.get_children(changes, watch=self.load)
            for pattern in (PatternType.LITERAL, PatternType.PREFIXED):
                for rtype in _TYPES:
                    base = f"{_root(pattern)}/{rtype.zk_name}"
                    if zk.exists(base) is None:
                        continue
                    for name in zk.get_children(base):
                        data, _ = zk.get(f"{base}/{name}")
                        rp = ResourcePattern(rtype, name, pattern)
                        out.extend(AclBinding(rp, e) for e in decode_entries(data))
        except NodeExists:
            pass
        except Exception as e:  # noqa: BLE001 - keep the old cache; the next change or call retries
            self.on_error(f"could not load ACLs: {e!r}")
            return
        self.bindings = sorted(out)

    def _write(self, pattern: ResourcePattern, entries: set[AccessControlEntry]) -> None:
        zk, path = self.zk, _path(pattern)
        if entries:
            data = encode_entries(entries)
            try:
                zk.set(path, data)
            except NoNode:
                zk.create(path, data, make_parents=True)
        else:
            with contextlib.suppress(NoNode):
                zk.delete(path)
        if pattern.pattern == PatternType.PREFIXED:
            note = json.dumps({"version": 1, "resourceType": pattern.type.zk_name, "name": pattern.name,
                               "patternType": "Prefixed"}).encode()  # fmt: skip
            zk.create(f"{PREFIXED_CHANGES}/{CHANGE_PREFIX}", note, sequential=True, make_parents=True)
        else:
            note = f"{pattern.type.zk_name}:{pattern.name}".encode()
            zk.create(f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", note, sequential=True, make_parents=True)

    def _entries(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        try:
            data, _ = self.zk.get(_path(pattern))
        except NoNode:
            return set()
        return set(decode_entries(data))

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, new in by_pattern.items():
            old = self._entries(pattern)
            if not new <= old:
                self._write(pattern, old | new)
        self.load()

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        self.load()
        return [b for b in self.bindings if flt.matches(b)]

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        self.load()
        filters = list(filters)
        matched = [[b for b in self.bindings if f.matches(b)] for f in filters]
        gone: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for group in matched:
            for b in group:
                gone.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in gone.items():
            self._write(pattern, self._entries(pattern) - entries)
        self.load()
        return matched


__all__ = ["AclAuthorizer", "AclDecisions", "decode_entries", "enabled", "encode_entries"]
