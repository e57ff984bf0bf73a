"""The denial matrix: the main APIs x {no ACL, wrong ACL, right ACL} for an authenticated user
(alice, SASL PLAIN) through confluent-kafka, each answered as Kafka answers it — the API's
*_AUTHORIZATION_FAILED without the right ACL, no denial with it. "Wrong" is an ALLOW that does
not cover the operation (another operation, or the right one on another resource)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AclBindingFilter, AclOperation as O, AclPermissionType,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic, ResourcePatternType,
                                   ResourceType as T)

from tests.security.test_acls import (acl_broker, add_acls, admin, binding,  # noqa: F401
                                      create_topic, produce_error)

TOPIC_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = KafkaError.CLUSTER_AUTHORIZATION_FAILED


def _code(run):
    """None when ``run()`` succeeds, else the Kafka error code it raised."""
    try:
        run()
    except KafkaException as exc:
        return exc.args[0].code()
    return None


def _wait(futures):
    for f in futures.values():
        f.result(20)


def create(b, client, name):
    _wait(client.create_topics([NewTopic(name, 1, 1)]))


def delete(b, client, name):
    _wait(client.delete_topics([name]))


def add_partitions(b, client, name):
    _wait(client.create_partitions([NewPartitions(name, 2)]))


def describe_configs(b, client, name):
    _wait(client.describe_configs([ConfigResource("topic", name)]))


def alter_configs(b, client, name):
    _wait(client.incremental_alter_configs([ConfigResource("topic", name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000",
                    incremental_operation=AlterConfigOpType.SET)])]))


def describe_group(b, client, name):
    result = client.describe_consumer_groups([name])
    _wait(result)


def delete_group(b, client, name):
    _wait(client.delete_consumer_groups([name]))


def create_acls(b, client, name):
    # (confluent-kafka 2.16's describe_acls does not surface a top-level error, so the ACL API
    # of the matrix is CreateAcls; kafka-acls.sh --list as alice is checked in the tool test.)
    _wait(client.create_acls([binding(T.TOPIC, f"x-{uuid.uuid4().hex[:8]}", "User:bob",
                                      O.READ)]))


def delete_records(b, client, name):
    _wait(client.delete_records([TopicPartition(name, 0, 0)]))


def produce(b, client, name):
    error = produce_error(b, "alice", name)
    if error is not None:
        raise KafkaException(KafkaError(error))


# (librdkafka names the CLUSTER resource type BROKER: both are code 4.)
# name, action, needs the topic first, resource type, right op, wrong op (None: right op on
# another resource), the denial, what the right ACL may still answer besides success.
CASES = [
    ("CreateTopics", create, False, T.TOPIC, O.CREATE, O.READ, TOPIC_DENIED, ()),
    ("DeleteTopics", delete, True, T.TOPIC, O.DELETE, O.ALTER, TOPIC_DENIED, ()),
    ("CreatePartitions", add_partitions, True, T.TOPIC, O.ALTER, O.DELETE, TOPIC_DENIED, ()),
    ("DescribeConfigs", describe_configs, True, T.TOPIC, O.DESCRIBE_CONFIGS, O.WRITE,
     TOPIC_DENIED, ()),
    ("IncrementalAlterConfigs", alter_configs, True, T.TOPIC, O.ALTER_CONFIGS,
     O.DESCRIBE_CONFIGS, TOPIC_DENIED, ()),
    ("DeleteRecords", delete_records, True, T.TOPIC, O.DELETE, O.WRITE, TOPIC_DENIED, ()),
    ("Produce", produce, True, T.TOPIC, O.WRITE, O.READ, TOPIC_DENIED, ()),
    ("DescribeGroups", describe_group, False, T.GROUP, O.DESCRIBE, None, GROUP_DENIED,
     (KafkaError.GROUP_ID_NOT_FOUND,)),
    ("DeleteGroups", delete_group, False, T.GROUP, O.DELETE, O.READ, GROUP_DENIED,
     (KafkaError.GROUP_ID_NOT_FOUND,)),
    ("CreateAcls", create_acls, False, T.BROKER, O.ALTER, O.DESCRIBE,
     CLUSTER_DENIED, ()),
]


# Without DESCRIBE the client's Metadata for the topic is denied, so librdkafka fails the call
# itself (no such partition) before sending it; the wrong ACL (WRITE, implying DESCRIBE) reaches
# the broker's own check.
NO_ACL_SEEN_AS = {"DeleteRecords": KafkaError._NOENT}


@pytest.mark.parametrize("state", ["no ACL", "wrong ACL", "right ACL"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_denial_matrix(acl_broker, case, state):  # noqa: F811
    api, action, needs_topic, rtype, right, wrong, denial, also_ok = case
    name = "kafka-cluster" if rtype == T.BROKER else f"m-{uuid.uuid4().hex[:10]}"
    if needs_topic:
        create_topic(acl_broker, name)
    if state == "wrong ACL":
        add_acls(acl_broker, binding(rtype, name if wrong is not None else name + "-other",
                                     "User:alice", wrong if wrong is not None else right))
    elif state == "right ACL":
        add_acls(acl_broker, binding(rtype, name, "User:alice", right))
    client = admin(acl_broker, "alice")
    code = _code(lambda: action(acl_broker, client, name))
    if state == "right ACL":
        assert code is None or code in also_ok, f"{api} with {state}: {code}"
        if rtype == T.BROKER:  # the cluster's ACLs are shared by the module: undo
            root = admin(acl_broker)
            _wait(root.delete_acls([AclBindingFilter(
                T.BROKER, name, ResourcePatternType.LITERAL, "User:alice", None, O.ANY,
                AclPermissionType.ANY)]))
    elif state == "no ACL":
        assert code == NO_ACL_SEEN_AS.get(api, denial), f"{api} with {state}: {code}"
    else:
        assert code == denial, f"{api} with {state}: {code}"
