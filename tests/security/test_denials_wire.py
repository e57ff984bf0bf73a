"""The denial matrix for the APIs a client library does not expose one call at a time (or, for
ListOffsets and DescribeUserScramCredentials, cannot show the denial of), over the raw wire:
group membership and offsets, transactions, inter-broker markers, ACL, feature, SCRAM and log-dir
admin, producer and transaction descriptions. Each runs on every listener type (PLAINTEXT as
``User:ANONYMOUS``, SSL as alice by her certificate, SASL_PLAINTEXT and SASL_SSL as alice by SASL
PLAIN) with no ACL and with a wrong one (the right operation on another resource, or on the
cluster an operation that does not imply the right one), and gets the error Kafka gives, in the
place Kafka puts it. (The client-level matrix is test_acls_denials.py.)"""

from __future__ import annotations

import ssl
import uuid

import pytest
from confluent_kafka.admin import AclOperation as O, ResourceType as T

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from tests.integration.clients import Wire
from tests.security.test_acls import add_acls, binding, create_topic
from tests.security.test_acls_denials import LISTENERS, matrix_broker, seat  # noqa: F401
from tests.security.test_denials import authenticate, handshake

TOPIC = Errors.TOPIC_AUTHORIZATION_FAILED.code
GROUP = Errors.GROUP_AUTHORIZATION_FAILED.code
TXN = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code
CLUSTER = Errors.CLUSTER_AUTHORIZATION_FAILED.code


def connect(broker, ca, listener: str) -> Wire:
    """A raw connection, authenticated as the listener's principal."""
    wire = Wire(broker.endpoints[listener])
    if listener in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=str(ca.ca_pem))
        if listener == "SSL":
            context.load_cert_chain(str(ca.client.cert_pem), str(ca.client.key_pem))
        wire.sock = context.wrap_socket(wire.sock, server_hostname="127.0.0.1")
    if listener.startswith("SASL"):
        assert handshake(wire, "PLAIN").error_code == 0
        assert authenticate(wire, b"\0alice\0alice-secret").error_code == 0
    return wire


def req(api_key: int, **fields):
    return messages.request_class(api_key)(**fields)


def nested(api_key: int, name: str):
    return getattr(messages.request_class(api_key), name)


# Each case: api key, version, request(topic, group, txn id), the error codes of the response,
# resource type and name key ("topic" / "group" / "txn" / "cluster"), the operation that would
# allow it, a wrong operation for the cluster, the denial.
def fetch(t, g, x):
    return req(1, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0,
               session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                   nested(1, "FetchTopic")(topic=t, partitions=[nested(1, "FetchPartition")(
                       partition=0, fetch_offset=0, partition_max_bytes=1024)])])


def offset_commit(t, g, x):
    return req(8, group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
        nested(8, "OffsetCommitRequestTopic")(name=t, partitions=[
            nested(8, "OffsetCommitRequestPartition")(partition_index=0, committed_offset=0,
                                                      committed_metadata="")])])


SOME_TOPIC_ID = uuid.UUID(int=1)  # any: the authorization comes first


def share_state_errors(response):
    return [p.error_code for t in response.results for p in t.partitions]


def partition_errors(response, topics="topics", partitions="partitions"):
    return [p.error_code for t in getattr(response, topics) for p in getattr(t, partitions)]


CASES = {
    "ListOffsets": (2, 7, lambda t, g, x: req(2, replica_id=-1, isolation_level=0, topics=[
        nested(2, "ListOffsetsTopic")(name=name, partitions=[nested(2, "ListOffsetsPartition")(
            partition_index=0, timestamp=-1)]) for name in (t, t + "-missing")]),
        partition_errors, T.TOPIC, O.DESCRIBE, None, TOPIC),  # existence does not leak
    "Fetch": (1, 12, fetch, lambda r: partition_errors(r, "responses"), T.TOPIC, O.READ, None,
              TOPIC),
    "OffsetCommit": (8, 8, offset_commit, partition_errors, T.GROUP, O.READ, None, GROUP),
    "FindCoordinator (group)": (
        10, 3, lambda t, g, x: req(10, key=g, key_type=0), lambda r: [r.error_code], T.GROUP,
        O.DESCRIBE, None, GROUP),
    "FindCoordinator (transaction)": (
        10, 3, lambda t, g, x: req(10, key=x, key_type=1), lambda r: [r.error_code],
        T.TRANSACTIONAL_ID, O.DESCRIBE, None, TXN),
    "JoinGroup": (11, 5, lambda t, g, x: req(
        11, group_id=g, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        protocol_type="consumer", protocols=[nested(11, "JoinGroupRequestProtocol")(
            name="range", metadata=b"")]), lambda r: [r.error_code], T.GROUP, O.READ, None,
        GROUP),
    "Heartbeat": (12, 3, lambda t, g, x: req(12, group_id=g, generation_id=1, member_id="m"),
                  lambda r: [r.error_code], T.GROUP, O.READ, None, GROUP),
    "SyncGroup": (14, 3, lambda t, g, x: req(14, group_id=g, generation_id=1, member_id="m",
                                             assignments=[]),
                  lambda r: [r.error_code], T.GROUP, O.READ, None, GROUP),
    "LeaveGroup": (13, 3, lambda t, g, x: req(13, group_id=g, members=[
        nested(13, "MemberIdentity")(member_id="m")]), lambda r: [r.error_code], T.GROUP,
        O.READ, None, GROUP),
    "OffsetDelete": (47, 0, lambda t, g, x: req(47, group_id=g, topics=[
        nested(47, "OffsetDeleteRequestTopic")(name=t, partitions=[
            nested(47, "OffsetDeleteRequestPartition")(partition_index=0)])]),
        lambda r: [r.error_code], T.GROUP, O.DELETE, None, GROUP),
    "AddPartitionsToTxn": (24, 3, lambda t, g, x: req(
        24, v3_and_below_transactional_id=x, v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0, v3_and_below_topics=[
            nested(24, "AddPartitionsToTxnTopic")(name=t, partitions=[0])]),
        lambda r: [p.partition_error_code for t in r.results_by_topic_v3_and_below
                   for p in t.results_by_partition],
        T.TRANSACTIONAL_ID, O.WRITE, None, TXN),
    "AddOffsetsToTxn": (25, 3, lambda t, g, x: req(25, transactional_id=x, producer_id=1,
                                                   producer_epoch=0, group_id=g),
                        lambda r: [r.error_code], T.TRANSACTIONAL_ID, O.WRITE, None, TXN),
    "EndTxn": (26, 3, lambda t, g, x: req(26, transactional_id=x, producer_id=1,
                                          producer_epoch=0, committed=True),
               lambda r: [r.error_code], T.TRANSACTIONAL_ID, O.WRITE, None, TXN),
    "TxnOffsetCommit": (28, 3, lambda t, g, x: req(
        28, transactional_id=x, group_id=g, producer_id=1, producer_epoch=0,
        generation_id_or_member_epoch=-1,
        member_id="", topics=[nested(28, "TxnOffsetCommitRequestTopic")(name=t, partitions=[
            nested(28, "TxnOffsetCommitRequestPartition")(partition_index=0, committed_offset=0,
                                                          committed_metadata="")])]),
        partition_errors, T.TRANSACTIONAL_ID, O.WRITE, None, TXN),
    "WriteTxnMarkers": (27, 1, lambda t, g, x: req(27, markers=[
        nested(27, "WritableTxnMarker")(producer_id=1, producer_epoch=0, transaction_result=True,
                                        coordinator_epoch=0, topics=[
            nested(27, "WritableTxnMarkerTopic")(name=t, partition_indexes=[0])])]),
        lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
        T.BROKER, O.CLUSTER_ACTION, O.ALTER, CLUSTER),
    "DescribeAcls": (29, 1, lambda t, g, x: req(
        29, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),
        lambda r: [r.error_code], T.BROKER, O.DESCRIBE, O.CREATE, CLUSTER),
    "DeleteAcls": (31, 1, lambda t, g, x: req(31, filters=[nested(31, "DeleteAclsFilter")(
        resource_type_filter=2, resource_name_filter=t, pattern_type_filter=3,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)]),
        lambda r: [f.error_code for f in r.filter_results], T.BROKER, O.ALTER, O.DESCRIBE,
        CLUSTER),
    "AlterConfigs": (33, 0, lambda t, g, x: req(33, validate_only=True, resources=[
        nested(33, "AlterConfigsResource")(resource_type=2, resource_name=t, configs=[
            nested(33, "AlterableConfig")(name="retention.ms", value="1000")])]),
        lambda r: [x.error_code for x in r.responses], T.TOPIC, O.ALTER_CONFIGS, None, TOPIC),
    "DescribeLogDirs": (35, 3, lambda t, g, x: req(35, topics=None),
                        lambda r: [r.error_code], T.BROKER, O.DESCRIBE, O.CREATE, CLUSTER),
    "DescribeProducers": (61, 0, lambda t, g, x: req(61, topics=[
        nested(61, "TopicRequest")(name=t, partition_indexes=[0])]), partition_errors,
        T.TOPIC, O.READ, None, TOPIC),
    "DescribeUserScramCredentials": (50, 0, lambda t, g, x: req(50, users=[
        nested(50, "UserName")(name="a"), nested(50, "UserName")(name="b")]),
        lambda r: [r.error_code] + [u.error_code for u in r.results], T.BROKER, O.DESCRIBE,
        O.CREATE, CLUSTER),  # Kafka's getErrorResponse repeats the error per requested user
    "UpdateFeatures": (57, 1, lambda t, g, x: req(57, timeout_ms=1000, feature_updates=[
        nested(57, "FeatureUpdateKey")(feature="transaction.version", max_version_level=1,
                                       allow_downgrade=False)]),
        lambda r: [r.error_code], T.BROKER, O.ALTER, O.DESCRIBE, CLUSTER),
    "DescribeTransactions": (65, 0, lambda t, g, x: req(65, transactional_ids=[x]),
                             lambda r: [s.error_code for s in r.transaction_states],
                             T.TRANSACTIONAL_ID, O.DESCRIBE, None, TXN),
    # KIP-1331: READ on the group comes before the missing-plugin answer (UNSUPPORTED_VERSION).
    "StreamsGroupTopologyDescriptionUpdate": (93, 0, lambda t, g, x: req(
        93, group_id=g, member_id="m", topology_epoch=1,
        topology_description=nested(93, "TopologyDescription")(subtopologies=[],
                                                               global_stores=[])),
        lambda r: [r.error_code] if r.error_message is None else [r.error_message], T.GROUP,
        O.READ, None, GROUP),
    # The share coordinator's inter-broker APIs: every partition denied without CLUSTER_ACTION.
    "InitializeShareGroupState": (83, 0, lambda t, g, x: req(83, group_id=g, topics=[
        nested(83, "InitializeStateData")(topic_id=SOME_TOPIC_ID, partitions=[
            nested(83, "PartitionData")(partition=0, state_epoch=0, start_offset=0)])]),
        share_state_errors, T.BROKER, O.CLUSTER_ACTION, O.ALTER, CLUSTER),
    "ReadShareGroupState": (84, 0, lambda t, g, x: req(84, group_id=g, topics=[
        nested(84, "ReadStateData")(topic_id=SOME_TOPIC_ID, partitions=[
            nested(84, "PartitionData")(partition=0, leader_epoch=0)])]),
        share_state_errors, T.BROKER, O.CLUSTER_ACTION, O.ALTER, CLUSTER),
    "WriteShareGroupState": (85, 1, lambda t, g, x: req(85, group_id=g, topics=[
        nested(85, "WriteStateData")(topic_id=SOME_TOPIC_ID, partitions=[
            nested(85, "PartitionData")(partition=0, state_epoch=0, leader_epoch=0,
                                        start_offset=0, state_batches=[])])]),
        share_state_errors, T.BROKER, O.CLUSTER_ACTION, O.ALTER, CLUSTER),
    "DeleteShareGroupState": (86, 0, lambda t, g, x: req(86, group_id=g, topics=[
        nested(86, "DeleteStateData")(topic_id=SOME_TOPIC_ID, partitions=[
            nested(86, "PartitionData")(partition=0)])]),
        share_state_errors, T.BROKER, O.CLUSTER_ACTION, O.ALTER, CLUSTER),
    "ReadShareGroupStateSummary": (87, 1, lambda t, g, x: req(87, group_id=g, topics=[
        nested(87, "ReadStateSummaryData")(topic_id=SOME_TOPIC_ID, partitions=[
            nested(87, "PartitionData")(partition=0, leader_epoch=0)])]),
        share_state_errors, T.BROKER, O.CLUSTER_ACTION, O.ALTER, CLUSTER),
    "FindCoordinator(SHARE)": (10, 6, lambda t, g, x: req(10, key_type=2, coordinator_keys=[
        f"{g}:AAAAAAAAAAAAAAAAAAAAAQ:0", f"{g}:AAAAAAAAAAAAAAAAAAAAAQ:1"]),
        lambda r: [c.error_code for c in r.coordinators], T.BROKER, O.CLUSTER_ACTION, O.ALTER,
        CLUSTER),
}


@pytest.mark.parametrize("state", ["no ACL", "wrong ACL"])
@pytest.mark.parametrize("api", list(CASES))
@pytest.mark.parametrize("listener", LISTENERS)
def test_denial_matrix_on_the_wire(matrix_broker, ca, listener, api, state):  # noqa: F811
    api_key, version, build, errors, rtype, right, wrong_cluster_op, denial = CASES[api]
    suffix = uuid.uuid4().hex[:10]
    topic, group, txn = f"w-{suffix}", f"g-{suffix}", f"x-{suffix}"
    create_topic(matrix_broker, topic)
    principal = seat(matrix_broker, ca, listener).principal
    if state == "wrong ACL":
        if rtype == T.BROKER:
            add_acls(matrix_broker, binding(rtype, "kafka-cluster", principal, wrong_cluster_op))
        else:
            name = {T.TOPIC: topic, T.GROUP: group, T.TRANSACTIONAL_ID: txn}[rtype]
            add_acls(matrix_broker, binding(rtype, name + "-other", principal, right))
    try:
        with connect(matrix_broker, ca, listener) as wire:
            response = wire.call(api_key, version, build(topic, group, txn))
        codes = errors(response)
        assert codes and set(codes) == {denial}, f"{api} with {state} on {listener}: {codes}"
    finally:
        if rtype == T.BROKER and state == "wrong ACL":
            from confluent_kafka.admin import (AclBindingFilter, AclPermissionType,
                                               ResourcePatternType)

            from tests.security.test_acls import admin

            root = admin(matrix_broker)  # kept referenced: the futures die with their client
            for future in root.delete_acls([AclBindingFilter(
                    T.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, None,
                    O.ANY, AclPermissionType.ANY)]).values():
                future.result(20)
