"""Inter-broker requests under the authorizer, as Kafka's KafkaApis checks them, on every listener
type: a replica Fetch (replica id >= 0) needs CLUSTER_ACTION on the cluster -- READ on the topic,
a consumer's right, does not do -- and is answered TOPIC_AUTHORIZATION_FAILED without it; an
OffsetForLeaderEpoch from a replica passes with CLUSTER_ACTION or with DESCRIBE on the topic
(Kafka does not look at its replica id). WriteTxnMarkers (CLUSTER_AUTHORIZATION_FAILED without
CLUSTER_ACTION) is in the wire matrix, test_denials_wire.py."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (AclBindingFilter, AclOperation as O, AclPermissionType,
                                   ResourcePatternType, ResourceType as T)

from kbroker.protocol.errors import Errors
from tests.security.test_acls import add_acls, admin, binding, create_topic
from tests.security.test_acls_denials import LISTENERS, matrix_broker, seat  # noqa: F401
from tests.security.test_denials_wire import connect, nested, req

TOPIC = Errors.TOPIC_AUTHORIZATION_FAILED.code
FOLLOWER = 2  # not a replica of the single node's partitions: NOT_LEADER_OR_FOLLOWER once allowed


def replica_fetch(topic):
    return req(1, replica_id=FOLLOWER, max_wait_ms=0, min_bytes=0, max_bytes=1024,
               isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
               rack_id="", topics=[nested(1, "FetchTopic")(topic=topic, partitions=[
                   nested(1, "FetchPartition")(partition=0, fetch_offset=0,
                                               partition_max_bytes=1024)])])


def replica_epoch_query(topic):
    return req(23, replica_id=FOLLOWER, topics=[nested(23, "OffsetForLeaderTopic")(
        topic=topic, partitions=[nested(23, "OffsetForLeaderPartition")(
            partition=0, current_leader_epoch=-1, leader_epoch=0)])])


def _codes(broker, ca, listener, api_key, version, request):
    with connect(broker, ca, listener) as wire:
        response = wire.call(api_key, version, request)
    rows = response.responses if api_key == 1 else response.topics
    return {p.error_code for t in rows for p in t.partitions}


def _drop_acls(broker, principal):
    root = admin(broker)  # kept referenced: the futures die with their client
    for future in root.delete_acls([AclBindingFilter(
            T.ANY, None, ResourcePatternType.ANY, principal, None, O.ANY,
            AclPermissionType.ANY)]).values():
        future.result(20)


@pytest.mark.parametrize("listener", LISTENERS)
def test_a_replica_fetch_needs_cluster_action(matrix_broker, ca, listener):  # noqa: F811
    topic = f"r-{uuid.uuid4().hex[:10]}"
    create_topic(matrix_broker, topic)
    principal = seat(matrix_broker, ca, listener).principal
    fetch = lambda: _codes(matrix_broker, ca, listener, 1, 12, replica_fetch(topic))  # noqa: E731
    try:
        assert fetch() == {TOPIC}
        add_acls(matrix_broker, binding(T.TOPIC, topic, principal, O.READ))
        assert fetch() == {TOPIC}, "READ on the topic is a consumer's right, not a replica's"
        add_acls(matrix_broker, binding(T.BROKER, "kafka-cluster", principal, O.CLUSTER_ACTION))
        assert fetch() == {Errors.NOT_LEADER_OR_FOLLOWER.code}
    finally:
        _drop_acls(matrix_broker, principal)


@pytest.mark.parametrize("listener", LISTENERS)
def test_a_replicas_epoch_query_needs_cluster_action_or_describe(matrix_broker, ca,  # noqa: F811
                                                                  listener):
    topic = f"e-{uuid.uuid4().hex[:10]}"
    create_topic(matrix_broker, topic)
    principal = seat(matrix_broker, ca, listener).principal
    query = lambda: _codes(matrix_broker, ca, listener, 23, 3,  # noqa: E731
                           replica_epoch_query(topic))
    try:
        assert query() == {TOPIC}
        add_acls(matrix_broker, binding(T.BROKER, "kafka-cluster", principal, O.CLUSTER_ACTION))
        assert query() == {Errors.NONE.code}
        _drop_acls(matrix_broker, principal)
        assert query() == {TOPIC}
        add_acls(matrix_broker, binding(T.TOPIC, topic, principal, O.DESCRIBE))
        assert query() == {Errors.NONE.code}
    finally:
        _drop_acls(matrix_broker, principal)
