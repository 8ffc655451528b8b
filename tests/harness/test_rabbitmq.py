"""A private RabbitMQ node (kafkalite/harness/rabbitmq.py): it starts on 127.0.0.1 with its own directories,
carries a message from pika to pika, and leaves no process or directory behind."""

import os

import pytest

from kafkalite.harness import rabbitmq

needs_rabbitmq = pytest.mark.skipif(
    not rabbitmq.available(), reason=rabbitmq.missing_reason() or "RabbitMQ missing"
)


def _alive(pid: int) -> bool:
    # A process (or a group member) that still runs: its /proc entry exists and is not a zombie.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry))
    return members


@needs_rabbitmq
def test_node_carries_a_message_and_stops_clean():
    with rabbitmq.RabbitMQNode() as node:
        pids = node.pids
        directory = node.directory
        assert node.host == "127.0.0.1" and node.port > 0
        assert directory is not None and (directory / "mnesia").is_dir()
        assert all(_alive(p) for p in pids), "broker and epmd run while the block is open"
        conn = node.connect()
        ch = conn.channel()
        ch.queue_declare("q1")
        ch.basic_publish("", "q1", b"hello")
        method, _props, body = None, None, None
        for _ in range(50):
            method, _props, body = ch.basic_get("q1", auto_ack=True)
            if method is not None:
                break
        assert body == b"hello", "the message published comes back"
        assert ch.queue_declare("q1", passive=True).method.message_count == 0, "acked: the queue is empty"
        conn.close()
        assert node.list_queues()["q1"]["messages"] == 0, "rabbitmqctl reaches the private node"
    assert not any(_alive(p) for p in pids), "broker and epmd stopped"
    assert not any(_group_members(p) for p in pids), "no beam helper (erl_child_setup, inet_gethost) left"
    assert not directory.exists(), "the node's directories are removed"


@needs_rabbitmq
def test_two_nodes_do_not_collide():
    with rabbitmq.RabbitMQNode() as a, rabbitmq.RabbitMQNode() as b:
        assert a.port != b.port and a.nodename != b.nodename
        for node, body in ((a, b"a"), (b, b"b")):
            conn = node.connect()
            conn.channel().queue_declare("shared-name")
            conn.channel().basic_publish("", "shared-name", body)
            conn.close()
        assert a.list_queues()["shared-name"]["messages"] == 1, "each node keeps its own queue"
        assert b.list_queues()["shared-name"]["messages"] == 1, "each node keeps its own queue"


def test_available_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(rabbitmq, "SERVER", tmp_path / "rabbitmq-server")
    assert not rabbitmq.available()
    assert "not installed" in rabbitmq.missing_reason()
    with pytest.raises(rabbitmq.RabbitMQError, match="not installed"):
        rabbitmq.RabbitMQNode().start()


@needs_rabbitmq
def test_server_version_is_the_installed_one():
    assert rabbitmq.server_version().count(".") == 2, rabbitmq.server_version()


def test_hidden_by_the_environment(monkeypatch):
    monkeypatch.setenv(rabbitmq.HIDE_ENV, "none")
    assert not rabbitmq.available()
    assert "hidden" in rabbitmq.missing_reason()


def test_a_port_lost_to_another_program_starts_again(monkeypatch):
    # _free_ports releases its ports before the node binds them; a node that finds one taken
    # (eaddrinuse) starts again on others, and any other failure is reported at once.
    monkeypatch.setattr(rabbitmq, "available", lambda: True)
    tries = []

    def taken_then_fine(self):
        tries.append(1)
        if len(tries) < rabbitmq.START_ATTEMPTS:
            raise rabbitmq.RabbitMQError("rabbitmq-server exited with 0: ... {listen_error, eaddrinuse}")
        return self

    monkeypatch.setattr(rabbitmq.RabbitMQNode, "_start_once", taken_then_fine)
    node = rabbitmq.RabbitMQNode()
    assert node.start() is node and len(tries) == rabbitmq.START_ATTEMPTS

    def broken(self):
        tries.append(1)
        raise rabbitmq.RabbitMQError("rabbitmq-server exited with 1: no such file")

    tries.clear()
    monkeypatch.setattr(rabbitmq.RabbitMQNode, "_start_once", broken)
    with pytest.raises(rabbitmq.RabbitMQError, match="no such file"):
        node.start()
    assert len(tries) == 1, "only a lost port is worth another start"
