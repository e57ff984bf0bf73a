"""The controller: the only writer of topics, partitions, assignments, configs, SCRAM
credentials, ACLs and client quotas.

Handlers translate requests into the calls below; nothing else writes the metadata store (a
test checks it). Each change persists to the store, then publishes a new immutable
:class:`MetadataImage` (``controller.image``); listeners — the replica manager — bring the log
dirs from the old image to the new one through ``apply(old, new)``, a generator that yields
between pieces of disk work. The same ``apply`` runs at start-up, from the image of what is on
disk to the stored image, so start-up repairs whatever a crash left half done.

Order of the steps, and why nothing is ever half visible:

- **Create a topic / add partitions**: partitions are created on disk *first* (``apply`` from
  the current image to the image with the change, driven in steps so the event loop keeps
  serving other clients between them), *then* the change is persisted, *then* the new image is
  published. If creating a partition fails (EMFILE, ENOSPC, a file in the way), the same
  ``apply`` runs backwards (new image to old) and deletes what was made; nothing was persisted,
  so nothing is left that could stop the broker from starting. A crash before the persist
  leaves partition dirs no image names: start-up deletes them as strays. A crash after it
  leaves a stored topic whose dirs start-up creates if missing. Until the image is published
  the topic is invisible to clients (they read topics only through the image).
- **Delete a topic**: persisted first and published (the topic is gone for everyone at once),
  then its partitions are deleted on disk in steps. A crash midway leaves strays that start-up
  deletes.
- **Configs**: persisted, published, applied (setting new LogConfigs is quick).

Limits (Kafka's own guards are similar: its controller refuses a request that would generate
more than 10,000 metadata records with POLICY_VIOLATION): a change that would bring this broker
past ``MAX_PARTITIONS`` partitions is refused with POLICY_VIOLATION before anything is
allocated, so a fuzzed count of 15 million costs nothing.

Internal topics (``__consumer_offsets``, ``__transaction_state``): Kafka 4's controller lets a
client delete them or add partitions to them (only ``kafka-topics.sh`` refuses, client-side),
which silently loses every group's offsets or moves groups to other coordinator partitions. We
refuse both: DeleteTopics gets TOPIC_DELETION_DISABLED, CreatePartitions POLICY_VIOLATION, and
altering ``cleanup.policy`` so it no longer compacts gets INVALID_CONFIG — each with a message
naming the topic and the reason.

Concurrency: one event loop; the image is replaced, never changed. A topic with a change in
progress on disk is "busy": a second change to it is refused instead of interleaved.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Generator, Iterator, Mapping, Protocol

from kbroker.metadata.image import MetadataImage, TopicMetadata
from kbroker.metadata.placement import check_replication_factor, reassignment_problem
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.controller")

# The most partitions one broker hosts; beyond it a change is refused before any work.
MAX_PARTITIONS = 200_000
# How long a step of disk work may hold the event loop before the controller yields (seconds).
STEP_BUDGET = 0.01


class ImageListener(Protocol):
    def apply(self, old: MetadataImage, new: MetadataImage) -> Iterator[None]:
        """Bring local state from ``old`` to ``new``; yield between pieces of disk work."""


class Controller:
    def __init__(self, store, node_id: int):
        self._store = store
        self._node_id = node_id
        self._image: MetadataImage = store.load()
        self._listeners: list[ImageListener] = []
        self._busy: set[str] = set()  # topics with a change in progress on disk

    @property
    def image(self) -> MetadataImage:
        """The current metadata; immutable, so a reader keeping it keeps one consistent view."""
        return self._image

    @property
    def cluster_id(self) -> str:
        return self._image.cluster_id

    def subscribe(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    # --- topics --------------------------------------------------------------------------------

    # A single node: every replica list is [this node] (the handlers checked a replication
    # factor of 1 and manual assignments naming this node); the cluster controller
    # (zk_controller) places replicas over the live brokers.

    def live_brokers(self) -> set[int]:
        return {self._node_id}

    def check_replication_factor(self, replication_factor: int) -> None:
        check_replication_factor(replication_factor, 1)

    def create_topic(self, name: str, num_partitions: int, configs: Mapping,
                     replication_factor: int = 1, assignments=None) -> TopicMetadata:
        """Create a topic in one go, for callers that cannot wait: internal topics at first use
        (their partition count is the broker's own config). Requests use create_topic_async."""
        return _run_now(self._create_topic(name, num_partitions, configs))

    async def create_topic_async(self, name: str, num_partitions: int, configs: Mapping,
                                 replication_factor: int = 1, assignments=None) -> TopicMetadata:
        """Create a topic, giving the event loop a turn between steps of disk work."""
        return await _run(self._create_topic(name, num_partitions, configs))

    async def create_partitions(self, name: str, count: int, assignments=None) -> TopicMetadata:
        return await _run(self._create_partitions(name, count))

    def list_reassignments(self, partitions=None) -> dict:
        return {}  # one replica per partition: nothing to move

    async def alter_reassignments(self, wanted, allow_replication_factor_change=True) -> dict:
        """A single node: the only valid target is the current one (this node)."""
        results = {}
        for name, index, target in wanted:
            topic = self._image.topic(name)
            if topic is None or not 0 <= index < topic.num_partitions:
                results[(name, index)] = (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"The partition {name}-{index} does not exist.")
            elif target is None:
                results[(name, index)] = (Errors.NO_REASSIGNMENT_IN_PROGRESS, None)
            elif (problem := reassignment_problem(target, {self._node_id})) is not None:
                results[(name, index)] = (Errors.INVALID_REPLICA_ASSIGNMENT, problem)
            else:
                results[(name, index)] = (Errors.NONE, None)
        return results

    async def elect_leaders(self, preferred: bool, partitions) -> dict:
        """ElectLeaders on a single node: every partition is led by its only (preferred)
        replica, so no election is ever needed."""
        if partitions is None:
            partitions = [(t.name, i) for t in self._image.topics().values()
                          for i in range(t.num_partitions)]
        results = {}
        for name, index in partitions:
            topic = self._image.topic(name)
            if topic is None or not 0 <= index < topic.num_partitions:
                results[(name, index)] = (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"The partition {name}-{index} does not exist.")
            else:
                results[(name, index)] = (Errors.ELECTION_NOT_NEEDED, None)
        return results

    async def delete_topic(self, name: str) -> None:
        await _run(self._delete_topic(name))

    async def alter_topic_configs(self, name: str, configs: Mapping) -> TopicMetadata:
        topic = self._existing(name)
        if topic.is_internal:
            _check_internal_configs(topic, configs)
        await self._persist_async(lambda: self._store.set_topic_configs(name, configs))
        # The image may have moved on during the write (new partition states): change that one.
        changed = self._existing(name).with_configs(configs)
        _run_now(self._publish(self._image.with_topic(changed)))
        return changed

    def check_new_partitions(self, count: int) -> None:
        """POLICY_VIOLATION if ``count`` more partitions would exceed MAX_PARTITIONS."""
        hosted = self._image.partition_count()
        if count > MAX_PARTITIONS - hosted:
            raise KafkaError(Errors.POLICY_VIOLATION,
                             f"Creating {count} partition(s) would bring this broker to "
                             f"{hosted + count} partitions; it hosts at most {MAX_PARTITIONS}.")

    def check_new_partitions_of(self, topic: TopicMetadata, count: int) -> None:
        """Whether ``topic`` may grow to ``count`` partitions (the request checked the count
        itself): never for an internal topic, and within MAX_PARTITIONS."""
        if topic.is_internal:
            raise KafkaError(Errors.POLICY_VIOLATION,
                             f"Cannot add partitions to internal topic {topic.name}: "
                             f"coordinators find their partition by hashing over its partition "
                             f"count, so every group or transaction would move.")
        self.check_new_partitions(count - topic.num_partitions)

    # --- broker configs and producer ids -------------------------------------------------------

    async def alter_broker_configs(self, configs: Mapping, *, cluster_default: bool) -> None:
        await self._persist_async(lambda: self._store.set_broker_configs(
            configs, cluster_default=cluster_default))
        # Topic settings derive from broker configs: listeners re-derive every topic's.
        _run_now(self._publish(self._image.with_broker_configs(
            configs, cluster_default=cluster_default)))

    def allocate_producer_id_block(self, size: int) -> int:
        return self._store.allocate_producer_id_block(size)

    # --- SCRAM credentials ---------------------------------------------------------------------

    async def alter_scram_credentials(self, upserts: Mapping[tuple[str, str], str],
                                deletions: set[tuple[str, str]]) -> None:
        """Set ``(user, mechanism) -> credential string`` and remove ``(user, mechanism)`` pairs,
        in one persisted change (the handler validated them)."""
        credentials = {user: dict(m) for user, m in self._image.scram_credentials.items()}
        for user, mechanism in deletions:
            credentials.get(user, {}).pop(mechanism, None)
        for (user, mechanism), credential in upserts.items():
            credentials.setdefault(user, {})[mechanism] = credential
        credentials = {user: m for user, m in credentials.items() if m}
        await self._persist_async(lambda: self._store.set_scram_credentials(credentials))
        _run_now(self._publish(self._image.with_scram_credentials(credentials)))

    # --- ACLs ---------------------------------------------------------------------------------

    async def create_acls(self, acls) -> dict:
        """Add ACL bindings (validated by the handler); one already present is not duplicated.
        Returns ACL -> KafkaError for each one not stored: none here, the local store writes
        every ACL in one file (a failed write raises KafkaError for all); the ZooKeeper
        controller writes one resource at a time and can fail some."""
        current = list(self._image.acls)
        present = set(current)
        current += [a for a in dict.fromkeys(tuple(a) for a in acls) if a not in present]
        await self._set_acls(current)
        return {}

    async def delete_acls(self, acls) -> dict:
        """Remove exactly these ACL bindings; returns those not removed, as create_acls."""
        gone = {tuple(a) for a in acls}
        await self._set_acls([a for a in self._image.acls if a not in gone])
        return {}

    async def _set_acls(self, acls) -> None:
        await self._persist_async(lambda: self._store.set_acls(acls))
        _run_now(self._publish(self._image.with_acls(acls)))

    # --- feature levels (UpdateFeatures) ------------------------------------------------------

    async def update_features(self, levels: Mapping[str, int]) -> None:
        """Finalize these feature levels (validated by the handler), kept across restarts."""
        merged = {**self._image.finalized_features, **levels}
        if merged == dict(self._image.finalized_features):
            return
        epoch = None

        def write():
            nonlocal epoch
            epoch = self._store.set_finalized_features(merged)
        await self._persist_async(write)
        _run_now(self._publish(self._image.with_finalized_features(merged, epoch)))

    # --- client quotas -------------------------------------------------------------------------

    async def alter_client_quotas(self, changes: Mapping[tuple, Mapping[str, float | None]]
                                  ) -> None:
        """Apply ``entity -> {key: value, or None to remove}`` (validated by the handler) in one
        persisted change; an entity left with no quota disappears, as in Kafka."""
        quotas = {entity: dict(values) for entity, values in self._image.client_quotas.items()}
        changed = []
        for entity, ops in changes.items():
            entity = tuple(sorted(entity))
            values = quotas.setdefault(entity, {})
            before = dict(values)
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if values != before:
                changed.append(entity)
        if not changed:
            return
        quotas = {entity: values for entity, values in quotas.items() if values}
        await self._persist_async(lambda: self._store.set_client_quotas(quotas, changed))
        _run_now(self._publish(self._image.with_client_quotas(quotas)))

    # --- the steps -----------------------------------------------------------------------------

    def _create_topic(self, name, num_partitions, configs) -> Generator[None, None, TopicMetadata]:
        if name in self._busy or self._image.topic(name) is not None:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        self.check_new_partitions(num_partitions)
        topic_id = uuid.uuid4()
        while topic_id in self._image.topics_by_id or topic_id.int == 0:
            topic_id = uuid.uuid4()
        topic = TopicMetadata(name, topic_id, ((self._node_id,),) * num_partitions, configs)
        with self._busy_topic(name):
            before = self._image
            after = before.with_topic(topic)
            yield from self._prepare(before, after, f"create topic {name}")
            try:
                self._persist(lambda: self._store.create_topic(topic))
            except KafkaError:
                yield from self._apply(after, before)
                raise
            yield from self._publish(self._image.with_topic(topic), prepared=after)
        return topic

    def _create_partitions(self, name, count) -> Generator[None, None, TopicMetadata]:
        topic = self._existing(name)
        self.check_new_partitions_of(topic, count)
        if name in self._busy:
            raise KafkaError(Errors.INVALID_REQUEST, f"Topic '{name}' is being changed.")
        added = count - topic.num_partitions
        grown = topic.with_assignments(topic.assignments + ((self._node_id,),) * added)
        with self._busy_topic(name):
            before = self._image
            after = before.with_topic(grown)
            yield from self._prepare(before, after, f"add partitions to {name}")
            try:
                self._persist(lambda: self._store.set_assignments(name, grown.assignments))
            except KafkaError:
                yield from self._apply(after, before)
                raise
            # Configs may have changed while partitions were being made: keep the newest.
            current = self._image.topic(name).with_assignments(grown.assignments)
            yield from self._publish(self._image.with_topic(current), prepared=after)
        return current

    def _delete_topic(self, name) -> Generator[None, None, None]:
        topic = self._existing(name)
        if topic.is_internal:
            raise KafkaError(Errors.TOPIC_DELETION_DISABLED,
                             f"Topic {name} is an internal topic and cannot be deleted: it holds "
                             f"the state of the broker's coordinators.")
        if name in self._busy:
            raise KafkaError(Errors.INVALID_REQUEST, f"Topic '{name}' is being changed.")
        self._persist(lambda: self._store.delete_topic(name))
        with self._busy_topic(name):  # its partition dirs are still on disk until apply ends
            yield from self._publish(self._image.without_topic(name))

    def _existing(self, name: str) -> TopicMetadata:
        topic = self._image.topic(name)
        if topic is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                             f"The topic '{name}' does not exist.")
        return topic

    def _busy_topic(self, name: str):
        controller = self

        class Busy:
            def __enter__(self):
                controller._busy.add(name)

            def __exit__(self, *exc):
                controller._busy.discard(name)

        return Busy()

    def _prepare(self, before: MetadataImage, after: MetadataImage, what: str):
        """Make ``after``'s partitions on disk before anything is persisted; on failure undo it
        with the same apply, backwards, and refuse with KAFKA_STORAGE_ERROR."""
        try:
            yield from self._apply(before, after)
        except OSError as exc:
            log.error("cannot %s: %s; deleting the partitions made so far", what, exc)
            yield from self._apply(after, before)
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                             f"Could not {what}: {exc.strerror or exc} ({exc.filename or ''}); "
                             f"nothing was created.") from None

    async def _persist_async(self, write) -> None:
        """A change an admin request makes (configs, credentials, ACLs, quotas, features). The
        local store writes one small file at once; the ZooKeeper controller's round trips run in
        a thread, so the broker keeps serving while they take."""
        self._persist(write)

    def _persist(self, write) -> None:
        try:
            write()
        except OSError as exc:
            log.error("cannot write the metadata store: %s; the change is refused", exc)
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                             f"Could not persist the change: {exc.strerror or exc}") from None

    def _publish(self, new: MetadataImage, prepared: MetadataImage | None = None):
        """Make ``new`` the current image, then let listeners apply it. ``prepared`` is the image
        the disk already matches (creations apply before persisting); from there to ``new`` is
        usually nothing, or a config change that landed meanwhile."""
        old = self._image if prepared is None else prepared
        self._image = new
        try:
            yield from self._apply(old, new)
        except OSError as exc:  # the change is durable: start-up finishes what is left
            log.error("applying a metadata change failed: %s; a restart completes it", exc)

    def _apply(self, old: MetadataImage, new: MetadataImage):
        for listener in self._listeners:
            yield from listener.apply(old, new)


def _check_internal_configs(topic: TopicMetadata, configs: Mapping) -> None:
    policy = configs.get("cleanup.policy", "compact")
    if "compact" not in [p.strip() for p in policy.split(",")]:
        raise KafkaError(Errors.INVALID_CONFIG,
                         f"cleanup.policy of internal topic {topic.name} must include 'compact': "
                         f"with '{policy}' retention would delete coordinator state.")


async def _run(steps: Generator):
    """Drive ``steps`` to the end in a task of its own, giving the event loop a turn whenever a
    step ran past STEP_BUDGET. Shielded: a client that goes away does not leave a change half
    made (the change finishes, or fails and undoes itself, either way)."""
    async def drive():
        started = time.monotonic()
        try:
            while True:
                next(steps)
                if time.monotonic() - started > STEP_BUDGET:
                    await asyncio.sleep(0)
                    started = time.monotonic()
        except StopIteration as done:
            return done.value

    return await asyncio.shield(asyncio.ensure_future(drive()))


def _run_now(steps: Generator):
    try:
        while True:
            next(steps)
    except StopIteration as done:
        return done.value
