"""A small blocking Kafka admin client over TCP, built on kafkalite's own codec, for the command-line tools
(``kafkalite topics`` and ``kafkalite consumer-groups`` with ``--bootstrap-server``).

It negotiates versions with ApiVersions as every Kafka client does, keeps one socket per broker, finds
the controller and group coordinators from Metadata and FindCoordinator, and raises the Kafka error a
broker answers (``kafkalite.errors``). The readers the consumer-groups tool needs (``list_groups``,
``describe_group``, ``group_offsets``, ``list_offsets``, ``commit_offsets``) have the same shapes as the
in-process ``Cluster``'s, so one tool serves both.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import ssl
import struct
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalite.common.bootstrap import parse_bootstrap
from kafkalite.common.isolation_level import IsolationLevel
from kafkalite.errors import KafkaError, error_for_code
from kafkalite.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    DescribedGroup,
    DescribedGroupMember,
    ListedGroup,
    TopicPartition,
)
from kafkalite.protocol.codec.header import decode_response, encode_request
from kafkalite.protocol.codec.messages import SPECS
from kafkalite.security.acl import (
    AclBinding,
    AclBindingFilter,
    binding_from_wire,
    binding_to_wire,
    filter_to_wire,
)
from kafkalite.security.scram import MECHANISM_TYPES, ScramClient, salted_password

_SIZE = struct.Struct(">i")
API_VERSIONS, METADATA, LIST_OFFSETS, FIND_COORDINATOR = 18, 3, 2, 10
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 8, 9, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, DELETE_GROUPS = 19, 20, 32, 42
CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
FETCH = 1
DESCRIBE_USER_SCRAM, ALTER_USER_SCRAM = 50, 51
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def _raise(code: int, what: str, message: str | None = None) -> None:
    if code:
        cls = error_for_code(code) or KafkaError
        raise cls(message or f"{what}: {cls.__name__}")


class ClientSecurity:
    """A client's security settings, Kafka's names (a ``--command-config`` file): ``security.protocol``,
    ``sasl.mechanism``, ``sasl.jaas.config`` (``username="..." password="..."``), ``ssl.truststore.location``
    (PEM CA certificates), ``ssl.keystore.location`` (PEM key and certificate, for client authentication)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
        if self.protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(
                f"security.protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got {self.protocol!r}"
            )
        self.tls = self.protocol in ("SSL", "SASL_SSL")
        self.sasl = self.protocol.startswith("SASL_")
        self.mechanism = str(props.get("sasl.mechanism", "PLAIN")).upper()
        jaas = str(props.get("sasl.jaas.config", ""))
        found = dict(re.findall(r'(username|password)\s*=\s*"([^"]*)"', jaas))
        self.username = props.get("sasl.username") or found.get("username", "")
        self.password = props.get("sasl.password") or found.get("password", "")
        if self.sasl and not self.username:
            raise ValueError('SASL needs a user: sasl.jaas.config with username="..." password="..."')
        self.cafile = props.get("ssl.truststore.location")
        self.keystore = props.get("ssl.keystore.location")
        self.keyfile = props.get("ssl.key.location")

    def ssl_context(self):  # noqa: ANN201

        ctx = ssl.create_default_context(cafile=self.cafile)
        if self.keystore:
            ctx.load_cert_chain(self.keystore, self.keyfile)
        return ctx


class _Connection:
    def __init__(
        self, host: str, port: int, timeout_s: float, client_id: str, security: ClientSecurity | None = None
    ) -> None:
        sock = socket.create_connection((host, port), timeout=timeout_s)
        if security is not None and security.tls:
            sock = security.ssl_context().wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.client_id = client_id
        self.corr = itertools.count(1)
        self.versions: dict[int, tuple[int, int]] = {}
        body = {"client_software_name": "kafkalite", "client_software_version": "cli"}
        resp = self.call(API_VERSIONS, 3, body)
        _raise(resp["error_code"], "ApiVersions")
        self.versions = {a["api_key"]: (a["min_version"], a["max_version"]) for a in resp["api_keys"]}
        if security is not None and security.sasl:
            self._authenticate(security)

    def _authenticate(self, sec: ClientSecurity) -> None:
        """SaslHandshake v1, then the mechanism's messages in SaslAuthenticate (KIP-152)."""
        resp = self.call(SASL_HANDSHAKE, 1, {"mechanism": sec.mechanism})
        _raise(resp["error_code"], f"SaslHandshake {sec.mechanism} (the broker offers {resp['mechanisms']})")

        def step(token: bytes) -> bytes:
            r = self.call(SASL_AUTHENTICATE, min(2, self.version(SASL_AUTHENTICATE)), {"auth_bytes": token})
            _raise(r["error_code"], "SaslAuthenticate", r.get("error_message"))
            return bytes(r["auth_bytes"])

        if sec.mechanism == "PLAIN":
            step(b"\x00" + sec.username.encode() + b"\x00" + sec.password.encode())
            return
        scram = ScramClient(sec.mechanism, sec.username, sec.password)
        server_first = step(scram.first())
        scram.verify(step(scram.final(server_first)))

    def version(self, api_key: int) -> int:
        """The highest version both this client and the broker speak."""
        ours = SPECS[api_key]
        lo, hi = self.versions.get(api_key, (0, -1))
        best = min(hi, ours.max_version)
        if best < max(lo, ours.min_version):
            raise KafkaError(f"the broker does not serve API {api_key} in a version kafkalite speaks")
        return best

    def call(self, api_key: int, version: int, body: dict) -> dict:
        corr = next(self.corr)
        self.sock.sendall(encode_request(api_key, version, corr, self.client_id, body))
        size = _SIZE.unpack(self._read(4))[0]
        got, resp = decode_response(api_key, version, self._read(size))
        if got != corr:
            raise KafkaError(f"answer to request {got} where {corr} was expected")
        return resp

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


class AdminClient:
    """Blocking admin calls against a running cluster; ``bootstrap`` is ``HOST:PORT[,HOST:PORT...]``."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_s: float = 10.0,
        client_id: str = "kafkalite-admin",
        security: Mapping[str, str] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.security = ClientSecurity(security) if security else None
        self._conns: dict[Any, _Connection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        errors = []
        for host, port in parse_bootstrap(bootstrap):
            try:
                self._conns["bootstrap"] = _Connection(host, port, timeout_s, client_id, self.security)
                break
            except OSError as e:
                errors.append(f"{host}:{port}: {e}")
        else:
            raise ConnectionError("no bootstrap server answered: " + "; ".join(errors))
        self.metadata()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    # ------------------------------------------------------------------------------------ plumbing

    def _conn(self, node: Any) -> _Connection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.brokers[node]
            conn = self._conns[node] = _Connection(host, port, self.timeout_s, self.client_id, self.security)
        return conn

    def _call(self, node: Any, api_key: int, body: dict) -> dict:
        conn = self._conn(node)
        return conn.call(api_key, conn.version(api_key), body)

    # ------------------------------------------------------------------------------------ metadata

    def metadata(self, topics: Iterable[str] | None = None) -> dict:
        """Metadata for ``topics`` (None: all); also refreshes the brokers and the controller id."""
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        }
        resp = self._call("bootstrap", METADATA, body)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        self.controller_id = resp["controller_id"]
        return resp

    # ------------------------------------------------------------------------------------ log dirs

    def describe_log_dirs(self, broker: int, partitions: Iterable[TopicPartition] | None = None) -> dict:
        """DescribeLogDirs at ``broker``: its answer (``results``: each dir, its error and replicas)."""
        body: dict[str, Any] = {"topics": None}
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body["topics"] = [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]
        resp = self._call(broker, DESCRIBE_LOG_DIRS, body)
        _raise(resp.get("error_code", 0), f"describe log dirs of broker {broker}")
        return resp

    def alter_replica_log_dirs(
        self, broker: int, targets: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, int]:
        """AlterReplicaLogDirs at ``broker``: each replica's error code (0: its move started or was done)."""
        dirs: dict[str, dict[str, list[int]]] = {}
        for tp, d in targets.items():
            dirs.setdefault(d, {}).setdefault(tp.topic, []).append(tp.partition)
        body = {
            "dirs": [
                {"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                for d, topics in dirs.items()
            ]
        }
        resp = self._call(broker, ALTER_REPLICA_LOG_DIRS, body)
        return {
            TopicPartition(t["topic_name"], p["partition_index"]): p["error_code"]
            for t in resp["results"]
            for p in t["partitions"]
        }

    # ---------------------------------------------------------------------------- reassignments

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Iterable[int] | None]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """AlterPartitionReassignments at the controller: each partition's target replicas (None cancels
        its reassignment); answers each partition's (error code, message)."""
        by_topic: dict[str, list[dict]] = {}
        for tp, replicas in sorted(targets.items()):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)}
            )
        body = {
            "timeout_ms": int(self.timeout_s * 1000),
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = self._call(self.controller_id, ALTER_PARTITION_REASSIGNMENTS, body)
        _raise(resp["error_code"], "alter partition reassignments", resp.get("error_message"))
        return {
            TopicPartition(t["name"], p["partition_index"]): (p["error_code"], p.get("error_message"))
            for t in resp["responses"]
            for p in t["partitions"]
        }

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments at the controller: each moving partition (of ``partitions``; all
        when None) -> (replicas, adding replicas, removing replicas)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": sorted(ps)} for t, ps in sorted(by_topic.items())]
        body = {"timeout_ms": int(self.timeout_s * 1000), "topics": topics}
        resp = self._call(self.controller_id, LIST_PARTITION_REASSIGNMENTS, body)
        _raise(resp["error_code"], "list partition reassignments", resp.get("error_message"))
        return {
            TopicPartition(t["name"], p["partition_index"]): (
                list(p["replicas"]),
                list(p["adding_replicas"]),
                list(p["removing_replicas"]),
            )
            for t in resp["topics"]
            for p in t["partitions"]
        }

    def topics(self) -> list[str]:
        return sorted(t["name"] for t in self.metadata()["topics"] if t["error_code"] == 0)

    def partitions_for(self, topic: str) -> list[int]:
        (t,) = self.metadata([topic])["topics"]
        _raise(t["error_code"], f"topic {topic!r}")
        return sorted(p["partition_index"] for p in t["partitions"])

    def _leaders(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        meta = self.metadata(sorted({tp.topic for tp in tps}))
        out = {}
        for t in meta["topics"]:
            for p in t["partitions"]:
                out[TopicPartition(t["name"], p["partition_index"])] = p["leader_id"]
        return out

    def partition_leaders(self, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, int]]:
        """Fresh Metadata: each partition of ``topics`` -> (leader id, leader epoch); -1 for no leader.
        A topic the cluster does not know is left out."""
        out = {}
        for t in self.metadata(sorted(set(topics)))["topics"]:
            if t["error_code"]:
                continue
            for p in t["partitions"]:
                out[TopicPartition(t["name"], p["partition_index"])] = (
                    p["leader_id"],
                    p.get("leader_epoch", -1),
                )
        return out

    def fetch_raw(
        self,
        node: int,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1 << 20,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        leader_epoch: int = -1,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        partition_max_bytes: int | None = None,
    ) -> dict:
        """One Fetch of one partition from broker ``node``, as a consumer sends it (replica id -1, no
        session): ``max_bytes`` for the answer, ``partition_max_bytes`` (default the same) for the
        partition, the broker holding it up to ``max_wait_ms`` until ``min_bytes`` are there. Returns the partition's answer unparsed: ``error_code``, ``high_watermark``,
        ``last_stable_offset``, ``log_start_offset``, ``aborted_transactions`` and ``records`` (raw
        record-batch bytes, possibly ending in a partial batch). Errors are the caller's to judge."""
        body = {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": int(isolation_level), "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": max_bytes if partition_max_bytes is None else partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": "",
        }  # fmt: skip
        resp = self._call(node, FETCH, body)
        _raise(resp.get("error_code", 0), f"Fetch {topic}-{partition}")
        for t in resp["responses"]:
            for p in t["partitions"]:
                if t["topic"] == topic and p["partition_index"] == partition:
                    records = p["records"]
                    if records is not None and not isinstance(records, bytes | bytearray | memoryview):
                        records = records.read()
                    return {**p, "records": bytes(records or b"")}
        raise KafkaError(f"Fetch answer from broker {node} has no partition {topic}-{partition}")

    def forget(self, node: Any) -> None:
        """Close the connection to ``node`` (after it failed), so the next call opens a new one."""
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()

    # -------------------------------------------------------------------------------------- topics

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": int(self.timeout_s * 1000),
            "validate_only": False,
        }
        (t,) = self._call(self.controller_id, CREATE_TOPICS, body)["topics"]
        _raise(t["error_code"], f"create topic {name!r}", t.get("error_message"))

    def delete_topic(self, name: str) -> None:
        body = {"topic_names": [name], "timeout_ms": int(self.timeout_s * 1000)}
        (t,) = self._call(self.controller_id, DELETE_TOPICS, body)["responses"]
        _raise(t["error_code"], f"delete topic {name!r}", t.get("error_message"))

    def describe_configs(
        self, resource_type: int, name: str, *, synonyms: bool = True
    ) -> list[dict[str, Any]]:
        """DescribeConfigs of one topic (``resource_type`` 2) or broker (4): every key as the broker
        answers it (name, value, config_source, synonyms, config_type)."""
        body = {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
            ],
            "include_synonyms": synonyms,
            "include_documentation": False,
        }
        (r,) = self._call("bootstrap", DESCRIBE_CONFIGS, body)["results"]
        _raise(r["error_code"], f"describe configs of {name!r}", r.get("error_message"))
        return list(r["configs"])

    def topic_configs(self, topic: str) -> dict[str, tuple[str | None, int]]:
        """Every config of ``topic``: key -> (value, source code)."""
        body = {
            "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        }
        (r,) = self._call("bootstrap", DESCRIBE_CONFIGS, body)["results"]
        _raise(r["error_code"], f"describe configs of {topic!r}", r.get("error_message"))
        return {c["name"]: (c["value"], c["config_source"]) for c in r["configs"]}

    def list_offsets(
        self,
        tps: Iterable[TopicPartition],
        timestamp: int,
        *,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> dict[TopicPartition, int | None]:
        """ListOffsets at each partition's leader: the offset for ``timestamp`` (-2 earliest, -1 latest,
        else the first record at or after it); None where no record is that late. ``isolation_level``
        READ_COMMITTED (ListOffsets v2+) bounds the answers by the last stable offset, not the high
        watermark."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp, leader in self._leaders(tps).items():
            if tp in set(tps):
                if leader < 0:
                    raise KafkaError(f"partition {tp} has no leader")
                by_leader.setdefault(leader, []).append(tp)
        out: dict[TopicPartition, int | None] = {}
        for leader, parts in sorted(by_leader.items()):
            topics: dict[str, list[dict]] = {}
            for tp in parts:
                topics.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": timestamp}
                )
            body = {
                "replica_id": -1,
                "isolation_level": int(isolation_level),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            if (
                isolation_level == IsolationLevel.READ_COMMITTED
                and self._conn(leader).version(LIST_OFFSETS) < 2
            ):
                # older versions have no isolation level: the broker would silently answer the HW
                raise KafkaError(f"broker {leader} cannot list read_committed offsets (ListOffsets < v2)")
            for t in self._call(leader, LIST_OFFSETS, body)["topics"]:
                for p in t["partitions"]:
                    _raise(p["error_code"], f"ListOffsets {t['name']}-{p['partition_index']}")
                    out[TopicPartition(t["name"], p["partition_index"])] = (
                        None if p["offset"] < 0 else p["offset"]
                    )
        return out

    def high_watermark(self, topic: str, partition: int) -> int | None:
        return self.list_offsets([TopicPartition(topic, partition)], LATEST_TIMESTAMP)[
            TopicPartition(topic, partition)
        ]

    def offset_bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        tps = list(tps)
        start = self.list_offsets(tps, EARLIEST_TIMESTAMP)
        end = self.list_offsets(tps, LATEST_TIMESTAMP)
        return {tp: (start[tp] or 0, end[tp] or 0) for tp in tps}

    # -------------------------------------------------------------------------------------- groups

    def coordinator(self, group: str) -> int:
        for _ in range(50):
            resp = self._call("bootstrap", FIND_COORDINATOR, {"key": group, "key_type": 0})
            if resp["error_code"] in RETRIABLE:
                time.sleep(0.1)
                continue
            _raise(resp["error_code"], f"FindCoordinator {group!r}", resp.get("error_message"))
            self.brokers.setdefault(resp["node_id"], (resp["host"], resp["port"]))
            return resp["node_id"]
        raise KafkaError(f"no coordinator for group {group!r}")

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        """ListGroups from every broker; ``group_state`` (v4+) and ``group_type`` (``classic`` or
        ``consumer``, v5+) are filled when the broker's version has them ("" otherwise)."""
        out: dict[str, ListedGroup] = {}
        body = {"states_filter": list(states), "types_filter": list(types)}
        for b in sorted(self.brokers):
            for g in self._call(b, LIST_GROUPS, body)["groups"]:
                out[g["group_id"]] = ListedGroup(
                    group_id=g["group_id"],
                    protocol_type=g["protocol_type"],
                    group_state=g.get("group_state", ""),
                    group_type=g.get("group_type", ""),
                )
        return [out[g] for g in sorted(out)]

    def describe_group(self, group: str) -> DescribedGroup:
        (g,) = self._call(self.coordinator(group), DESCRIBE_GROUPS, {"groups": [group]})["groups"]
        return DescribedGroup(
            group_id=g["group_id"],
            error_code=g["error_code"],
            group_state=g["group_state"],
            protocol_type=g["protocol_type"],
            protocol_data=g["protocol_data"],
            members=tuple(
                DescribedGroupMember(
                    member_id=m["member_id"],
                    group_instance_id=m["group_instance_id"],
                    client_id=m["client_id"],
                    client_host=m["client_host"],
                    member_metadata=m["member_metadata"],
                    member_assignment=m["member_assignment"],
                )
                for m in g["members"]
            ),
        )

    def group_offsets(self, group: str) -> dict[TopicPartition, int]:
        resp = self._call(self.coordinator(group), OFFSET_FETCH, {"group_id": group, "topics": None})
        _raise(resp["error_code"], f"OffsetFetch {group!r}")
        return {
            TopicPartition(t["name"], p["partition_index"]): p["committed_offset"]
            for t in resp["topics"]
            for p in t["partitions"]
            if p["committed_offset"] >= 0
        }

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit as an admin tool does (no member, generation -1): only an Empty group takes it."""
        topics: dict[str, list[dict]] = {}
        for tp, off in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": off,
                    "committed_leader_epoch": -1,
                    "commit_timestamp": -1,
                    "committed_metadata": "",
                }  # fmt: skip
            )
        body = {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }  # fmt: skip
        for t in self._call(self.coordinator(group), OFFSET_COMMIT, body)["topics"]:
            for p in t["partitions"]:
                _raise(p["error_code"], f"OffsetCommit {t['name']}-{p['partition_index']} for {group!r}")

    def delete_group(self, group: str) -> None:
        (r,) = self._call(self.coordinator(group), DELETE_GROUPS, {"groups_names": [group]})["results"]
        _raise(r["error_code"], f"delete group {group!r}")

    # ------------------------------------------------------------------------------------ security

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        creations = [binding_to_wire(b, "resource_pattern_type") for b in bindings]
        for r in self._call("bootstrap", CREATE_ACLS, {"creations": creations})["results"]:
            _raise(r["error_code"], "CreateAcls", r.get("error_message"))

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        resp = self._call("bootstrap", DESCRIBE_ACLS, filter_to_wire(flt))
        _raise(resp["error_code"], "DescribeAcls", resp.get("error_message"))
        return sorted(binding_from_wire({**r, **a}) for r in resp["resources"] for a in r["acls"])

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> int:
        """Delete what the filters match; returns how many ACLs went."""
        body = {"filters": [filter_to_wire(f) for f in filters]}
        n = 0
        for r in self._call("bootstrap", DELETE_ACLS, body)["filter_results"]:
            _raise(r["error_code"], "DeleteAcls", r.get("error_message"))
            n += len(r["matching_acls"])
        return n

    def alter_scram(self, user: str, mechanism: str, password: str | None, iterations: int = 4096) -> None:
        """Add (password given) or delete (None) a user's SCRAM credential; the password never leaves:
        the broker gets a random salt and the salted password, as Kafka's admin client sends (KIP-554)."""

        mech = MECHANISM_TYPES[mechanism]
        if password is None:
            body = {"deletions": [{"name": user, "mechanism": mech}], "upsertions": []}
        else:
            salt = os.urandom(32)
            body = {"deletions": [], "upsertions": [{"name": user, "mechanism": mech, "iterations": iterations,
                    "salt": salt, "salted_password": salted_password(mechanism, password, salt, iterations)}]}  # fmt: skip
        for r in self._call("bootstrap", ALTER_USER_SCRAM, body)["results"]:
            _raise(r["error_code"], f"AlterUserScramCredentials {user!r}", r.get("error_message"))

    def describe_scram(self, users: Iterable[str] | None = None) -> dict[str, list[tuple[str, int]]]:
        names = {v: k for k, v in MECHANISM_TYPES.items()}
        body = {"users": None if users is None else [{"name": u} for u in users]}
        resp = self._call("bootstrap", DESCRIBE_USER_SCRAM, body)
        _raise(resp["error_code"], "DescribeUserScramCredentials", resp.get("error_message"))
        out = {}
        for r in resp["results"]:
            _raise(r["error_code"], f"describe {r['user']!r}", r.get("error_message"))
            out[r["user"]] = [(names[c["mechanism"]], c["iterations"]) for c in r["credential_infos"]]
        return out


__all__ = ["AdminClient", "ClientSecurity", "parse_bootstrap"]
