"""CreateTopics, CreatePartitions and DeleteTopics in the controller: the topic half of Kafka's
``ZkAdminManager`` (with ``AdminZkClient``'s checks and ``DelayedDeleteTopics``); the config half is
``kafkalite.broker.admin_manager``.

In Kafka these run on the broker that receives the request and only write znodes, which the controller
then picks up through its watches. kafkalite routes them to the controller, which checks a request against
its context (live brokers and racks, topics, deletions and reassignments in progress), writes the znodes
and brings the new partitions online in the same event, so a creation never races the controller's view.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kafkalite.broker.controller.channel_manager import ControllerBrokerRequestBatch
from kafkalite.broker.controller.context import ControllerContext, PartitionInfo, config_flag
from kafkalite.broker.topic_validator import colliding_topics, validate_topic, validate_topic_configs
from kafkalite.config.broker import BrokerConfig
from kafkalite.coordination import paths
from kafkalite.coordination.store import CoordinationError, Create, NodeExists
from kafkalite.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    NotControllerError,
    PolicyViolationError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from kafkalite.metadata.partition_assignment import (
    MAX_RECORDS_PER_USER_OP,
    create_partitions_records,
    create_topics_records,
    excessive_batch,
    partitions_to_add,
    validate_manual_assignment,
)
from kafkalite.metadata.placement import assign_new_partitions, assign_replicas
from kafkalite.protocol import (
    NO_ERROR,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    RequestEnvelope,
    TopicPartition,
)
from kafkalite.protocol.metadata import NO_TOPIC_ID


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    """``/config/topics/<t>``: Kafka's entity config JSON."""
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode()


def decode_topic_config(data: bytes) -> dict[str, str]:
    obj = json.loads(data) if data else {}
    return {str(k): str(v) for k, v in (obj.get("config") or {}).items()}


class TopicAdmin:
    """Runs inside the active controller; ``controller`` is the ``Controller`` (its context, ZooKeeper
    link and epoch-fenced writes, partition state machine, channel manager, timers)."""

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self._broker_conf: BrokerConfig | None = None  # parsed once, to validate topic configs

    @property
    def ctx(self) -> ControllerContext:
        ctx = self.c.ctx
        assert ctx is not None, "not the active controller"
        return ctx

    def _validate_each(
        self,
        topics: Iterable[Any],
        validate: Callable[[Any], dict[int, list[int]]],
        results: list[Any],
        result_type: type,
        failed_event: str,
    ) -> Iterator[tuple[Any, dict[int, list[int]]]]:
        """``(topic, plan)`` for each topic ``validate`` accepts; a refused one gets its error result
        appended to ``results`` in request order (the caller appends the accepted ones' results)."""
        for t in topics:
            try:
                plan = validate(t)
            except KafkaError as exc:
                # the message alone, as Kafka sends it: the code already names the error
                results.append(
                    result_type(name=t.name, error_code=exc.code, error_message=exc.message or None)
                )
                self.c._log(failed_event, topic=t.name, error=exc.name)
                continue
            yield t, plan

    def _excessive_batch(self, what: str, records: int) -> PolicyViolationError | None:
        """KRaft's bound on one operation (QuorumController's 10,000 metadata records: a topic, each of its
        partitions and each config override is one). ZooKeeper-mode Kafka has none and would try, until
        the broker runs out of file descriptors and takes its log directory offline; refusing up front
        (POLICY_VIOLATION, as KRaft answers) keeps the broker serving."""
        error = excessive_batch(records)
        if error is not None:
            self.c._log(f"{what}_refused", records=records, limit=MAX_RECORDS_PER_USER_OP)
        return error

    def _broker_config(self) -> BrokerConfig:
        if self._broker_conf is None:
            self._broker_conf = BrokerConfig.coerce(self.c.config)
        return self._broker_conf

    def _live_racks(self) -> dict[int, str | None] | None:
        """``broker.rack`` of each live broker from its registration; None when no broker has one.

        Some brokers with a rack and some without is refused as Kafka's ZooKeeper mode does, before any
        random draw, so the request fails cleanly instead of placement raising in the event loop.
        """
        ctx = self.ctx
        racks = {b: ep.rack if (ep := ctx.endpoints.get(b)) is not None else None for b in ctx.live_brokers}
        missing = sorted(b for b, r in racks.items() if r is None)
        if len(missing) == len(racks):
            return None
        if missing:
            raise InvalidReplicaAssignmentError(
                f"brokers {missing} have no broker.rack while others have one: rack-aware placement "
                "needs a rack on every live broker"
            )
        return racks

    # ------------------------------------------------------------------------------ CreateTopics

    def create_topics(self, req: CreateTopicsRequest) -> CreateTopicsResponse:
        ctx = self.ctx
        too_many = self._excessive_batch(
            "create_topics",
            create_topics_records(req.topics, int(self.c.config["num.partitions"])),
        )
        if too_many is not None:
            return CreateTopicsResponse(
                topics=tuple(
                    CreatableTopicResult(
                        name=t.name, error_code=too_many.code, error_message=too_many.message
                    )
                    for t in req.topics
                )
            )
        results: list[Any] = []
        batch = ControllerBrokerRequestBatch()
        names = [t.name for t in req.topics]
        dupes = {n for n in names if names.count(n) > 1}
        checked = self._validate_each(
            (t for t in req.topics if t.name not in dupes),
            self._validate_new_topic,
            results,
            CreatableTopicResult,
            "create_topic_failed",
        )
        for t, assignment in checked:
            rf = len(assignment[0])
            results.append(
                CreatableTopicResult(name=t.name, num_partitions=len(assignment), replication_factor=rf)
            )
            if req.validate_only:
                continue
            tid = ctx.new_topic_id()
            ta = paths.TopicAssignment({p: tuple(r) for p, r in assignment.items()}, topic_id=tid)
            self.c._write(
                [
                    Create(f"{paths.CONFIG_TOPICS}/{t.name}", encode_topic_config(dict(t.configs)), make_parents=True),
                    Create(paths.topic_path(t.name), ta.encode(), make_parents=True),
                ]
            )  # fmt: skip
            self.c._log(
                "topic_created", topic=t.name, assignment={p: tuple(r) for p, r in assignment.items()}
            )
            ctx.topic_configs[t.name] = dict(t.configs)
            ctx.topic_ids[t.name] = tid
            ctx.topics[t.name] = {p: PartitionInfo(tuple(r), topic_id=tid) for p, r in assignment.items()}
            for p, info in sorted(ctx.topics[t.name].items()):
                self.c.partition_state_machine.initialize(TopicPartition(t.name, p), info, batch)
        self.c.channel.send_batch(batch)
        # Kafka refuses every entry of a topic named twice, in the request's order
        refused = {
            n: CreatableTopicResult(
                name=n,
                error_code=InvalidRequestError.code,
                error_message="Found multiple entries for this topic.",
            )
            for n in dupes
        }
        ordered = iter(results)
        return CreateTopicsResponse(topics=tuple(refused.get(n) or next(ordered) for n in names))

    def _validate_new_topic(self, t: Any) -> dict[int, list[int]]:
        """Kafka's checks, in ZkAdminManager's order: the name (INVALID_TOPIC_EXCEPTION), that it is
        free (TOPIC_ALREADY_EXISTS) and collides with no topic ('.' against '_'), the partition count and
        replication factor (or the explicit assignment), then the configs (INVALID_CONFIG). Nothing is
        written before every check has passed."""
        ctx = self.ctx
        if t.name in ctx.topics:
            raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        configs = dict(t.configs)
        if any(v is None for v in configs.values()):
            validate_topic_configs(self._broker_config(), configs)  # names the null keys
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            raise InvalidRequestError(
                "give either explicit replica assignments or num_partitions/replication_factor, not both"
            )
        validate_topic(t.name)  # before the name reaches a znode path or a directory
        if ctx.deletion is not None and ctx.deletion.is_deleting(t.name):
            raise TopicAlreadyExistsError(f"Topic '{t.name}' is marked for deletion.")
        if self.c.zk.exists(paths.topic_path(t.name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        colliding = colliding_topics(t.name, ctx.topics)
        if colliding:
            raise InvalidTopicError(f"Topic '{t.name}' collides with existing topics: {', '.join(colliding)}")
        assignment = self._new_topic_assignment(t)
        validate_topic_configs(self._broker_config(), configs)
        return assignment

    def _new_topic_assignment(self, t: Any) -> dict[int, list[int]]:
        live = sorted(self.ctx.live_brokers)
        if t.assignments:
            assignment = {a.partition: list(a.broker_ids) for a in t.assignments}
            # Kafka's order of checks (AdminZkClient.validateTopicCreate), all INVALID_REPLICA_ASSIGNMENT.
            if len({len(r) for r in assignment.values()}) != 1:
                raise InvalidReplicaAssignmentError("every partition needs the same number of replicas")
            for p, r in sorted(assignment.items()):
                if len(set(r)) != len(r):
                    raise InvalidReplicaAssignmentError(f"partition {p} lists a replica twice: {r}")
            if len(assignment) != len(t.assignments) or sorted(assignment) != list(range(len(assignment))):
                raise InvalidReplicaAssignmentError("partition ids must run 0, 1, ... without gaps")
            return assignment
        config = self.c.config
        n = t.num_partitions if t.num_partitions != -1 else int(config["num.partitions"])
        rf = t.replication_factor if t.replication_factor != -1 else int(config["default.replication.factor"])
        if n < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {n}")
        if rf < 1 or rf > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: {len(live)}."
                if rf > len(live)
                else f"replication factor must be at least 1, got {rf}"
            )
        racks = self._live_racks()
        return assign_replicas(live, n, rf, rng=self.c.rng, broker_racks=racks)

    # -------------------------------------------------------------------------- CreatePartitions

    def create_partitions(self, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """Grow topics: new partitions are placed (or taken from the request), written to the topic's
        assignment znode and brought online like a new topic's; every broker learns them by UpdateMetadata."""
        ctx = self.ctx
        new = create_partitions_records(req.topics, lambda n: len(ctx.topics[n]) if n in ctx.topics else None)
        too_many = self._excessive_batch("create_partitions", new)
        if too_many is not None:
            return CreatePartitionsResponse(
                results=tuple(
                    CreatePartitionsTopicResult(
                        name=t.name, error_code=too_many.code, error_message=too_many.message
                    )
                    for t in req.topics
                )
            )
        results: list[Any] = []
        batch = ControllerBrokerRequestBatch()
        checked = self._validate_each(
            req.topics,
            self._validate_new_partitions,
            results,
            CreatePartitionsTopicResult,
            "create_partitions_failed",
        )
        for t, added in checked:
            results.append(CreatePartitionsTopicResult(name=t.name))
            if req.validate_only:
                continue
            parts = ctx.topics[t.name]
            for p, replicas in added.items():
                parts[p] = PartitionInfo(tuple(replicas), topic_id=ctx.topic_ids.get(t.name, NO_TOPIC_ID))
            self.c._write_assignment(t.name)
            self.c._log(
                "partitions_created", topic=t.name, assignment={p: tuple(r) for p, r in added.items()}
            )
            for p in sorted(added):
                self.c.partition_state_machine.initialize(TopicPartition(t.name, p), parts[p], batch)
        self.c.channel.send_batch(batch)
        return CreatePartitionsResponse(results=tuple(results))

    def _validate_new_partitions(self, t: Any) -> dict[int, list[int]]:
        ctx = self.ctx
        parts = ctx.topics.get(t.name)
        if parts is None:
            raise UnknownTopicOrPartitionError(f"The topic '{t.name}' does not exist.")
        if any(tp.topic == t.name for tp in ctx.reassigning):
            raise ReassignmentInProgressError(
                f"A partition reassignment is in progress for the topic '{t.name}'."
            )
        current = len(parts)
        to_add = partitions_to_add(current, t.count, t.assignments)
        live = sorted(ctx.live_brokers)
        if t.assignments is not None:
            rf = len(parts[0].replicas)
            for i, replicas in enumerate(t.assignments):
                validate_manual_assignment(current + i, replicas, live, rf)
            return {current + i: list(r) for i, r in enumerate(t.assignments)}
        rf = len(parts[0].replicas)
        if rf > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: {len(live)}."
            )
        existing = {p: list(info.replicas) for p, info in parts.items()}
        return assign_new_partitions(live, existing, to_add, broker_racks=self._live_racks())

    # ------------------------------------------------------------------------------ DeleteTopics

    def delete_topics(self, src: Any, env: RequestEnvelope) -> None:
        """Mark topics for deletion (``/admin/delete_topics/<t>``) and answer once they have left the
        metadata, as Kafka's DelayedDeleteTopics does; REQUEST_TIMED_OUT after ``timeout_ms``. Answers
        NOT_CONTROLLER itself when this controller is not active."""
        c = self.c
        req: DeleteTopicsRequest = env.request  # type: ignore[assignment]
        ctx = c.ctx
        codes: dict[str, int] = {}
        if ctx is None:
            codes = {t: NotControllerError.code for t in req.topic_names}
        elif not config_flag(c.config["delete.topic.enable"]):
            codes = {t: TopicDeletionDisabledError.code for t in req.topic_names}
        else:
            for t in req.topic_names:
                if t not in ctx.topics and not ctx.deletion.is_deleting(t):
                    codes[t] = UnknownTopicOrPartitionError.code
                    continue
                try:
                    c.zk.create(paths.delete_topic_path(t), b"", make_parents=True)
                except NodeExists:
                    pass  # already marked: wait for it like the first caller
                except CoordinationError:
                    codes[t] = RequestTimedOutError.code
        waiting = {t for t in req.topic_names if t not in codes}

        def answer(timed_out: bool = False) -> None:
            if answered:
                return
            answered.append(True)
            c._cancel_timer(timer[0] if timer else None)
            results = tuple(
                DeletableTopicResult(
                    name=t, error_code=codes.get(t, RequestTimedOutError.code if timed_out else NO_ERROR)
                )
                for t in req.topic_names
            )
            c._send(src, env.reply(DeleteTopicsResponse(topics=results)))

        answered: list[bool] = []
        timer: list[int] = []
        if not waiting or req.timeout_ms <= 0:
            answer()
            return
        timer.append(c._set_timer(req.timeout_ms, lambda _now: answer(timed_out=True)))
        c._guard("delete_topics", c._delete_topics_change)
        if c.ctx is not None:
            c.ctx.deletion.when_started(waiting, answer)


__all__ = ["MAX_RECORDS_PER_USER_OP", "TopicAdmin", "decode_topic_config", "encode_topic_config"]
