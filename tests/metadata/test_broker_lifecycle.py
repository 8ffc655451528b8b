"""Which controller a broker's registration and heartbeats go to while the quorum's leader changes."""

from __future__ import annotations

import random
from itertools import pairwise

from kafkalite.errors import NotControllerError, StaleBrokerEpochError
from kafkalite.metadata.broker_lifecycle_manager import BrokerLifecycleManager
from kafkalite.protocol.broker_lifecycle import BrokerHeartbeatResponse, BrokerRegistrationResponse
from kafkalite.protocol.envelope import ResponseEnvelope
from tests.metadata.kraft_harness import ManualTimers

VOTERS = (3001, 3002, 3003)
HEARTBEAT_MS = 2000
SESSION_MS = 9000


class Quorum:
    """Three controllers: ``active`` answers, ``dead`` never does, the others say NOT_CONTROLLER."""

    def __init__(self, timers: ManualTimers, active: int, dead: int) -> None:
        self.timers, self.active, self.dead = timers, active, dead
        self.named: int | None = dead  # what the broker's observer believes: a leader that died
        self.answered: list[tuple[int, int]] = []  # (time, controller) of each accepted request
        self.lc: BrokerLifecycleManager | None = None
        self.refuse_next = False  # the active controller answers the next heartbeat STALE_BROKER_EPOCH

    def send(self, dst: int, env) -> None:
        self.timers.sent.append((self.timers.now, dst))
        if dst == self.dead:
            return
        if dst != self.active:
            resp = BrokerHeartbeatResponse(error_code=NotControllerError.code)
        elif self.refuse_next:
            self.refuse_next = False
            resp = BrokerHeartbeatResponse(error_code=StaleBrokerEpochError.code)
        elif env.request.__class__.__name__ == "BrokerRegistrationRequest":
            resp = BrokerRegistrationResponse(broker_epoch=7)
        else:
            resp = BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False)
        if dst == self.active:
            self.answered.append((self.timers.now, dst))
        self.timers.set(1, lambda _now: self.lc.on_response(dst, ResponseEnvelope(env.correlation_id, resp)))


def started(active: int, named: int | None = 3001) -> tuple[ManualTimers, Quorum, BrokerLifecycleManager]:
    """A broker's lifecycle manager, started, beside a quorum whose controller 3001 is dead."""
    t = ManualTimers()
    q = Quorum(t, active=active, dead=3001)
    q.named = named
    q.lc = BrokerLifecycleManager(
        1, "c", (), rng=random.Random(1), send=q.send, set_timer=t.set, cancel_timer=t.cancel,
        controllers=lambda: (q.named, VOTERS), metadata_offset=lambda: 5, heartbeat_interval_ms=HEARTBEAT_MS,
    )  # fmt: skip
    q.lc.start()
    return t, q, q.lc


def test_a_dead_leader_the_observer_still_names_is_not_asked_again_once_another_answered():
    for active in (3002, 3003):  # the rotation's first pick is the live controller, then the other one
        t, q, lc = started(active)
        t.advance(60_000)
        first = q.answered[0][0]
        assert first <= 2 * HEARTBEAT_MS + 2, q.answered[:3]  # one unanswered try, one NOT_CONTROLLER
        assert not lc.fenced and lc.broker_epoch == 7
        assert [dst for when, dst in t.sent if when > first] == [active] * len(q.answered[1:])
        times = [when for when, _ in q.answered]
        assert max(b - a for a, b in pairwise(times)) == HEARTBEAT_MS + 1  # never near SESSION_MS


def test_news_from_the_quorum_outweighs_the_controller_that_answered():
    t, q, _ = started(3002)
    t.advance(10_000)
    q.active, q.dead = 3003, 3002  # another election: 3002 dies, 3003 leads and the observer learns it
    q.named = 3003
    before = len(t.sent)
    t.advance(HEARTBEAT_MS + 2)
    assert [dst for _, dst in t.sent[before:]] == [3003] and q.answered[-1][1] == 3003


def test_with_no_leader_named_every_voter_is_tried_in_turn():
    t, _, _ = started(3003, named=None)
    t.advance(3 * HEARTBEAT_MS)
    tried = [dst for _, dst in t.sent]
    assert 3003 in tried[:3] and set(tried[tried.index(3003) :]) == {3003}


def test_an_observer_that_names_no_leader_for_a_while_does_not_send_it_back_to_the_dead_one():
    for active in (3002, 3003):
        t, q, _ = started(active)
        t.advance(6_000)
        first = q.answered[0][0]
        q.named = None  # the observer's fetch to 3001 timed out: it looks for the leader among the voters
        t.advance(6_000)
        q.named = active  # and finds it
        t.advance(6_000)
        assert [dst for when, dst in t.sent if when > first] == [active] * len(q.answered[1:]), active


def test_an_error_from_the_active_controller_itself_is_answered_there():
    t, q, lc = started(3003, named=3003)
    t.advance(5_000)
    q.refuse_next = True  # it lost the broker's registration (STALE_BROKER_EPOCH): register again
    before = len(t.sent)
    t.advance(5_000)
    assert {dst for _, dst in t.sent[before:]} == {3003} and lc.broker_epoch == 7
