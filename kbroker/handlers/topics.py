"""CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6, CreatePartitions (key 37) v0-3.

Behaviour follows Kafka's KRaft controller (ControllerApis, ReplicationControlManager), with one
broker: every partition's replica list is ``[this node]``.

CreateTopics, per topic, in Kafka's order: a name given twice in one request gets INVALID_REQUEST
("Duplicate topic name."); an illegal name, or one colliding with an existing topic once '.' and
'_' are unified, INVALID_TOPIC_EXCEPTION; an existing one TOPIC_ALREADY_EXISTS; a null config
value or a config that fails validation INVALID_CONFIG naming the key. Then the layout: manual
assignments need num_partitions and replication_factor of -1 and may only name this node, once,
for partitions 0..n-1 (INVALID_REPLICA_ASSIGNMENT otherwise); without them -1 means
``num.partitions`` / ``default.replication.factor``, 0 or below -1 is INVALID_PARTITIONS /
INVALID_REPLICATION_FACTOR, and a replication factor above 1 is INVALID_REPLICATION_FACTOR with
Kafka's "cannot be reached because only 1 broker(s) are registered" message. ``validate_only``
(v1+) answers the same without creating anything. v5+ (KIP-525) returns the partition count,
replication factor and the effective configs with their sources; v7 the topic id (KIP-516).

DeleteTopics: by name (v0-5, ``topic_names``) or by name or id (v6, ``topics``, KIP-516). Unknown
names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, duplicates and
name-plus-id INVALID_REQUEST. With ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, as Kafka). Internal topics
(``__consumer_offsets``, ``__transaction_state``) get the same TOPIC_DELETION_DISABLED with a
message naming the topic: Kafka 4's controller deletes them (only ``kafka-topics.sh`` refuses,
client-side), losing every group's state; we refuse (see kbroker.metadata.controller). The topic
leaves the metadata store first, then its logs are deleted in steps; a crash between the two
leaves stray logs that start-up removes.

CreatePartitions: the count must exceed the current one (INVALID_PARTITIONS with Kafka's "Topic
currently has N partitions, which is higher than the requested M." / "Topic already has N
partition(s)."); assignments, if given, must be one ``[this node]`` list per new partition.
An internal topic cannot grow (POLICY_VIOLATION: coordinators hash over its partition count).
``validate_only`` creates nothing.

Partitions at scale: creation never holds the event loop (the controller creates partition dirs
in steps and yields between them); a count that would take the broker past
``kbroker.metadata.controller.MAX_PARTITIONS`` is POLICY_VIOLATION before anything is made; a
creation that fails on disk (descriptors, space) is undone and answered KAFKA_STORAGE_ERROR.

Not supported: CreateTopicPolicy / AlterConfigPolicy plugins, controller mutation quotas
(throttle_time_ms is always 0), authorization (no ACLs yet: every topic is creatable and its
configs describable, so topic_config_error_code is always NONE).
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.metadata.image import topic_name_problem
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
            partitions, replication_factor, configs, assignments = _check_new_topic(ctx, wanted)
        except KafkaError as exc:
            log.info("CreateTopics %s from %s refused: %s", name, ctx.client_id, exc)
            results.append(R.CreatableTopicResult(name=name, error_code=exc.code,
                                                  error_message=exc.message))
            continue
        topic_id = ZERO_UUID
        if not request.validate_only:
            try:
                topic = await ctx.controller.create_topic_async(
                    name, partitions, configs, replication_factor, assignments)
            except KafkaError as exc:
                log.warning("CreateTopics %s from %s failed: %s", name, ctx.client_id, exc)
                results.append(R.CreatableTopicResult(name=name, error_code=exc.code,
                                                      error_message=exc.message))
                continue
            topic_id = topic.topic_id
            log.info("created topic %s with %d partition(s) (id %s), configs %s", name,
                     partitions, topic_id, configs)
        from kbroker.handlers.configs import describe_topic_configs
        entries = describe_topic_configs(ctx.config, configs)
        results.append(R.CreatableTopicResult(
            name=name, topic_id=topic_id, error_code=Errors.NONE.code, error_message=None,
            num_partitions=partitions, replication_factor=replication_factor,
            configs=[R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                             config_source=int(e.source),
                                             is_sensitive=e.is_sensitive)
                     for e in entries]))
    return R(throttle_time_ms=0, topics=results)


def _check_new_topic(ctx, wanted) -> tuple[int, int, dict, list | None]:
    """(partitions, replication factor, config overrides, manual assignments or None) of a
    topic to create, or KafkaError."""
    name = wanted.name
    if not may_create_topic(ctx, name):
        raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to create {name}.")
    problem = topic_name_problem(name)
    if problem is not None:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, problem)
    store = ctx.metadata
    if store.topic(name) is not None:
        raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if "." in name or "_" in name:
        unified = name.replace(".", "_")
        for existing in store.topics():
            if existing.replace(".", "_") == unified:
                raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {existing}")
    nulls = [c.name for c in wanted.configs if c.value is None]
    if nulls:
        raise KafkaError(Errors.INVALID_CONFIG,
                         "Null value not supported for topic configs: " + ",".join(nulls))
    from kbroker.handlers.configs import validate_overrides
    configs = validate_overrides(ctx.config, {c.name: c.value for c in wanted.configs})

    if wanted.assignments:
        assignments = _manual_layout(ctx, wanted)
        ctx.controller.check_new_partitions(len(assignments))
        return len(assignments), len(assignments[0]), configs, assignments
    if wanted.replication_factor < -1 or wanted.replication_factor == 0:
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default "
                         "value.")
    if wanted.num_partitions < -1 or wanted.num_partitions == 0:
        raise KafkaError(Errors.INVALID_PARTITIONS,
                         "Number of partitions was set to an invalid non-positive value.")
    partitions = wanted.num_partitions
    if partitions == -1:
        partitions = ctx.config.get("num.partitions")
    replication_factor = wanted.replication_factor
    if replication_factor == -1:
        replication_factor = ctx.config.get("default.replication.factor")
    ctx.controller.check_new_partitions(partitions)
    ctx.controller.check_replication_factor(replication_factor)
    return partitions, replication_factor, configs, None


def _manual_layout(ctx, wanted) -> list[list[int]]:
    """Check manual assignments (live brokers, each once); the replica lists by partition."""
    if wanted.replication_factor != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                 "but replication factor was not set to -1.")
    if wanted.num_partitions != -1:
        raise KafkaError(Errors.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                 "but numPartitions was not set to -1.")
    layout = {}
    live = ctx.controller.live_brokers()
    for assignment in wanted.assignments:
        if assignment.partition_index in layout:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             "Found multiple manual partition assignments for partition "
                             f"{assignment.partition_index}")
        layout[assignment.partition_index] = _check_replicas(live, assignment.broker_ids)
    if set(layout) != set(range(len(layout))):
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         "partitions should be a consecutive 0-based integer sequence")
    return [layout[p] for p in range(len(layout))]


def _check_replicas(live: set[int], broker_ids) -> list[int]:
    """Kafka's validateManualPartitionAssignment: live brokers, each named once."""
    if not broker_ids:
        raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for node in broker_ids:
        if node not in live:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {node}, but no "
                             "such broker is registered.")
    seen = set()
    for node in broker_ids:
        if node in seen:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes the broker "
                             f"{node} more than once.")
        seen.add(node)
    return list(broker_ids)


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
        try:
            topic = _check_new_partitions(ctx, wanted)
        except KafkaError as exc:
            log.info("CreatePartitions %s from %s refused: %s", name, ctx.client_id, exc)
            results.append(R.CreatePartitionsTopicResult(name=name, error_code=exc.code,
                                                         error_message=exc.message))
            continue
        if not request.validate_only:
            old = topic.num_partitions
            try:
                topic = await ctx.controller.create_partitions(
                    name, wanted.count, [list(a.broker_ids) for a in wanted.assignments]
                    if wanted.assignments is not None else None)
            except KafkaError as exc:
                log.warning("CreatePartitions %s from %s failed: %s", name, ctx.client_id, exc)
                results.append(R.CreatePartitionsTopicResult(name=name, error_code=exc.code,
                                                             error_message=exc.message))
                continue
            log.info("topic %s now has %d partition(s) (was %d)", name, wanted.count, old)
        results.append(R.CreatePartitionsTopicResult(name=name, error_code=Errors.NONE.code,
                                                     error_message=None))
    return R(throttle_time_ms=0, results=results)


def _check_new_partitions(ctx, wanted):
    check(ctx, Op.ALTER, ResourceType.TOPIC, wanted.name)  # before existence: it must not leak
    topic = ctx.metadata.topic(wanted.name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    current = topic.num_partitions
    if wanted.count == current:
        raise KafkaError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if wanted.count < current:
        raise KafkaError(Errors.INVALID_PARTITIONS,
                         f"Topic currently has {current} partitions, which is higher than the "
                         f"requested {wanted.count}.")
    if wanted.assignments is not None:
        added = wanted.count - current
        if len(wanted.assignments) != added:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {added} additional partition(s), but only "
                             f"{len(wanted.assignments)} assignment(s) were specified.")
        live = ctx.controller.live_brokers()
        for assignment in wanted.assignments:
            _check_replicas(live, assignment.broker_ids)
    ctx.controller.check_new_partitions_of(topic, wanted.count)
    return topic
