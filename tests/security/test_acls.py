"""The ACL authorizer over real sockets with real clients (SASL PLAIN users): allowed, denied,
prefixed, deny wins, super users, allow.everyone.if.no.acl.found, and the ACL APIs through
confluent-kafka's admin client."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)

from tests.security.conftest import _broker_factory

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _start(directory, **more):
    make, started = _broker_factory(directory)
    broker = make({"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, **{
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin", **more})
    return broker, started


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    broker, started = _start(tmp_path_factory.mktemp("acl"))
    yield broker
    for process in started:
        process.kill()


def conf(broker, user):
    return {"bootstrap.servers": broker.endpoints["SASL_PLAINTEXT"],
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def admin(broker, user="admin"):
    return AdminClient(conf(broker, user))


def create_topic(broker, name):
    client = admin(broker)  # kept referenced: the futures die with their client
    client.create_topics([NewTopic(name, 1, 1)])[name].result(20)


def add_acls(broker, *bindings):
    client = admin(broker)
    for future in client.create_acls(list(bindings)).values():
        future.result(20)


def binding(rtype, name, principal, op, permission=AclPermissionType.ALLOW,
            pattern=ResourcePatternType.LITERAL, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def produce_error(broker, user, topic):
    """None if one record is delivered, else the delivery error's code."""
    errors = []
    producer = Producer({**conf(broker, user), "message.timeout.ms": 10000, "retries": 0})
    producer.produce(topic, b"v", callback=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert errors, "no delivery report"
    return None if errors[0] is None else errors[0].code()


def test_produce_allowed_denied_and_deny_wins(acl_broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(acl_broker, topic)
    assert produce_error(acl_broker, "alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
    assert produce_error(acl_broker, "alice", topic) is None
    assert produce_error(acl_broker, "bob", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A DENY for everyone beats alice's ALLOW.
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:*", AclOperation.ALL,
                                 AclPermissionType.DENY))
    assert produce_error(acl_broker, "alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(acl_broker, "admin", topic) is None  # super user


def test_prefixed_acl(acl_broker):
    prefix = f"p{uuid.uuid4().hex[:6]}-"
    create_topic(acl_broker, prefix + "a")
    create_topic(acl_broker, "x" + prefix)
    add_acls(acl_broker, binding(ResourceType.TOPIC, prefix, "User:bob", AclOperation.WRITE,
                                 pattern=ResourcePatternType.PREFIXED))
    assert produce_error(acl_broker, "bob", prefix + "a") is None
    assert produce_error(acl_broker, "bob", "x" + prefix) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_topics_without_describe(acl_broker):
    topic, hidden = f"seen-{uuid.uuid4().hex[:6]}", f"hidden-{uuid.uuid4().hex[:6]}"
    create_topic(acl_broker, topic)
    create_topic(acl_broker, hidden)
    # READ implies DESCRIBE.
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ))
    bob = admin(acl_broker, "bob")
    names = set(bob.list_topics(timeout=20).topics)
    assert topic in names and hidden not in names
    # Named explicitly: denied whether it exists or not (existence does not leak).
    for name in (hidden, "does-not-exist-" + hidden):
        md = bob.list_topics(topic=name, timeout=20)
        assert md.topics[name].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_consume_needs_read_on_topic_and_group(acl_broker):
    topic, group = f"c-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(acl_broker, topic)
    assert produce_error(acl_broker, "admin", topic) is None
    # DESCRIBE lets alice see the topic; fetching it needs READ. (READ on the group: librdkafka
    # looks up its coordinator even when partitions are assigned by hand.)
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE),
             binding(ResourceType.GROUP, group, "User:alice", AclOperation.READ))
    consumer = Consumer({**conf(acl_broker, "alice"), "group.id": group,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = None
    for _ in range(20):
        message = consumer.poll(1)
        if message is not None:
            break
    assert message is not None and message.error().code() == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer.close()
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ))
    consumer = Consumer({**conf(acl_broker, "alice"), "group.id": group,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = None
    for _ in range(20):
        message = consumer.poll(1)
        if message is not None:
            break
    assert message is not None and message.error() is None and message.value() == b"v"
    consumer.close()


def test_acl_apis(acl_broker):
    topic = f"api-{uuid.uuid4().hex[:6]}"
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
             binding(ResourceType.GROUP, topic, "User:alice", AclOperation.READ))
    root = admin(acl_broker)
    described = root.describe_acls(AclBindingFilter(
        ResourceType.ANY, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(20)
    assert {(b.restype, b.principal, b.operation) for b in described} == {
        (ResourceType.TOPIC, "User:alice", AclOperation.READ),
        (ResourceType.GROUP, "User:alice", AclOperation.READ)}
    # Without ALTER on the cluster alice may not change ACLs.
    alice, root = admin(acl_broker, "alice"), admin(acl_broker)
    with pytest.raises(KafkaException) as denied:
        for f in alice.create_acls([binding(
                ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE)]).values():
            f.result(20)
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deleted = root.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY)])
    assert len(list(deleted.values())[0].result(20)) == 1
    remaining = root.describe_acls(AclBindingFilter(
        ResourceType.ANY, topic, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(20)
    assert [b.restype for b in remaining] == [ResourceType.GROUP]


def test_one_invalid_acl_fails_alone_and_the_others_are_stored(acl_broker):
    """CreateAcls answers per creation (AclCreationResult): confluent-kafka's future for the
    binding Kafka refuses fails, the others succeed and DescribeAcls lists them."""
    topic = f"per-acl-{uuid.uuid4().hex[:6]}"
    read = binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ)
    no_type = binding(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE)  # no "User:"
    group = binding(ResourceType.GROUP, topic, "User:bob", AclOperation.READ,
                    pattern=ResourcePatternType.PREFIXED)
    client = admin(acl_broker)
    futures = client.create_acls([read, no_type, group])
    futures[read].result(20)
    futures[group].result(20)
    with pytest.raises(KafkaException) as refused:
        futures[no_type].result(20)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Could not parse principal" in refused.value.args[0].str()
    described = client.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(20)
    assert {b for b in described if b.name == topic} == {read, group}


def test_allow_everyone_if_no_acl_found(tmp_path):
    broker, started = _start(tmp_path, **{"allow.everyone.if.no.acl.found": "true"})
    try:
        open_topic, guarded = "open-topic", "guarded-topic"
        create_topic(broker, open_topic)
        create_topic(broker, guarded)
        add_acls(broker, binding(ResourceType.TOPIC, guarded, "User:bob", AclOperation.WRITE))
        assert produce_error(broker, "alice", open_topic) is None
        assert produce_error(broker, "alice", guarded) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        for process in started:
            process.kill()


def test_authorized_operations_for_the_asking_principal(acl_broker):
    group = f"ops-{uuid.uuid4().hex[:6]}"
    add_acls(acl_broker, binding(ResourceType.GROUP, group, "User:bob", AclOperation.READ))
    bob = admin(acl_broker, "bob")
    cluster = bob.describe_cluster(include_authorized_operations=True).result(20)
    assert not cluster.authorized_operations  # bob holds no cluster ACL
    root = admin(acl_broker)
    assert AclOperation.ALTER in root.describe_cluster(
        include_authorized_operations=True).result(20).authorized_operations  # super user
    described = bob.describe_consumer_groups([group], include_authorized_operations=True)
    ops = set(described[group].result(20).authorized_operations)
    assert ops == {AclOperation.READ, AclOperation.DESCRIBE}


def test_idempotent_producer_needs_write_on_some_topic(tmp_path):
    # A broker of its own: the module's broker has given bob WRITE on other topics.
    acl_broker, started = _start(tmp_path)
    try:
        _idempotent_producer(acl_broker)
    finally:
        for process in started:
            process.kill()


def _idempotent_producer(acl_broker):
    topic = "idem"
    create_topic(acl_broker, topic)
    # DESCRIBE only: bob sees the topic but may write nowhere.
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.DESCRIBE))
    errors = []
    producer = Producer({**conf(acl_broker, "bob"), "enable.idempotence": True,
                         "message.timeout.ms": 10000,
                         "error_cb": lambda err: errors.append(err.code())})
    try:
        producer.produce(topic, b"v")
        producer.flush(10)
    except KafkaException as fatal:  # librdkafka makes the failed PID request fatal
        errors.append(fatal.args[0].code())
    # InitProducerId without IDEMPOTENT_WRITE on the cluster nor WRITE on any topic.
    assert KafkaError.CLUSTER_AUTHORIZATION_FAILED in errors, errors
    add_acls(acl_broker, binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.WRITE))
    delivered = []
    producer = Producer({**conf(acl_broker, "bob"), "enable.idempotence": True,
                         "message.timeout.ms": 10000})
    producer.produce(topic, b"v", callback=lambda err, msg: delivered.append(err))
    producer.flush(20)
    assert delivered == [None]


def test_acl_apis_without_an_authorizer_answer_security_disabled(secure_broker):
    broker = secure_broker({"PLAINTEXT": "PLAINTEXT"})
    client = AdminClient({"bootstrap.servers": broker.endpoints["PLAINTEXT"]})
    with pytest.raises(KafkaException) as refused:
        for future in client.create_acls([binding(ResourceType.TOPIC, "t", "User:alice",
                                                  AclOperation.READ)]).values():
            future.result(20)
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_describe_topic_partitions_filters_by_describe(acl_broker):
    """DescribeTopicPartitions (issue 36): a named topic without DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED whether or not it exists, after the described ones, without id or
    operations; listing every topic leaves it out; a described one carries its operations."""
    from kbroker.protocol import messages
    from tests.integration.clients import Wire
    from tests.security.test_denials import authenticate, handshake

    visible, hidden = f"dtp-visible-{uuid.uuid4().hex[:6]}", f"dtp-hidden-{uuid.uuid4().hex[:6]}"
    for name in (visible, hidden):
        create_topic(acl_broker, name)
    add_acls(acl_broker, binding(ResourceType.TOPIC, visible, "User:alice",
                                 AclOperation.DESCRIBE))
    cls = messages.request_class(75)

    def describe(names):
        with Wire(acl_broker.endpoints["SASL_PLAINTEXT"]) as wire:
            assert handshake(wire, "PLAIN").error_code == 0
            assert authenticate(wire, b"\0alice\0alice-secret").error_code == 0
            return wire.call(75, 0, cls(topics=[cls.TopicRequest(name=n) for n in names],
                                        response_partition_limit=100, cursor=None)).topics

    absent = f"dtp-absent-{uuid.uuid4().hex[:6]}"
    named = describe([hidden, visible, absent])
    assert [(t.error_code, t.name) for t in named] == [(0, visible), (29, absent), (29, hidden)] \
        or [(t.error_code, t.name) for t in named] == [(0, visible), (29, hidden), (29, absent)]
    assert named[0].topic_authorized_operations == 1 << 8  # DESCRIBE only
    assert all(t.topic_id.int == 0 and not t.partitions
               and t.topic_authorized_operations == -(2**31) for t in named[1:])
    listed = [t.name for t in describe([]) if t.name in (visible, hidden)]
    assert listed == [visible]
