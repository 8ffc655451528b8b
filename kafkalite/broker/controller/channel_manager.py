"""How the controller's decisions reach the brokers: Kafka's ``ControllerBrokerRequestBatch`` and
``ControllerChannelManager``.

One controller event (a broker failure, a new topic, an election) collects its requests in a
``ControllerBrokerRequestBatch``, keyed by broker and partition, so a partition touched twice in one event
is sent once with its last state. At the end of the event ``ControllerChannelManager.send_batch`` sends one
LeaderAndIsr and one StopReplica per broker (brokers and partitions in order), then one UpdateMetadata to
every live broker.

The channel manager sends each request with a correlation id from a range of the controller's own and
sends it again every ``controller.socket.timeout.ms`` until it is answered, while the broker is live and
this is still the same controllership (Kafka's per-broker request queue). Answers refusing a request are
kept in ``rejections`` and logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.broker.controller.context import ControllerContext, PartitionInfo
from kafkalite.protocol import (
    NO_ERROR,
    NO_LEADER,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    RequestEnvelope,
    ResponseEnvelope,
    StopReplicaPartitionState,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

# Controller requests use correlation ids from a range of their own, so a broker can route an answer to its
# controller or to its replica manager without a shared counter.
CONTROLLER_CORRELATION_BASE = 1 << 40


class ControllerBrokerRequestBatch:
    """The requests one controller event collects, sent together at its end (``send_batch``)."""

    def __init__(self, *, metadata_all: bool = False) -> None:
        self.leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self.metadata: set[TopicPartition] = set()
        self.metadata_all = metadata_all  # UpdateMetadata with every partition, not just ``metadata``

    def add_leader_and_isr(
        self, broker: int, tp: TopicPartition, info: PartitionInfo, *, is_new: bool = False
    ) -> None:
        """LeaderAndIsr to ``broker`` with the partition's current state and assignment."""
        st = info.state
        assert st is not None
        self.leader_and_isr.setdefault(broker, {})[tp] = LeaderAndIsrPartitionState(
            tp=tp,
            controller_epoch=st.controller_epoch,
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=st.isr,
            partition_epoch=info.zk_version,
            replicas=info.replicas,
            adding_replicas=info.adding,
            removing_replicas=info.removing,
            is_new=is_new,
            topic_id=info.topic_id,
        )

    def add_stop_replica(
        self, broker: int, tp: TopicPartition, leader_epoch: int, *, delete_partition: bool
    ) -> None:
        self.stop_replica.setdefault(broker, {})[tp] = StopReplicaPartitionState(
            tp=tp, leader_epoch=leader_epoch, delete_partition=delete_partition
        )

    def add_update_metadata(self, tp: TopicPartition) -> None:
        self.metadata.add(tp)


class ControllerChannelManager:
    """Sends the controller's requests and matches their answers.

    ``context`` gives the active controller's context (None when not active): the epoch stamped on every
    request, the live brokers with their broker epochs and endpoints. ``on_answer(broker, request,
    response)`` is told of every answer to a request still waiting, before it is checked for an error.
    """

    def __init__(
        self,
        broker_id: int,
        config: Mapping[str, Any],
        *,
        context: Callable[[], ControllerContext | None],
        send: Callable[[Any, Any], Any],
        set_timer: Callable[[int, Callable[[int], None]], int],
        cancel_timer: Callable[[int], Any],
        log: Callable[..., None],
        on_answer: Callable[[Any, Any, Any], None],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._context = context
        self._send = send
        self._set_timer = set_timer
        self._cancel_timer = cancel_timer
        self._log = log
        self._on_answer = on_answer
        self._next_cid = CONTROLLER_CORRELATION_BASE
        self._pending: dict[tuple[Any, int], tuple[Any, int]] = {}  # (dst, cid) -> (request, timer)
        self.rejections: list[tuple[Any, str, int]] = []  # (broker, api, error_code) answers refusing us

    def _ctx(self) -> ControllerContext:
        ctx = self._context()
        assert ctx is not None, "not the active controller"
        return ctx

    # ------------------------------------------------------------------------------- batches

    def send_batch(self, batch: ControllerBrokerRequestBatch) -> None:
        """LeaderAndIsr, then StopReplica, per broker in order; then UpdateMetadata to every live broker."""
        ctx = self._ctx()
        for broker, states in sorted(batch.leader_and_isr.items()):
            leaders = sorted({s.leader for s in states.values() if s.leader in ctx.endpoints})
            self.send_request(
                broker,
                LeaderAndIsrRequest(
                    controller_id=self.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers.get(broker, -1),
                    partition_states=tuple(states[tp] for tp in sorted(states)),
                    live_leaders=tuple(ctx.endpoints[b] for b in leaders),
                ),
            )
        for broker, stops in sorted(batch.stop_replica.items()):
            self.send_request(
                broker,
                StopReplicaRequest(
                    controller_id=self.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers.get(broker, -1),
                    partition_states=tuple(stops[tp] for tp in sorted(stops)),
                ),
            )
        if batch.metadata_all or batch.metadata:
            self.send_update_metadata(None if batch.metadata_all else batch.metadata)

    def send_update_metadata(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """UpdateMetadata with ``tps`` (None: every partition) and the live brokers, to every live broker."""
        ctx = self._ctx()
        wanted = None if tps is None else set(tps)
        self.broadcast_metadata(
            tuple(
                self._metadata_state(ctx, tp, info)
                for tp, info in ctx.partitions()
                if wanted is None or tp in wanted
            )
        )

    def broadcast_metadata(self, states: tuple[UpdateMetadataPartitionState, ...]) -> None:
        """One UpdateMetadata with these partition states and the live brokers, to every live broker."""
        ctx = self._ctx()
        brokers = tuple(ctx.endpoints[b] for b in ctx.live_brokers if b in ctx.endpoints)
        for b in ctx.live_brokers:
            self.send_request(
                b,
                UpdateMetadataRequest(
                    controller_id=self.broker_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers[b],
                    partition_states=states,
                    live_brokers=brokers,
                ),
            )

    @staticmethod
    def _metadata_state(
        ctx: ControllerContext, tp: TopicPartition, info: PartitionInfo
    ) -> UpdateMetadataPartitionState:
        st = info.state
        live = ctx.live_brokers
        return UpdateMetadataPartitionState(
            tp=tp,
            controller_epoch=st.controller_epoch if st else ctx.epoch,
            leader=st.leader if st else NO_LEADER,
            leader_epoch=st.leader_epoch if st else -1,
            isr=st.isr if st else (),
            partition_epoch=info.zk_version,
            replicas=info.replicas,
            offline_replicas=tuple(
                r for r in info.replicas if r not in live or tp in ctx.offline_replicas.get(r, ())
            ),
            topic_id=info.topic_id,
        )

    # ------------------------------------------------------------------------------ requests

    def send_request(self, dst: int, request: Any, *, epoch: int | None = None) -> None:
        """Send a controller request; retried every ``controller.socket.timeout.ms`` until answered while
        ``dst`` is live and we are still the same controller (Kafka's per-broker request queue)."""
        self._next_cid += 1
        cid = self._next_cid
        if epoch is None:
            ctx = self._context()
            epoch = ctx.epoch if ctx is not None else -1
        timeout = int(self.config["controller.socket.timeout.ms"])
        timer = self._set_timer(timeout, lambda now, d=dst, c=cid, e=epoch: self._request_timeout(d, c, e))
        self._pending[(dst, cid)] = (request, timer)
        self._send(dst, RequestEnvelope(cid, f"controller-{self.broker_id}", request))

    def _request_timeout(self, dst: int, cid: int, epoch: int) -> None:
        entry = self._pending.pop((dst, cid), None)
        ctx = self._context()
        if entry is None or ctx is None or ctx.epoch != epoch or dst not in ctx.live_brokers:
            return
        self._log("controller_request_retry", dst=dst, api=type(entry[0]).__name__)
        self.send_request(dst, entry[0], epoch=epoch)

    def on_response(self, src: Any, env: ResponseEnvelope) -> bool:
        """Answers to our requests; False if the correlation id is not ours."""
        entry = self._pending.pop((src, env.correlation_id), None)
        if entry is None:
            return env.correlation_id > CONTROLLER_CORRELATION_BASE
        request, timer = entry
        self._cancel_timer(timer)
        self._on_answer(src, request, env.response)
        code = getattr(env.response, "error_code", NO_ERROR)
        if code != NO_ERROR:
            self.rejections.append((src, type(request).__name__, code))
            self._log(
                "controller_request_rejected",
                dst=src,
                api=type(request).__name__,
                error_code=code,
                epoch=getattr(request, "controller_epoch", -1),
            )
        return True

    def clear(self, *, cancel_timers: bool = True) -> None:
        """Forget the requests still waiting (the controller resigned; after a crash the timers are
        already gone with the node)."""
        if cancel_timers:
            for _, timer in self._pending.values():
                self._cancel_timer(timer)
        self._pending.clear()


__all__ = ["CONTROLLER_CORRELATION_BASE", "ControllerBrokerRequestBatch", "ControllerChannelManager"]
