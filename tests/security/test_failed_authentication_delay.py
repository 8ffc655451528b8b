"""A failed authentication is answered, and its connection closed, only after
``connection.failed.authentication.delay.ms`` (Kafka's 100 ms), to slow password guessing; the wait
holds up no other connection."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


def _server(delay_ms: int | None):
    from kafkalite.host.server import BackgroundServer

    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.jaas.config": JAAS}
    if delay_ms is not None:
        config["connection.failed.authentication.delay.ms"] = delay_ms
    return BackgroundServer(1, config=config)


def _frame(api_key: int, version: int, corr: int, payload: bytes) -> bytes:
    body = struct.pack(">hhih", api_key, version, corr, -1) + payload
    return struct.pack(">i", len(body)) + body


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def guess(address: tuple[str, int], password: bytes) -> tuple[int, float]:
    """SaslHandshake (PLAIN) then SaslAuthenticate with ``password``: the error code and how long the
    answer to the authenticate took."""
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(_frame(17, 1, 1, _string(b"PLAIN")))
        size, corr, code = struct.unpack(">iih", _recv(s, 10))
        _recv(s, size - 6)
        assert code == 0
        token = b"\0alice\0" + password
        start = time.monotonic()
        s.sendall(_frame(36, 1, 2, struct.pack(">i", len(token)) + token))
        size, corr, code = struct.unpack(">iih", _recv(s, 10))
        took = time.monotonic() - start
        _recv(s, size - 6)
        assert corr == 2
        if code:
            assert s.recv(10) == b""  # then closed
        return code, took


def _metadata(address: tuple[str, int]) -> None:
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(_frame(3, 1, 5, struct.pack(">i", -1)))
        size, corr = struct.unpack(">ii", _recv(s, 8))
        assert corr == 5


def test_twenty_wrong_passwords_take_at_least_twenty_delays() -> None:
    with _server(None) as srv:  # Kafka's default, 100 ms
        address = srv.server.endpoints["SASL_PLAINTEXT"][1]
        start = time.monotonic()
        results = [guess(address, f"guess-{i}".encode()) for i in range(20)]
        elapsed = time.monotonic() - start
        assert {code for code, _ in results} == {58}  # SASL_AUTHENTICATION_FAILED
        assert min(took for _, took in results) >= 0.1
        assert elapsed >= 20 * 0.1
        assert guess(address, b"alice-secret")[0] == 0  # the right one is answered at once
        assert srv.server.stats.auth_failures == 20


def test_the_delay_holds_up_no_other_connection() -> None:
    with _server(1500) as srv:
        bad = srv.server.endpoints["SASL_PLAINTEXT"][1]
        good = srv.server.endpoints["PLAINTEXT"][1]
        done: list[float] = []
        guessers = [threading.Thread(target=lambda: done.append(guess(bad, b"nope")[1])) for _ in range(5)]
        for t in guessers:
            t.start()
        time.sleep(0.2)  # the guesses are waiting out their delay now
        _metadata(good)
        assert guess(bad, b"alice-secret")[0] == 0
        served_while_waiting = len(done)
        for t in guessers:
            t.join(10)
        assert served_while_waiting == 0 and len(done) == 5 and min(done) >= 1.5


@pytest.mark.parametrize("delay", [0])
def test_a_zero_delay_answers_at_once(delay) -> None:
    with _server(delay) as srv:
        code, _ = guess(srv.server.endpoints["SASL_PLAINTEXT"][1], b"nope")
        assert code == 58
