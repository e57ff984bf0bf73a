"""The fault tooling itself, before it judges any cluster: the proxy really forwards, cuts and
restores over real sockets, and the checker really fails runs that lost, duplicated or moved an
acknowledged write, let a committed offset go back, or left replicas with different logs."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from tools.cluster_faults.checker import batches, check, compare_replicas
from tools.cluster_faults.cluster import _free_ports
from tools.cluster_faults.drivers import Acked, ConsumerResult, ProducerResult
from tools.cluster_faults.proxy import ProxyLoop


@pytest.fixture
def echo_server():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def _echo(conn):
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def _roundtrip(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"ping")
        return s.recv(4)


def test_proxy_forwards_cuts_live_connections_refuses_new_ones_and_restores(echo_server):
    loop = ProxyLoop()
    try:
        (port,) = _free_ports(1)
        loop.add("link", port, echo_server)
        assert _roundtrip(port) == b"ping"
        live = socket.create_connection(("127.0.0.1", port), timeout=5)
        live.sendall(b"one")
        assert live.recv(3) == b"one"

        loop.cut("link")
        # the established connection is dropped (reset or EOF), as a dead link looks to a peer
        try:
            live.sendall(b"two")
            assert live.recv(3) == b""
        except OSError:
            pass
        live.close()
        # A new connection is refused: reset, or closed before any echo (the proxy's abort is a
        # FIN when our bytes had not arrived yet, a reset when they had).
        try:
            assert _roundtrip(port) == b""
        except OSError:
            pass

        loop.restore("link")
        assert _roundtrip(port) == b"ping"
    finally:
        loop.close()


def _producer(*acked):
    result = ProducerResult("p")
    result.acked = [Acked(v, p, o) for v, p, o in acked]
    return result


def test_checker_passes_a_clean_run():
    records = [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    consumer = ConsumerResult(commits=[(0, 1), (0, 2), (1, 1)])
    verdict = check([_producer(("a", 0, 0), ("b", 0, 1), ("c", 1, 0))], records, consumer,
                    {"a", "b", "c"}, {0: 2, 1: 1})
    assert verdict.ok and verdict.acked == 3, verdict


def test_checker_counts_lost_duplicated_moved_missed_and_commits_going_back():
    records = [(0, 0, "a"), (0, 1, "a"), (0, 2, "c")]
    consumer = ConsumerResult(commits=[(0, 3), (0, 1)])
    verdict = check([_producer(("a", 0, 0), ("b", 0, 1), ("c", 0, 1))], records, consumer,
                    {"a"}, {0: 2})
    assert (verdict.lost, verdict.duplicated, verdict.moved) == (1, 1, 1), verdict
    assert verdict.commits_backwards == 1 and verdict.group_missed == 2, verdict
    assert verdict.commits_lost == 1, verdict  # 3 was committed, the cluster says 2
    assert not verdict.ok


def _batch(base: int, count: int, epoch: int, crc: int) -> bytes:
    body = struct.pack(">bIhi", 2, crc, 0, count - 1) + b"\0" * 20
    return struct.pack(">qii", base, 4 + len(body), epoch) + body


def test_replica_logs_are_compared_batch_by_batch_below_the_high_watermark(tmp_path):
    for broker, tail_crc in ((1, 7), (2, 7), (3, 8)):
        directory = tmp_path / str(broker) / "t-0"
        directory.mkdir(parents=True)
        data = _batch(0, 5, 0, 1) + _batch(5, 5, 1, tail_crc) + _batch(10, 2, 1, 9)[:-3]
        (directory / "00000000000000000000.log").write_bytes(data)
    assert [b[:2] for b in batches(tmp_path / "1" / "t-0")] == [(0, 4), (5, 9)]
    dirs = {b: str(tmp_path / str(b)) for b in (1, 2, 3)}
    compared, diverged = compare_replicas(dirs, "t", {0: [1, 2]}, {0: 10})
    assert (compared, diverged) == (4, [])
    compared, diverged = compare_replicas(dirs, "t", {0: [1, 2, 3]}, {0: 10})
    assert len(diverged) == 1 and "broker 3" in diverged[0]
    # below a high watermark of 5 the three agree: the difference is above it
    assert compare_replicas(dirs, "t", {0: [1, 2, 3]}, {0: 5})[1] == []
