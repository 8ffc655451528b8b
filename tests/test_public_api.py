"""The public face: ``from kafkalite import ...`` gives the classes a notebook or script needs, lazily."""

import pytest

import kafkalite
from kafkalite import errors
from kafkalite.client.consumer import Consumer
from kafkalite.client.producer import Producer
from kafkalite.host.admin_client import AdminClient
from kafkalite.host.cluster import Cluster
from kafkalite.protocol.api import TopicPartition
from tests.imports import modules_loaded


def test_public_names_are_the_package_classes():
    from kafkalite import Admin, KafkaError
    from kafkalite import Cluster as PublicCluster
    from kafkalite import Consumer as PublicConsumer
    from kafkalite import Producer as PublicProducer
    from kafkalite import TopicPartition as PublicTopicPartition

    assert PublicCluster is Cluster
    assert PublicProducer is Producer
    assert PublicConsumer is Consumer
    assert Admin is AdminClient
    assert PublicTopicPartition is TopicPartition
    assert KafkaError is errors.KafkaError
    assert kafkalite.errors is errors


def test_all_lists_the_public_names_and_each_resolves():
    assert set(kafkalite.__all__) == {
        "__version__",
        "errors",
        "Cluster",
        "Producer",
        "Consumer",
        "Admin",
        "TopicPartition",
        "KafkaError",
    }
    for name in kafkalite.__all__:
        assert getattr(kafkalite, name) is not None, name
    namespace: dict = {}
    exec("from kafkalite import *", namespace)
    assert {n for n in namespace if n != "__builtins__"} == set(kafkalite.__all__)


def test_every_error_class_is_importable_from_the_package():
    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, errors.KafkaError)]
    assert len(classes) > 50
    for cls in classes:
        assert getattr(kafkalite, cls.__name__) is cls
        assert cls.__name__ in dir(kafkalite)
    from kafkalite import NotLeaderOrFollowerError, ProducerFencedError

    assert NotLeaderOrFollowerError.code == 6
    assert ProducerFencedError.code == 90


@pytest.mark.parametrize("name", ["error_for_code", "Broker", "NoSuchError", "_BY_CODE"])
def test_other_names_are_not_exported(name):
    with pytest.raises(AttributeError, match=name):
        getattr(kafkalite, name)
    with pytest.raises(ImportError):
        exec(f"from kafkalite import {name}", {})


def test_import_kafkalite_loads_no_heavy_module():
    """``import kafkalite`` alone must not import the broker, the CLI, Spark, plots or the real clients."""
    loaded = modules_loaded(
        "import kafkalite",
        roots=("pyspark", "confluent_kafka", "kafka", "matplotlib", "numpy"),
        prefixes=("kafkalite.",),
    )
    assert loaded == [], loaded
