"""Authorization at the listener: which ACL each API needs, and the errors Kafka answers without it.

``check`` looks at one decoded request (Kafka's field names, as the wire codec reads them) before it goes
to the broker. It returns what to forward (the request with the unauthorized topics, groups or resources
taken out) and how to put the refused parts back into the broker's answer with Kafka's error codes; or,
when nothing is left to forward, the whole answer at once. The rules follow Kafka's request handlers:

==========================  ==============================================================================
Produce                     WRITE on each topic; WRITE on the transactional id
Fetch (consumer / replica)  READ on each topic / CLUSTER_ACTION on the cluster
ListOffsets, Metadata       DESCRIBE on each topic (Metadata drops the topics a client may not describe
                            when it asks for all; auto-creation needs CREATE)
Group APIs, OffsetCommit    READ on the group (and READ on each committed topic)
OffsetFetch, DescribeGroups DESCRIBE on the group (and on each topic)
ListGroups                  DESCRIBE on the cluster, else only the groups it may describe
Create/Delete topics        CREATE (cluster or topic) / DELETE; CreatePartitions ALTER; DeleteRecords DELETE
Describe/Alter configs      DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker
InitProducerId              WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster, or
                            WRITE on some topic (Kafka 3)
Transactions                WRITE on the transactional id, WRITE on topics, READ on the group
Cluster administration      ALTER on the cluster (elect, reassign, ACLs, SCRAM users), DESCRIBE to list
DescribeQuorum              DESCRIBE on the cluster (a KRaft broker forwards it to the active controller)
DescribeLogDirs             DESCRIBE on the cluster; AlterReplicaLogDirs ALTER on the cluster
==========================  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.security.acl import CLUSTER_NAME, Operation, ResourceType

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
OPERATION_NOT_ATTEMPTED = 55

Authorize = Callable[[Operation, ResourceType, str], bool]
Merge = Callable[[dict], dict]
Verdict = tuple[dict | None, Merge | None, dict | None]  # (forward, merge into the answer, whole answer)
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = Operation


def _split(items: list[dict], key: str, ok: Callable[[str], bool]) -> tuple[list[dict], list[dict]]:
    allowed, denied = [], []
    for it in items or []:
        (allowed if ok(it[key]) else denied).append(it)
    return allowed, denied


def _forward_or_answer(body: dict, field: str, allowed: list, merge: Merge) -> Verdict:
    if allowed:
        return {**body, field: allowed}, merge, None
    return None, None, merge({})


def _appender(field: str, extra: list[dict]) -> Merge:
    def merge(resp: dict) -> dict:
        return {**resp, field: list(resp.get(field) or []) + extra}

    return merge


def check(
    api_key: int,
    body: dict,
    ok: Authorize,
    any_topic_write: Callable[[], bool],
    would_create: Callable[[str], bool] = lambda _topic: False,
) -> Verdict:
    """See the module docstring. ``ok(op, type, name)`` asks the authorizer for this connection's principal;
    ``would_create(topic)``: the broker would auto-create this topic (it is missing and
    ``auto.create.topics.enable`` is on), so a Metadata naming it needs CREATE."""
    if api_key == 3:
        return _metadata(body, ok, would_create)
    fn = _RULES.get(api_key)
    if fn is None:
        return body, None, None
    return fn(body, ok, any_topic_write)


def _topic_ok(ok: Authorize, op: Operation) -> Callable[[str], bool]:
    return lambda name: ok(op, T, name)


def _produce(body: dict, ok: Authorize, _any: Any) -> Verdict:
    txn = body.get("transactional_id")
    if txn is not None and not ok(Op.WRITE, X, txn):
        allowed, denied = [], body["topic_data"]
        code = TXN_DENIED
    else:
        allowed, denied = _split(body["topic_data"], "name", _topic_ok(ok, Op.WRITE))
        code = TOPIC_DENIED
    if not denied:
        return body, None, None
    extra = [{"name": t["name"], "partition_responses": [
        {"index": p["index"], "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
         "log_start_offset": -1} for p in t["partition_data"]]} for t in denied]  # fmt: skip
    return _forward_or_answer(body, "topic_data", allowed, _appender("responses", extra))


def _fetch(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if body.get("replica_id", -1) >= 0:  # a follower's fetch: only brokers may
        if ok(Op.CLUSTER_ACTION, C, CLUSTER_NAME):
            return body, None, None
        return None, None, {"error_code": CLUSTER_DENIED, "responses": []}
    # ACLs are checked here on the topics a fetch names, and a fetch session's later fetches name only
    # what moved (KIP-227): so behind an authorizer a consumer's fetch opens no session. The answer's
    # session id 0 keeps the client on full fetches.
    body = {**body, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": []}
    allowed, denied = _split(body["topics"], "topic", _topic_ok(ok, Op.READ))
    if not denied:
        return body, None, None
    extra = [{"topic": t["topic"], "partitions": [
        {"partition_index": p["partition"], "error_code": TOPIC_DENIED, "high_watermark": -1,
         "last_stable_offset": -1, "log_start_offset": -1, "records": None} for p in t["partitions"]]}
        for t in denied]  # fmt: skip
    return _forward_or_answer(body, "topics", allowed, _appender("responses", extra))


def _list_offsets(body: dict, ok: Authorize, _any: Any) -> Verdict:
    allowed, denied = _split(body["topics"], "name", _topic_ok(ok, Op.DESCRIBE))
    if not denied:
        return body, None, None
    extra = [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": TOPIC_DENIED, "timestamp": -1, "offset": -1}
        for p in t["partitions"]]} for t in denied]  # fmt: skip
    return _forward_or_answer(body, "topics", allowed, _appender("topics", extra))


def _metadata(body: dict, ok: Authorize, would_create: Callable[[str], bool]) -> Verdict:
    topics = body.get("topics")
    if topics is None:  # every topic: show only those this principal may describe

        def hide(resp: dict) -> dict:
            return {**resp, "topics": [t for t in resp.get("topics") or [] if ok(Op.DESCRIBE, T, t["name"])]}

        return body, hide, None
    allowed, denied = _split(topics, "name", _topic_ok(ok, Op.DESCRIBE))
    if body.get("allow_auto_topic_creation") and not ok(Op.CREATE, C, CLUSTER_NAME):
        # Kafka: a missing topic the principal may not create is TOPIC_AUTHORIZATION_FAILED, not created
        refused = [t for t in allowed if would_create(t["name"]) and not ok(Op.CREATE, T, t["name"])]
        allowed = [t for t in allowed if t not in refused]
        denied += refused
    extra = [{"name": t["name"], "error_code": TOPIC_DENIED, "is_internal": False, "partitions": []}
             for t in denied]  # fmt: skip
    forward = {**body, "topics": allowed}
    return forward, (_appender("topics", extra) if extra else None), None


def _group_error(op: Operation, key: str = "group_id") -> Callable[[dict, Authorize, Any], Verdict]:
    def rule(body: dict, ok: Authorize, _any: Any) -> Verdict:
        if ok(op, G, body[key]):
            return body, None, None
        return None, None, {"error_code": GROUP_DENIED}

    return rule


def _offset_commit(body: dict, ok: Authorize, _any: Any, txn: bool = False) -> Verdict:
    code = None
    if txn and not ok(Op.WRITE, X, body["transactional_id"]):
        code = TXN_DENIED
    elif not ok(Op.READ, G, body["group_id"]):
        code = GROUP_DENIED
    if code is not None:
        allowed, denied = [], body["topics"]
    else:
        allowed, denied = _split(body["topics"], "name", _topic_ok(ok, Op.READ))
        code = TOPIC_DENIED
    if not denied:
        return body, None, None
    extra = [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                                for p in t["partitions"]]} for t in denied]  # fmt: skip
    return _forward_or_answer(body, "topics", allowed, _appender("topics", extra))


def _offset_fetch(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if not ok(Op.DESCRIBE, G, body["group_id"]):
        return None, None, {"error_code": GROUP_DENIED, "topics": []}
    topics = body.get("topics")
    if topics is None:

        def hide(resp: dict) -> dict:
            return {**resp, "topics": [t for t in resp.get("topics") or [] if ok(Op.DESCRIBE, T, t["name"])]}

        return body, hide, None
    allowed, denied = _split(topics, "name", _topic_ok(ok, Op.DESCRIBE))
    if not denied:
        return body, None, None
    extra = [{"name": t["name"], "partitions": [
        {"partition_index": p, "committed_offset": -1, "error_code": TOPIC_DENIED}
        for p in t["partition_indexes"]]} for t in denied]  # fmt: skip
    return _forward_or_answer(body, "topics", allowed, _appender("topics", extra))


def _find_coordinator(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if body.get("key_type", 0) == 1:
        if ok(Op.DESCRIBE, X, body["key"]):
            return body, None, None
        return None, None, {"error_code": TXN_DENIED, "node_id": -1, "host": "", "port": -1}
    if ok(Op.DESCRIBE, G, body["key"]):
        return body, None, None
    return None, None, {"error_code": GROUP_DENIED, "node_id": -1, "host": "", "port": -1}


def _describe_groups(body: dict, ok: Authorize, _any: Any) -> Verdict:
    groups = body["groups"]
    allowed = [g for g in groups if ok(Op.DESCRIBE, G, g)]
    denied = [g for g in groups if g not in allowed]
    if not denied:
        return body, None, None
    extra = [{"group_id": g, "error_code": GROUP_DENIED, "group_state": "", "protocol_type": "",
              "protocol_data": "", "members": []} for g in denied]  # fmt: skip
    return _forward_or_answer(body, "groups", allowed, _appender("groups", extra))


def _list_groups(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if ok(Op.DESCRIBE, C, CLUSTER_NAME):
        return body, None, None

    def hide(resp: dict) -> dict:
        return {**resp, "groups": [g for g in resp.get("groups") or [] if ok(Op.DESCRIBE, G, g["group_id"])]}

    return body, hide, None


def _create_topics(body: dict, ok: Authorize, _any: Any) -> Verdict:
    cluster = ok(Op.CREATE, C, CLUSTER_NAME)
    allowed, denied = _split(body["topics"], "name", lambda n: cluster or ok(Op.CREATE, T, n))
    if not denied:
        return body, None, None
    extra = [{"name": t["name"], "error_code": TOPIC_DENIED, "error_message": "Authorization failed."}
             for t in denied]  # fmt: skip
    return _forward_or_answer(body, "topics", allowed, _appender("topics", extra))


def _delete_topics(body: dict, ok: Authorize, _any: Any) -> Verdict:
    names = body.get("topic_names") or [t["name"] for t in body.get("topics") or []]
    allowed = [n for n in names if ok(Op.DELETE, T, n)]
    denied = [n for n in names if n not in allowed]
    if not denied:
        return body, None, None
    extra = [{"name": n, "error_code": TOPIC_DENIED} for n in denied]
    return _forward_or_answer(body, "topic_names", allowed, _appender("responses", extra))


def _per_topic_partitions(op: Operation, req_key: str, resp_key: str, parts: str, out_parts: str,
                          index: str, **fill: Any) -> Callable[[dict, Authorize, Any], Verdict]:  # fmt: skip
    def rule(body: dict, ok: Authorize, _any: Any) -> Verdict:
        allowed, denied = _split(body[req_key], "name", _topic_ok(ok, op))
        if not denied:
            return body, None, None
        extra = [{"name": t["name"], out_parts: [
            {index: p["partition_index"] if isinstance(p, dict) else p, "error_code": TOPIC_DENIED, **fill}
            for p in t[parts]]} for t in denied]  # fmt: skip
        return _forward_or_answer(body, req_key, allowed, _appender(resp_key, extra))

    return rule


def _create_partitions(body: dict, ok: Authorize, _any: Any) -> Verdict:
    allowed, denied = _split(body["topics"], "name", _topic_ok(ok, Op.ALTER))
    if not denied:
        return body, None, None
    extra = [{"name": t["name"], "error_code": TOPIC_DENIED} for t in denied]
    return _forward_or_answer(body, "topics", allowed, _appender("results", extra))


def _configs(op: Operation, resp_key: str) -> Callable[[dict, Authorize, Any], Verdict]:
    def allowed_resource(r: dict, ok: Authorize) -> int:
        if r["resource_type"] == 2:
            return 0 if ok(op, T, r["resource_name"]) else TOPIC_DENIED
        if r["resource_type"] in (4, 8):  # a broker, a broker's loggers
            return 0 if ok(op, C, CLUSTER_NAME) else CLUSTER_DENIED
        return 0

    def rule(body: dict, ok: Authorize, _any: Any) -> Verdict:
        codes = [allowed_resource(r, ok) for r in body["resources"]]
        if not any(codes):
            return body, None, None
        allowed = [r for r, c in zip(body["resources"], codes, strict=True) if not c]
        extra = [{"error_code": c, "error_message": "Authorization failed.", "resource_type": r["resource_type"],
                  "resource_name": r["resource_name"], "configs": []}
                 for r, c in zip(body["resources"], codes, strict=True) if c]  # fmt: skip
        return _forward_or_answer(body, "resources", allowed, _appender(resp_key, extra))

    return rule


def _init_producer_id(body: dict, ok: Authorize, any_topic_write: Callable[[], bool]) -> Verdict:
    txn = body.get("transactional_id")
    if txn is not None:
        if ok(Op.WRITE, X, txn):
            return body, None, None
        return None, None, {"error_code": TXN_DENIED, "producer_id": -1, "producer_epoch": -1}
    if ok(Op.IDEMPOTENT_WRITE, C, CLUSTER_NAME) or any_topic_write():
        return body, None, None
    return None, None, {"error_code": CLUSTER_DENIED, "producer_id": -1, "producer_epoch": -1}


def _add_partitions_to_txn(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if not ok(Op.WRITE, X, body["transactional_id"]):
        codes = {t["name"]: TXN_DENIED for t in body["topics"]}
    else:
        codes = {t["name"]: 0 if ok(Op.WRITE, T, t["name"]) else TOPIC_DENIED for t in body["topics"]}
    if not any(codes.values()):
        return body, None, None
    # Kafka adds none of them when any is refused: the rest are OPERATION_NOT_ATTEMPTED
    results = [{"name": t["name"], "results_by_partition": [
        {"partition_index": p, "partition_error_code": codes[t["name"]] or OPERATION_NOT_ATTEMPTED}
        for p in t["partitions"]]} for t in body["topics"]]  # fmt: skip
    return None, None, {"results": results}


def _add_offsets_to_txn(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if not ok(Op.WRITE, X, body["transactional_id"]):
        return None, None, {"error_code": TXN_DENIED}
    if not ok(Op.READ, G, body["group_id"]):
        return None, None, {"error_code": GROUP_DENIED}
    return body, None, None


def _end_txn(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if ok(Op.WRITE, X, body["transactional_id"]):
        return body, None, None
    return None, None, {"error_code": TXN_DENIED}


def _delete_groups(body: dict, ok: Authorize, _any: Any) -> Verdict:
    names = body["groups_names"]
    allowed = [g for g in names if ok(Op.DELETE, G, g)]
    extra = [{"group_id": g, "error_code": GROUP_DENIED} for g in names if g not in allowed]
    if not extra:
        return body, None, None
    return _forward_or_answer(body, "groups_names", allowed, _appender("results", extra))


def _cluster(op: Operation, answer: Callable[[], dict]) -> Callable[[dict, Authorize, Any], Verdict]:
    def rule(body: dict, ok: Authorize, _any: Any) -> Verdict:
        if ok(op, C, CLUSTER_NAME):
            return body, None, None
        return None, None, answer()

    return rule


def _err(**extra: Any) -> Callable[[], dict]:
    return lambda: {"error_code": CLUSTER_DENIED, "error_message": "Cluster authorization failed.", **extra}


def _alter_replica_log_dirs(body: dict, ok: Authorize, _any: Any) -> Verdict:
    if ok(Op.ALTER, C, CLUSTER_NAME):
        return body, None, None
    by_topic: dict[str, list[int]] = {}
    for d in body.get("dirs") or []:
        for t in d.get("topics") or []:
            by_topic.setdefault(t["name"], []).extend(t.get("partitions") or [])
    results = [
        {
            "topic_name": name,
            "partitions": [{"partition_index": p, "error_code": CLUSTER_DENIED} for p in parts],
        }
        for name, parts in by_topic.items()
    ]
    return None, None, {"throttle_time_ms": 0, "results": results}


_RULES: dict[int, Callable[[dict, Authorize, Any], Verdict]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group_error(Op.READ),
    12: _group_error(Op.READ),
    13: _group_error(Op.READ),
    14: _group_error(Op.READ),
    15: _describe_groups,
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _per_topic_partitions(
        Op.DELETE, "topics", "topics", "partitions", "partitions", "partition_index", low_watermark=-1
    ),  # fmt: skip
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _end_txn,
    28: lambda b, ok, a: _offset_commit(b, ok, a, txn=True),
    32: _configs(Op.DESCRIBE_CONFIGS, "results"),
    33: _configs(Op.ALTER_CONFIGS, "responses"),
    34: _alter_replica_log_dirs,
    35: _cluster(Op.DESCRIBE, lambda: {"error_code": CLUSTER_DENIED, "results": []}),
    37: _create_partitions,
    42: _delete_groups,
    43: _cluster(Op.ALTER, _err(replica_election_results=[])),
    44: _configs(Op.ALTER_CONFIGS, "responses"),
    45: _cluster(Op.ALTER, _err(responses=[])),
    46: _cluster(Op.DESCRIBE, _err(topics=[])),
    55: _cluster(Op.DESCRIBE, _err(topics=[])),
    60: _cluster(Op.DESCRIBE, _err(brokers=[], controller_id=-1)),
}

__all__ = ["check"]
