"""CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6, CreatePartitions (key 37) v0-3.

Thin: each handler checks what only the request can tell (a name given twice in one request is
INVALID_REQUEST "Duplicate topic name."; the principal's CREATE / DELETE / ALTER on the topic,
checked before its existence so it does not leak) and hands the rest to the controller, whose
rules (:mod:`kbroker.metadata.topic_policy`) are Kafka's ``ReplicationControlManager``'s in
Kafka's order: illegal or colliding names, existing topics, config validation, manual
assignments over the live brokers, default partition counts and replication factors, the
partition limit (POLICY_VIOLATION before anything is made), internal topics (never deleted or
grown). ``validate_only`` (v1+) answers the same without creating anything. CreateTopics v5+
(KIP-525) returns the partition count, replication factor and the effective configs with their
sources; v7 the topic id (KIP-516). A creation answers once this broker holds the partitions;
one that fails on disk (descriptors, space) is undone and answered KAFKA_STORAGE_ERROR.

DeleteTopics: by name (v0-5, ``topic_names``) or by name or id (v6, ``topics``, KIP-516). Unknown
names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, duplicates and
name-plus-id INVALID_REQUEST. With ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, as Kafka). Internal topics get the same
TOPIC_DELETION_DISABLED with a message naming the topic (Kafka 4's controller deletes them,
losing every group's state). The topic leaves the metadata store first, then its logs are
deleted in steps; a crash between the two leaves stray logs that start-up removes.

CreatePartitions: the count must exceed the current one (INVALID_PARTITIONS with Kafka's "Topic
currently has N partitions, which is higher than the requested M." / "Topic already has N
partition(s)."); assignments, if given, one replica list of live brokers per new partition.

Not supported: CreateTopicPolicy / AlterConfigPolicy plugins, controller mutation quotas
(throttle_time_ms is always 0); topic_config_error_code is always NONE.
"""

from __future__ import annotations

import logging

from types import SimpleNamespace

from kbroker.handlers import handles
from kbroker.metadata.topic_policy import NewTopic
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.primitives import ZERO_UUID
from kbroker.security.authorizer import Op, ResourceType, allowed, check, may_create_topic

DENIED = Errors.TOPIC_AUTHORIZATION_FAILED

log = logging.getLogger("kbroker.topics")


# --- CreateTopics ------------------------------------------------------------------------------

@handles("CreateTopics")
async def handle_create_topics(ctx, request):
    from kbroker.protocol.messages.create_topics import CreateTopicsResponse as R

    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    results, reported = [], set()
    for wanted in request.topics:
        name = wanted.name
        if counts[name] > 1:
            if name not in reported:
                reported.add(name)
                results.append(R.CreatableTopicResult(
                    name=name, error_code=Errors.INVALID_REQUEST.code,
                    error_message="Duplicate topic name."))
            continue
        try:
            if not may_create_topic(ctx, name):
                raise KafkaError(DENIED, f"Not authorized to create {name}.")
            topic = await ctx.controller.create_topic(NewTopic(
                name, wanted.num_partitions, wanted.replication_factor,
                {a.partition_index: list(a.broker_ids) for a in wanted.assignments}
                if wanted.assignments else None,
                {c.name: c.value for c in wanted.configs}), request.validate_only)
        except KafkaError as exc:
            log.info("CreateTopics %s from %s refused: %s", name, ctx.client_id, exc)
            results.append(R.CreatableTopicResult(name=name, error_code=exc.code,
                                                  error_message=exc.message))
            continue
        if not request.validate_only:
            log.info("created topic %s with %d partition(s) (id %s), configs %s", name,
                     topic.num_partitions, topic.topic_id, dict(topic.configs))
        from kbroker.handlers.configs import describe_topic_configs
        entries = describe_topic_configs(ctx.config, dict(topic.configs))
        results.append(R.CreatableTopicResult(
            name=name, topic_id=ZERO_UUID if request.validate_only else topic.topic_id,
            error_code=Errors.NONE.code, error_message=None,
            num_partitions=topic.num_partitions,
            replication_factor=len(topic.assignments[0]) if topic.assignments else 0,
            configs=[R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                             config_source=int(e.source),
                                             is_sensitive=e.is_sensitive)
                     for e in entries]))
    return R(throttle_time_ms=0, topics=results)


# --- DeleteTopics ------------------------------------------------------------------------------

@handles("DeleteTopics")
async def handle_delete_topics(ctx, request):
    from kbroker.protocol.messages.delete_topics import DeleteTopicsResponse as R

    store = ctx.metadata
    # (name, id) pairs as requested; v6 may carry either, older versions only names.
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    if not ctx.config.get("delete.topic.enable"):
        error = Errors.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else Errors.INVALID_REQUEST
        return R(throttle_time_ms=0, responses=[
            R.DeletableTopicResult(name=name, topic_id=topic_id, error_code=error.code,
                                   error_message="Topic deletion is disabled.")
            for name, topic_id in wanted])

    results = []

    def answer(name, topic_id, error=Errors.NONE, message=None):
        results.append(R.DeletableTopicResult(name=name, topic_id=topic_id,
                                              error_code=error.code, error_message=message))

    def key(name, topic_id):  # how a request names a topic; None when it names none
        if name is not None and topic_id == ZERO_UUID:
            return name
        if name is None and topic_id != ZERO_UUID:
            return topic_id
        return None

    keys = [key(name, topic_id) for name, topic_id in wanted]
    duplicates = {k for k in keys if k is not None and keys.count(k) > 1}
    answered_duplicates = set()
    to_delete: dict = {}  # name -> topic id, in request order
    for (name, topic_id), k in zip(wanted, keys):
        if k in duplicates:  # Kafka answers a duplicate once and ignores its other mentions
            if k not in answered_duplicates:
                answered_duplicates.add(k)
                by_name = isinstance(k, str)
                answer(name if by_name else None, ZERO_UUID if by_name else topic_id,
                       Errors.INVALID_REQUEST,
                       "Duplicate topic name." if by_name else "Duplicate topic id.")
            continue
        if name is not None and topic_id != ZERO_UUID:
            answer(name, topic_id, Errors.INVALID_REQUEST,
                   "You may not specify both topic name and topic id.")
        elif name is None and topic_id == ZERO_UUID:
            answer(None, ZERO_UUID, Errors.INVALID_REQUEST,
                   "Neither topic name nor id were specified.")
        elif name is not None:
            topic = store.topic(name)
            if not allowed(ctx, Op.DELETE, ResourceType.TOPIC, name):  # before existence
                answer(name, ZERO_UUID, DENIED, DENIED.message)
            elif topic is None:
                answer(name, ZERO_UUID, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                       Errors.UNKNOWN_TOPIC_OR_PARTITION.message)
            elif topic.name in to_delete:
                answer(name, topic.topic_id, Errors.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                to_delete[topic.name] = topic.topic_id
        else:
            topic = store.topic_by_id(topic_id)
            if topic is None or not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, topic.name):
                answer(None, topic_id, Errors.UNKNOWN_TOPIC_ID, Errors.UNKNOWN_TOPIC_ID.message)
            elif not allowed(ctx, Op.DELETE, ResourceType.TOPIC, topic.name):
                answer(None, topic_id, DENIED, DENIED.message)
            elif topic.name in to_delete:
                answer(topic.name, topic_id, Errors.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                to_delete[topic.name] = topic.topic_id
    for name, topic_id in to_delete.items():
        try:
            await ctx.controller.delete_topic(name)
        except KafkaError as exc:
            error = exc.error
            if error == Errors.TOPIC_DELETION_DISABLED and ctx.api_version < 3:
                error = Errors.INVALID_REQUEST  # as Kafka: v0-2 clients do not know the code
            log.warning("DeleteTopics %s from %s refused: %s", name, ctx.client_id, exc)
            answer(name, topic_id, error, exc.message)
            continue
        log.info("deleted topic %s (id %s) at the request of %s", name, topic_id, ctx.client_id)
        answer(name, topic_id)
    return R(throttle_time_ms=0, responses=results)


# --- CreatePartitions --------------------------------------------------------------------------

@handles("CreatePartitions")
async def handle_create_partitions(ctx, request):
    from kbroker.protocol.messages.create_partitions import CreatePartitionsResponse as R

    names = [t.name for t in request.topics]
    results, reported = [], set()
    for wanted in request.topics:
        name = wanted.name
        if names.count(name) > 1:
            if name not in reported:
                reported.add(name)
                results.append(R.CreatePartitionsTopicResult(
                    name=name, error_code=Errors.INVALID_REQUEST.code,
                    error_message="Duplicate topic name."))
            continue
        old = (ctx.metadata.topic(name) or SimpleNamespace(num_partitions=0)).num_partitions
        try:
            check(ctx, Op.ALTER, ResourceType.TOPIC, name)  # before existence: it must not leak
            await ctx.controller.create_partitions(
                name, wanted.count, [list(a.broker_ids) for a in wanted.assignments]
                if wanted.assignments is not None else None, request.validate_only)
        except KafkaError as exc:
            log.info("CreatePartitions %s from %s refused: %s", name, ctx.client_id, exc)
            results.append(R.CreatePartitionsTopicResult(name=name, error_code=exc.code,
                                                         error_message=exc.message))
            continue
        if not request.validate_only:
            log.info("topic %s now has %d partition(s) (was %d)", name, wanted.count, old)
        results.append(R.CreatePartitionsTopicResult(name=name, error_code=Errors.NONE.code,
                                                     error_message=None))
    return R(throttle_time_ms=0, results=results)
