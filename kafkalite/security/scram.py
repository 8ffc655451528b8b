"""SCRAM credentials and both ends of the exchange, importable from here as before: they live in
``kafkalite.common.scram`` (as Kafka's ``ScramFormatter`` in ``org.apache.kafka.common``) because the KRaft
controller, a layer below ``security``, derives the stored keys of the credentials it writes."""

from kafkalite.common.scram import *  # noqa: F403
from kafkalite.common.scram import __all__  # noqa: F401
