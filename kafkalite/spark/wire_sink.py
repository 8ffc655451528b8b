"""The sink's wire mode: ``option("kafka.bootstrap.servers", ...)`` produces through the brokers.

As Spark's Kafka sink: each task runs one producer (confluent-kafka, i.e. librdkafka) over its rows;
``topic`` comes from the option, else the ``topic`` column; ``key``, ``value``, ``partition`` and
``headers`` columns as Spark's; every other ``kafka.*`` option goes to the producer without its prefix.
Idempotent by default (``enable.idempotence=true``, ``acks=all``), so a retry inside the producer never
writes a record twice; a task retried by Spark may (Spark's Kafka sink is at-least-once too). A task
flushes before it ends, and any record the brokers did not acknowledge fails the task: nothing is
dropped silently.

librdkafka spells some of Kafka's Java client settings differently; ``librdkafka_config`` maps them
(``sasl.jaas.config`` -> ``sasl.username``/``sasl.password``, a PEM ``ssl.truststore.location`` ->
``ssl.ca.location``, ...) and refuses, naming the option, what has no librdkafka equivalent.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from kafkalite.errors import InvalidConfigError, InvalidRecordError
from kafkalite.spark.options import WriteOptions

# Kafka's Java producer defaults that matter for correctness, where librdkafka's differ or may.
PRODUCER_DEFAULTS = {
    "enable.idempotence": "true",
    "acks": "all",
    # Kafka's default partitioner hashes keys with murmur2 (librdkafka's default is CRC32): the same
    # key lands in the same partition as from Spark's own Kafka sink or any Java producer.
    "partitioner": "murmur2_random",
}
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<args>.*?);?\s*$", re.S
)
_JAAS_ARG = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
# Java settings whose value names Java classes, or that only the JVM client has: no librdkafka meaning.
_JAVA_ONLY = ("partitioner.class", "interceptor.classes", "metric.reporters", "buffer.memory", "max.block.ms")


def _not_mappable(name: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"option 'kafka.{name}' cannot be used in wire mode: {why}")


def _jaas_credentials(text: str) -> tuple[str, str]:
    m = _JAAS.match(text)
    if m is None:
        raise _not_mappable("sasl.jaas.config", f"not a JAAS login module entry: {text!r}")
    if m["module"] not in _LOGIN_MODULES:
        raise _not_mappable(
            "sasl.jaas.config",
            f"login module {m['module']!r} has no librdkafka equivalent (PlainLoginModule and "
            "ScramLoginModule map to sasl.username / sasl.password)",
        )
    args = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_ARG.findall(m["args"])}
    if "username" not in args or "password" not in args:
        raise _not_mappable("sasl.jaas.config", 'it needs username="..." and password="..."')
    return args["username"], args["password"]


def _pem_only(props: dict[str, str], store: str) -> None:
    kind = props.pop(f"ssl.{store}.type", "PEM").strip().upper()
    if kind != "PEM":
        raise _not_mappable(f"ssl.{store}.type", f"librdkafka reads PEM files only, got {kind!r}")
    if f"ssl.{store}.password" in props:
        raise _not_mappable(
            f"ssl.{store}.password",
            "a PEM store has no store password (a PEM keystore's encrypted key uses ssl.key.password)",
        )


def librdkafka_config(bootstrap_servers: str, kafka: Mapping[str, str]) -> dict[str, str]:
    """The confluent-kafka Producer configuration for Kafka's Java-style settings ``kafka`` (without the
    ``kafka.`` prefix). Raises ``InvalidConfigError`` naming an option that cannot be mapped."""
    props = {k: str(v) for k, v in kafka.items()}
    out: dict[str, str] = {}
    for name in _JAVA_ONLY:
        if name in props:
            raise _not_mappable(name, "it is a setting of Kafka's Java client only")
    if "sasl.jaas.config" in props:
        out["sasl.username"], out["sasl.password"] = _jaas_credentials(props.pop("sasl.jaas.config"))
    _pem_only(props, "truststore")
    if "ssl.truststore.location" in props:
        out["ssl.ca.location"] = props.pop("ssl.truststore.location")
    _pem_only(props, "keystore")
    if "ssl.keystore.location" in props:  # Kafka's PEM keystore: the private key and the certificate chain
        out["ssl.certificate.location"] = out["ssl.key.location"] = props.pop("ssl.keystore.location")
    if "max.request.size" in props:
        out["message.max.bytes"] = props.pop("max.request.size")
    if props.get("ssl.endpoint.identification.algorithm") == "":
        props["ssl.endpoint.identification.algorithm"] = "none"  # Java's empty value: no hostname check
    idempotence_given = "enable.idempotence" in props
    config = {**PRODUCER_DEFAULTS, **out, **props, "bootstrap.servers": bootstrap_servers}
    acks = config["acks"].strip().lower()
    if not idempotence_given and acks not in ("all", "-1"):
        config["enable.idempotence"] = "false"  # as Kafka's producer: acks other than all turns it off
    return config


_RENAMED = {
    "sasl.username": "sasl.jaas.config",
    "sasl.password": "sasl.jaas.config",
    "ssl.ca.location": "ssl.truststore.location",
    "ssl.certificate.location": "ssl.keystore.location",
    "ssl.key.location": "ssl.keystore.location",
    "message.max.bytes": "max.request.size",
}


def make_producer(opts: WriteOptions) -> Any:
    """A confluent-kafka Producer for ``opts``; librdkafka's refusal of a setting becomes an
    ``InvalidConfigError`` naming the ``kafka.*`` option it came from."""
    from confluent_kafka import KafkaException, Producer  # deferred: only the wire mode needs it

    config = librdkafka_config(opts.bootstrap_servers or "", dict(opts.kafka))
    try:
        return Producer(config)
    except (KafkaException, ValueError, TypeError) as e:
        text = str(e.args[0].str() if e.args and hasattr(e.args[0], "str") else e)
        named = re.search(r'property:?\s*"?([\w.]+)"?', text) or re.search(r'"([\w.]+)"', text)
        given = dict(opts.kafka)
        if named:
            name = _RENAMED.get(named[1], named[1])
            if name in given:
                raise InvalidConfigError(
                    f"option 'kafka.{name}' is refused by the producer: {text}"
                ) from None
        options = ", ".join(f"'kafka.{k}'" for k in sorted(given)) or "no kafka.* options"
        raise InvalidConfigError(f"the producer refused its configuration ({options}): {text}") from None


@dataclass
class ProducedRecords(WriterCommitMessage):
    """What one task delivered: records per ``(topic, partition)``, and where it ran (``host:pid``)."""

    task: int
    executor: str
    delivered: dict[tuple[str, int], int] = field(default_factory=dict)


def _as_bytes(col: pa.Array | None, n: int) -> list:
    if col is None:
        return [None] * n
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return col.to_pylist()


class DeliveryFailed(RuntimeError):
    """The brokers did not acknowledge some of a task's records: the task fails, so Spark retries it. Each
    record's own Kafka error is in the message; this one has no error code of its own."""


def produce_task(opts: WriteOptions, task: int, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
    """Produce one task's rows, flush, and raise ``DeliveryFailed`` if any record was not acknowledged."""
    producer = make_producer(opts)
    message = ProducedRecords(task, f"{socket.gethostname()}:{os.getpid()}")
    failures: list[str] = []
    failed = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if len(failures) < 5:
                failures.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")
            return
        tp = (msg.topic(), msg.partition())
        message.delivered[tp] = message.delivered.get(tp, 0) + 1

    for batch in iterator:
        n = batch.num_rows
        col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
        values = _as_bytes(col["value"], n)
        keys = _as_bytes(col.get("key"), n)
        topics = [opts.topic] * n if opts.topic else col["topic"].to_pylist()
        parts = col["partition"].to_pylist() if "partition" in col else None
        stamps = None
        if "timestamp" in col:
            stamps = col["timestamp"].cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
        headers = col["headers"].to_pylist() if "headers" in col else None
        for i in range(n):
            if not topics[i]:
                raise InvalidRecordError(f"row {i} of a sink task has a null or empty topic")
            kw: dict[str, Any] = {"value": values[i], "key": keys[i], "on_delivery": on_delivery}
            if parts is not None and parts[i] is not None:
                kw["partition"] = parts[i]
            if stamps is not None and stamps[i] is not None:
                kw["timestamp"] = stamps[i] // 1000
            if headers is not None and headers[i]:
                kw["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topics[i], **kw)
                    break
                except BufferError:  # the local queue is full: wait for deliveries to make room
                    producer.poll(0.1)
        producer.poll(0)
        if failed:
            break  # the task fails anyway: stop producing more
    while len(producer) > 0:  # every record gets its delivery report within delivery.timeout.ms
        producer.flush(1.0)
    if failed:
        raise DeliveryFailed(
            f"{failed} record(s) of Spark task {task} were not acknowledged by the brokers "
            f"({opts.bootstrap_servers}); first: {'; '.join(failures)}"
        )
    return message


__all__ = ["DeliveryFailed", "ProducedRecords", "librdkafka_config", "make_producer", "produce_task"]
