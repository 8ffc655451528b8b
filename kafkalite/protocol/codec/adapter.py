"""Between the wire's dicts and kafkalite's request and response dataclasses.

Kafka nests partitions under topics; kafkalite's messages keep one flat tuple of per-partition entries
with a ``TopicPartition`` each. ``to_request`` flattens a decoded request body, ``to_body`` regroups a
response by topic, in the order the topics first appear.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite import protocol as P
from kafkalite.protocol import TopicPartition
from kafkalite.protocol.codec.binding import from_wire, to_wire
from kafkalite.protocol.codec.messages import supported_versions


def _by_topic(entries: Any, topic_key: str, parts_key: str, part: Callable[[Any], dict]) -> list[dict]:
    out: dict[str, list[dict]] = {}
    for e in entries:
        out.setdefault(e.tp.topic, []).append(part(e))
    return [{topic_key: t, parts_key: ps} for t, ps in out.items()]


def _flat(
    b: dict, topics: str, name: str, parts: str, index: str, make: Callable[[TopicPartition, dict], Any]
) -> tuple:
    """Kafka's topic -> partitions nesting, flattened: ``make(tp, partition_dict)`` for every partition."""
    return tuple(make(TopicPartition(t[name], p[index]), p) for t in b[topics] for p in t[parts])


def _records(r: Any) -> Any:
    """Bytes, or a file slice left as it is: the encoder copies it or leaves it for ``sendfile``."""
    if r is None or hasattr(r, "read"):
        return r
    return bytes(r)


# ------------------------------------------------------------------------------------------ requests


def _metadata(b: dict, v: int) -> P.MetadataRequest:
    topics = b["topics"]
    every = topics is None or (v == 0 and not topics)  # v0 asks for every topic with an empty list
    names = None if every else tuple(t["name"] for t in topics)
    return P.MetadataRequest(topics=names, allow_auto_topic_creation=b["allow_auto_topic_creation"])


def _create_topics(b: dict, v: int) -> P.CreateTopicsRequest:
    topics = tuple(
        P.CreatableTopic(
            name=t["name"],
            num_partitions=t["num_partitions"],
            replication_factor=t["replication_factor"],
            assignments=tuple(
                P.ReplicaAssignment(partition=a["partition_index"], broker_ids=tuple(a["broker_ids"]))
                for a in t["assignments"]
            ),
            configs=tuple((c["name"], c["value"]) for c in t["configs"]),
        )
        for t in b["topics"]
    )
    return P.CreateTopicsRequest(topics=topics, timeout_ms=b["timeout_ms"], validate_only=b["validate_only"])


def _create_partitions(b: dict, v: int) -> P.CreatePartitionsRequest:
    topics = tuple(
        P.CreatePartitionsTopic(
            name=t["name"],
            count=t["count"],
            assignments=None
            if t["assignments"] is None
            else tuple(tuple(a["broker_ids"]) for a in t["assignments"]),
        )
        for t in b["topics"]
    )
    return P.CreatePartitionsRequest(
        topics=topics, timeout_ms=b["timeout_ms"], validate_only=b["validate_only"]
    )


def _topic_partitions(entries: Any, name: str, parts: str) -> tuple[TopicPartition, ...] | None:
    """Kafka's nullable ``[{topic, [partition]}]``: None stays None (every partition)."""
    if entries is None:
        return None
    return tuple(TopicPartition(t[name], p) for t in entries for p in t[parts])


def _elect_leaders(b: dict, v: int) -> P.ElectLeadersRequest:
    return P.ElectLeadersRequest(
        election_type=b["election_type"],
        partitions=_topic_partitions(b["topic_partitions"], "topic", "partitions"),
        timeout_ms=b["timeout_ms"],
    )


def _alter_reassignments(b: dict, v: int) -> P.AlterPartitionReassignmentsRequest:
    moves = _flat(
        b, "topics", "name", "partitions", "partition_index",
        lambda tp, p: P.Reassignment(tp=tp, replicas=None if p["replicas"] is None else tuple(p["replicas"])),
    )  # fmt: skip
    return P.AlterPartitionReassignmentsRequest(timeout_ms=b["timeout_ms"], reassignments=moves)


def _describe_configs(b: dict, v: int) -> P.DescribeConfigsRequest:
    resources = tuple(
        P.DescribeConfigsResource(
            resource_type=r["resource_type"],
            resource_name=r["resource_name"],
            configuration_keys=None if r["configuration_keys"] is None else tuple(r["configuration_keys"]),
        )
        for r in b["resources"]
    )
    return P.DescribeConfigsRequest(
        resources=resources,
        include_synonyms=b["include_synonyms"],
        include_documentation=b["include_documentation"],
    )


def _alter_resources(b: dict, incremental: bool) -> tuple:
    return tuple(
        P.AlterConfigsResource(
            resource_type=r["resource_type"],
            resource_name=r["resource_name"],
            configs=tuple(
                P.AlterableConfig(
                    name=c["name"],
                    value=c["value"],
                    op=c["config_operation"] if incremental else P.AlterConfigOp.SET,
                )
                for c in r["configs"]
            ),
        )
        for r in b["resources"]
    )


def _describe_configs_body(r: P.DescribeConfigsResponse) -> dict:
    return {
        "results": [
            {
                "error_code": res.error_code,
                "error_message": res.error_message,
                "resource_type": res.resource_type,
                "resource_name": res.resource_name,
                "configs": [
                    {
                        "name": c.name,
                        "value": c.value,
                        "read_only": c.read_only,
                        "is_default": c.config_source == P.ConfigSource.DEFAULT_CONFIG,
                        "config_source": c.config_source,
                        "is_sensitive": c.is_sensitive,
                        "synonyms": [
                            {"name": s.name, "value": s.value, "source": s.source} for s in c.synonyms
                        ],
                        "config_type": c.config_type,
                        "documentation": c.documentation,
                    }
                    for c in res.configs
                ],
            }
            for res in r.results
        ]
    }


def _alter_configs_body(r: Any) -> dict:
    return {
        "responses": [
            {
                "error_code": x.error_code,
                "error_message": x.error_message,
                "resource_type": x.resource_type,
                "resource_name": x.resource_name,
            }
            for x in r.results
        ]
    }


REQUESTS: dict[int, Callable[[dict, int], Any]] = {
    3: _metadata,
    19: _create_topics,
    20: lambda b, v: P.DeleteTopicsRequest(topic_names=tuple(b["topic_names"]), timeout_ms=b["timeout_ms"]),
    37: _create_partitions,
    43: _elect_leaders,
    45: _alter_reassignments,
    46: lambda b, v: P.ListPartitionReassignmentsRequest(
        timeout_ms=b["timeout_ms"], partitions=_topic_partitions(b["topics"], "name", "partition_indexes")
    ),
    32: _describe_configs,
    33: lambda b, v: P.AlterConfigsRequest(
        resources=_alter_resources(b, False), validate_only=b["validate_only"]
    ),
    44: lambda b, v: P.IncrementalAlterConfigsRequest(
        resources=_alter_resources(b, True), validate_only=b["validate_only"]
    ),
    60: lambda b, v: P.DescribeClusterRequest(
        include_cluster_authorized_operations=b["include_cluster_authorized_operations"]
    ),
    21: lambda b, v: P.DeleteRecordsRequest(
        partitions=_flat(
            b,
            "topics",
            "name",
            "partitions",
            "partition_index",
            lambda tp, p: P.DeleteRecordsPartition(tp=tp, offset=p["offset"]),
        ),
        timeout_ms=b["timeout_ms"],
    ),  # fmt: skip
}


def to_request(api_key: int, version: int, body: dict) -> Any:
    cls = P.REQUEST_TYPES.get(api_key)  # type: ignore[call-overload]
    if cls is not None and cls.versions is not None:
        return from_wire(cls, body, version)
    return REQUESTS[api_key](body, version)


# ----------------------------------------------------------------------------------------- responses


def api_versions_body(error_code: int = 0) -> dict:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported_versions()
        ],
        "throttle_time_ms": 0,
    }


def _metadata_body(r: P.MetadataResponse) -> dict:
    return {
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in r.brokers
        ],
        "cluster_id": r.cluster_id,
        "controller_id": r.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader_id,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": list(p.replicas),
                        "isr_nodes": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                    }
                    for p in t.partitions
                ],
            }
            for t in r.topics
        ],
    }


def _partition_errors(entries: Any, name: str, parts: str, index: str, code: str) -> list[dict]:
    return _by_topic(entries, name, parts, lambda p: {index: p.tp.partition, code: p.error_code})


RESPONSES: dict[type, Callable[[Any], dict]] = {
    P.CreatePartitionsResponse: lambda r: {
        "results": [
            {"name": t.name, "error_code": t.error_code, "error_message": t.error_message} for t in r.results
        ]
    },
    P.ElectLeadersResponse: lambda r: {
        "error_code": r.error_code,
        "replica_election_results": _by_topic(
            r.results,
            "topic",
            "partition_result",
            lambda e: {
                "partition_id": e.tp.partition,
                "error_code": e.error_code,
                "error_message": e.error_message,
            },
        ),  # fmt: skip
    },
    P.AlterPartitionReassignmentsResponse: lambda r: {
        "error_code": r.error_code,
        "error_message": r.error_message,
        "responses": _by_topic(
            r.results,
            "name",
            "partitions",
            lambda e: {
                "partition_index": e.tp.partition,
                "error_code": e.error_code,
                "error_message": e.error_message,
            },
        ),  # fmt: skip
    },
    P.ListPartitionReassignmentsResponse: lambda r: {
        "error_code": r.error_code,
        "error_message": r.error_message,
        "topics": _by_topic(
            r.reassignments,
            "name",
            "partitions",
            lambda e: {
                "partition_index": e.tp.partition,
                "replicas": list(e.replicas),
                "adding_replicas": list(e.adding_replicas),
                "removing_replicas": list(e.removing_replicas),
            },
        ),  # fmt: skip
    },
    P.DeleteRecordsResponse: lambda r: {
        "topics": _by_topic(
            r.partitions,
            "name",
            "partitions",
            lambda p: {
                "partition_index": p.tp.partition,
                "low_watermark": p.low_watermark,
                "error_code": p.error_code,
            },
        )  # fmt: skip
    },
    P.DescribeConfigsResponse: _describe_configs_body,
    P.AlterConfigsResponse: _alter_configs_body,
    P.IncrementalAlterConfigsResponse: _alter_configs_body,
    P.DescribeClusterResponse: lambda r: {
        "error_code": r.error_code,
        "cluster_id": r.cluster_id,
        "controller_id": r.controller_id,
        "brokers": [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in r.brokers
        ],
    },
    P.MetadataResponse: _metadata_body,
    P.CreateTopicsResponse: lambda r: {
        "topics": [
            {"name": t.name, "error_code": t.error_code, "error_message": t.error_message} for t in r.topics
        ]
    },
    P.DeleteTopicsResponse: lambda r: {
        "responses": [
            {"name": t.name, "error_code": t.error_code, "error_message": t.error_message} for t in r.topics
        ]
    },
}


def to_body(response: Any, version: int) -> dict:
    """The wire dict of a response dataclass, for the version the request came in."""
    fn = RESPONSES.get(type(response))
    return to_wire(response, version) if fn is None else fn(response)
