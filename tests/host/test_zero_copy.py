"""Fetch responses sent with sendfile: the frame split around file slices, the bytes on the socket, the
order of pipelined responses, a log truncated under a pending send, and TLS falling back to a copy."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.host.server import BackgroundServer, ClientConnection, ServerStats, _FilePiece
from kafkalite.protocol.codec.header import encode_response, encode_response_parts
from kafkalite.protocol.codec.types import ZERO_COPY_MIN_BYTES
from kafkalite.storage import FileSlice

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _fetch_body(records: object) -> dict:
    part = {"partition_index": 0, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9,
            "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
            "records": records}  # fmt: skip
    return {"error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [part, dict(part)]}]}


def _join(parts: list) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p.read() for p in parts)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 3 * ZERO_COPY_MIN_BYTES), version=st.sampled_from([4, 11]))
def test_parts_around_slices_are_the_copied_frame_byte_for_byte(tmp_path_factory, size, version):
    path = tmp_path_factory.mktemp("zc") / "00000000000000000000.log"
    path.write_bytes(os.urandom(size + 7))
    piece = FileSlice(path, 7, size)
    parts = encode_response_parts(1, version, 42, _fetch_body(piece), zero_copy=True)
    copied = encode_response(1, version, 42, _fetch_body(piece.read()))
    assert _join(parts) == copied
    slices = [p for p in parts if not isinstance(p, bytes)]
    assert len(slices) == (2 if size >= ZERO_COPY_MIN_BYTES else 0)  # small slices are copied in
    assert int.from_bytes(parts[0][:4], "big") == len(copied) - 4


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(0, 3 * ZERO_COPY_MIN_BYTES),
    version=st.sampled_from([4, 11]),
    as_slice=st.booleans(),
    zero_copy=st.booleans(),
)
def test_split_frames_are_the_copied_frame_byte_for_byte(
    tmp_path_factory, size, version, as_slice, zero_copy
):
    """With split, large records become pieces of their own: bytes when they are bytes or when the
    connection copies, the file slice itself only for a zero-copy sender."""
    path = tmp_path_factory.mktemp("split") / "00000000000000000000.log"
    path.write_bytes(os.urandom(size + 7))
    piece = FileSlice(path, 7, size)
    records = piece if as_slice else piece.read()
    parts = encode_response_parts(1, version, 42, _fetch_body(records), zero_copy=zero_copy, split=True)
    copied = encode_response(1, version, 42, _fetch_body(piece.read()))
    assert _join(parts) == copied
    big = size >= ZERO_COPY_MIN_BYTES
    assert len(parts) == (5 if big else 1)  # frame, records, frame, records, frame
    kinds = {type(p) for p in parts[1::2]}
    assert kinds <= ({FileSlice} if as_slice and zero_copy else {bytes})
    assert int.from_bytes(parts[0][:4], "big") == len(copied) - 4


class _Server:
    """What a ClientConnection needs of its server, for driving one by hand."""

    zero_copy = True

    def __init__(self) -> None:
        self.stats = ServerStats()


_KEEP: list = []  # a dropped StreamWriter closes its connection


async def _pair() -> tuple[ClientConnection, asyncio.StreamReader, asyncio.AbstractServer]:
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()
    srv = await asyncio.start_server(lambda r, w: accepted.set_result((r, w)), "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*srv.sockets[0].getsockname()[:2])
    server_side = await accepted
    _KEEP[:] = [writer, server_side]
    conn = ClientConnection(_Server(), 1, server_side[1])  # type: ignore[arg-type]
    return conn, reader, srv


def test_pipelined_responses_keep_their_order_around_a_sendfile(tmp_path):
    data = os.urandom(300_000)
    (tmp_path / "a.log").write_bytes(data)

    async def run() -> tuple[bytes, ServerStats]:
        conn, reader, srv = await _pair()
        piece = _FilePiece.of(FileSlice(tmp_path / "a.log", 1000, 200_000))
        conn._finish(1, b"second")  # finished first, sent second
        conn._finish(0, [b"head", piece, b"tail"])
        conn._finish(2, b"third")
        got = await reader.readexactly(4 + 200_000 + 4 + 6 + 5)
        conn.close()
        srv.close()
        return got, conn.server.stats

    got, stats = asyncio.run(run())
    assert got == b"head" + data[1000:201_000] + b"tail" + b"second" + b"third"
    assert stats.zero_copy_bytes == 200_000


class _LoopWithoutSendfile(asyncio.SelectorEventLoop):
    """An event loop without ``loop.sendfile``, as uvloop's (it inherits the abstract one, which raises)."""

    async def sendfile(self, *args: object, **kwargs: object) -> int:
        raise NotImplementedError


def test_slices_go_out_on_a_loop_without_loop_sendfile(tmp_path):
    """uvloop has no ``loop.sendfile``: the connection calls ``os.sendfile`` itself, so fetches are served
    there too, larger than the socket's buffer, behind and before other responses."""
    data = os.urandom(8 << 20)
    (tmp_path / "d.log").write_bytes(data)

    async def run() -> tuple[bytes, ServerStats, bool]:
        conn, reader, srv = await _pair()
        piece = _FilePiece.of(FileSlice(tmp_path / "d.log", 100, len(data) - 100))
        conn._finish(0, b"first")
        conn._finish(1, [b"head", piece, b"tail"])
        conn._finish(2, b"last")
        got = bytearray()
        while len(got) < 5 + 4 + len(data) - 100 + 4 + 4:
            more = await reader.read(1 << 16)
            if not more:
                break  # closed by the server
            got += more
            await asyncio.sleep(0)  # a slow reader: the socket's buffer fills and the slice waits
        closed = conn.closed
        conn.close()
        srv.close()
        return bytes(got), conn.server.stats, closed

    loop = _LoopWithoutSendfile()
    try:
        got, stats, closed = loop.run_until_complete(run())
    finally:
        loop.close()
    assert not closed, "the connection closed instead of sending the slice"
    assert got == b"first" + b"head" + data[100:] + b"tail" + b"last"
    assert stats.zero_copy_bytes == len(data) - 100


def test_closing_in_the_middle_of_a_slice_leaves_no_descriptor_open(tmp_path):
    (tmp_path / "e.log").write_bytes(os.urandom(16 << 20))

    async def run() -> tuple[bool, int]:
        conn, reader, srv = await _pair()
        before = len(os.listdir("/proc/self/fd"))
        conn._finish(0, [b"head", _FilePiece.of(FileSlice(tmp_path / "e.log", 0, 16 << 20))])
        await reader.readexactly(1 << 20)  # the slice is under way, the socket's buffer full
        waiting = conn.sending is not None
        conn.close()
        srv.close()
        await asyncio.sleep(0.05)
        return waiting, len(os.listdir("/proc/self/fd")) - before

    waiting, left_open = asyncio.run(run())
    assert waiting, "the slice was sent whole before the close (the test did not test the close)"
    # the server's socket is gone (-1); its watched duplicate and the slice's file must be gone too
    assert left_open <= -1, f"{left_open + 1} descriptors left open by a connection closed mid-slice"


def test_a_slice_truncated_before_it_is_sent_closes_only_that_connection(tmp_path):
    (tmp_path / "b.log").write_bytes(os.urandom(100_000))

    async def run() -> tuple[bytes, bool]:
        conn, reader, srv = await _pair()
        piece = _FilePiece.of(FileSlice(tmp_path / "b.log", 0, 100_000))
        os.truncate(tmp_path / "b.log", 40_000)  # the log shrank between the read and the send
        conn._finish(0, [b"head", piece])
        got = await reader.read()  # until EOF: the connection is closed, not hung
        srv.close()
        return got, conn.closed

    got, closed = asyncio.run(run())
    assert closed and got.startswith(b"head") and len(got) == 4 + 40_000


def test_a_slice_stays_readable_after_its_segment_is_deleted(tmp_path):
    data = os.urandom(150_000)
    (tmp_path / "c.log").write_bytes(data)
    with open(tmp_path / "c.log", "rb") as f:
        piece = _FilePiece.of(FileSlice(tmp_path / "c.log", 0, 150_000, file=f))
        os.unlink(tmp_path / "c.log")  # retention deleted it after the fetch was read
        assert os.pread(piece.file.fileno(), 150_000, 0) == data
        piece.file.close()


@pytest.mark.parametrize("zero_copy", [True, False])
def test_confluent_consumer_reads_the_same_records_with_and_without_sendfile(zero_copy):
    from confluent_kafka import Consumer, Producer, TopicPartition

    with BackgroundServer(1) as srv:
        srv.server.zero_copy = zero_copy
        srv.create_topic("z", 1, 1)
        p = Producer({"bootstrap.servers": srv.bootstrap_servers, "linger.ms": 5})
        for i in range(3000):
            p.produce("z", f"value-{i:06d}".encode() * 8, key=str(i).encode())
        assert p.flush(30) == 0
        c = Consumer(
            {"bootstrap.servers": srv.bootstrap_servers, "group.id": "zc", "enable.auto.commit": False}
        )
        c.assign([TopicPartition("z", 0, 0)])
        got = []
        deadline = 30
        while len(got) < 3000 and deadline > 0:
            got += [m for m in c.consume(1000, 1.0) if m.error() is None]
            deadline -= 1
        c.close()
        sent = srv.server.stats.zero_copy_bytes
    assert [m.key() for m in got] == [str(i).encode() for i in range(3000)]
    assert got[-1].value() == b"value-002999" * 8
    assert (sent > 0) == zero_copy
