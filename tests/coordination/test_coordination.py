"""The ZooKeeper-like coordination store: znodes, sessions, ephemerals, watches, multi, Kafka's paths."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalite.clock import ManualClock
from kafkalite.coordination import (
    BadArguments,
    BadVersion,
    Check,
    CoordinationClient,
    CoordinationError,
    CoordinationStore,
    Create,
    Delete,
    EventType,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionExpired,
    SetData,
    StoreClient,
    WatchedEvent,
)
from kafkalite.coordination import paths as zk

T0 = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(clock: ManualClock) -> CoordinationStore:
    return CoordinationStore(clock)


# ------------------------------------------------------------------------------------------ CRUD


def test_create_get_set_delete_and_stats(store: CoordinationStore, clock: ManualClock) -> None:
    assert store.create("/a", b"hello") == "/a"
    data, stat = store.get("/a")
    assert data == b"hello"
    assert (stat.czxid, stat.mzxid, stat.pzxid) == (1, 1, 1)
    assert (stat.version, stat.cversion, stat.num_children, stat.ephemeral_owner) == (0, 0, 0, 0)
    assert (stat.ctime, stat.mtime, stat.data_length) == (T0, T0, 5)

    clock.advance(10)
    stat2 = store.set("/a", b"bye")
    assert (stat2.czxid, stat2.mzxid, stat2.version, stat2.mtime, stat2.ctime) == (1, 2, 1, T0 + 10, T0)
    assert store.get("/a") == (b"bye", stat2)

    store.create("/a/b")
    parent = store.exists("/a")
    assert parent is not None
    assert (parent.num_children, parent.cversion, parent.pzxid, parent.mzxid) == (1, 1, 3, 2)
    assert store.get_children("/a") == ["b"]

    store.delete("/a/b")
    parent = store.exists("/a")
    assert parent is not None and (parent.num_children, parent.cversion, parent.pzxid) == (0, 2, 4)
    assert store.exists("/a/b") is None
    assert store.zxid == 4


def test_errors_have_zookeeper_names_and_codes(store: CoordinationStore) -> None:
    with pytest.raises(NoNode) as exc:
        store.get("/missing")
    assert exc.value.code == -101 and exc.value.path == "/missing"
    assert str(exc.value).startswith("NoNode:")
    with pytest.raises(NoNode):
        store.create("/no/parent")
    with pytest.raises(NoNode):
        store.get_children("/missing")
    with pytest.raises(NoNode):
        store.set("/missing", b"")
    with pytest.raises(NoNode):
        store.delete("/missing")
    store.create("/a")
    with pytest.raises(NodeExists):
        store.create("/a")
    with pytest.raises(NodeExists):
        store.create("/")
    store.create("/a/b")
    with pytest.raises(NotEmpty):
        store.delete("/a")
    with pytest.raises(BadArguments):
        store.delete("/")
    with pytest.raises(TypeError):
        store.create("/s", "not bytes")  # type: ignore[arg-type]


def test_children_are_sorted_and_make_parents(store: CoordinationStore) -> None:
    assert store.create("/x/y/z", b"leaf", make_parents=True) == "/x/y/z"
    for name in ["c", "a", "b10", "b2"]:
        store.create(f"/x/{name}")
    assert store.get_children("/x") == ["a", "b10", "b2", "c", "y"]
    assert store.get_children("/") == ["x"]
    # the parents are created in the same transaction as the leaf
    assert {c.zxid for c in store.change_log() if c.path.startswith("/x/y") or c.path == "/x"} == {1}


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "absolute"),
        ("a/b", "absolute"),
        ("/a/", "end with"),
        ("//a", "empty component"),
        ("/a//b", "empty component"),
        ("/a/./b", "relative"),
        ("/a/..", "relative"),
        ("/a\x00b", "null"),
    ],
)
def test_invalid_paths_are_rejected_with_clear_messages(
    store: CoordinationStore, path: str, reason: str
) -> None:
    with pytest.raises(BadArguments, match=reason):
        store.create(path)
    with pytest.raises(BadArguments, match=reason):
        store.exists(path)


def test_versioned_set_and_delete(store: CoordinationStore) -> None:
    store.create("/v", b"0")
    assert store.set("/v", b"1", version=0).version == 1
    with pytest.raises(BadVersion, match="at version 1, expected 0"):
        store.set("/v", b"x", version=0)
    assert store.get("/v")[0] == b"1"
    assert store.set("/v", b"2").version == 2  # -1 matches any version
    with pytest.raises(BadVersion):
        store.delete("/v", version=1)
    assert store.exists("/v") is not None
    store.delete("/v", version=2)
    assert store.exists("/v") is None


# ------------------------------------------------------------------------------------ sequential


def test_sequential_names_use_the_parents_counter(store: CoordinationStore) -> None:
    store.create("/q")
    store.create("/r")
    assert [store.create("/q/n-", sequential=True) for _ in range(3)] == [
        "/q/n-0000000000",
        "/q/n-0000000001",
        "/q/n-0000000002",
    ]
    # Each parent counts on its own, whatever the prefix.
    assert store.create("/r/other-", sequential=True) == "/r/other-0000000000"
    assert store.create("/q/m-", sequential=True) == "/q/m-0000000003"
    # The counter is the parent's cversion, so deletions advance it too, as in ZooKeeper.
    store.delete("/q/n-0000000000")
    assert store.create("/q/n-", sequential=True) == "/q/n-0000000005"
    # A sequential path may end in '/': the counter is the whole name.
    assert store.create("/r/", sequential=True) == "/r/0000000001"
    assert store.create("/", sequential=True) == "/0000000002"


def test_isr_change_notifications_are_sequential(store: CoordinationStore) -> None:
    store.create(zk.ISR_CHANGE_NOTIFICATION)
    data = zk.encode_partition_list([("t", 0), ("t", 1)])
    p0 = store.create(zk.isr_change_sequential_prefix(), data, sequential=True)
    p1 = store.create(zk.isr_change_sequential_prefix(), data, sequential=True)
    assert (p0, p1) == (zk.isr_change_path(0), zk.isr_change_path(1))
    assert p1 == "/isr_change_notification/isr_change_0000000001"
    assert zk.parse_isr_change_seq(p1) == 1
    assert zk.decode_partition_list(store.get(p0)[0]) == [("t", 0), ("t", 1)]


# ------------------------------------------------------------------------------ sessions/ephemerals


def test_ephemeral_node_vanishes_when_session_expires(store: CoordinationStore, clock: ManualClock) -> None:
    store.create("/brokers/ids", make_parents=True)
    sid = store.connect(6000)
    path = store.create("/brokers/ids/1", b"{}", ephemeral=True, session=sid)
    assert store.exists(path).ephemeral_owner == sid  # type: ignore[union-attr]

    # Heartbeats keep it alive well past the timeout.
    for _ in range(5):
        clock.advance(5000)
        store.heartbeat(sid)
    assert store.tick() == []
    clock.advance(6000)  # exactly the timeout since the last heartbeat: still alive
    assert store.tick() == []
    clock.advance(1)
    assert store.tick() == [sid]
    assert store.exists(path) is None
    assert not store.session_alive(sid)
    expiry = [c for c in store.change_log() if c.session == sid][-2:]
    assert [(c.op, c.path) for c in expiry] == [("expire_session", ""), ("delete", path)]
    assert expiry[0].zxid == expiry[1].zxid  # one transaction


def test_expiry_is_also_checked_on_each_call(store: CoordinationStore, clock: ManualClock) -> None:
    sid = store.connect(100)
    store.create("/e", ephemeral=True, session=sid)
    clock.advance(101)
    assert store.exists("/e") is None  # no tick needed
    for call in (
        lambda: store.heartbeat(sid),
        lambda: store.create("/x", session=sid),
        lambda: store.get("/", session=sid),
        lambda: store.multi([Check("/")], session=sid),
    ):
        with pytest.raises(SessionExpired):
            call()
    store.close_session(sid)  # closing a dead session is a no-op


def test_tick_with_explicit_time_and_late_heartbeat(store: CoordinationStore) -> None:
    a, b = store.connect(1000), store.connect(3000)
    assert store.tick(T0 + 2000) == [a]
    assert store.tick(T0 + 2500) == []
    # The clock still reads T0, but store time does not go back: b's late ping cannot revive it.
    assert store.tick(T0 + 3001) == [b]
    with pytest.raises(SessionExpired):
        store.heartbeat(b)
    assert store.sessions() == {}


def test_ephemeral_vanishes_on_close_and_needs_a_session(store: CoordinationStore) -> None:
    client = store.client(1000)
    assert isinstance(client, CoordinationClient)
    client.create("/e", ephemeral=True)
    client.create("/p")  # persistent nodes outlive the session
    client.close()
    assert store.exists("/e") is None and store.exists("/p") is not None
    assert not client.alive
    with pytest.raises(SessionExpired):
        client.create("/again")
    with pytest.raises(BadArguments, match="needs a session"):
        store.create("/e2", ephemeral=True)


def test_no_children_for_ephemerals(store: CoordinationStore) -> None:
    sid = store.connect(1000)
    store.create("/e", ephemeral=True, session=sid)
    with pytest.raises(NoChildrenForEphemerals):
        store.create("/e/child")
    with pytest.raises(NoChildrenForEphemerals):
        store.create("/e/seq-", sequential=True, session=sid)
    with pytest.raises(NoChildrenForEphemerals):
        store.create("/e/a/b", make_parents=True)
    assert store.get_children("/e") == []


# ---------------------------------------------------------------------------------------- watches


def test_data_watch_fires_once(store: CoordinationStore) -> None:
    seen: list[WatchedEvent] = []
    store.create("/w", b"0")
    store.get("/w", seen.append)
    store.set("/w", b"1")
    store.set("/w", b"2")  # one-shot: no second event
    assert [(e.type, e.path) for e in seen] == [(EventType.NODE_DATA_CHANGED, "/w")]
    assert seen[0].zxid == store.get("/w")[1].mzxid - 1
    assert str(seen[0].type) == "NodeDataChanged"


def test_exists_watch_on_missing_node_fires_on_create(store: CoordinationStore) -> None:
    assert store.exists("/later", watch=True) is None
    store.get("/", watch=True)  # the root's data does not change when children are added
    store.create("/later")
    assert [(e.type, e.path) for e in store.drain_events()] == [(EventType.NODE_CREATED, "/later")]
    assert store.drain_events() == []
    assert store.watches() == {"/": {"data": 1, "child": 0}}


def test_child_watch_fires_on_child_changes_not_on_child_data(store: CoordinationStore) -> None:
    store.create("/p")
    store.create("/p/a")
    store.get_children("/p", watch=True)
    store.set("/p/a", b"x")
    store.set("/p", b"x")
    assert store.drain_events() == []
    store.create("/p/b")
    store.get_children("/p", watch=True)
    store.delete("/p/a")
    assert [(e.type, e.path) for e in store.drain_events()] == [
        (EventType.NODE_CHILDREN_CHANGED, "/p"),
        (EventType.NODE_CHILDREN_CHANGED, "/p"),
    ]


def test_delete_fires_data_and_child_watches_once_per_watcher(store: CoordinationStore) -> None:
    seen: list[tuple[str, str, str]] = []

    def w1(e: WatchedEvent) -> None:
        seen.append(("w1", e.type, e.path))

    def w2(e: WatchedEvent) -> None:
        seen.append(("w2", e.type, e.path))

    store.create("/d")
    store.get("/d", w1)
    store.get_children("/d", w1)  # same watcher on both lists: notified once
    store.exists("/d", w1)  # registering twice is idempotent
    store.get_children("/d", w2)
    store.get_children("/", w2)
    store.delete("/d")
    assert seen == [
        ("w1", "NodeDeleted", "/d"),
        ("w2", "NodeDeleted", "/d"),
        ("w2", "NodeChildrenChanged", "/"),
    ]


def test_watches_are_delivered_after_the_operation_in_order_never_reentrantly(
    store: CoordinationStore,
) -> None:
    log: list[str] = []

    def first(e: WatchedEvent) -> None:
        log.append(f"first start {e.type} {e.path}")
        # The whole multi has committed before any callback runs.
        log.append(f"first sees /b: {store.exists('/b') is not None}")
        store.set("/c", b"from first")  # its watch fires only after this callback returns
        log.append("first end")

    def second(e: WatchedEvent) -> None:
        log.append(f"second {e.type} {e.path}")

    def third(e: WatchedEvent) -> None:
        log.append(f"third {e.type} {e.path}")

    store.create("/c")
    store.exists("/a", first)
    store.exists("/a", second)
    store.exists("/b", second)
    store.get("/c", third)
    store.multi([Create("/a"), Create("/b")])
    assert log == [
        "first start NodeCreated /a",
        "first sees /b: True",
        "first end",
        "second NodeCreated /a",
        "second NodeCreated /b",
        "third NodeDataChanged /c",
    ]


def test_a_failing_callback_does_not_stop_delivery(store: CoordinationStore) -> None:
    seen: list[str] = []

    def boom(e: WatchedEvent) -> None:
        raise RuntimeError("watcher bug")

    store.exists("/x", boom)
    store.exists("/x", lambda e: seen.append(e.path))
    with pytest.raises(RuntimeError, match="watcher bug"):
        store.create("/x")
    assert seen == ["/x"] and store.exists("/x") is not None


def test_session_watches_are_per_session_and_die_with_it(store: CoordinationStore) -> None:
    a, b = store.client(1000), store.client(1000)
    store.create("/n")
    a.get("/n", watch=True)
    b.get("/n", watch=True)
    b.get_children("/n", watch=True)
    b.close()
    store.set("/n", b"1")
    assert b.drain_events() == []
    assert [(e.type, e.session) for e in store.drain_events(999)] == []
    assert [(e.type, e.session) for e in a.drain_events()] == [(EventType.NODE_DATA_CHANGED, a.session_id)]


# ------------------------------------------------------------------------------------------ multi


def test_multi_commits_all_in_one_zxid(store: CoordinationStore) -> None:
    store.create("/controller_epoch", b"1")
    results = store.multi(
        [
            Check("/controller_epoch", version=0),
            Create("/t", b"x"),
            Create("/t/s-", sequential=True),
            SetData("/t", b"y"),
            Delete("/t/s-0000000000"),
        ]
    )
    assert results[0] is True and results[1] == "/t" and results[2] == "/t/s-0000000000"
    assert results[3].version == 1 and results[4] is None  # type: ignore[union-attr]
    assert {c.zxid for c in store.change_log(since_zxid=1)} == {2}
    assert store.zxid == 2
    # A multi of checks only changes nothing and takes no zxid.
    assert store.multi([Check("/t", version=1)]) == [True]
    assert store.zxid == 2


@pytest.mark.parametrize(
    ("ops", "error", "index"),
    [
        ([Create("/a"), Check("/controller_epoch", version=7), SetData("/keep", b"lost")], BadVersion, 1),
        ([SetData("/keep", b"lost"), Create("/a"), Create("/a")], NodeExists, 2),
        ([Delete("/keep"), Create("/keep/under")], NoNode, 1),
        ([Create("/a"), Create("/a/b"), Delete("/a")], NotEmpty, 2),
        ([Create("/a", b"x"), Create("bad")], BadArguments, 1),
    ],
)
def test_multi_is_all_or_nothing(
    store: CoordinationStore, ops: list, error: type[CoordinationError], index: int
) -> None:
    store.create("/controller_epoch", b"1")
    store.create("/keep", b"kept")
    events: list[WatchedEvent] = []
    store.get("/keep", events.append)
    store.exists("/a", events.append)
    before, zxid, log = store.dump(), store.zxid, store.change_log()
    with pytest.raises(error) as exc:
        store.multi(ops)
    assert exc.value.op_index == index
    assert store.dump() == before and store.zxid == zxid and store.change_log() == log
    assert events == []  # nothing fired, and the watches are still armed
    store.set("/keep", b"now")
    assert [e.type for e in events] == [EventType.NODE_DATA_CHANGED]


# ------------------------------------------------------------------------------ controller election


def _elect(client: StoreClient, broker_id: int, clock: ManualClock, won: list[tuple[int, int]]) -> None:
    """Kafka's pattern: race for the ephemeral /controller, bump /controller_epoch with a CAS, else watch."""
    try:
        client.create(
            zk.CONTROLLER, zk.ControllerRegistration(broker_id, clock.now_ms()).encode(), ephemeral=True
        )
    except NodeExists:
        # Watch it; if it vanished between create and exists, exists() sees None and we retry at once.
        if client.exists(zk.CONTROLLER, lambda e: _elect(client, broker_id, clock, won)) is None:
            _elect(client, broker_id, clock, won)
        return
    try:
        data, stat = client.get(zk.CONTROLLER_EPOCH)
        epoch = zk.decode_controller_epoch(data) + 1
        client.set(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch), version=stat.version)
    except NoNode:
        epoch = zk.INITIAL_CONTROLLER_EPOCH + 1
        client.create(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch))
    won.append((broker_id, epoch))


def test_controller_election_failover_and_epoch_fencing(store: CoordinationStore, clock: ManualClock) -> None:
    b1, b2 = store.client(6000), store.client(6000)
    assert zk.ensure_persistent_paths(b1) == list(zk.PERSISTENT_PATHS)
    assert zk.ensure_persistent_paths(b2) == []
    won: list[tuple[int, int]] = []
    _elect(b1, 1, clock, won)
    _elect(b2, 2, clock, won)
    assert won == [(1, 1)]
    assert zk.ControllerRegistration.decode(store.get(zk.CONTROLLER)[0]) == zk.ControllerRegistration(1, T0)
    epoch_stat = store.exists(zk.CONTROLLER_EPOCH)
    assert epoch_stat is not None and epoch_stat.version == 0

    # Controller 1 writes partition state fenced by the epoch znode's version.
    state = zk.PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    b1.create(zk.partition_state_path("t", 0), state.encode(), make_parents=True)
    stale_epoch_version = epoch_stat.version

    # Broker 1 stops heartbeating (a GC pause); broker 2 keeps pinging.
    for _ in range(3):
        clock.advance(2000)
        b2.heartbeat()
    assert won == [(1, 1)]  # 6000 ms of silence is exactly the timeout: still alive
    clock.advance(1)
    assert store.tick() == [b1.session_id]
    # Broker 2's watch fired after the tick and it won with the next epoch.
    assert won == [(1, 1), (2, 2)]
    assert zk.ControllerRegistration.decode(store.get(zk.CONTROLLER)[0]).broker_id == 2
    assert zk.decode_controller_epoch(store.get(zk.CONTROLLER_EPOCH)[0]) == 2

    # The zombie controller's fenced write fails as a whole (its session is gone, and so is its epoch).
    with pytest.raises(SessionExpired):
        b1.multi(
            [Check(zk.CONTROLLER_EPOCH, stale_epoch_version), SetData(zk.partition_state_path("t", 0), b"")]
        )
    before = store.dump()
    with pytest.raises(BadVersion):
        store.multi(
            [
                Check(zk.CONTROLLER_EPOCH, stale_epoch_version),
                SetData(zk.partition_state_path("t", 0), state.encode()),
            ]
        )
    assert store.dump() == before
    # The new controller's fenced write goes through.
    new_state = zk.PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=2)
    epoch_version = store.exists(zk.CONTROLLER_EPOCH).version  # type: ignore[union-attr]
    b2.multi(
        [
            Check(zk.CONTROLLER_EPOCH, epoch_version),
            SetData(zk.partition_state_path("t", 0), new_state.encode()),
        ]
    )
    assert zk.PartitionState.decode(store.get(zk.partition_state_path("t", 0))[0]) == new_state


def test_broker_registration_is_watched_by_the_controller(
    store: CoordinationStore, clock: ManualClock
) -> None:
    zk.ensure_persistent_paths(store.client(10_000))
    controller = store.client(10_000)
    brokers = {i: store.client(1000) for i in (1, 2, 3)}
    for i, c in brokers.items():
        reg = zk.BrokerRegistration(i, (f"PLAINTEXT://broker{i}:9092",), timestamp=clock.now_ms())
        c.create(zk.broker_path(i), reg.encode(), ephemeral=True)
    live: list[list[int]] = []

    def on_change(e: WatchedEvent) -> None:
        live.append(sorted(int(n) for n in controller.get_children(zk.BROKER_IDS, on_change)))

    on_change(WatchedEvent(EventType.NODE_CHILDREN_CHANGED, zk.BROKER_IDS, None, 0))
    clock.advance(600)
    for i in (1, 3):
        brokers[i].heartbeat()
        controller.heartbeat()
    clock.advance(600)
    store.tick()
    brokers[3].close()
    assert live == [[1, 2, 3], [1, 3], [1]]
    assert zk.parse_broker_path(zk.broker_path(1)) == 1
    assert "broker1:9092" in store.format_tree(zk.BROKERS)


# ------------------------------------------------------------------------------------ Kafka paths


def test_path_helpers() -> None:
    assert zk.broker_path(3) == "/brokers/ids/3"
    assert zk.topic_path("orders") == "/brokers/topics/orders"
    assert zk.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert zk.parse_partition_state_path("/brokers/topics/orders/partitions/2/state") == ("orders", 2)
    assert zk.consumer_offset_path("g", "orders", 1) == "/consumers/g/offsets/orders/1"
    assert zk.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert zk.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    with pytest.raises(BadArguments):
        zk.topic_path("a/b")
    with pytest.raises(BadArguments):
        zk.parse_partition_state_path("/brokers/topics/orders")


def test_kafka_json_formats_match_what_kafka_writes() -> None:
    assert (
        zk.ControllerRegistration(1, T0).encode() == b'{"version":1,"brokerid":1,"timestamp":"1700000000000"}'
    )
    assert zk.ControllerRegistration.decode(b"7") == zk.ControllerRegistration(7)
    assert zk.encode_controller_epoch(5) == b"5" and zk.decode_controller_epoch(b"5") == 5
    state = json.loads(zk.PartitionState(2, 4, (2, 1), 3).encode())
    assert state == {"controller_epoch": 3, "leader": 2, "version": 1, "leader_epoch": 4, "isr": [2, 1]}
    topic = json.loads(zk.TopicAssignment({1: (2, 3), 0: (1, 2)}).encode())
    assert topic == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    # Kafka 2.8+ adds the topic id, as Uuid.toString prints it (URL-safe base64, no padding)
    tid = uuid.UUID("8f5c1c2e-4a3b-4c1d-9e2f-0a1b2c3d4e5f")
    with_id = zk.TopicAssignment({0: (1,)}, topic_id=tid)
    assert json.loads(with_id.encode())["topic_id"] == "j1wcLko7TB2eLwobLD1OXw"
    assert zk.TopicAssignment.decode(with_id.encode()) == with_id
    assert zk.TopicAssignment.decode(b'{"version":2,"partitions":{"0":[1]}}').topic_id is None
    with pytest.raises(BadArguments, match="bad topic_id"):
        zk.TopicAssignment.decode(b'{"version":3,"partitions":{},"topic_id":"nope"}')
    assert zk.TopicAssignment.decode(b'{"version":1,"partitions":{"0":[1]}}').partitions == {0: (1,)}
    broker = json.loads(
        zk.BrokerRegistration(
            1,
            ("INTERNAL://h:9093", "EXTERNAL://h:9092"),
            {"INTERNAL": "SASL_PLAINTEXT", "EXTERNAL": "PLAINTEXT"},
            timestamp=T0,
            rack="r1",
        ).encode()
    )
    assert broker["version"] == 4 and broker["timestamp"] == "1700000000000"
    assert (broker["host"], broker["port"], broker["jmx_port"], broker["rack"]) == ("h", 9092, -1, "r1")
    no_plain = json.loads(zk.BrokerRegistration(1, ("SSL://h:9093",)).encode())
    assert (no_plain["host"], no_plain["port"], no_plain["listener_security_protocol_map"]) == (
        None,
        -1,
        {"SSL": "SSL"},
    )
    assert json.loads(zk.encode_reassignment({("t", 0): [3, 1]})) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}],
    }
    assert zk.encode_consumer_offset(42) == b"42" and zk.decode_consumer_offset(b"42") == 42
    with pytest.raises(BadArguments, match="not JSON"):
        zk.PartitionState.decode(b"{nope")


_names = st.text(alphabet="abcxyz_-.0123456789", min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..")
)
_ids = st.integers(min_value=0, max_value=2**31 - 1)
_brokers = st.lists(_ids, max_size=5).map(tuple)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 1000),
    st.dictionaries(st.integers(0, 50), _brokers, max_size=5),
    st.dictionaries(st.tuples(_names, st.integers(0, 50)), _brokers, max_size=5),
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**40),
)
def test_kafka_json_round_trips(
    broker_id: int,
    assignment: dict[int, tuple[int, ...]],
    reassignment: dict[tuple[str, int], tuple[int, ...]],
    leader: int,
    ts: int,
) -> None:
    reg = zk.BrokerRegistration(broker_id, (f"PLAINTEXT://host-{broker_id}:9092",), timestamp=ts)
    assert zk.BrokerRegistration.decode(broker_id, reg.encode()) == reg
    ta = zk.TopicAssignment(assignment, adding_replicas=dict(list(assignment.items())[:1]))
    assert zk.TopicAssignment.decode(ta.encode()) == ta
    ps = zk.PartitionState(leader, ts % 1000, tuple(assignment.get(0, ())), broker_id)
    assert zk.PartitionState.decode(ps.encode()) == ps
    cr = zk.ControllerRegistration(broker_id, ts)
    assert zk.ControllerRegistration.decode(cr.encode()) == cr
    assert zk.decode_reassignment(zk.encode_reassignment(reassignment)) == reassignment
    tps = list(reassignment)
    assert zk.decode_partition_list(zk.encode_partition_list(tps)) == tps
    for topic, partition in tps:
        path = zk.partition_state_path(topic, partition)
        assert zk.parse_partition_state_path(path) == (topic, partition)


# ------------------------------------------------------------------------------- state machine

_PATHS = ["/a", "/b", "/a/a", "/a/b", "/b/a", "/a/a/a", "/a/b/a"]


class StoreMachine(RuleBasedStateMachine):
    """Random operations; any failure leaves the tree untouched and the invariants always hold."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self.store = CoordinationStore(self.clock)
        self.store.create("/a")  # so that deeper creates often find their parent
        self.sessions: list[int] = []
        self.seen: dict[tuple[str, int], tuple[int, int, int, int]] = {}  # (path, czxid) -> versions
        self.last_zxid = 0
        self.events = 0

    def _session(self, i: int) -> int | None:
        return self.sessions[i % len(self.sessions)] if self.sessions and i >= 0 else None

    def _attempt(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        before, zxid = self.store.dump(), self.store.zxid
        try:
            return fn(*args, **kwargs)
        except CoordinationError:
            assert self.store.dump() == before and self.store.zxid == zxid
            return None

    @rule()
    def connect(self) -> None:
        self.sessions.append(self.store.connect(1000))

    @rule(
        path=st.sampled_from(_PATHS),
        data=st.binary(max_size=4),
        ephemeral=st.booleans(),
        sequential=st.booleans(),
        s=st.integers(-1, 3),
        parents=st.booleans(),
    )
    def create(
        self, path: str, data: bytes, ephemeral: bool, sequential: bool, s: int, parents: bool
    ) -> None:
        session = self._session(s)
        if ephemeral and session is None:
            return
        created = self._attempt(
            self.store.create,
            path,
            data,
            ephemeral=ephemeral,
            sequential=sequential,
            session=session,
            make_parents=parents,
        )
        if created is not None:
            data_now, stat = self.store.get(created)
            assert data_now == data and stat.czxid == self.store.zxid
            assert stat.ephemeral_owner == (session if ephemeral else 0)
            parent = self.store.exists(created.rsplit("/", 1)[0] or "/")
            assert parent is not None and parent.pzxid == self.store.zxid
            if sequential:
                assert len(created) == len(path) + 10 and created[len(path) :].isdigit()

    @rule(path=st.sampled_from(_PATHS), data=st.binary(max_size=4), version=st.integers(-1, 2))
    def set(self, path: str, data: bytes, version: int) -> None:
        stat = self._attempt(self.store.set, path, data, version=version)
        if stat is not None:
            assert self.store.get(path) == (data, stat)

    @rule(pick=st.integers(0, 50), data=st.binary(max_size=4))
    def set_existing(self, pick: int, data: bytes) -> None:
        nodes = sorted(self.store.dump())
        path = nodes[pick % len(nodes)]
        version = self.store.get(path)[1].version
        assert self.store.set(path, data, version=version).version == version + 1

    @rule(pick=st.integers(0, 50))
    def delete_existing(self, pick: int) -> None:
        nodes = sorted(self.store.dump())
        self.delete(nodes[pick % len(nodes)], -1)

    @rule(path=st.sampled_from(_PATHS), version=st.integers(-1, 2))
    def delete(self, path: str, version: int) -> None:
        if path == "/":
            return
        parent = self.store.exists(path.rsplit("/", 1)[0] or "/")
        before = self.store.zxid
        self._attempt(self.store.delete, path, version=version)
        if self.store.zxid != before:
            after = self.store.exists(path.rsplit("/", 1)[0] or "/")
            assert parent is not None and after is not None
            assert (after.cversion, after.num_children) == (parent.cversion + 1, parent.num_children - 1)
            assert after.pzxid == self.store.zxid

    @rule(
        ops=st.lists(
            st.one_of(
                st.builds(Create, st.sampled_from(_PATHS), st.binary(max_size=2)),
                st.builds(SetData, st.sampled_from(_PATHS), st.binary(max_size=2), st.integers(-1, 1)),
                st.builds(Delete, st.sampled_from(_PATHS), st.integers(-1, 1)),
                st.builds(Check, st.sampled_from(_PATHS), st.integers(-1, 1)),
            ),
            max_size=4,
        )
    )
    def multi(self, ops: list) -> None:
        self._attempt(self.store.multi, ops)

    @rule(path=st.sampled_from(["/", *_PATHS]), child=st.booleans())
    def watch(self, path: str, child: bool) -> None:
        if child:
            self._attempt(self.store.get_children, path, True)
        else:
            self.store.exists(path, True)

    @precondition(lambda self: self.sessions)
    @rule(s=st.integers(0, 3))
    def heartbeat(self, s: int) -> None:
        self._attempt(self.store.heartbeat, self._session(s))

    @precondition(lambda self: self.sessions)
    @rule(s=st.integers(0, 3))
    def close(self, s: int) -> None:
        self.store.close_session(self._session(s))  # type: ignore[arg-type]

    @rule(ms=st.integers(0, 1500))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.store.tick()

    @invariant()
    def tree_is_consistent(self) -> None:
        dump = self.store.dump()
        children: dict[str, set[str]] = {p: set() for p in dump}
        for path in dump:
            if path != "/":
                parent, name = path.rsplit("/", 1)
                children[parent or "/"].add(name)  # KeyError here would be an orphan
        for path, (data, stat) in dump.items():
            assert stat.num_children == len(children[path])
            assert self.store.get_children(path) == sorted(children[path])
            assert stat.data_length == len(data)
            if stat.ephemeral_owner:
                assert stat.num_children == 0
                assert self.store.session_alive(stat.ephemeral_owner)
            assert stat.czxid <= stat.mzxid <= self.store.zxid and stat.pzxid <= self.store.zxid
            key = (path, stat.czxid)
            now = (stat.version, stat.cversion, stat.mzxid, stat.pzxid)
            prev = self.seen.get(key)
            if prev is not None:
                assert all(n >= p for n, p in zip(now, prev, strict=True)), (path, prev, now)
            self.seen[key] = now

    @invariant()
    def history_is_ordered(self) -> None:
        log = self.store.change_log()
        zxids = [c.zxid for c in log]
        assert zxids == sorted(zxids)
        assert self.store.zxid == (zxids[-1] if zxids else 0)
        assert self.store.zxid >= self.last_zxid
        self.last_zxid = self.store.zxid
        events = self.store.drain_events()
        assert [e.zxid for e in events] == sorted(e.zxid for e in events)


StoreMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
TestStoreMachine = StoreMachine.TestCase
