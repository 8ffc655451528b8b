"""Kafka's ACL model and decision rule, importable from here as before: it lives in ``kafkalite.common.acl``
(as Kafka's in ``org.apache.kafka.common.acl``) because the KRaft controller, a layer below ``security``,
validates and matches ACLs too."""

from kafkalite.common.acl import *  # noqa: F403
from kafkalite.common.acl import __all__  # noqa: F401
