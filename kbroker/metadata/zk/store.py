"""The metadata store over ZooKeeper, in Kafka's classic znode layout (:mod:`.znodes`).

It implements :class:`kbroker.metadata.store.MetadataStore`: ``commit(delta)`` writes each kind
of change in a delta as ZooKeeper transactions (``multi``), asynchronously (kazoo's
``commit_async``, awaited through :mod:`.client`, never blocking the event loop).

**Every write is conditional.** A ``set_data`` or ``delete`` names the znode version last read
or written (:class:`~.reader.ZnodeVersions`; a partition state names the version in the
image), a ``create`` fails if the znode exists. Once this broker has won the controller
election (:meth:`fence`), every transaction also checks ``/controller_epoch`` at the version its
election wrote, as Kafka's controller does (``zkControllerEpochZkVersion``): a controller that
was paused while another won cannot overwrite anything. A write that loses raises
:class:`StaleMetadataError` (:class:`FencedError` when the epoch check lost,
:class:`AlreadyExistsError` when a znode it creates exists) and changes nothing; a dropped
connection raises :class:`StoreUnavailableError` (the outcome is unknown until the next read).

What each field of a delta writes:

- ``created``: the topic's config, assignment and one state znode per partition (leader = the
  first replica, ISR = all replicas, leader epoch 0) in one transaction, the states beyond the
  first ``STATES_PER_TRANSACTION`` in further ones, each with an ``/isr_change_notification``
  naming its partitions (ZooKeeper drops a request above ``jute.maxbuffer``, 1 MiB, about 5,000
  partitions). Until its state is written a partition has no leader (LEADER_NOT_AVAILABLE), as
  on Kafka while its controller initializes new partitions; the elected controller writes the
  states a creator that died half-way left missing.
- ``deleted``: ``/admin/delete_topics/T`` first (as Kafka's admin does: brokers stop serving the
  topic), then its znodes and the marker; :meth:`load` finishes a deletion a crash interrupted.
- ``assignments``: ``/brokers/topics/T`` (every broker watches its data), with the states of the
  partitions it adds and, for a finished reassignment, the state changes, in one transaction.
- ``topic_configs``, ``broker_configs``: the config znode with a sequential
  ``/config/changes/config_change_`` notification, which is how a Kafka broker learns of it.
- ``states``: each partition's state znode, conditional on its version, in transactions of
  ``STATES_PER_TRANSACTION`` with one ISR change notification each; a transaction that loses is
  retried a partition at a time, and the partitions that still lose are refused (the
  controller's next round decides again; a leader whose ISR change is refused waits for the
  next image). A leader's own ISR changes (``isr_only``, many leaders' changes batched by the
  controller) are fenced by the state version alone: a leader is not the controller.
- SCRAM credentials, ACLs and client quotas: read-modify-write deltas (:mod:`.security`).
- ``features``: ``/feature``, conditional on the version read.
- ``tokens``: ``/delegation_token/tokens/<id>`` with a ``token_changes`` notification each
  (:mod:`.tokens`).
- ``group_configs``: ``/config/groups/<group>`` (created, updated, or deleted when the group has
  no config left), conditional on its version, with a ``/config/changes`` notification naming
  ``groups/<group>``, one transaction per group.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MISSING_STATE, MetadataImage, PartitionState, TopicMetadata
from kbroker.metadata.store import (AlreadyExistsError, Commit, FencedError, StaleMetadataError,
                                    StoreUnavailableError, new_cluster_id)
from kbroker.metadata.zk import security, tokens
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.client import ZK_ERRORS, aio, gather, submit
from kbroker.metadata.zk.reader import ZkReader, ZnodeVersions

log = logging.getLogger("kbroker.metadata.zk")

_PRODUCER_ID_RETRIES = 20
# Partition states written per ZooKeeper transaction: two creates of ~150 bytes each, far below
# ZooKeeper's 1 MiB request limit (jute.maxbuffer).
STATES_PER_TRANSACTION = 500
# Znodes deleted per transaction when a topic goes (a path is ~60 bytes).
DELETES_PER_TRANSACTION = 5000
_NOTIFICATION_PREFIXES = (zn.ISR_CHANGE_PREFIX, zn.CONFIG_CHANGE_PREFIX, zn.TOKEN_CHANGE_PREFIX,
                          f"{zn.ACL_CHANGES}/{zn.ACL_CHANGE_SEQUENCE}",
                          f"{zn.EXTENDED_ACL_CHANGES}/{zn.ACL_CHANGE_SEQUENCE}")
# Own notifications remembered until the sync sees them (a bound: one it never sees is dropped).
_OWN_NOTIFICATIONS_KEPT = 10_000


class ZkMetadataStore:
    replicated = True

    def __init__(self, client, node_id: int, cluster_id: str):
        self._zk = client
        self._node_id = node_id
        self.cluster_id = cluster_id
        self.versions = ZnodeVersions()
        self.reader = ZkReader(client, cluster_id, node_id, self.versions)
        # Sequential notifications this store created, oldest first (path -> None).
        self.own_notifications: dict[str, None] = {}
        # (controller epoch, /controller_epoch's znode version) while this broker is controller;
        # replaced whole from the election's thread, read once per transaction.
        self._fencing: tuple[int, int] | None = None
        self._parents: set[str] = set()  # lazily created persistent parents (/config/groups)

    @classmethod
    async def open(cls, client, node_id: int, cluster_id: str | None = None
                   ) -> "ZkMetadataStore":
        """The persistent paths a Kafka broker creates, and ``/cluster/id`` (created if absent;
        ValueError if it holds another id than ``cluster_id``)."""
        await gather([client.ensure_path_async(path) for path in zn.PERSISTENT_PATHS])
        try:
            await aio(client.create_async(
                zn.CLUSTER_ID, zn.encode_cluster_id(cluster_id or new_cluster_id()),
                makepath=True))
        except NodeExistsError:
            pass
        data, _ = await aio(client.get_async(zn.CLUSTER_ID))
        stored = zn.decode_cluster_id(data)
        if cluster_id and cluster_id != stored:
            raise ValueError(f"cluster.id {cluster_id} does not match {stored} stored in "
                             f"ZooKeeper at {zn.CLUSTER_ID}")
        return cls(client, node_id, stored)

    # --- fencing (called by the election, on kazoo's thread) -------------------------------------

    def fence(self, controller_epoch: int, epoch_zk_version: int) -> None:
        """From now on every write checks ``/controller_epoch`` is still at ``epoch_zk_version``
        (this broker became controller). After a resignation the old version no longer matches,
        so a stale controller's writes fail, as they must."""
        self._fencing = (controller_epoch, epoch_zk_version)

    def unfence(self) -> None:
        """This broker resigned: its writes go back to being a plain broker's (topic and config
        changes, which any Kafka broker makes through its admin client), and the controller's
        writes are refused. A controller paused past its session never got here: its writes
        stay fenced and fail."""
        self._fencing = None

    @property
    def is_controller(self) -> bool:
        return self._fencing is not None

    @property
    def controller_epoch(self) -> int:
        fencing = self._fencing
        return fencing[0] if fencing else 0

    # --- reads ----------------------------------------------------------------------------------

    async def load(self) -> MetadataImage:
        await self.finish_deletions()
        return await self._guarded(self.reader.read_image(), writes=False)

    async def finish_deletions(self) -> None:
        """Complete the topic deletions a crash interrupted (``/admin/delete_topics/T`` left)."""
        await self._guarded(self._finish_deletions())

    async def reread(self, delta: MetadataDelta) -> MetadataDelta:
        """The current content of what ``delta`` touches: its topics whole (or gone), its
        config entities, its features."""
        return await self._guarded(self._reread(delta), writes=False)

    async def _reread(self, delta: MetadataDelta) -> MetadataDelta:
        names = (set(delta.created) | set(delta.assignments) | set(delta.topic_configs)
                 | {name for name, _ in delta.states})
        topics = await self.reader.read_topics(sorted(names))
        fresh = MetadataDelta(created={n: t for n, t in topics.items() if t is not None},
                              deleted=frozenset(n for n, t in topics.items() if t is None))
        image = MetadataImage.build(self.cluster_id)
        for scope in delta.broker_configs:
            fresh = fresh.merged(await self.reader.read_entity(
                image, "brokers/" + (zn.DEFAULT_ENTITY if scope == "cluster"
                                     else str(self._node_id))))
        if delta.features is not None:
            fresh = fresh.merged(await self.reader.read_features(image))
        if delta.group_configs:
            fresh = fresh.merged(MetadataDelta(group_configs=await self.reader.read_group_configs(
                list(delta.group_configs))))
        return fresh

    # --- transactions ---------------------------------------------------------------------------

    def transaction(self, fenced: bool = True):
        txn = self._zk.transaction()
        fencing = self._fencing
        if fenced and fencing is not None:
            txn.check(zn.CONTROLLER_EPOCH, fencing[1])
        return txn

    async def run(self, txn, what: str) -> list:
        """Commit ``txn``; on any failed operation raise StaleMetadataError (or the kind naming
        the cause) with the cause in its message."""
        results = await aio(txn.commit_async())
        self._check(txn, results, what)
        return results

    def _committed(self, txn, results: list) -> None:
        """What a transaction that committed wrote: the versions (the next conditional write
        names them), and the notifications it created (this broker's sync skips them: the
        image has their content already)."""
        for op, result in zip(txn.operations, results):
            kind, path = type(op).__name__, self._zk.unchroot(op.path)
            if kind == "SetData":
                self.versions.remember(path, result)
            elif kind == "Create":
                if path.startswith(_NOTIFICATION_PREFIXES):
                    self.own_notifications[result] = None  # kazoo answers it unchrooted
                else:
                    self.versions.wrote(path, 0)
            elif kind == "Delete":
                self.versions.forget(path)
        while len(self.own_notifications) > _OWN_NOTIFICATIONS_KEPT:
            del self.own_notifications[next(iter(self.own_notifications))]

    def _check(self, txn, results: list, what: str) -> None:
        """Raise the error of a transaction that did not commit; take in what one that did
        wrote."""
        failures = [r for r in results if isinstance(r, Exception)
                    and not isinstance(r, RolledBackError)]
        if not failures:
            self._committed(txn, results)
            return
        failure = failures[0]
        op = txn.operations[results.index(failure)]
        path = self._zk.unchroot(op.path)
        error = StaleMetadataError
        if type(op).__name__ == "CheckVersion" and path == zn.CONTROLLER_EPOCH:
            error = FencedError
            reason = (f"the controller epoch moved on (this broker's epoch "
                      f"{self.controller_epoch} is stale: another broker is controller)")
        elif isinstance(failure, BadVersionError):
            reason = f"{path} changed since it was read"
        elif isinstance(failure, NodeExistsError):
            error = AlreadyExistsError
            reason = f"{path} already exists"
        elif isinstance(failure, NoNodeError):
            reason = f"{path} does not exist"
        else:
            reason = f"{path}: {type(failure).__name__}"
        raise error(f"{what} refused: {reason}")

    async def _guarded(self, work, writes: bool = True):
        """``work`` awaited, a lost connection (or a server that stopped answering) raised as
        StoreUnavailableError."""
        try:
            return await work
        except (StaleMetadataError, ValueError):
            raise
        except (*ZK_ERRORS, TimeoutError) as exc:
            raise StoreUnavailableError(
                f"ZooKeeper did not answer ({type(exc).__name__}: {exc})"
                + ("; the change may or may not be made" if writes else "")) from None

    async def _version(self, path: str) -> int | None:
        """The version a write of ``path`` names: the one last read or written, or read now."""
        version = self.versions.version(path)
        if version is None:
            stat = (await self.reader.exists_many([path])).get(path)
            if stat is not None:
                self.versions.remember(path, stat)
                version = stat.version
        return version

    async def _set_or_create(self, txn, path: str, data: bytes) -> None:
        version = await self._version(path)
        if version is None:
            txn.create(path, data)
        else:
            txn.set_data(path, data, version)

    # --- commit ---------------------------------------------------------------------------------

    async def commit(self, delta: MetadataDelta) -> Commit:
        return await self._guarded(self._commit(delta))

    async def _commit(self, delta: MetadataDelta) -> Commit:
        stored, refused = delta, {}
        for name in sorted(delta.deleted):
            await self._delete_topic(name)
        created = {}
        for name, topic in delta.created.items():
            created[name] = await self._create_topic(topic)
        if created:
            stored = replace(stored, created=created)
        states, written = dict(delta.states), {}
        for name, assignment in delta.assignments.items():
            mine = {key: states.pop(key) for key in [k for k in states if k[0] == name]}
            written.update(await self._set_assignment(name, assignment, mine))
        for name, configs in delta.topic_configs.items():
            await self._set_config(zn.topic_config_path(name), configs, f"topics/{name}",
                                   f"altering the configs of {name}")
        if states:
            if not delta.isr_only and not self.is_controller:
                raise FencedError(f"updating partition states refused: broker {self._node_id} "
                                  "is not the controller")
            changed, refused = await self._set_states(states, delta.isr_only)
            written.update(changed)
        if delta.states:
            stored = stored.with_states(written)
        for scope, configs in delta.broker_configs.items():
            entity = zn.DEFAULT_ENTITY if scope == "cluster" else str(self._node_id)
            await self._set_config(zn.broker_config_path(None if scope == "cluster"
                                                         else self._node_id),
                                   configs, f"brokers/{entity}",
                                   f"altering broker configs ({entity})")
        if delta.scram:
            await security.update_scram_credentials(self, delta.scram)
        if delta.acls_added or delta.acls_removed:
            failures = await security.update_acls(self, delta.acls_added, delta.acls_removed)
            refused.update(failures)
            stored = replace(stored, acls_added=tuple(a for a in delta.acls_added
                                                      if tuple(a) not in failures),
                             acls_removed=tuple(a for a in delta.acls_removed
                                                if tuple(a) not in failures))
        if delta.client_quotas:
            await security.set_client_quotas(self, delta.client_quotas)
        if delta.features is not None:
            stored = replace(stored, features_epoch=await self._set_features(delta.features))
        if delta.tokens:
            await tokens.write_tokens(self, delta.tokens)
        for group_id, configs in delta.group_configs.items():
            await self._set_group_config(group_id, configs)
        return Commit(stored, refused)

    # --- topics -----------------------------------------------------------------------------------

    def _partition_ops(self, txn, name: str, partitions: dict[int, PartitionState]) -> None:
        for p, state in sorted(partitions.items()):
            txn.create(f"{zn.TOPICS}/{name}/partitions/{p}")
            txn.create(zn.partition_state_path(name, p), self._encode_state(state))

    def _encode_state(self, state: PartitionState) -> bytes:
        return zn.PartitionState(state.leader, state.leader_epoch, tuple(state.isr),
                                 state.controller_epoch).encode()

    async def _create_topic(self, topic: TopicMetadata) -> TopicMetadata:
        name = topic.name
        states = {p: topic.state(p) for p in range(topic.num_partitions)}
        first = dict(list(states.items())[:STATES_PER_TRANSACTION])
        txn = self.transaction()
        txn.create(zn.topic_config_path(name), zn.encode_config(topic.configs))
        txn.create(zn.topic_path(name), zn.encode_topic(topic.topic_id, topic.assignments))
        txn.create(f"{zn.TOPICS}/{name}/partitions")
        self._partition_ops(txn, name, first)
        await self.run(txn, f"creating topic {name}")
        held = {p: replace(s, version=0) for p, s in first.items()}
        held.update(await self._create_states(
            name, {p: s for p, s in states.items() if p not in first}))
        return topic.with_states(held.get(p, MISSING_STATE) for p in sorted(states))

    async def _create_states(self, name: str, states: dict[int, PartitionState]
                             ) -> dict[int, PartitionState]:
        """The first states of partitions whose znodes are not there, in transactions of
        STATES_PER_TRANSACTION (all in flight at once), each with an ISR change notification
        naming them. A state someone else wrote meanwhile is kept: what each partition's znode
        holds afterwards is returned (partition -> state, with its version)."""
        chunks = _chunks(sorted(states), STATES_PER_TRANSACTION)
        txns = []
        for chunk in chunks:
            txn = self.transaction()
            self._partition_ops(txn, name, {p: states[p] for p in chunk})
            txn.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change([(name, p) for p in chunk]),
                       sequence=True)
            txns.append(txn)
        results = await gather(submit(self._zk, [txn.commit_async for txn in txns]))
        held, existing = {}, []
        for chunk, txn, result in zip(chunks, txns, results):
            if isinstance(result, Exception):
                raise result
            try:
                self._check(txn, result, f"creating the partitions of {name}")
                held.update({p: replace(states[p], version=0) for p in chunk})
                continue
            except AlreadyExistsError:
                pass
            for p in chunk:  # some exist: one at a time, keeping what is there
                one = self.transaction()
                self._partition_ops(one, name, {p: states[p]})
                one.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change([(name, p)]),
                           sequence=True)
                try:
                    await self.run(one, f"creating partition {name}-{p}")
                    held[p] = replace(states[p], version=0)
                except AlreadyExistsError:
                    existing.append(p)
        if existing:
            # Written by a creator that may have died before announcing them: every broker
            # reads them now, rather than at its next full read.
            await aio(self._zk.create_async(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change(
                [(name, p) for p in existing]), sequence=True))
        paths = {p: zn.partition_state_path(name, p) for p in existing}
        found = await self.reader.get_many(paths.values())
        for p, path in paths.items():
            if path in found:
                data, stat = found[path]
                s = zn.PartitionState.decode(data, stat.version)
                held[p] = PartitionState(s.leader, s.leader_epoch, s.isr, s.zk_version,
                                         s.controller_epoch)
        return held

    async def _delete_topic(self, name: str) -> None:
        try:
            await aio(self._zk.create_async(f"{zn.DELETE_TOPICS}/{name}"))
        except NodeExistsError:
            pass  # a deletion already under way (or interrupted): finish it
        partitions = f"{zn.topic_path(name)}/partitions"
        indexes = await self.reader.children(partitions)
        states = await self.reader.exists_many(f"{partitions}/{p}/state" for p in indexes)
        paths = [path for p in indexes for path in (f"{partitions}/{p}/state",
                                                    f"{partitions}/{p}") if
                 not path.endswith("/state") or path in states]
        for chunk in _chunks(paths, DELETES_PER_TRANSACTION):
            txn = self.transaction()
            for path in chunk:
                txn.delete(path)
            await self.run(txn, f"deleting the partitions of {name}")
        present = await self.reader.exists_many([partitions, zn.topic_path(name),
                                                 zn.topic_config_path(name)])
        txn = self.transaction()
        for path in (partitions, zn.topic_path(name), zn.topic_config_path(name)):
            if path in present:
                txn.delete(path, present[path].version)
        txn.delete(f"{zn.DELETE_TOPICS}/{name}")
        await self.run(txn, f"deleting topic {name}")
        self.versions.forget_under(zn.topic_path(name))
        self.versions.forget(zn.topic_config_path(name))

    async def _finish_deletions(self) -> None:
        for name in await self.reader.children(zn.DELETE_TOPICS):
            log.info("finishing the deletion of topic %s that was under way", name)
            await self._delete_topic(name)

    async def _set_assignment(self, name: str, assignment, states: dict
                              ) -> dict[tuple[str, int], PartitionState]:
        """The topic znode, the first states of the partitions it adds and the state changes
        of a finished reassignment: one transaction (more states in further ones)."""
        path = zn.topic_path(name)
        version = await self._version(path)
        if version is None:
            raise StaleMetadataError(f"changing the assignment of {name} refused: {path} does "
                                     "not exist")
        data, _ = await aio(self._zk.get_async(path))
        topic_id, _ = zn.decode_topic(data)
        adding = {p: m[0] for p, m in assignment.reassigning.items() if m[0]}
        removing = {p: m[1] for p, m in assignment.reassigning.items() if m[1]}
        new = {k[1]: s for k, s in states.items() if s.version == MISSING_STATE.version}
        changed = {k: s for k, s in states.items() if s.version != MISSING_STATE.version}
        first = dict(list(sorted(new.items()))[:STATES_PER_TRANSACTION])
        txn = self.transaction()
        txn.set_data(path, zn.encode_topic(topic_id, assignment.replicas, adding, removing),
                     version)
        self._partition_ops(txn, name, first)
        for (_, p), state in changed.items():
            txn.set_data(zn.partition_state_path(name, p), self._encode_state(state),
                         state.version)
        if changed:
            txn.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change(sorted(changed)),
                       sequence=True)
        results = await self.run(txn, f"changing the assignment of {name}")
        held = {p: replace(s, version=0) for p, s in first.items()}
        held.update(await self._create_states(
            name, {p: s for p, s in new.items() if p not in first}))
        written = {(name, p): s for p, s in held.items()}
        written.update(self._written_states(txn, results, changed))
        return written

    def _written_states(self, txn, results, states: dict) -> dict:
        """(topic, partition) -> the state ``txn`` wrote, with the version it got."""
        written = {}
        for op, result in zip(txn.operations, results):
            path = self._zk.unchroot(op.path)
            if type(op).__name__ == "SetData" and path.endswith("/state"):
                _, name, _, index, _ = path.rsplit("/", 4)
                key = (name, int(index))
                written[key] = replace(states[key], version=result.version)
        return written

    async def _set_config(self, path: str, configs, entity_path: str, what: str) -> None:
        txn = self.transaction()
        await self._set_or_create(txn, path, zn.encode_config(configs))
        txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(entity_path), sequence=True)
        await self.run(txn, what)

    async def _set_group_config(self, group_id: str, configs) -> None:
        """``/config/groups/<group>`` made ``configs``, or deleted when empty, and the
        notification every broker's sync reads."""
        path = zn.group_config_path(group_id)
        what = f"altering the configs of group {group_id}"
        txn = self.transaction()
        if configs:
            await self._ensure_parent(zn.GROUP_CONFIGS)
            await self._set_or_create(txn, path, zn.encode_config(configs))
        else:
            version = await self._version(path)
            if version is None:
                return  # nothing stored: nothing to delete
            txn.delete(path, version)
        txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(zn.group_entity_path(
            group_id)), sequence=True)
        await self.run(txn, what)

    async def _ensure_parent(self, path: str) -> None:
        """Create ``path`` (a persistent parent Kafka 3.x does not create) if missing."""
        if path in self._parents:
            return
        await aio(self._zk.ensure_path_async(path))
        self._parents.add(path)

    # --- partition states -----------------------------------------------------------------------

    async def _set_states(self, states: dict, isr_only: bool,
                          size: int = STATES_PER_TRANSACTION) -> tuple[dict, dict]:
        """(states written, with their new versions; (topic, partition) -> why, for those
        refused). Chunks go out at once; a chunk that loses goes again a partition at a time."""
        creates = {k: s for k, s in states.items() if s.version == MISSING_STATE.version}
        updates = sorted(k for k in states if k not in creates)
        written, refused = {}, {}
        by_topic: dict[str, dict[int, PartitionState]] = {}
        for (name, p), state in creates.items():
            by_topic.setdefault(name, {})[p] = state
        for name, missing in by_topic.items():
            held = await self._create_states(name, missing)
            written.update({(name, p): s for p, s in held.items()})
        chunks = _chunks(updates, size)
        txns = [self._states_transaction(chunk, states, isr_only) for chunk in chunks]
        results = await gather(submit(self._zk, [txn.commit_async for txn in txns]))
        for chunk, txn, result in zip(chunks, txns, results):
            if isinstance(result, Exception):
                raise result
            try:
                self._check(txn, result, "updating partition states")
            except FencedError:
                raise
            except StaleMetadataError as exc:
                if len(chunk) == 1:
                    refused[chunk[0]] = exc
                    continue
                one_by_one = await self._set_states({k: states[k] for k in chunk}, isr_only, 1)
                written.update(one_by_one[0])
                refused.update(one_by_one[1])
                continue
            written.update(self._written_states(txn, result, states))
        if size > 1:  # once, not again for the partitions retried one at a time
            for key, state in written.items():
                log.info("%s-%d: leader %d, leader epoch %d, ISR %s", key[0], key[1],
                         state.leader, state.leader_epoch, list(state.isr))
            for key, exc in refused.items():
                log.info("partition state change skipped: %s", exc)
        return written, refused

    def _states_transaction(self, chunk, states, isr_only: bool):
        txn = self.transaction(fenced=not isr_only)
        for name, p in chunk:
            state = states[(name, p)]
            txn.set_data(zn.partition_state_path(name, p), self._encode_state(state),
                         state.version)
        txn.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change(chunk), sequence=True)
        return txn

    # --- features and producer ids ----------------------------------------------------------------

    async def _set_features(self, levels) -> int:
        """Kafka's /feature znode, conditional on the version read (two brokers finalizing at
        once: the second loses and the client retries). The new epoch, from the znode
        version as Kafka's."""
        data = zn.encode_features(levels)
        current = (await self.reader.exists_many([zn.FEATURE])).get(zn.FEATURE)
        try:
            if current is None:
                await aio(self._zk.create_async(zn.FEATURE, data))
                return zn.features_epoch(0)
            stat = await aio(self._zk.set_async(zn.FEATURE, data, current.version))
        except (BadVersionError, NodeExistsError):
            raise StaleMetadataError("the finalized features changed meanwhile; "
                                     "try again") from None
        return zn.features_epoch(stat.version)

    async def allocate_producer_ids(self, size: int) -> int:
        """Kafka's ZooKeeper-era scheme: read the latest block, claim the next one with a write
        conditional on the version read, retry if another broker claimed it first. The counter
        is shared by every broker, so it is not fenced by the controller epoch."""
        return await self._guarded(self._allocate_producer_ids(size))

    async def _allocate_producer_ids(self, size: int) -> int:
        for _ in range(_PRODUCER_ID_RETRIES):
            data, stat = await aio(self._zk.get_async(zn.PRODUCER_ID_BLOCK))
            first = zn.decode_producer_id_block_end(data) + 1
            try:
                await aio(self._zk.set_async(
                    zn.PRODUCER_ID_BLOCK, zn.encode_producer_id_block(self._node_id, first, size),
                    stat.version))
            except BadVersionError:
                await asyncio.sleep(0)
                continue
            return first
        raise StaleMetadataError(f"could not claim a producer id block in "
                                 f"{_PRODUCER_ID_RETRIES} tries (too much contention)")


def _chunks(items, size: int) -> list[list]:
    items = list(items)
    return [items[i:i + size] for i in range(0, len(items), size)]
