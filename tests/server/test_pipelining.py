"""Responses leave a connection in request order, even when an earlier request waits (long-poll
fetch) or is answered from files with sendfile while later ones are answered at once."""

from __future__ import annotations

import socket

from confluent_kafka import Producer

from kbroker.protocol import messages
from kbroker.protocol.messages.headers import ResponseHeader
from tests.frames import read_frame, request_frame


def _frame(api_key, version, correlation_id, body):
    return request_frame(api_key, version, body, correlation_id, "pipelining-test")


def _read_frame(sock):
    frame = read_frame(sock)
    assert frame is not None, "connection closed"
    return frame


def _fetch(topic, max_wait_ms):
    fetch = messages.request_class(1)
    return fetch(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, topics=[fetch.FetchTopic(topic=topic, partitions=[
                     fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                          current_leader_epoch=-1, log_start_offset=-1)])])


def _correlation_ids(sock, count):
    ids = []
    for _ in range(count):
        data = _read_frame(sock)
        ids.append(ResponseHeader.decode(data, 0).correlation_id)
    return ids


def _metadata_for(topic):
    metadata = messages.request_class(3)
    return metadata(topics=[metadata.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=True)


def test_long_poll_does_not_let_later_answers_overtake(broker):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(_frame(3, 4, 1, _metadata_for("quiet")))
        _read_frame(sock)
        api_versions = messages.request_class(18)()
        # A fetch that waits (no data), then two requests answered at once.
        sock.sendall(_frame(1, 11, 2, _fetch("quiet", 400))
                     + _frame(18, 2, 3, api_versions) + _frame(18, 2, 4, api_versions))
        assert _correlation_ids(sock, 3) == [2, 3, 4]


def test_sendfile_answer_keeps_its_place(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        producer.produce("busy", value=b"x" * 1000, key=str(i).encode())
    assert producer.flush(10) == 0
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        api_versions = messages.request_class(18)()
        requests = b"".join(_frame(1, 11, 10 + 2 * i, _fetch("busy", 0))
                            + _frame(18, 2, 11 + 2 * i, api_versions) for i in range(20))
        sock.sendall(requests)
        assert _correlation_ids(sock, 40) == list(range(10, 50))
