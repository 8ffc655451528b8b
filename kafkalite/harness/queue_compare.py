"""The same workloads on a Kafka log (kafkalite's TCP broker, confluent-kafka) and a RabbitMQ queue (pika).

Each ``kafka_*`` / ``rabbitmq_*`` pair runs one comparison of the queues chapter and returns plain values (JSON
friendly), so that a run on a machine with RabbitMQ can be stored (``python -m kafkalite.harness.queue_compare
--write data/queues_rabbitmq.json``) and shown where RabbitMQ is missing. Everything but the ``*_per_s`` rates
is a count that does not depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

PAYLOAD = b"x" * 100  # every message's body: 100 bytes, as in the book's other benchmarks


# ------------------------------------------------------------------------------------------- Kafka side
def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    # murmur2_random: the Java client's partitioner (librdkafka's own default hashes keys with CRC32).
    return Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "partitioner": "murmur2_random"}
    )


def _consumer(bootstrap: str, group: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50,
            **extra,
        }
    )


def kafka_produce(bootstrap: str, topic: str, messages: int, keys: int = 0) -> None:
    """``messages`` records of 100 bytes; with ``keys``, record i has key ``k{i % keys}`` and its value says
    the key's sequence number (``k3:17``)."""
    producer = _producer(bootstrap)
    for i in range(messages):
        if keys:
            key = f"k{i % keys}"
            producer.produce(topic, key=key.encode(), value=f"{key}:{i // keys}".encode())
        else:
            producer.produce(topic, value=PAYLOAD)
        producer.poll(0)
    left = producer.flush(30)
    if left:
        raise RuntimeError(f"{left} records to {topic} not acknowledged")


def _assign(consumer: Any, topic: str, partitions: list[int], offset: int | None = None) -> None:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_STORED, TopicPartition

    start = OFFSET_STORED if offset is None else (OFFSET_BEGINNING if offset == 0 else offset)
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])


def _read(consumer: Any, want: int, timeout_s: float = 30.0, batch: int = 500) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=min(batch, want - len(got)), timeout=0.5):
            if msg.error() is None:
                got.append(msg)
    return got


def _read_until_quiet(consumer: Any, quiet_s: float = 1.0) -> int:
    # For a reader expected to find nothing: read until it has seen nothing for quiet_s.
    count = 0
    deadline = time.monotonic() + quiet_s
    while time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(num_messages=500, timeout=0.2) if m.error() is None]
        if msgs:
            count += len(msgs)
            deadline = time.monotonic() + quiet_s
    return count


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap, "watermarks")
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def kafka_pull(bootstrap: str, messages: int, batch: int) -> dict[str, Any]:
    """A consumer that asks for ``batch`` records at a time: the broker has handed out exactly what was asked
    for and keeps one committed offset for the group, not a record per message in flight."""
    kafka_produce(bootstrap, "pull", messages)
    c = _consumer(bootstrap, "pull-group")
    _assign(c, "pull", [0], 0)
    first = _read(c, batch)
    c.commit(asynchronous=False)
    from confluent_kafka import TopicPartition

    committed = c.committed([TopicPartition("pull", 0)], timeout=10)[0].offset
    c.close()
    return {
        "log_end_offset": _end_offsets(bootstrap, "pull", 1)[0],
        "asked_for": batch,
        "received": len(first),
        "committed_offset": committed,
        "broker_state_per_consumer": "1 committed offset per partition",
    }


def kafka_retention(bootstrap: str, messages: int) -> dict[str, Any]:
    """A group reads and commits everything; then a second group, and the first group rewound to offset 0."""
    kafka_produce(bootstrap, "retention", messages)
    first = _consumer(bootstrap, "first-reader")
    _assign(first, "retention", [0], 0)
    read_first = len(_read(first, messages))
    first.commit(asynchronous=False)
    first.close()
    second = _consumer(bootstrap, "second-reader")
    _assign(second, "retention", [0], 0)
    read_second = len(_read(second, messages))
    second.close()
    again = _consumer(bootstrap, "first-reader")
    _assign(again, "retention", [0])  # from its committed offset: nothing new
    read_after_commit = _read_until_quiet(again)
    again.close()
    replay = _consumer(bootstrap, "first-reader")
    _assign(replay, "retention", [0], 0)  # rewound to offset 0
    read_replay = len(_read(replay, messages))
    replay.close()
    return {
        "first_reader": read_first,
        "first_reader_again": read_after_commit,
        "second_reader": read_second,
        "replay_from_offset_0": read_replay,
        "stored_after_reads": _end_offsets(bootstrap, "retention", 1)[0],
    }


def kafka_fanout(bootstrap: str, messages: int) -> dict[str, Any]:
    """Two consumer groups on one topic: each reads every record; the log stores each record once."""
    kafka_produce(bootstrap, "fanout", messages)
    reads = {}
    for group in ("group-a", "group-b"):
        c = _consumer(bootstrap, group)
        _assign(c, "fanout", [0], 0)
        reads[group] = len(_read(c, messages))
        c.close()
    return {"reads": reads, "stored": sum(_end_offsets(bootstrap, "fanout", 1))}


def _inversions(processed: list[tuple[str, int]]) -> dict[str, int]:
    # Per key, how many messages were processed after one with a higher sequence number.
    highest: dict[str, int] = {}
    late: dict[str, int] = {}
    for key, seq in processed:
        if seq < highest.get(key, -1):
            late[key] = late.get(key, 0) + 1
        highest[key] = max(highest.get(key, -1), seq)
        late.setdefault(key, 0)
    return late


def kafka_ordering(bootstrap: str, messages: int, keys: int, slow_ms: float) -> dict[str, Any]:
    """Keyed records on two partitions, read by two consumers in parallel (one per partition, as a group of two
    would share them), one of them ``slow_ms`` per record: every key comes out in order."""
    kafka_produce(bootstrap, "ordering", messages, keys)
    processed: list[tuple[str, int]] = []
    owner: dict[str, set[int]] = {}
    lock = threading.Lock()
    counts = [0, 0]

    def run(partition: int, delay_s: float) -> None:
        c = _consumer(bootstrap, "ordering-group")
        _assign(c, "ordering", [partition], 0)
        want = _end_offsets(bootstrap, "ordering", 2)[partition]
        done = 0
        deadline = time.monotonic() + 60
        while done < want and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            time.sleep(delay_s)
            key, seq = msg.value().decode().split(":")
            with lock:
                processed.append((key, int(seq)))
                owner.setdefault(key, set()).add(partition)
            done += 1
        counts[partition] = done
        c.close()

    return _two_consumers(run, slow_ms, processed, owner, keys, counts)


def _two_consumers(
    run: Any, slow_ms: float, processed: list, owner: dict, keys: int, counts: dict
) -> dict[str, Any]:
    """Run consumer 0 (``slow_ms`` per message) and consumer 1 (no delay) side by side, then count how
    the keys fared: on one consumer only, and processed out of order."""
    threads = [threading.Thread(target=run, args=(i, d)) for i, d in ((0, slow_ms / 1000), (1, 0.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    late = _inversions(processed)
    return {
        "processed": len(processed),
        "keys": keys,
        "keys_on_one_consumer": sum(1 for s in owner.values() if len(s) == 1),
        "keys_out_of_order": sum(1 for n in late.values() if n),
        "per_consumer": counts,
    }


def kafka_slow_consumer(bootstrap: str, messages: int, consumed: int) -> dict[str, Any]:
    """A consumer that has read ``consumed`` of ``messages``: its lag is its own business, the log is on disk."""
    kafka_produce(bootstrap, "slow", messages)
    c = _consumer(bootstrap, "slow-group")
    _assign(c, "slow", [0], 0)
    got = len(_read(c, consumed))
    c.commit(asynchronous=False)
    c.close()
    end = _end_offsets(bootstrap, "slow", 1)[0]
    return {"stored": end, "consumed": got, "lag": end - got}


def kafka_throughput(bootstrap: str, messages: int) -> dict[str, Any]:
    """Produce ``messages`` records (acks=all, one broker), then consume them: records per second each way."""
    t0 = time.perf_counter()
    kafka_produce(bootstrap, "throughput", messages)
    produced_s = time.perf_counter() - t0
    c = _consumer(bootstrap, "throughput-group")
    _assign(c, "throughput", [0], 0)
    t0 = time.perf_counter()
    got = len(_read(c, messages, timeout_s=120))
    consumed_s = time.perf_counter() - t0
    c.close()
    return {
        "messages": got,
        "produce_per_s": messages / produced_s,
        "consume_per_s": got / consumed_s,
    }


# ---------------------------------------------------------------------------------------- RabbitMQ side
def _count(channel: Any, queue: str) -> int:
    """Ready messages of a queue (not those delivered and awaiting an ack), as a passive declare reports."""
    return channel.queue_declare(queue, passive=True).method.message_count


def _publish(channel: Any, exchange: str, routing_key: str, messages: int, keys: int = 0) -> None:
    import pika

    props = pika.BasicProperties(delivery_mode=1)
    for i in range(messages):
        body = f"k{i % keys}:{i // keys}".encode() if keys else PAYLOAD
        channel.basic_publish(exchange, routing_key, body, props)


def _settle(channel: Any, queue: str, expected: int, timeout_s: float = 30.0) -> int:
    # basic_publish without confirms returns before the broker has queued the message: wait for the count.
    deadline = time.monotonic() + timeout_s
    count = _count(channel, queue)
    while count < expected and time.monotonic() < deadline:
        time.sleep(0.02)
        count = _count(channel, queue)
    return count


def _drain(channel: Any, queue: str, want: int, timeout_s: float = 30.0, ack: bool = True) -> int:
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < want and time.monotonic() < deadline:
        method, _props, _body = channel.basic_get(queue, auto_ack=ack)
        if method is None:
            time.sleep(0.01)
            continue
        got += 1
    return got


def rabbitmq_push(node: Any, messages: int, prefetch: int) -> dict[str, Any]:
    """A consumer that has not acked yet: the broker has pushed ``prefetch`` messages to it and tracks each."""
    conn = node.connect()
    ch = conn.channel()
    ch.queue_declare("push")
    _publish(ch, "", "push", messages)
    _settle(ch, "push", messages)
    consumer = node.connect()
    cch = consumer.channel()
    cch.basic_qos(prefetch_count=prefetch)
    delivered: list[int] = []
    cch.basic_consume("push", lambda c, m, p, b: delivered.append(m.delivery_tag), auto_ack=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(delivered) < prefetch:
        consumer.process_data_events(time_limit=0.05)
    consumer.process_data_events(time_limit=0.5)  # had the broker more to push, it would arrive now
    pushed_unacked = len(delivered)
    ready = _count(ch, "push")
    queues = node.list_queues()
    cch.basic_ack(delivered[-1], multiple=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(delivered) < 2 * prefetch:
        consumer.process_data_events(time_limit=0.05)
    after_ack = len(delivered) - pushed_unacked
    consumer.close()
    conn.close()
    return {
        "published": messages,
        "prefetch": prefetch,
        "pushed_before_any_ack": pushed_unacked,
        "ready_in_queue": ready,
        "unacked_tracked_by_broker": queues["push"]["messages"] - ready,
        "pushed_after_one_ack": after_ack,
    }


def rabbitmq_retention(node: Any, messages: int) -> dict[str, Any]:
    """A consumer reads and acks everything; a second consumer of the queue then finds it empty."""
    conn = node.connect()
    ch = conn.channel()
    ch.queue_declare("retention")
    _publish(ch, "", "retention", messages)
    _settle(ch, "retention", messages)
    first = _drain(ch, "retention", messages)
    left = _count(ch, "retention")
    second_conn = node.connect()
    second = _drain(second_conn.channel(), "retention", messages, timeout_s=1.0)
    second_conn.close()
    conn.close()
    return {"first_reader": first, "stored_after_acks": left, "second_reader": second, "replay": "no offsets"}


def rabbitmq_fanout(node: Any, messages: int) -> dict[str, Any]:
    """A fanout exchange bound to two queues: each queue holds its own copy of every message."""
    conn = node.connect()
    ch = conn.channel()
    ch.exchange_declare("fanout", exchange_type="fanout")
    for q in ("queue-a", "queue-b"):
        ch.queue_declare(q)
        ch.queue_bind(q, "fanout")
    _publish(ch, "fanout", "", messages)
    stored = {q: _settle(ch, q, messages) for q in ("queue-a", "queue-b")}
    broker = node.list_queues()
    reads = {q: _drain(ch, q, messages) for q in ("queue-a", "queue-b")}
    conn.close()
    return {
        "reads": reads,
        "stored": sum(stored.values()),
        "stored_per_queue": stored,
        "rabbitmqctl_messages": sum(broker[q]["messages"] for q in ("queue-a", "queue-b")),
    }


def rabbitmq_ordering(node: Any, messages: int, keys: int, slow_ms: float) -> dict[str, Any]:
    """Keyed messages on one queue, two competing consumers (prefetch 1) in parallel, one ``slow_ms`` per
    message: the broker spreads each key over both, and the fast one overtakes the slow one."""
    conn = node.connect()
    ch = conn.channel()
    ch.queue_declare("ordering")
    _publish(ch, "", "ordering", messages, keys)
    _settle(ch, "ordering", messages)
    conn.close()
    processed: list[tuple[str, int]] = []
    owner: dict[str, set[int]] = {}
    lock = threading.Lock()
    done = threading.Event()
    counts = [0, 0]
    ready = threading.Barrier(2)

    def run(index: int, delay_s: float) -> None:
        c = node.connect()
        cch = c.channel()
        cch.basic_qos(prefetch_count=1)

        def on_message(channel: Any, method: Any, _props: Any, body: bytes) -> None:
            time.sleep(delay_s)
            key, seq = body.decode().split(":")
            with lock:
                processed.append((key, int(seq)))
                owner.setdefault(key, set()).add(index)
                counts[index] += 1
                if len(processed) >= messages:
                    done.set()
            channel.basic_ack(method.delivery_tag)

        ready.wait()
        cch.basic_consume("ordering", on_message)
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            c.process_data_events(time_limit=0.05)
        c.close()

    return _two_consumers(run, slow_ms, processed, owner, keys, counts)


def rabbitmq_slow_consumer(node: Any, messages: int, consumed: int) -> dict[str, Any]:
    """A consumer that has read ``consumed`` of ``messages``: the rest wait in the broker's queue."""
    conn = node.connect()
    ch = conn.channel()
    ch.queue_declare("slow")
    empty = node.list_queues()["slow"]["memory"]
    _publish(ch, "", "slow", messages)
    _settle(ch, "slow", messages)
    got = _drain(ch, "slow", consumed)
    queued = _count(ch, "slow")
    memory = node.list_queues()["slow"]["memory"]
    conn.close()
    return {
        "stored": queued,
        "consumed": got,
        "queue_memory_empty_bytes": empty,
        "queue_memory_bytes": memory,
    }


def rabbitmq_memory_alarm(
    node: Any, headroom_bytes: int = 30_000_000, body_bytes: int = 10_000
) -> dict[str, Any]:
    """No consumer while a publisher goes on: the queue grows in the broker's memory until the memory alarm
    blocks every publishing connection. The watermark is set to the node's memory now plus ``headroom_bytes``
    (rabbitmqctl set_vm_memory_high_watermark absolute) so the alarm comes after tens of megabytes, not
    gigabytes. Then a consumer on another connection drains the queue, and the alarm clears."""
    status = json.loads(node.ctl("status", "--formatter", "json"))
    totals = status["memory"]["total"]
    now = totals.get(status.get("mem_calculation_strategy", "rss"), totals["rss"])
    node.ctl("set_vm_memory_high_watermark", "absolute", str(now + headroom_bytes))
    # Blocked on purpose, for as long as the drain takes on a busy machine: the loops' deadlines bound it.
    conn = node.connect(blocked_timeout_s=None)
    ch = conn.channel()
    ch.queue_declare("backlog")
    events: list[str] = []
    reasons: list[str] = []

    def on_blocked(_conn: Any, frame: Any) -> None:
        events.append("blocked")
        reasons.append(str(getattr(frame.method, "reason", "")))

    conn.add_on_connection_blocked_callback(on_blocked)
    conn.add_on_connection_unblocked_callback(lambda _c, _m: events.append("unblocked"))
    body = b"x" * body_bytes
    sent = 0
    deadline = time.monotonic() + 60
    while "blocked" not in events and time.monotonic() < deadline:
        ch.basic_publish("", "backlog", body)
        sent += 1
        if sent % 50 == 0:
            conn.process_data_events(0)
    # The resources the node named when it blocked us ("low on memory"). Its status is read as well, but only
    # adds to them: by the time rabbitmqctl answers, the node may have paged the queue out to disk and
    # cleared the alarm already.
    raised = {
        a.get("resource") for a in json.loads(node.ctl("status", "--formatter", "json")).get("alarms", [])
    }
    raised.update(r for r in ("memory", "disk") if any(r in reason for reason in reasons))
    alarms = sorted(a for a in raised if a)
    reader = node.connect()
    rch = reader.channel()
    rch.basic_qos(prefetch_count=1000)
    drained = [0]

    def on_message(_ch: Any, _method: Any, _props: Any, _body: bytes) -> None:
        drained[0] += 1

    rch.basic_consume("backlog", on_message, auto_ack=True)
    deadline = time.monotonic() + 120  # the drain's own: the node frees the memory at its pace
    while "unblocked" not in events and time.monotonic() < deadline:
        reader.process_data_events(time_limit=0.02)
        conn.process_data_events(0)
    reader.close()
    conn.close()
    return {
        "blocked": "blocked" in events,
        "alarms": alarms,
        "blocked_reason": reasons[0] if reasons else None,
        "published_before_block_bytes": sent * body_bytes,
        "unblocked_after_drain": "unblocked" in events,
        "drained": drained[0],
    }


def rabbitmq_throughput(node: Any, messages: int) -> dict[str, Any]:
    """Publish ``messages`` (no confirms: pika's blocking channel would wait a round trip for each), wait until
    the queue holds them all, then consume with prefetch 500 and an ack per 100."""
    conn = node.connect()
    ch = conn.channel()
    ch.queue_declare("throughput")
    t0 = time.perf_counter()
    _publish(ch, "", "throughput", messages)
    _settle(ch, "throughput", messages, timeout_s=120)
    produced_s = time.perf_counter() - t0
    ch.basic_qos(prefetch_count=500)
    got = 0
    t0 = time.perf_counter()
    for method, _props, _body in ch.consume("throughput", inactivity_timeout=5):
        if method is None:
            break
        got += 1
        if got % 100 == 0 or got == messages:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if got == messages:
            break
    consumed_s = time.perf_counter() - t0
    ch.cancel()
    conn.close()
    return {"messages": got, "produce_per_s": messages / produced_s, "consume_per_s": got / consumed_s}


# ------------------------------------------------------------------------------------------- all of it
DEFAULTS = {"messages": 1000, "prefetch": 10, "keys": 6, "slow_ms": 10.0, "throughput_messages": 20_000}
# Messages per key in the ordering comparison: enough that the fast consumer passes the slow one on some key.
ORDERING_PER_KEY = 20
TOPICS = {"pull": 1, "retention": 1, "fanout": 1, "ordering": 2, "slow": 1, "throughput": 1}


def run_rabbitmq(node: Any, p: dict[str, Any]) -> dict[str, Any]:
    """Every RabbitMQ comparison with the parameters ``p`` (``DEFAULTS``' keys)."""
    n = p["messages"]
    return {
        "push": rabbitmq_push(node, n, p["prefetch"]),
        "retention": rabbitmq_retention(node, n),
        "fanout": rabbitmq_fanout(node, n),
        "ordering": rabbitmq_ordering(node, ORDERING_PER_KEY * p["keys"], p["keys"], p["slow_ms"]),
        "slow_consumer": rabbitmq_slow_consumer(node, n, n // 10),
        "throughput": rabbitmq_throughput(node, p["throughput_messages"]),
        # Last: it lowers the node's memory watermark.
        "memory_alarm": rabbitmq_memory_alarm(node),
    }


def stored_run(p: dict[str, Any]) -> dict[str, Any]:
    """A run on a private node, labelled with the date and versions (what ``--write`` stores)."""
    import pika

    from kafkalite.harness import rabbitmq

    with rabbitmq.RabbitMQNode() as node:
        results = run_rabbitmq(node, p)
    return {
        "what": "kafkalite.harness.queue_compare.run_rabbitmq on a private RabbitMQ node",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "rabbitmq_server": rabbitmq.server_version(),
        "pika": pika.__version__,
        "parameters": p,
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="store the RabbitMQ run as JSON here")
    args = parser.parse_args(argv)
    record = stored_run(dict(DEFAULTS))
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
