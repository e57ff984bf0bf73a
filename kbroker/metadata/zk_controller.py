"""The controller in cluster mode: writes go to ZooKeeper, images come from ZooKeeper.

:class:`ClusterController` keeps the single-node :class:`Controller`'s contract (the only writer
of the store, the only publisher of images) with ZooKeeper as the truth:

- **Writes** (CreateTopics, CreatePartitions, DeleteTopics, configs) go to ZooKeeper from any
  broker, as a Kafka broker's admin client does (``AdminZkClient``): the topic's assignment
  (placed over the live brokers by :mod:`kbroker.metadata.placement`) and its initial
  partition states (the first replica leads, ISR = the replicas, all alive when placed) in one
  transaction. Then the broker re-reads ZooKeeper and publishes that image; the other brokers
  get there through their watches.
- **Images** are only ever published from a fresh read of the whole tree (:mod:`zk_image`),
  under one lock, so two publishes never interleave and a late one never goes back in time
  relative to what the broker already applied from ZooKeeper. Topics that did not change keep
  their :class:`TopicMetadata` object, so the replica manager skips them (it compares by
  identity).
- **Controller duties** (only while this broker holds ``/controller``): :meth:`run_duties`
  computes the partition state changes from the current image (:mod:`leader_election`) and
  writes each conditionally on the state version the image shows and fenced by the controller
  epoch (``ZkMetadataStore.set_partition_state``). A write that loses is skipped: the next read
  shows what won, and the next round decides again.
- **ISR changes** from a partition's leader (the replica layer's injected ``isr_writer``):
  :meth:`write_isr`, conditional on the version the leader holds, not fenced by the controller
  epoch (a leader is not the controller).

kazoo calls block for a round trip; every call from the event loop runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Mapping

from kazoo.client import KazooClient

from kbroker.metadata import leader_election, zk_client
from kbroker.metadata import zk_znodes as zn
from kbroker.metadata.controller import Controller, _run, _run_now
from kbroker.metadata.image import MetadataImage, PartitionState, TopicMetadata
from kbroker.metadata.placement import (assign_replicas, check_replication_factor,
                                        reassignment_problem)
from kbroker.metadata.store import StaleMetadataError
from kbroker.metadata.zk_errors import ControllerEpochMovedError, NodeAlreadyExistsError
from kbroker.metadata.zk_image import ZkSnapshot, read_snapshot
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.controller")


# How long a partition may stay without a state znode before the controller writes it.
MISSING_STATE_GRACE_S = 30


class ClusterController(Controller):
    def __init__(self, store, node_id: int, client: KazooClient, config):
        self._zk = client
        self._config = config
        self._publish_lock = asyncio.Lock()
        self._preferred_requests: set[tuple[str, int]] = set()
        self._next_rebalance = time.monotonic() + config.get(
            "leader.imbalance.check.interval.seconds")
        # (topic, partition) -> (adding, removing): reassignments in progress, from ZooKeeper.
        self.reassignments: dict = {}
        # (topic, partition) -> when this controller first saw it without a state znode.
        self._missing_since: dict[tuple[str, int], float] = {}
        super().__init__(store, node_id)
        snapshot = read_snapshot(client, store.cluster_id, node_id)
        store.remember_versions(snapshot.versions)
        self.reassignments = snapshot.reassignments or {}
        self._image = snapshot.image

    # --- reading ZooKeeper -------------------------------------------------------------------

    async def refresh(self) -> MetadataImage:
        """Re-read ZooKeeper and publish what it holds now."""
        async with self._publish_lock:
            snapshot = await asyncio.to_thread(read_snapshot, self._zk, self._store.cluster_id,
                                               self._node_id)
            await _run(self._publish_snapshot(snapshot))
        return self._image

    def refresh_now(self) -> None:
        """The same, blocking the loop for the read: for the synchronous creation of an internal
        topic (a coordinator's first use), which must see its own topic at once."""
        snapshot = read_snapshot(self._zk, self._store.cluster_id, self._node_id)
        _run_now(self._publish_snapshot(snapshot))

    def _publish_snapshot(self, snapshot: ZkSnapshot):
        self._store.remember_versions(snapshot.versions)
        self.reassignments = snapshot.reassignments or {}
        new = _share_unchanged(self._image, snapshot.image)
        yield from self._publish(new)

    # --- who is there ------------------------------------------------------------------------

    def live_brokers(self) -> set[int]:
        # A broker in controlled shutdown has removed its registration: not live any more.
        return set(self._image.brokers)

    def check_replication_factor(self, replication_factor: int) -> None:
        check_replication_factor(replication_factor, len(self.live_brokers()))

    def _place(self, partitions: int, replication_factor: int, first: int = 0):
        brokers = self._image.brokers
        racks = {b: brokers[b].rack for b in self.live_brokers()}
        return assign_replicas(racks, partitions, replication_factor, first)

    # --- topics ------------------------------------------------------------------------------

    def _new_topic(self, name, num_partitions, configs, replication_factor, assignments):
        if self._image.topic(name) is not None:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments is None:
            assignments = self._place(num_partitions, replication_factor)
        topic_id = uuid.uuid4()
        while topic_id in self._image.topics_by_id or topic_id.int == 0:
            topic_id = uuid.uuid4()
        return TopicMetadata(name, topic_id, assignments, configs)

    def create_topic(self, name: str, num_partitions: int, configs: Mapping,
                     replication_factor: int = 1, assignments=None) -> TopicMetadata:
        topic = self._new_topic(name, num_partitions, configs, replication_factor, assignments)
        self._write(lambda: self._store.create_topic(topic), topic_exists=name)
        self.refresh_now()
        return self._image.topic(name) or topic

    async def create_topic_async(self, name: str, num_partitions: int, configs: Mapping,
                                 replication_factor: int = 1, assignments=None) -> TopicMetadata:
        topic = self._new_topic(name, num_partitions, configs, replication_factor, assignments)
        await asyncio.to_thread(self._write, lambda: self._store.create_topic(topic), name)
        await self.refresh()
        return self._image.topic(name) or topic

    async def create_partitions(self, name: str, count: int, assignments=None) -> TopicMetadata:
        topic = self._existing(name)
        if any(t == name for t, _ in self.reassignments):
            raise KafkaError(Errors.REASSIGNMENT_IN_PROGRESS,
                             f"A partition reassignment is in progress for the topic '{name}'.")
        self.check_new_partitions_of(topic, count)
        added = count - topic.num_partitions
        if assignments is None:
            replication_factor = len(topic.assignments[0]) if topic.assignments else 1
            assignments = self._place(added, replication_factor, topic.num_partitions)
        grown = topic.assignments + tuple(tuple(a) for a in assignments)
        await asyncio.to_thread(self._write,
                                lambda: self._store.set_assignments(name, grown))
        await self.refresh()
        return self._image.topic(name)

    async def delete_topic(self, name: str) -> None:
        topic = self._existing(name)
        if topic.is_internal:
            raise KafkaError(Errors.TOPIC_DELETION_DISABLED,
                             f"Topic {name} is an internal topic and cannot be deleted: it holds "
                             f"the state of the broker's coordinators.")
        await asyncio.to_thread(self._write, lambda: self._store.delete_topic(name))
        await self.refresh()

    def _write(self, write, topic_exists: str | None = None) -> None:
        """One store write; a lost conditional write is retried once on fresh versions (another
        broker changed the znode since this broker's image), then answered with an error."""
        for attempt in (1, 2):
            try:
                write()
                return
            except StaleMetadataError as exc:
                if topic_exists and isinstance(exc, NodeAlreadyExistsError):
                    raise KafkaError(Errors.TOPIC_ALREADY_EXISTS,
                                     f"Topic '{topic_exists}' already exists.") from None
                if attempt == 2 or self._store.is_fenced_controller:
                    log.warning("metadata write refused: %s", exc)
                    raise self._refused(exc) from None
                snapshot = read_snapshot(self._zk, self._store.cluster_id, self._node_id)
                self._store.remember_versions(snapshot.versions)
            except OSError as exc:
                raise KafkaError(Errors.KAFKA_STORAGE_ERROR, str(exc)) from None
            except zk_client.ZK_ERRORS as exc:
                # The connection dropped mid-request: whether the write happened is unknown
                # until the next read; the client retries (REQUEST_TIMED_OUT is retriable).
                log.warning("metadata write not confirmed: ZooKeeper %s", type(exc).__name__)
                raise KafkaError(Errors.REQUEST_TIMED_OUT,
                                 f"ZooKeeper did not confirm the change "
                                 f"({type(exc).__name__}); it may or may not be made") from None

    def _refused(self, exc: Exception) -> KafkaError:
        """The client's error for a write the store refused."""
        if isinstance(exc, KafkaError):
            return exc
        # A fenced (stale) controller is NOT_CONTROLLER, retriable: the client asks again and
        # reaches a broker with a current view.
        stale_controller = (isinstance(exc, ControllerEpochMovedError)
                            or self._store.is_fenced_controller)
        return KafkaError(Errors.NOT_CONTROLLER if stale_controller
                          else Errors.UNKNOWN_SERVER_ERROR, str(exc))

    def _persist(self, write) -> None:  # the base class's synchronous steps
        self._write(write)

    async def _persist_async(self, write) -> None:
        await asyncio.to_thread(self._write, write)

    # --- SCRAM credentials and ACLs ----------------------------------------------------------
    # Written to ZooKeeper as deltas (another broker may have changed the same user or resource
    # since this broker's image), then published here at once; other brokers follow through
    # their watches on /config/changes and /kafka-acl[-extended]-changes.

    async def alter_scram_credentials(self, upserts, deletions) -> None:
        await asyncio.to_thread(self._write,
                                lambda: self._store.update_scram_credentials(upserts, deletions))
        credentials = {user: dict(m) for user, m in self._image.scram_credentials.items()}
        for user, mechanism in deletions:
            credentials.get(user, {}).pop(mechanism, None)
        for (user, mechanism), credential in upserts.items():
            credentials.setdefault(user, {})[mechanism] = credential
        _run_now(self._publish(self._image.with_scram_credentials(credentials)))

    # ACLs go one resource pattern at a time (as Kafka's AclAuthorizer): a resource that cannot
    # be written fails its own ACLs (returned, ACL -> KafkaError), the others are stored.

    async def create_acls(self, acls) -> dict:
        added = list(dict.fromkeys(tuple(a) for a in acls))
        failures = await asyncio.to_thread(self._write_acls, added, ())
        present = set(self._image.acls)
        _run_now(self._publish(self._image.with_acls(
            list(self._image.acls) + [a for a in added
                                      if a not in present and a not in failures])))
        return failures

    async def delete_acls(self, acls) -> dict:
        gone = {tuple(a) for a in acls}
        failures = await asyncio.to_thread(self._write_acls, (), gone)
        _run_now(self._publish(self._image.with_acls(
            [a for a in self._image.acls if a not in gone or a in failures])))
        return failures

    def _write_acls(self, added, removed) -> dict:
        failures = {}
        self._write(lambda: failures.update(self._store.update_acls(added, removed)))
        return {acl: self._refused(exc) for acl, exc in failures.items()}

    # --- partition state ---------------------------------------------------------------------

    async def write_isr(self, topic: str, index: int, proposed: PartitionState) -> PartitionState:
        """The leader's ISR change, written if the state znode is still at ``proposed.version``;
        returns the state as written (with its new version). Raises StaleMetadataError when the
        state moved on (the leader waits for the next image), TimeoutError when ZooKeeper has
        not answered within the session timeout: the write may still land, and the next image
        says whether it did; until then the leader would otherwise hold its change pending for
        ever and never propose another."""
        async with asyncio.timeout(self._config.get("zookeeper.session.timeout.ms") / 1000):
            written = await asyncio.to_thread(
                self._store.set_partition_state, topic, index,
                zn.PartitionState(proposed.leader, proposed.leader_epoch, tuple(proposed.isr),
                                  proposed.controller_epoch, proposed.version), False)
        return PartitionState(written.leader, written.leader_epoch, written.isr,
                              written.zk_version, written.controller_epoch)

    def request_preferred_election(self, partitions) -> None:
        self._preferred_requests.update(partitions)

    async def run_duties(self, controller_epoch: int) -> int:
        """One round of the elected controller's work on the current image; the number of state
        changes written (the caller re-reads ZooKeeper when it is not 0)."""
        image = self._image
        live = self.live_brokers()
        changes = leader_election.on_live_brokers(image, live, controller_epoch, self._unclean)
        changed = {(t, p) for t, p, _ in changes}
        wanted = None
        if self._config.get("auto.leader.rebalance.enable") \
                and time.monotonic() >= self._next_rebalance:
            self._next_rebalance = time.monotonic() + self._config.get(
                "leader.imbalance.check.interval.seconds")
            imbalanced = leader_election.imbalanced_brokers(
                image, self._config.get("leader.imbalance.per.broker.percentage"))
            wanted = {(t.name, i) for t in image.topics().values()
                      for i, r in enumerate(t.assignments) if r and r[0] in imbalanced}
        if self._preferred_requests:
            wanted = (wanted or set()) | self._preferred_requests
            self._preferred_requests = set()
        if wanted:
            changes += [c for c in leader_election.preferred(image, live, controller_epoch, wanted)
                        if (c[0], c[1]) not in changed]
        done = await self._create_missing_states(image)
        if changes:
            done += len(await asyncio.to_thread(self._write_states, changes))
        elif self.reassignments:  # on a settled image only: one step at a time
            done += await asyncio.to_thread(self._complete_reassignments, controller_epoch)
        return done

    async def _create_missing_states(self, image: MetadataImage) -> int:
        """Partitions without a state znode for MISSING_STATE_GRACE_S (a broker died while
        creating them, see ZkMetadataStore.create_topic) get their initial state, as Kafka's
        controller initializes new partitions. The grace leaves a live creator time to finish."""
        now = time.monotonic()
        missing = {(t.name, i) for t in image.topics().values() if t.states
                   for i, s in enumerate(t.states) if s.leader_epoch < 0}
        self._missing_since = {k: self._missing_since.get(k, now) for k in missing}
        due: dict[str, list[int]] = {}
        for (name, index), since in self._missing_since.items():
            if now - since >= MISSING_STATE_GRACE_S:
                due.setdefault(name, []).append(index)
        for name, indexes in due.items():
            log.warning("%s: %d partition(s) without a state for %d s; writing their initial "
                        "state", name, len(indexes), MISSING_STATE_GRACE_S)
            assignments = image.topic(name).assignments
            await asyncio.to_thread(self._write, lambda: self._store.create_missing_states(
                name, sorted(indexes), assignments))
        return sum(len(v) for v in due.values())

    # --- reassignment (KIP-455, as Kafka's ZooKeeper controller) -----------------------------

    def _check_active(self) -> None:
        if not self.is_active():
            raise KafkaError(Errors.NOT_CONTROLLER,
                             f"broker {self._node_id} is not the controller")

    def list_reassignments(self, partitions=None) -> dict:
        """(topic, index) -> (replicas, adding, removing) of each reassignment in progress."""
        self._check_active()
        result = {}
        for (name, index), (adding, removing) in sorted(self.reassignments.items()):
            if partitions is not None and (name, index) not in partitions:
                continue
            topic = self._image.topic(name)
            if topic is not None and index < topic.num_partitions:
                result[(name, index)] = (topic.assignments[index], adding, removing)
        return result

    async def alter_reassignments(self, wanted, allow_replication_factor_change=True) -> dict:
        """Start (target replicas) or cancel (None) reassignments: ``[(topic, index, replicas
        or None)]`` -> ``{(topic, index): (error, message)}``. Starting writes the full replica
        set (target, then original) with the adding and removing replicas; the controller's
        rounds finish it once every target replica is in the ISR (:meth:`run_duties`)."""
        self._check_active()
        image, live = self._image, self.live_brokers()
        results, per_topic = {}, {}
        for name, index, target in wanted:
            topic = image.topic(name)
            if topic is None or not 0 <= index < topic.num_partitions:
                results[(name, index)] = (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"The partition {name}-{index} does not exist.")
                continue
            moving = self.reassignments.get((name, index))
            current = topic.assignments[index]
            original = tuple(r for r in current if moving is None or r not in moving[0])
            if target is None:
                if moving is None:
                    results[(name, index)] = (Errors.NO_REASSIGNMENT_IN_PROGRESS, None)
                    continue
                per_topic.setdefault(name, {})[index] = (original, None)
                continue
            problem = reassignment_problem(target, live)
            if problem is not None:
                results[(name, index)] = (Errors.INVALID_REPLICA_ASSIGNMENT, problem)
                continue
            if not allow_replication_factor_change and len(target) != len(original):
                results[(name, index)] = (Errors.INVALID_REPLICATION_FACTOR,
                                          "The replication factor is changed from "
                                          f"{len(original)} to {len(target)}")
                continue
            target = tuple(target)
            if target == current and moving is None:
                results[(name, index)] = (Errors.NONE, None)  # already there
                continue
            full = tuple(dict.fromkeys(target + original))
            adding = tuple(r for r in target if r not in original)
            removing = tuple(r for r in original if r not in target)
            per_topic.setdefault(name, {})[index] = (full, (adding, removing))
        for name, changes in per_topic.items():
            try:
                await asyncio.to_thread(self._write_reassignment, name, changes)
                outcome = (Errors.NONE, None)
            except StaleMetadataError as exc:
                outcome = (Errors.NOT_CONTROLLER, str(exc))
            for index in changes:
                results[(name, index)] = outcome
        if per_topic:
            await self.refresh()
        return results

    def _write_reassignment(self, name: str, changes: dict) -> None:
        """One topic's replica sets and reassignments in progress, ``changes``: index ->
        (replicas, (adding, removing) or None when it ends)."""
        topic = self._image.topic(name)
        assignments = list(topic.assignments)
        adding = {p: a for (t, p), (a, _) in self.reassignments.items() if t == name and a}
        removing = {p: r for (t, p), (_, r) in self.reassignments.items() if t == name and r}
        for index, (replicas, moving) in changes.items():
            assignments[index] = replicas
            adding.pop(index, None)
            removing.pop(index, None)
            if moving is not None:
                if moving[0]:
                    adding[index] = moving[0]
                if moving[1]:
                    removing[index] = moving[1]
            log.info("%s-%d: replicas %s%s", name, index, list(replicas),
                     f" (adding {list(moving[0])}, removing {list(moving[1])})"
                     if moving else " (reassignment ended)")
        self._store.set_reassignment(name, assignments, adding, removing)

    def _complete_reassignments(self, controller_epoch: int) -> int:
        """Finish the reassignments whose target replicas are all in the ISR: the leader moves
        into the target if it is not there, the removed replicas leave the ISR (one state
        write, leader epoch bumped), then the assignment becomes the target."""
        image, live = self._image, self.live_brokers()
        finished = 0
        by_topic: dict[str, dict] = {}
        for (name, index), (adding, removing) in self.reassignments.items():
            topic = image.topic(name)
            if topic is None or index >= topic.num_partitions:
                continue
            state = topic.state(index)
            target = tuple(r for r in topic.assignments[index] if r not in removing)
            if not all(r in state.isr for r in target):
                continue  # the new replicas are still catching up
            isr = tuple(r for r in state.isr if r in target)
            leader = state.leader
            if leader not in target or leader not in live:
                leader = next((r for r in target if r in isr and r in live), -1)
                if leader == -1:
                    continue
            if leader != state.leader or isr != state.isr:
                new = PartitionState(leader, state.leader_epoch + 1, isr, state.version,
                                     controller_epoch)
                if not self._write_states([(name, index, new)]):
                    continue
            by_topic.setdefault(name, {})[index] = (target, None)
        for name, changes in by_topic.items():
            try:
                self._write_reassignment(name, changes)
                finished += len(changes)
            except StaleMetadataError as exc:
                log.info("finishing a reassignment of %s deferred: %s", name, exc)
        return finished

    def _write_states(self, changes) -> set[tuple[str, int]]:
        written = set()
        for topic, index, state in changes:
            try:
                self._store.set_partition_state(topic, index, zn.PartitionState(
                    state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                    state.version))
            except StaleMetadataError as exc:
                log.info("partition state change skipped: %s", exc)
                continue
            written.add((topic, index))
            log.info("%s-%d: leader %d, leader epoch %d, ISR %s", topic, index, state.leader,
                     state.leader_epoch, list(state.isr))
        return written

    # --- ElectLeaders --------------------------------------------------------------------------

    def is_active(self) -> bool:
        """Whether this broker is the elected controller (set by the cluster wiring)."""
        return False

    async def elect_leaders(self, preferred: bool, partitions) -> dict:
        """ElectLeaders on the controller: ``(topic, index) -> (error, message)`` for
        ``partitions`` (None: every partition). Kafka's outcomes: ELECTION_NOT_NEEDED when the
        preferred replica already leads (preferred) or the leader is alive (unclean);
        PREFERRED_LEADER_NOT_AVAILABLE when the preferred replica is dead or out of the ISR;
        ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica can lead. Answers once the new leaders
        are in this broker's image."""
        if not self.is_active():
            raise KafkaError(Errors.NOT_CONTROLLER,
                             f"broker {self._node_id} is not the controller")
        image, live = self._image, self.live_brokers()
        epoch = self._store.controller_epoch
        if partitions is None:
            partitions = [(t.name, i) for t in image.topics().values()
                          for i in range(t.num_partitions)]
        results, changes = {}, []
        for name, index in partitions:
            topic = image.topic(name)
            if topic is None or not 0 <= index < topic.num_partitions:
                results[(name, index)] = (Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"The partition {name}-{index} does not exist.")
                continue
            outcome = _election(topic, index, live, preferred, epoch)
            if isinstance(outcome, PartitionState):
                changes.append((name, index, outcome))
            else:
                results[(name, index)] = outcome
        written = await asyncio.to_thread(self._write_states, changes) if changes else set()
        for name, index, _ in changes:
            results[(name, index)] = (Errors.NONE, None) if (name, index) in written else (
                Errors.NOT_CONTROLLER, f"the state of {name}-{index} changed under the election;"
                                       " retry")
        if written:
            await self.refresh()
        return results

    def _unclean(self, topic: TopicMetadata) -> bool:
        value = topic.configs.get("unclean.leader.election.enable")
        if value is not None:
            return value.strip().lower() == "true"
        return bool(self._config.get("unclean.leader.election.enable"))


def _election(topic: TopicMetadata, index: int, live: set[int], preferred: bool, epoch: int):
    """The new state of one partition for ElectLeaders, or (error, message) when there is
    none."""
    state, replicas = topic.state(index), topic.assignments[index]
    where = f"{topic.name}-{index}"
    if preferred:
        if replicas and state.leader == replicas[0]:
            return Errors.ELECTION_NOT_NEEDED, None
        changes = leader_election.preferred(_one(topic, index), live, epoch)
        if not changes:
            return (Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {where} under strategy "
                    f"PreferredReplicaPartitionLeaderElectionStrategy")
        return changes[0][2]
    if state.leader in live:
        return Errors.ELECTION_NOT_NEEDED, None
    changes = leader_election.on_live_brokers(_one(topic, index), live, epoch, lambda t: True)
    if not changes or changes[0][2].leader == -1:
        return (Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition {where} under strategy "
                f"OfflinePartitionLeaderElectionStrategy(true)")
    return changes[0][2]


def _one(topic: TopicMetadata, index: int) -> MetadataImage:
    """An image holding only partition ``index`` of ``topic`` (for the election rules)."""
    states = [PartitionState(-1, -1, ())] * topic.num_partitions
    states[index] = topic.state(index)
    return MetadataImage.build("", [topic.with_states(states)])


def _share_unchanged(old: MetadataImage, new: MetadataImage) -> MetadataImage:
    """``new`` with every topic equal to ``old``'s replaced by ``old``'s object, so listeners
    comparing by identity see only real changes."""
    shared = []
    for topic in new.topics().values():
        before = old.topic(topic.name)
        if (before is not None and before.topic_id == topic.topic_id
                and before.assignments == topic.assignments
                and dict(before.configs) == dict(topic.configs) and before.states == topic.states):
            shared.append(before)
        else:
            shared.append(topic)
    image = MetadataImage.build(new.cluster_id, shared,
                                {k: dict(v) for k, v in new.dynamic_broker_configs.items()},
                                new.scram_credentials, client_quotas=new.client_quotas)
    # The same ACL set keeps its tuple: the authorizer caches its index and decisions by it.
    acls = old.acls if set(old.acls) == set(new.acls) else new.acls
    return image.with_acls(acls).with_brokers(new.brokers.values(), new.controller_id) \
        .with_finalized_features(new.finalized_features, new.features_epoch)
