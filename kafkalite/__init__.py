"""kafkalite: a small but real implementation of Apache Kafka in Python.

The public face, what a notebook or a script needs::

    from kafkalite import Cluster, Producer, Consumer, Admin, TopicPartition, KafkaError

``Cluster`` is a simulated cluster (brokers and ZooKeeper in virtual time), ``Producer`` and ``Consumer``
its clients, ``Admin`` the blocking admin client of a running cluster (Kafka's ``Admin`` interface),
``TopicPartition`` a partition's name, and ``KafkaError`` the base of every Kafka error; each error class of
``kafkalite.errors`` (``NotLeaderOrFollowerError``, ...) can be imported from here too.

Each name is imported on first use (PEP 562), so ``import kafkalite`` stays cheap: the CLI and the
subprocess entry points import the package without paying for the broker, the protocol tables or numpy.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a few ms at every start)

__version__ = "0.1.0"

# Public name -> (module, attribute). Kept lazy: see the module docstring.
_EXPORTS: dict[str, tuple[str, str]] = {
    "Cluster": ("kafkalite.host.cluster", "Cluster"),
    "Producer": ("kafkalite.client.producer", "Producer"),
    "Consumer": ("kafkalite.client.consumer", "Consumer"),
    "Admin": ("kafkalite.host.admin_client", "AdminClient"),
    "TopicPartition": ("kafkalite.protocol.api", "TopicPartition"),
    "KafkaError": ("kafkalite.errors", "KafkaError"),
}

__all__ = [
    "Admin",
    "Cluster",
    "Consumer",
    "KafkaError",
    "Producer",
    "TopicPartition",
    "__version__",
    "errors",
]

if TYPE_CHECKING:
    from kafkalite import errors
    from kafkalite.client.consumer import Consumer
    from kafkalite.client.producer import Producer
    from kafkalite.errors import KafkaError
    from kafkalite.host.admin_client import AdminClient as Admin
    from kafkalite.host.cluster import Cluster
    from kafkalite.protocol.api import TopicPartition


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module), attr)
    elif name == "errors" or name.endswith("Error"):
        errors = importlib.import_module("kafkalite.errors")
        if name == "errors":
            value = errors
        else:
            value = getattr(errors, name, None)
            if not (isinstance(value, type) and issubclass(value, errors.KafkaError)):
                raise AttributeError(f"module 'kafkalite' has no attribute {name!r}")
    else:
        raise AttributeError(f"module 'kafkalite' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    errors = importlib.import_module("kafkalite.errors")
    error_classes = [
        n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.KafkaError)
    ]
    return sorted({*globals(), *__all__, *error_classes})
