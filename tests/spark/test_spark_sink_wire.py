"""The sink's wire mode (``kafka.bootstrap.servers``): options and producer settings as units, then Spark
batch and streaming writes through the three broker processes of ``kafkalite cluster start`` (the
session's ``wire_cluster``; plaintext and SASL_SSL), read back with confluent-kafka; delivery failures
fail the job. And path mode refusing a log dir a live broker holds."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark")
ck = pytest.importorskip("confluent_kafka")

from kafkalite.client.partitioner import murmur2, to_positive  # noqa: E402
from kafkalite.errors import InvalidConfigError  # noqa: E402
from kafkalite.spark.options import parse_write_options  # noqa: E402
from kafkalite.spark.wire_sink import PRODUCER_DEFAULTS, librdkafka_config, make_producer  # noqa: E402
from kafkalite.storage.log_dir_lock import LogDirLock  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


# ------------------------------------------------------------------------------------------ options


def test_exactly_one_of_path_and_bootstrap_servers():
    for given, named in (({}, "neither"), ({"path": "/x", "kafka.bootstrap.servers": "h:1"}, "'path' and")):
        with pytest.raises(
            InvalidConfigError, match=rf"exactly one of 'path'.*'kafka.bootstrap.servers'.*{named}"
        ):
            parse_write_options({"topic": "t", **given})
    o = parse_write_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.acks": "1", "Kafka.Linger.ms": "5"}
    )
    assert o.wire and o.path is None and o.bootstrap_servers == "h:1"
    assert dict(o.kafka) == {"acks": "1", "linger.ms": "5"}  # the prefix stripped, bootstrap kept apart
    assert not parse_write_options({"path": "/x", "topic": "t"}).wire


@pytest.mark.parametrize(
    "options, message",
    [
        ({"partitions": "3"}, "option 'partitions' is for path mode only"),
        ({"kafka.key.serializer": "x"}, "option 'kafka.key.serializer' is not supported"),
        ({"subscribe": "t"}, r"unknown option\(s\) 'subscribe'"),
    ],
)
def test_wire_write_option_errors_name_the_option(options, message):
    with pytest.raises(InvalidConfigError, match=message):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t", **options})


def test_path_mode_refuses_kafka_options():
    with pytest.raises(InvalidConfigError, match="'kafka.acks' are for the wire mode"):
        parse_write_options({"path": "/x", "topic": "t", "kafka.acks": "1"})


def test_java_settings_map_to_librdkafka():
    conf = librdkafka_config(
        "h:1",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="p\\"w";',
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.keystore.location": "/me.pem",
            "max.request.size": "2000000",
        },
    )
    assert conf["sasl.username"] == "alice" and conf["sasl.password"] == 'p"w'
    assert conf["ssl.ca.location"] == "/ca.pem" and "ssl.truststore.location" not in conf
    assert conf["ssl.certificate.location"] == conf["ssl.key.location"] == "/me.pem"
    assert conf["message.max.bytes"] == "2000000" and conf["bootstrap.servers"] == "h:1"
    assert "sasl.jaas.config" not in conf and "ssl.truststore.type" not in conf


def test_idempotent_by_default_and_off_with_weaker_acks_as_kafka():
    conf = librdkafka_config("h:1", {})
    assert (conf["enable.idempotence"], conf["acks"]) == ("true", "all")
    assert conf["partitioner"] == "murmur2_random" == PRODUCER_DEFAULTS["partitioner"]  # Java's key hash
    assert librdkafka_config("h:1", {"acks": "1"})["enable.idempotence"] == "false"
    assert (
        librdkafka_config("h:1", {"acks": "1", "enable.idempotence": "true"})["enable.idempotence"] == "true"
    )


@pytest.mark.parametrize(
    "props, message",
    [
        ({"sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;'},
         "'kafka.sasl.jaas.config'.*Krb5LoginModule"),
        ({"sasl.jaas.config": f"{PLAIN} required username=\"u\";"}, "'kafka.sasl.jaas.config'.*password"),
        ({"ssl.truststore.location": "/t.jks", "ssl.truststore.type": "JKS"}, "'kafka.ssl.truststore.type'.*PEM"),
        ({"ssl.truststore.password": "x"}, "'kafka.ssl.truststore.password'"),
        ({"buffer.memory": "1000"}, "'kafka.buffer.memory'.*Java client only"),
    ],
)  # fmt: skip
def test_settings_without_a_librdkafka_equivalent_are_refused_by_name(props, message):
    with pytest.raises(InvalidConfigError, match=message):
        librdkafka_config("h:1", props)


def test_a_setting_librdkafka_does_not_know_is_named():
    opts = parse_write_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "kafka.no.such.thing": "1"}
    )
    with pytest.raises(InvalidConfigError, match="option 'kafka.no.such.thing' is refused by the producer"):
        make_producer(opts)


# ------------------------------------------------------------------------------- through a broker


class _Brokers:
    """The session's 3-broker ``cluster start``, seen from the sink's tests."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.bootstrap_servers = cluster.bootstrap

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        for f in admin.create_topics([NewTopic(name, partitions, 3)]).values():
            f.result(30)


@pytest.fixture(scope="module")
def broker(wire_cluster):
    return _Brokers(wire_cluster)


def consume(bootstrap: str, topic: str, n: int, timeout_s: float = 30.0) -> list:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.monotonic()}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        time.sleep(0.5)  # anything beyond n would be a duplicate: give it a chance to show up
        while (m := c.poll(0.5)) is not None:
            if m.error() is None:
                got.append(m)
    finally:
        c.close()
    return got


def test_batch_write_through_the_broker_with_spark_columns(spark, broker):
    broker.create_topic("sink-out", 3)
    broker.create_topic("sink-side", 1)
    rows = [(f"k{i % 7}", f"v{i}", [("h", b"%d" % i)]) for i in range(300)]
    df = spark.createDataFrame(
        rows, "key string, value string, headers array<struct<key: string, value: binary>>"
    )
    df.repartition(4).write.format("kafkalite").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).option("topic", "sink-out").option("kafka.linger.ms", "2").mode("append").save()
    got = consume(broker.bootstrap_servers, "sink-out", 300)
    assert sorted(m.value() for m in got) == sorted(
        f"v{i}".encode() for i in range(300)
    )  # none lost or doubled
    for m in got:
        i = int(m.value()[1:])
        assert m.key() == f"k{i % 7}".encode() and m.headers() == [("h", b"%d" % i)]
        assert m.partition() == to_positive(murmur2(m.key())) % 3  # Kafka's partitioner, as Spark's sink
    # a topic column and a partition column, as Spark's Kafka sink takes them
    spark.sql("SELECT 'sink-side' AS topic, 0 AS partition, 'x' AS value").write.format("kafkalite").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).mode("append").save()
    assert [m.value() for m in consume(broker.bootstrap_servers, "sink-side", 1)] == [b"x"]


def test_sasl_ssl_with_kafkas_option_names(spark, broker):
    broker.create_topic("sink-secure", 1)
    writer = (
        spark.sql("SELECT CAST(id AS STRING) AS value FROM range(50)")
        .write.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.cluster.sasl_bootstrap)
        .option("topic", "sink-secure")
        .option("kafka.security.protocol", "SASL_SSL")
        .option("kafka.sasl.mechanism", "PLAIN")
        .option("kafka.ssl.truststore.location", broker.cluster.ca)
        .option("kafka.delivery.timeout.ms", "8000")
        .mode("append")
    )
    writer.option(
        "kafka.sasl.jaas.config", f'{PLAIN} required username="admin" password="admin-secret";'
    ).save()
    assert len(consume(broker.bootstrap_servers, "sink-secure", 50)) == 50
    with pytest.raises(Exception, match="not acknowledged by the brokers"):  # a wrong password: the job fails
        writer.option("kafka.sasl.jaas.config", f'{PLAIN} required username="admin" password="nope";').save()


def test_a_record_the_broker_refuses_fails_the_job(spark, broker):
    broker.create_topic("sink-one", 1)
    with pytest.raises(Exception, match=r"not acknowledged by the brokers.*sink-one-5"):
        spark.sql("SELECT 'v' AS value, 5 AS partition").write.format("kafkalite").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("topic", "sink-one").mode("append").save()


def test_streaming_write_through_the_broker(spark, broker, tmp_path):
    broker.create_topic("sink-stream", 2)
    src = tmp_path / "in"
    src.mkdir()
    spark.createDataFrame([(f"s{i}",) for i in range(40)], "value string").write.mode("overwrite").parquet(
        str(src / "a")
    )
    q = (
        spark.readStream.schema("value string")
        .parquet(str(src / "a"))
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", "sink-stream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert sorted(m.value() for m in consume(broker.bootstrap_servers, "sink-stream", 40)) == sorted(
        f"s{i}".encode() for i in range(40)
    )


# -------------------------------------------------------------------- path mode and a live broker


def _path_write(spark, path):
    spark.sql("SELECT 'v' AS value").write.format("kafkalite").option("path", str(path)).option(
        "topic", "t"
    ).mode("append").save()


def test_path_sink_refuses_a_live_brokers_log_dir(spark, tmp_path):
    from kafkalite.host.server import BackgroundServer

    held = rf"'{tmp_path / 'broker-1'}' is held by a running broker"
    with BackgroundServer(1, log_dir=tmp_path), pytest.raises(Exception, match=held):
        _path_write(spark, tmp_path / "broker-1")
    assert not list((tmp_path / "broker-1").glob("t-*"))


def test_path_sink_refused_while_a_broker_holds_the_dir_and_allowed_after_it_stops(spark, tmp_path):
    code = (
        "import time; from kafkalite.storage.log_dir_lock import LogDirLock; "
        f"LogDirLock({str(tmp_path)!r}).acquire(); print('up', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        with pytest.raises(Exception, match="is held by a running broker"):
            _path_write(spark, tmp_path)
    finally:
        holder.kill()
        holder.wait()
    _path_write(spark, tmp_path)  # the broker is gone: the dir is the sink's again
    assert (tmp_path / "t-0").is_dir()
    with LogDirLock(tmp_path):  # the sink released the lock it held while appending
        pass
