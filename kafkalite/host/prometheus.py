"""The brokers' metrics on a Prometheus endpoint (``metrics.port``), served on the brokers' own event loop.

Names follow the MBean, as the usual JMX-exporter rules for Kafka do: ``domain_type_name`` lowercased, so
``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` is
``kafka_server_replicamanager_underreplicatedpartitions``; MBean tags (``topic``, ``request``,
``delayedOperation``) become labels, and every sample has a ``broker`` label. A meter is a counter
(``..._total``) plus its one-minute rate (``..._oneminuterate``); a histogram is a summary (quantiles,
``_count``, ``_sum``); a gauge is a gauge.

The endpoint runs as one more server on the loop that drives the brokers, so a scrape reads their state
between two turns of the simulation, never while a turn changes it (a scrape thread would race it).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kafkalite.common.metrics import PERCENTILES, MetricName, percentile_key

__all__ = ["LoopIdle", "MetricsEndpoint", "prometheus_name"]

IDLE_NAME = MetricName("kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent")


def prometheus_name(name: MetricName) -> str:
    return f"{name.domain}_{name.type}_{name.name}".lower().replace(".", "_").replace("-", "_")


class LoopIdle:
    """How idle the process's event loop was over about the last minute (0..1): 1 minus the CPU time it
    used per second of wall time. kafkalite handles requests on that one loop, so this stands for Kafka's
    ``RequestHandlerAvgIdlePercent`` (the request handler threads' idle fraction)."""

    WINDOW_S = 60.0

    def __init__(self) -> None:
        self.value = 1.0
        self._wall = time.monotonic()
        self._cpu = time.process_time()

    def sample(self) -> None:
        wall = time.monotonic()
        dt = wall - self._wall
        if dt < 0.05:
            return
        # read only now: the process's CPU clock sums every thread's, dearer than the wall clock, and the
        # loop calls this once a turn
        cpu = time.process_time()
        idle = min(1.0, max(0.0, 1.0 - (cpu - self._cpu) / dt))
        weight = 1.0 - math.exp(-dt / self.WINDOW_S)
        self.value += weight * (idle - self.value)
        self._wall, self._cpu = wall, cpu


class _Collector:
    def __init__(self, brokers: Callable[[], Mapping[int, Any]], idle: LoopIdle | None) -> None:
        self.brokers = brokers
        self.idle = idle

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}

        def family(name: str, kind: str, mbean: MetricName) -> Metric:
            f = families.get(name)
            if f is None:
                doc = f"{mbean.domain}:type={mbean.type},name={mbean.name}"
                if kind == "counter":
                    f = CounterMetricFamily(name, doc)
                elif kind == "gauge":
                    f = GaugeMetricFamily(name, doc)
                else:
                    f = Metric(name, doc, "summary")
                families[name] = f
            return f

        for broker_id, metrics in sorted(self.brokers().items()):
            if metrics is None:
                continue
            base_labels = {"broker": str(broker_id)}
            for name, kind, values in metrics.registry.read():
                prom = prometheus_name(name)
                labels = {**base_labels, **dict(name.tags)}
                if kind == "gauge":
                    family(prom, "gauge", name).add_sample(prom, labels, values["Value"])
                elif kind == "meter":
                    family(prom, "counter", name).add_sample(prom + "_total", labels, values["Count"])
                    rate = prom + "_oneminuterate"
                    family(rate, "gauge", name).add_sample(rate, labels, values["OneMinuteRate"])
                else:
                    f = family(prom, "summary", name)
                    for q in PERCENTILES:
                        f.add_sample(prom, {**labels, "quantile": f"{q:g}"}, values[percentile_key(q)])
                    f.add_sample(prom + "_count", labels, values["Count"])
                    f.add_sample(prom + "_sum", labels, values["Mean"] * values["Count"])
            if self.idle is not None:
                prom = prometheus_name(IDLE_NAME)
                family(prom, "gauge", IDLE_NAME).add_sample(prom, base_labels, self.idle.value)
        yield from families.values()


class MetricsEndpoint:
    """``GET /metrics`` over HTTP/1.1 on an asyncio server; anything else gets 404."""

    def __init__(self, brokers: Callable[[], Mapping[int, Any]], idle: LoopIdle | None = None) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Collector(brokers, idle))
        self._server: asyncio.base_events.Server | None = None
        self.address: tuple[str, int] | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.address = (host, self._server.sockets[0].getsockname()[1])
        return self.address

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, _, rest = request.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method == b"GET" and path in (b"/metrics", b"/"):
                status, body = b"200 OK", generate_latest(self._registry)
                ctype = b"text/plain; version=0.0.4; charset=utf-8"
            else:
                status, body, ctype = b"404 Not Found", b"only /metrics is served here\n", b"text/plain"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype
                + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
            )  # fmt: skip
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
