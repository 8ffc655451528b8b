"""``StandardAuthorizer``: ACL decisions on a KRaft broker from the ACL records it replayed (Kafka's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``).

The same rule as the ZooKeeper-mode ``AclAuthorizer`` (``super.users``, ``allow.everyone.if.no.acl.found``,
DENY first, implied operations), over the bindings of the metadata image instead of znodes. A broker's
publisher hands it each new image's ACLs (``apply``); nothing writes ACLs here: CreateAcls and DeleteAcls
go to the active controller, which writes the records every node then replays.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkalite.metadata.controller.acl_control import acl_binding
from kafkalite.metadata.records import AccessControlEntryRecord
from kafkalite.security.acl import AclBinding, AclBindingFilter
from kafkalite.security.authorizer import AclDecisions


class StandardAuthorizer(AclDecisions):
    def __init__(self, props: Mapping[str, Any]) -> None:
        super().__init__(props)
        self._acls: Mapping[uuid.UUID, AccessControlEntryRecord] = {}

    def apply(self, acls: Mapping[uuid.UUID, AccessControlEntryRecord]) -> bool:
        """Take the ACLs of a newer image; False when they are the ones already applied."""
        if acls is self._acls:
            return False
        self._acls = acls
        self.bindings = sorted(acl_binding(r) for r in acls.values())
        return True

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings if flt.matches(b)]


__all__ = ["StandardAuthorizer"]
