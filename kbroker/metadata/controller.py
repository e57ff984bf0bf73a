"""The controller: the one pipeline every metadata change takes, in both modes.

A change goes through four steps, one change at a time (an asyncio lock serialises them):

1. **validate** the request against the current image (all policy lives here and in
   :mod:`topic_policy` / :mod:`partition_changes`, none in handlers) and express it as a
   :class:`MetadataDelta`;
2. **commit** the delta in the store (``await store.commit(delta)``): the local JSON file, or a
   ZooKeeper transaction conditional on znode versions and fenced by the controller epoch;
3. **publish** ``image.apply(committed delta)`` as the current image: every reader sees the
   change from now on, all of it at once;
4. **reconcile**: listeners (replica manager, coordinators, dynamic configs) bring local state
   from the last image they applied to the current one, in steps that give the event loop a
   turn (``apply(old, new)`` generators), by a single reconciler task, so reconciliations run in
   order and a burst of changes is applied in one go.

A change committed by another broker (cluster mode) takes steps 3 and 4 the same way:
:meth:`follow` reads it from the store under the same lock (so it never interleaves with a
commit of this broker) and publishes it. The elected controller's duties
(:mod:`kbroker.metadata.zk.duties`) and a partition leader's ISR change are writes like any
other. The store is the only thing that differs between modes.

**Crash safety.** Each step is durable or repeatable: a crash before the commit leaves nothing
(the file is replaced atomically; a ZooKeeper transaction is all or nothing); a crash after it
leaves a stored change that start-up publishes (the first image *is* the store) and reconciles
(``ReplicaManager.open`` brings the log dirs from what is on disk to the stored image: missing
partitions made, strays deleted). A topic creation that fails on this broker's disk (EMFILE,
ENOSPC, a file in the way) is undone by a second change (the deletion) and answered
KAFKA_STORAGE_ERROR; a crash between the two leaves a stored topic that start-up tries again.

**Failures.** A commit that loses a conditional write (another broker changed the znode first)
re-reads what the change touches, publishes that, and decides once more; a second loss, or a
controller epoch that moved on, is refused (NOT_CONTROLLER for a fenced controller, so the
client asks again elsewhere). A lost ZooKeeper connection is REQUEST_TIMED_OUT (the change may
or may not be made; the next read says). A failed file write is KAFKA_STORAGE_ERROR, with
nothing changed. A client that goes away mid-change does not stop it: each write runs in a task
of its own, shielded from the request's cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Iterator, Mapping, Protocol

from kbroker.metadata import partition_changes, state_change, topic_policy
from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata
from kbroker.metadata.store import (AlreadyExistsError, Commit, FencedError, StaleMetadataError,
                                    StoreUnavailableError)
from kbroker.metadata.topic_policy import MAX_PARTITIONS, NewTopic  # noqa: F401  (re-exported)
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.controller")

# How long a step of reconciliation may hold the event loop before the reconciler yields (s).
STEP_BUDGET = 0.01

Decide = Callable[[MetadataImage], "MetadataDelta | None"]


class ImageListener(Protocol):
    def apply(self, old: MetadataImage, new: MetadataImage,
              delta: MetadataDelta) -> Iterator[None]:
        """Bring local state from ``old`` to ``new``, which ``delta`` (every change published
        between the two, merged) tells apart: a listener looks at what the delta names, never
        walks the whole image. Yield between pieces of disk work. May return
        ``{topic: OSError}`` for topics it could not apply (the rest are applied)."""


class Controller:
    def __init__(self, store, node_id: int, image: MetadataImage, config=None):
        self._store = store
        self._node_id = node_id
        self._config = config
        self._image = image
        self._version = 0  # of the published image
        self._listeners: list[ImageListener] = []
        self._lock = asyncio.Lock()
        self._applied = image  # what listeners have reconciled to, at _applied_version
        self._applied_version = 0
        self._changes = MetadataDelta()  # published since _applied, merged
        self._reconciler: asyncio.Task | None = None
        self._writes: set[asyncio.Task] = set()
        # Leaders' ISR changes waiting for the next batch: (topic, index) -> (state, waiter).
        self._isr_queue: dict[tuple[str, int], tuple[PartitionState, asyncio.Future]] = {}
        self._isr_batches: asyncio.Task | None = None
        # Topics this broker could not apply locally (creation failed on disk), with why.
        self._apply_failures: dict[str, OSError] = {}

    @property
    def image(self) -> MetadataImage:
        """The current metadata; immutable, so a reader keeping it keeps one consistent view."""
        return self._image

    @property
    def cluster_id(self) -> str:
        return self._image.cluster_id

    @property
    def node_id(self) -> int:
        return self._node_id

    def subscribe(self, listener: ImageListener) -> None:
        """Listeners reconcile in subscription order, from the current image on."""
        self._listeners.append(listener)

    def is_active(self) -> bool:
        """Whether this broker makes the elected controller's writes (a single node always)."""
        return self._store.is_controller

    def live_brokers(self) -> dict[int, str | None]:
        """Live broker id -> rack: the registered brokers of a cluster, or this node alone."""
        brokers = self._image.brokers
        if brokers or self._store.replicated:
            return {b.node_id: b.rack for b in brokers.values()}
        rack = self._config.get("broker.rack") if self._config is not None else None
        return {self._node_id: rack or None}

    def _setting(self, name: str, default):
        return self._config.get(name) if self._config is not None else default

    # --- the pipeline ----------------------------------------------------------------------------

    async def write(self, decide: Decide, what: str = "metadata change") -> Commit | None:
        """Validate (``decide(image)`` -> delta, or None for nothing to do; raises KafkaError),
        commit, publish, reconcile. Returns the commit (None when there was nothing to do)."""
        task = asyncio.ensure_future(self._write(decide, what))
        self._writes.add(task)
        task.add_done_callback(_forget(self._writes))
        return await asyncio.shield(task)

    async def follow(self, read: Callable[[MetadataImage], Awaitable["MetadataDelta | None"]]
                     ) -> None:
        """Publish and reconcile a change committed elsewhere: ``read(image)`` reads it from the
        store (under the write lock, so no commit of this broker interleaves) as a delta."""
        async with self._lock:
            delta = await read(self._image)
            if delta is None or delta.empty:
                return
            version = self._publish(delta)
        await self._reconciled(version)

    async def _write(self, decide: Decide, what: str) -> Commit | None:
        async with self._lock:
            delta = decide(self._image)
            if delta is None or delta.empty:
                return None
            self._between_steps("decided", what)
            commit = await self._commit(delta, decide, what)
            if commit is None:
                return None
            self._between_steps("committed", what)
            state_change.committed(self.node_id, self._image, commit.delta, what)
            version = self._publish(commit.delta)
        self._between_steps("published", what)
        await self._reconciled(version)
        self._between_steps("reconciled", what)
        return commit

    async def _commit(self, delta: MetadataDelta, decide: Decide, what: str) -> Commit | None:
        for attempt in (1, 2):
            try:
                return await self._store.commit(delta)
            except AlreadyExistsError as exc:
                if delta.created:
                    name = next(iter(delta.created))
                    raise KafkaError(Errors.TOPIC_ALREADY_EXISTS,
                                     f"Topic '{name}' already exists.") from None
                stale = exc
            except FencedError as exc:
                log.warning("%s refused: %s", what, exc)
                raise KafkaError(Errors.NOT_CONTROLLER, str(exc)) from None
            except StaleMetadataError as exc:
                stale = exc
            except StoreUnavailableError as exc:
                log.warning("%s not confirmed: %s", what, exc)
                raise KafkaError(Errors.REQUEST_TIMED_OUT, str(exc)) from None
            except OSError as exc:
                log.error("cannot write the metadata store: %s; %s is refused", exc, what)
                raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                                 f"Could not persist the change: {exc.strerror or exc}") from None
            if delta.isr_only or attempt == 2:
                break
            # Another writer changed what this change is conditional on: take in what it wrote
            # and decide again (a creation may now collide, a config change apply on top).
            fresh = await self._store.reread(delta)
            if not fresh.empty:
                self._publish(fresh)
            delta = decide(self._image)
            if delta is None or delta.empty:
                return None
        if delta.isr_only:
            raise stale
        log.warning("%s refused: %s", what, stale)
        raise KafkaError(Errors.NOT_CONTROLLER if self._store.is_controller
                         else Errors.UNKNOWN_SERVER_ERROR, str(stale))

    def _publish(self, delta: MetadataDelta) -> int:
        self._image = self._image.apply(delta)
        self._changes = self._changes.merged(delta)
        self._version += 1
        for name in delta.deleted:
            self._apply_failures.pop(name, None)
        return self._version

    def _between_steps(self, step: str, what: str) -> None:
        """A seam between the pipeline's steps: crash tests stop the process here."""

    async def _reconciled(self, version: int) -> None:
        """Wait until listeners have applied image ``version`` (or a later one)."""
        while self._applied_version < version:
            if self._reconciler is None or self._reconciler.done():
                self._reconciler = asyncio.ensure_future(self._reconcile())
            await asyncio.shield(self._reconciler)

    async def _reconcile(self) -> None:
        """The reconciler: brings every listener from the last applied image to the newest,
        in steps, until no newer image is waiting."""
        while self._applied_version < self._version:
            old, new, version = self._applied, self._image, self._version
            delta, self._changes = self._changes, MetadataDelta()
            failures = {}
            for listener in self._listeners:
                failures.update(await _drive(listener, old, new, delta))
            self._apply_failures.update(failures)
            self._applied, self._applied_version = new, version

    async def close(self) -> None:
        """Let writes in flight finish (their changes are committed or not, never half). ISR
        changes still queued are dropped: their leaders stop with this broker."""
        if self._isr_batches is not None:
            self._isr_batches.cancel()
            await asyncio.gather(self._isr_batches, return_exceptions=True)
        pending = list(self._writes) + ([self._reconciler] if self._reconciler else [])
        await asyncio.gather(*pending, return_exceptions=True)

    # --- topics ----------------------------------------------------------------------------------

    async def create_topic(self, wanted: NewTopic, validate_only: bool = False) -> TopicMetadata:
        """CreateTopics of one topic (rules in :mod:`topic_policy`). Answers once the topic is
        published and this broker holds its partitions; a creation that fails on this broker's
        disk is undone and answered KAFKA_STORAGE_ERROR."""
        created: dict[str, TopicMetadata] = {}

        def decide(image):
            topic = topic_policy.new_topic(
                image, self.live_brokers(), wanted, self._setting("num.partitions", 1),
                self._setting("default.replication.factor", 1), self._store.controller_epoch)
            created["topic"] = topic
            return None if validate_only else MetadataDelta(created={topic.name: topic})

        commit = await self.write(decide, f"creating topic {wanted.name}")
        if commit is None:
            return created["topic"]
        topic = commit.delta.created[wanted.name]
        failure = self._apply_failures.pop(wanted.name, None)
        if failure is not None:
            await self._undo_creation(topic, failure)
        return self._image.topic(wanted.name) or topic

    async def _undo_creation(self, topic: TopicMetadata, failure: OSError) -> None:
        log.error("cannot create topic %s on disk: %s; deleting it again", topic.name, failure)

        def decide(image):
            current = image.topic(topic.name)
            if current is None or current.topic_id != topic.topic_id:
                return None
            return MetadataDelta(deleted=frozenset({topic.name}))

        await self.write(decide, f"undoing the creation of {topic.name}")
        raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                         f"Could not create topic {topic.name}: {failure.strerror or failure} "
                         f"({failure.filename or ''}); nothing was created.")

    async def create_partitions(self, name: str, count: int, assignments=None,
                                validate_only: bool = False) -> TopicMetadata:
        def decide(image):
            delta = topic_policy.new_partitions(image, self.live_brokers(), name, count,
                                                assignments, self._store.controller_epoch)
            return None if validate_only else delta

        await self.write(decide, f"adding partitions to {name}")
        return self._image.topic(name)

    async def delete_topic(self, name: str) -> None:
        def decide(image):
            topic_policy.check_deletable(topic_policy.existing(image, name))
            return MetadataDelta(deleted=frozenset({name}))

        await self.write(decide, f"deleting topic {name}")

    async def alter_topic_configs(self, name: str, configs: Mapping) -> TopicMetadata:
        def decide(image):
            topic_policy.check_topic_configs(topic_policy.existing(image, name), configs)
            return MetadataDelta(topic_configs={name: dict(configs)})

        await self.write(decide, f"altering the configs of {name}")
        return self._image.topic(name)

    # --- broker configs, producer ids, features --------------------------------------------------

    async def alter_broker_configs(self, configs: Mapping, *, cluster_default: bool) -> None:
        scope = "cluster" if cluster_default else "broker"
        await self.write(lambda image: MetadataDelta(broker_configs={scope: dict(configs)}),
                         f"altering {scope} broker configs")

    async def allocate_producer_ids(self, size: int) -> int:
        """Reserve ``size`` producer ids, durably, through the store; the first."""
        async with self._lock:
            try:
                return await self._store.allocate_producer_ids(size)
            except (StaleMetadataError, StoreUnavailableError) as exc:
                raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                 f"no producer id block could be reserved: {exc}") from None
            except OSError as exc:
                raise KafkaError(Errors.KAFKA_STORAGE_ERROR,
                                 f"Could not reserve producer ids: {exc.strerror or exc}") from None

    async def update_features(self, levels: Mapping[str, int]) -> None:
        """Finalize these feature levels (validated by the handler), kept across restarts."""
        def decide(image):
            merged = {**image.finalized_features, **levels}
            if merged == dict(image.finalized_features):
                return None
            return MetadataDelta(features=merged, features_epoch=image.features_epoch + 1)

        await self.write(decide, "updating finalized features")

    # --- SCRAM credentials, ACLs, client quotas --------------------------------------------------

    async def alter_scram_credentials(self, upserts: Mapping[tuple[str, str], str],
                                      deletions: set[tuple[str, str]]) -> None:
        """Set ``(user, mechanism) -> credential string`` and remove ``(user, mechanism)`` pairs,
        in one change (the handler validated them)."""
        changes = {pair: None for pair in deletions}
        changes.update(upserts)
        await self.write(lambda image: MetadataDelta(scram=changes),
                         "altering SCRAM credentials")

    async def change_delegation_tokens(self, decide, what: str):
        """A delegation token change (:mod:`kbroker.metadata.delegation_tokens`):
        ``decide(image)`` -> (token id -> TokenInfo or None to remove, answer); raises
        KafkaError. Returns the answer of the decision that was committed."""
        answer = None

        def as_delta(image):
            nonlocal answer
            changes, answer = decide(image)
            return MetadataDelta(tokens=dict(changes)) if changes else None

        await self.write(as_delta, what)
        return answer

    async def alter_group_configs(self, group_id: str,
                                  decide: Callable[[Mapping[str, str]], Mapping[str, str]],
                                  validate_only: bool = False) -> None:
        """Set a group's whole set of configs (KIP-848, the GROUP resource):
        ``decide(current overrides)`` -> the new overrides, validated (raises KafkaError); an
        empty set removes the group's entry. The group coordinator reads them from the image.
        """
        def as_delta(image):
            current = dict(image.group_config(group_id))
            new = {k: str(v) for k, v in decide(current).items()}
            if validate_only or new == current:
                return None
            return MetadataDelta(group_configs={group_id: new})

        await self.write(as_delta, f"altering the configs of group {group_id}")

    async def create_acls(self, acls) -> dict:
        """Add ACL bindings (validated by the handler); one already present is not duplicated.
        Returns ACL -> KafkaError for each one not stored (the ZooKeeper store writes one
        resource at a time, as Kafka's AclAuthorizer, and can fail some)."""
        added = tuple(dict.fromkeys(tuple(a) for a in acls))

        def decide(image):
            present = set(image.acls)
            wanted = tuple(a for a in added if a not in present)
            return MetadataDelta(acls_added=wanted) if wanted else None

        return _refused_acls(await self.write(decide, "creating ACLs"))

    async def delete_acls(self, acls) -> dict:
        """Remove exactly these ACL bindings; returns those not removed, as create_acls."""
        gone = tuple(dict.fromkeys(tuple(a) for a in acls))
        return _refused_acls(await self.write(lambda image: MetadataDelta(acls_removed=gone),
                                              "deleting ACLs"))

    async def alter_client_quotas(self, changes: Mapping[tuple, Mapping[str, float | None]]
                                  ) -> None:
        """Apply ``entity -> {key: value, or None to remove}`` (validated by the handler) in one
        change; an entity left with no quota disappears, as in Kafka."""
        def decide(image):
            quotas = {}
            for entity, ops in changes.items():
                entity = tuple(sorted(entity))
                values = dict(quotas.get(entity, image.client_quotas.get(entity, {})))
                for key, value in ops.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = float(value)
                quotas[entity] = values
            changed = {e: v for e, v in quotas.items()
                       if v != dict(image.client_quotas.get(e, {}))}
            return MetadataDelta(client_quotas=changed) if changed else None

        await self.write(decide, "altering client quotas")

    # --- partitions: elections, reassignments, ISR changes ---------------------------------------

    def _check_active(self) -> None:
        if not self.is_active():
            raise KafkaError(Errors.NOT_CONTROLLER,
                             f"broker {self._node_id} is not the controller")

    def unclean_allowed(self, topic: TopicMetadata) -> bool:
        value = topic.configs.get("unclean.leader.election.enable")
        if value is not None:
            return value.strip().lower() == "true"
        return bool(self._setting("unclean.leader.election.enable", False))

    async def elect_leaders(self, preferred: bool, partitions) -> dict:
        """ElectLeaders on the controller: ``(topic, index) -> (error, message)`` for
        ``partitions`` (None: every partition); answers once the new leaders are published."""
        self._check_active()
        outcomes: dict = {}

        def decide(image):
            found, states = partition_changes.elections(
                image, set(self.live_brokers()), preferred, partitions,
                self._store.controller_epoch, self.unclean_allowed)
            outcomes.clear()
            outcomes.update(found)
            outcomes.update({key: (Errors.NONE, None) for key in states})
            return MetadataDelta(states=states) if states else None

        commit = await self.write(decide, "electing leaders")
        for key in (commit.refused if commit else {}):
            outcomes[key] = (Errors.NOT_CONTROLLER,
                             f"the state of {key[0]}-{key[1]} changed under the election; retry")
        return outcomes

    def list_reassignments(self, partitions=None) -> dict:
        """(topic, index) -> (replicas, adding, removing) of each reassignment in progress."""
        self._check_active()
        return partition_changes.reassignments(self._image, partitions)

    async def alter_reassignments(self, wanted, allow_replication_factor_change=True) -> dict:
        """Start (target replicas) or cancel (None) reassignments: ``[(topic, index, replicas
        or None)]`` -> ``{(topic, index): (error, message)}``. The elected controller's duties
        finish each once its target replicas are in sync."""
        self._check_active()
        outcomes: dict = {}

        def decide(image):
            found, delta = partition_changes.alter_reassignments(
                image, set(self.live_brokers()), wanted, allow_replication_factor_change)
            outcomes.clear()
            outcomes.update(found)
            return delta if delta.assignments else None

        try:
            await self.write(decide, "altering reassignments")
        except KafkaError as exc:
            for key, outcome in outcomes.items():
                if outcome[0] is Errors.NONE:
                    outcomes[key] = (exc.error, exc.message)
        return outcomes

    async def change_isr(self, topic: str, index: int, proposed: PartitionState
                         ) -> PartitionState:
        """A partition leader's ISR change, committed if the state is still at
        ``proposed.version``; the state as written (with its new version). Raises
        StaleMetadataError when the state moved on (the leader waits for the next image).

        Changes proposed while earlier ones are being written wait, and go together in the next
        commit, as Kafka's AlterPartitionManager keeps one request in flight and batches the
        rest: a restarted follower caught up on 10,000 partitions at once costs a few ZooKeeper
        transactions and one image, not 10,000 commits in a row (which outlasted the leaders'
        timeouts and were proposed again, without end)."""
        key = (topic, index)
        waiter = asyncio.get_running_loop().create_future()
        replaced = self._isr_queue.pop(key, None)
        if replaced is not None and not replaced[1].done():
            replaced[1].set_exception(StaleMetadataError(
                f"a newer ISR change of {topic}-{index} was proposed"))
        self._isr_queue[key] = (proposed, waiter)
        if self._isr_batches is None or self._isr_batches.done():
            self._isr_batches = asyncio.ensure_future(self._write_isr_changes())
        return await waiter

    async def _write_isr_changes(self) -> None:
        """Commit the queued ISR changes, a batch at a time, until none is queued; answer each
        change's waiter with its written state or why it was not written."""
        while self._isr_queue:
            batch, self._isr_queue = self._isr_queue, {}
            states = {key: proposed for key, (proposed, _) in batch.items()}
            written, refused, failure = {}, {}, None
            try:
                commit = await self.write(
                    lambda image: MetadataDelta(states=states, isr_only=True),
                    f"changing the ISR of {_partitions(states)}")
            except asyncio.CancelledError:
                for _, waiter in batch.values():
                    waiter.cancel()
                raise
            except Exception as exc:  # each waiter hears it (the leaders log it)
                failure = exc
            else:
                if commit is not None:
                    written, refused = commit.delta.states, commit.refused
            for key, (_, waiter) in batch.items():
                if waiter.done():  # its leader stopped waiting (a timeout, a new epoch)
                    continue
                if key in written:
                    waiter.set_result(written[key])
                else:
                    waiter.set_exception(failure or refused.get(key) or StaleMetadataError(
                        f"the ISR change of {key[0]}-{key[1]} was not written"))


def _partitions(states: Mapping) -> str:
    """``t-0`` for one partition, ``N partitions`` for more (a log line's subject)."""
    if len(states) == 1:
        topic, index = next(iter(states))
        return f"{topic}-{index}"
    return f"{len(states)} partitions"


def _refused_acls(commit: Commit | None) -> dict:
    if commit is None:
        return {}
    return {acl: exc if isinstance(exc, KafkaError)
            else KafkaError(Errors.UNKNOWN_SERVER_ERROR, str(exc))
            for acl, exc in commit.refused.items()}


async def _drive(listener: ImageListener, old: MetadataImage, new: MetadataImage,
                 delta: MetadataDelta) -> dict:
    """Run ``listener.apply(old, new, delta)`` to the end, giving the event loop a turn whenever
    a step ran past STEP_BUDGET; its failures ({topic: OSError})."""
    steps = listener.apply(old, new, delta)
    started = time.monotonic()
    try:
        while True:
            next(steps)
            if time.monotonic() - started > STEP_BUDGET:
                await asyncio.sleep(0)
                started = time.monotonic()
    except StopIteration as done:
        return dict(done.value or {})
    except OSError as exc:  # the change is durable: a restart completes it
        log.error("applying a metadata change failed: %s; a restart completes it", exc)
    except Exception:
        log.exception("a metadata listener (%s) failed; continuing with the next image",
                      type(listener).__name__)
    return {}


def _forget(tasks: set):
    def done(task: asyncio.Task) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the caller may have gone (it sees it through shield)
    return done
