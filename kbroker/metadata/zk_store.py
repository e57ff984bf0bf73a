"""The metadata store over ZooKeeper (kazoo), in Kafka's classic znode layout (``zk_znodes``).

It implements :class:`kbroker.metadata.store.MetadataStore` one call to one ZooKeeper
transaction (``multi``), and adds what only a cluster has: partition state
(``/brokers/topics/T/partitions/P/state``) read and written with its znode version.

**Every write is conditional.** The store remembers the version of each znode it read or wrote
(``_versions``); a ``set_data`` or ``delete`` names that version, a ``create`` fails if the
znode exists. Once this broker has won the controller election (:meth:`fence`), every
transaction also checks ``/controller_epoch`` at the version this broker's election wrote, as
Kafka's controller does (``KafkaZkClient.retryRequestsUntilConnected`` with
``zkControllerEpochZkVersion``): a controller that was paused while another won cannot
overwrite anything. A write that loses either check raises :class:`StaleMetadataError` and
changes nothing: :class:`ControllerEpochMovedError` when the epoch check lost,
:class:`NodeAlreadyExistsError` when a znode it creates is there already (callers that find
"someone else made it" a success catch that type, never the message).

Topics: ``create_topic`` writes the topic's config, assignment and one state znode per partition
(leader = the first replica, ISR = all replicas, leader epoch 0) in one transaction. ZooKeeper
bounds one transaction by ``jute.maxbuffer`` (1 MiB by default), about 5,000 partitions.
``delete_topic`` first creates ``/admin/delete_topics/T`` (as Kafka's admin does), then deletes
the topic's znodes and the marker in one transaction; ``load`` finishes a deletion a crash
interrupted.

Config changes create a sequential ``/config/changes/config_change_`` notification in the same
transaction, which is how a Kafka broker learns of them. SCRAM credentials and ACLs are written
as deltas by :mod:`zk_security` (``update_scram_credentials``, ``update_acls``).

Concurrency: kazoo calls block the caller for one ZooKeeper round trip (about a millisecond on
a local server); the controller is the one caller.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from kbroker.metadata import zk_security
from kbroker.metadata import zk_znodes as zn
from kbroker.metadata.image import MetadataImage, TopicMetadata
from kbroker.metadata.local_store import new_cluster_id
from kbroker.metadata.store import StaleMetadataError
from kbroker.metadata.zk_errors import ControllerEpochMovedError, NodeAlreadyExistsError

log = logging.getLogger("kbroker.metadata.zk")

_PRODUCER_ID_RETRIES = 20
# Partition states written per ZooKeeper transaction: two creates of ~150 bytes each, far below
# ZooKeeper's 1 MiB request limit (jute.maxbuffer).
STATES_PER_TRANSACTION = 500


class ZkMetadataStore:
    def __init__(self, client: KazooClient, node_id: int, cluster_id: str | None = None):
        self._zk = client
        self._node_id = node_id
        self._versions: dict[str, int] = {}
        self._partition_counts: dict[str, int] = {}
        self._topic_ids: dict[str, object] = {}
        self._epoch: int | None = None            # controller epoch this broker won, if any
        self._epoch_zk_version: int | None = None
        for path in zn.PERSISTENT_PATHS:
            client.ensure_path(path)
        self.cluster_id = self._create_or_get_cluster_id(cluster_id)

    def _create_or_get_cluster_id(self, wanted: str | None) -> str:
        try:
            self._zk.create(zn.CLUSTER_ID, zn.encode_cluster_id(wanted or new_cluster_id()),
                            makepath=True)
        except NodeExistsError:
            pass
        data, _ = self._zk.get(zn.CLUSTER_ID)
        stored = zn.decode_cluster_id(data)
        if wanted and wanted != stored:
            raise ValueError(f"cluster.id {wanted} does not match {stored} stored in ZooKeeper "
                             f"at {zn.CLUSTER_ID}")
        return stored

    # --- fencing ---------------------------------------------------------------------------------

    def fence(self, controller_epoch: int, epoch_zk_version: int) -> None:
        """From now on every write checks ``/controller_epoch`` is still at ``epoch_zk_version``
        (called by the election when this broker becomes controller). Never cleared: after a
        resignation the old version no longer matches, so stale writes fail, as they must."""
        self._epoch = controller_epoch
        self._epoch_zk_version = epoch_zk_version

    def unfence(self) -> None:
        """This broker resigned (the election saw another controller, or its session ended):
        its writes go back to being a plain broker's (topic and config changes, which any
        Kafka broker makes through its admin client), and partition-state writes that need
        the controller are refused. A controller paused past its session never got here: its
        writes stay fenced and fail, as they must."""
        self._epoch = None
        self._epoch_zk_version = None

    @property
    def is_fenced_controller(self) -> bool:
        return self._epoch_zk_version is not None

    @property
    def controller_epoch(self) -> int:
        return self._epoch or 0

    # --- reads -----------------------------------------------------------------------------------

    def _get(self, path: str) -> bytes | None:
        """Data of ``path`` (None if absent), remembering its version for the next write."""
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            self._versions.pop(path, None)
            return None
        self._versions[path] = stat.version
        return data

    def load(self) -> MetadataImage:
        self._finish_deletions()
        topics = []
        for name in sorted(self._zk.get_children(zn.TOPICS)):
            data = self._get(zn.topic_path(name))
            if data is None:
                continue  # deleted since the listing
            topic_id, assignments = zn.decode_topic(data)
            if topic_id is None:
                log.warning("topic %s in ZooKeeper has no topic_id (written by Kafka < 2.8); "
                            "it is skipped", name)
                continue
            self._partition_counts[name] = len(assignments)
            self._topic_ids[name] = topic_id
            configs = zn.decode_config(self._get(zn.topic_config_path(name)))
            topics.append(TopicMetadata(name, topic_id, assignments, configs))
        broker_configs = {
            "cluster": zn.decode_config(self._get(zn.broker_config_path(None))),
            "broker": zn.decode_config(self._get(zn.broker_config_path(self._node_id))),
        }
        credentials, acls, quotas = zk_security.read(self._zk)
        return MetadataImage.build(self.cluster_id, topics, broker_configs, credentials, acls,
                                   client_quotas=quotas)

    def partition_state(self, topic: str, partition: int) -> zn.PartitionState | None:
        try:
            data, stat = self._zk.get(zn.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return zn.PartitionState.decode(data, stat.version)

    # --- writes (the controller only) ------------------------------------------------------------

    def _transaction(self):
        txn = self._zk.transaction()
        if self._epoch_zk_version is not None:
            txn.check(zn.CONTROLLER_EPOCH, self._epoch_zk_version)
        return txn

    def _commit(self, txn, what: str) -> list:
        """Commit; on any failed operation raise StaleMetadataError (or the subclass naming
        the cause's kind) with the cause in its message."""
        return self._check_commit(txn, txn.commit(), what)

    def _check_commit(self, txn, results: list, what: str) -> list:
        """``results`` of ``txn`` (committed, possibly asynchronously), or the error of
        :meth:`_commit` when an operation failed."""
        failures = [r for r in results if isinstance(r, Exception)
                    and not isinstance(r, RolledBackError)]
        if failures:
            failure = failures[0]
            ops = txn.operations
            path = self._zk.unchroot(ops[results.index(failure)].path)
            error = StaleMetadataError
            if self._epoch_zk_version is not None and results[0] is failure:
                error = ControllerEpochMovedError
                reason = (f"the controller epoch moved on (this broker's epoch {self._epoch} "
                          "is stale: another broker is controller)")
            elif isinstance(failure, BadVersionError):
                reason = f"{path} changed since it was read"
            elif isinstance(failure, NodeExistsError):
                error = NodeAlreadyExistsError
                reason = f"{path} already exists"
            elif isinstance(failure, NoNodeError):
                reason = f"{path} does not exist"
            else:
                reason = f"{path}: {type(failure).__name__}"
            raise error(f"{what} refused: {reason}")
        return results

    def _commit_unless_exists(self, txn, what: str) -> bool:
        """Commit; False (nothing written) when a znode it creates already exists."""
        try:
            self._commit(txn, what)
        except NodeAlreadyExistsError:
            return False
        return True

    def _set_or_create(self, txn, path: str, data: bytes) -> None:
        version = self._versions.get(path)
        if version is None:
            txn.create(path, data)
        else:
            txn.set_data(path, data, version)

    def _remember(self, txn, results) -> None:
        """Record the versions our own writes produced, so the next write names them."""
        for op, result in zip(txn.operations, results):
            kind, path = type(op).__name__, self._zk.unchroot(op.path)
            if kind == "SetData":
                self._versions[path] = result.version
            elif kind == "Create":
                self._versions[path] = 0
            elif kind == "Delete":
                self._versions.pop(path, None)

    def _partition_state_ops(self, txn, topic: str, first: int, assignments,
                             last: int | None = None) -> None:
        for p in range(first, len(assignments) if last is None else last):
            replicas = tuple(assignments[p])
            txn.create(f"{zn.TOPICS}/{topic}/partitions/{p}")
            state = zn.PartitionState(replicas[0] if replicas else -1, 0, replicas,
                                      self.controller_epoch)
            txn.create(zn.partition_state_path(topic, p), state.encode())

    def create_topic(self, topic: TopicMetadata) -> None:
        """The topic's znodes and its first partitions' states in one transaction, the other
        states in further ones of STATES_PER_TRANSACTION: ZooKeeper refuses a request above
        its ``jute.maxbuffer`` (1 MiB) by dropping the connection, which a few thousand
        partitions in one transaction would exceed. Until its state is written a partition has
        no leader (Metadata says LEADER_NOT_AVAILABLE), as on Kafka while its controller
        initializes new partitions; a controller finds states left missing by a creator that
        died half-way and writes them (``ClusterController.run_duties``)."""
        txn = self._transaction()
        config_path = zn.topic_config_path(topic.name)
        txn.create(config_path, zn.encode_config(topic.configs))
        txn.create(zn.topic_path(topic.name), zn.encode_topic(topic.topic_id, topic.assignments))
        txn.create(f"{zn.TOPICS}/{topic.name}/partitions")
        first = min(topic.num_partitions, STATES_PER_TRANSACTION)
        self._partition_state_ops(txn, topic.name, 0, topic.assignments, first)
        self._remember(txn, self._commit(txn, f"creating topic {topic.name}"))
        self._partition_counts[topic.name] = topic.num_partitions
        self._topic_ids[topic.name] = topic.topic_id
        self.create_missing_states(topic.name, range(first, topic.num_partitions),
                                   topic.assignments)

    def create_missing_states(self, name: str, partitions, assignments) -> None:
        """Write the initial state of ``partitions`` (leader: the first replica), in
        transactions of at most STATES_PER_TRANSACTION; one already written by someone else is
        left as it is."""
        partitions = list(partitions)
        for start in range(0, len(partitions), STATES_PER_TRANSACTION):
            chunk = partitions[start:start + STATES_PER_TRANSACTION]
            if self._commit_unless_exists(self._states_transaction(name, chunk, assignments),
                                          f"creating the partitions of {name}"):
                continue
            for p in chunk:  # some exist: one at a time, keeping what is there
                self._commit_unless_exists(self._states_transaction(name, [p], assignments),
                                           f"creating partition {name}-{p}")

    def _states_transaction(self, name: str, partitions, assignments):
        txn = self._transaction()
        for p in partitions:
            self._partition_state_ops(txn, name, p, assignments, p + 1)
        return txn

    def set_assignments(self, name: str, assignments: Sequence[Sequence[int]]) -> None:
        path = zn.topic_path(name)
        if path not in self._versions:  # never read by this store: read it, then write on it
            data = self._get(path)
            if data is None:
                raise StaleMetadataError(f"changing the assignment of {name} refused: "
                                         f"{path} does not exist")
            self._topic_ids[name], old = zn.decode_topic(data)
            self._partition_counts[name] = len(old)
        txn = self._transaction()
        txn.set_data(path, zn.encode_topic(self._topic_ids[name], assignments),
                     self._versions[path])
        self._partition_state_ops(txn, name, self._partition_counts[name], assignments)
        # Brokers watch topic creations and deletions (children of /brokers/topics), not each
        # topic's data: this nudge makes them re-read it.
        txn.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change(
            [(name, p) for p in range(self._partition_counts[name], len(assignments))]),
            sequence=True)
        self._remember(txn, self._commit(txn, f"changing the assignment of {name}"))
        self._partition_counts[name] = len(assignments)

    def set_reassignment(self, name: str, assignments, adding, removing) -> None:
        """The controller's step of a reassignment: the topic's replica sets with the
        ``adding``/``removing`` replicas in progress (KIP-455), conditional on the version of
        ``/brokers/topics/T`` this store last read and fenced by the controller epoch; a
        notification makes every broker re-read it."""
        path = zn.topic_path(name)
        if self._epoch_zk_version is None:
            raise StaleMetadataError(f"reassigning {name} refused: broker {self._node_id} is "
                                     "not the controller")
        if path not in self._versions:
            self._get(path)
        txn = self._transaction()
        txn.set_data(path, zn.encode_topic(self._topic_ids.get(name) or self._read_topic_id(name),
                                           assignments, adding, removing),
                     self._versions.get(path, -1))
        txn.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change(
            [(name, p) for p in sorted(set(adding) | set(removing))]), sequence=True)
        self._remember(txn, self._commit(txn, f"reassigning {name}"))

    def _read_topic_id(self, name: str):
        data = self._get(zn.topic_path(name))
        if data is None:
            raise StaleMetadataError(f"reassigning {name} refused: the topic does not exist")
        self._topic_ids[name], _ = zn.decode_topic(data)
        return self._topic_ids[name]

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        path = zn.topic_config_path(name)
        if path not in self._versions:
            self._get(path)
        txn = self._transaction()
        self._set_or_create(txn, path, zn.encode_config(configs))
        txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(f"topics/{name}"),
                   sequence=True)
        self._remember(txn, self._commit(txn, f"altering the configs of {name}"))

    def delete_topic(self, name: str) -> None:
        try:
            self._zk.create(f"{zn.DELETE_TOPICS}/{name}")
        except NodeExistsError:
            pass  # a deletion already under way (or interrupted): finish it
        self._delete_topic_znodes(name)

    def _delete_topic_znodes(self, name: str) -> None:
        txn = self._transaction()
        topic = zn.topic_path(name)
        partitions = f"{topic}/partitions"
        try:
            for p in self._zk.get_children(partitions):
                if self._zk.exists(f"{partitions}/{p}/state"):
                    txn.delete(f"{partitions}/{p}/state")
                txn.delete(f"{partitions}/{p}")
            txn.delete(partitions)
        except NoNodeError:
            pass
        if self._zk.exists(topic):
            txn.delete(topic, self._versions.get(topic, -1))
        config = zn.topic_config_path(name)
        if self._zk.exists(config):
            txn.delete(config, self._versions.get(config, -1))
        txn.delete(f"{zn.DELETE_TOPICS}/{name}")
        self._remember(txn, self._commit(txn, f"deleting topic {name}"))
        self._partition_counts.pop(name, None)
        self._topic_ids.pop(name, None)

    def _finish_deletions(self) -> None:
        for name in self._zk.get_children(zn.DELETE_TOPICS):
            log.info("finishing the deletion of topic %s that was under way", name)
            self._versions.pop(zn.topic_path(name), None)
            self._versions.pop(zn.topic_config_path(name), None)
            self._delete_topic_znodes(name)

    def set_broker_configs(self, configs: Mapping[str, str], *, cluster_default: bool) -> None:
        broker = None if cluster_default else self._node_id
        path = zn.broker_config_path(broker)
        if path not in self._versions:
            self._get(path)
        txn = self._transaction()
        self._set_or_create(txn, path, zn.encode_config(configs))
        entity = zn.DEFAULT_ENTITY if cluster_default else str(self._node_id)
        txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(f"brokers/{entity}"),
                   sequence=True)
        self._remember(txn, self._commit(txn, f"altering broker configs ({entity})"))

    def set_partition_state(self, topic: str, partition: int, state: zn.PartitionState,
                            fenced: bool = True) -> zn.PartitionState:
        """Write ``state`` if the znode is still at ``state.zk_version``; return it with the new
        version. A leader or controller holding an older version gets StaleMetadataError.

        ``fenced`` (the controller's writes) also checks the controller epoch; a leader changing
        its own ISR is not the controller and is fenced by the znode version alone (Kafka's
        ZooKeeper-era ``updateLeaderAndIsr`` from the partition leader). Either way the same
        transaction adds an ``/isr_change_notification`` child: every broker watches it and
        re-reads the partition states (the notification is a nudge, never the data)."""
        if fenced and self._epoch_zk_version is None:
            raise StaleMetadataError(f"updating the state of {topic}-{partition} refused: "
                                     f"broker {self._node_id} is not the controller")
        txn = self._transaction() if fenced else self._zk.transaction()
        txn.set_data(zn.partition_state_path(topic, partition), state.encode(), state.zk_version)
        txn.create(zn.ISR_CHANGE_PREFIX, zn.encode_isr_change([(topic, partition)]),
                   sequence=True)
        results = self._commit(txn, f"updating the state of {topic}-{partition}")
        new_version = results[-2].version
        return zn.PartitionState(state.leader, state.leader_epoch, state.isr,
                                 state.controller_epoch, new_version)

    def set_client_quotas(self, quotas, changed=()) -> None:
        """Write the ``changed`` entities' znodes (Kafka's ZooKeeper-mode layout, with a
        /config/changes notification each) in one transaction. Keys other than quotas in the
        same znode (SCRAM credentials in /config/users/U) are kept; an entity with no quota
        left keeps its znode with an empty config, as Kafka's ZooKeeper mode leaves it."""
        txn = self._transaction()
        written = set()  # paths this transaction creates or sets: each only once
        # Parents first: users/U is written before users/U/clients/C needs it to exist.
        for entity_path, entity in sorted((zn.quota_entity_path(e), e) for e in changed):
            path = f"/config/{entity_path}"
            parts = entity_path.split("/")
            if len(parts) == 4:  # users/U/clients/C: the parents may not exist yet
                for parent in (f"/config/users/{parts[1]}", f"/config/users/{parts[1]}/clients"):
                    if parent not in written and self._get(parent) is None:
                        txn.create(parent, b"")
                        written.add(parent)
            written.add(path)
            current = zn.decode_config(self._get(path))
            config = {k: v for k, v in current.items() if k not in zk_security.QUOTA_KEYS}
            config.update({k: zn.encode_quota_value(k, v)
                           for k, v in quotas.get(entity, {}).items()})
            self._set_or_create(txn, path, zn.encode_config(config))
            txn.create(zn.CONFIG_CHANGE_PREFIX, zn.encode_config_change(entity_path),
                       sequence=True)
        self._remember(txn, self._commit(txn, "altering client quotas"))

    def remember_versions(self, versions: Mapping[str, int]) -> None:
        """Adopt the znode versions of a fresh read of the tree (``zk_image``), so the next
        conditional write names what the current image shows (another broker may have changed
        a topic's config or assignment since this store last wrote it)."""
        self._versions.update(versions)

    def update_scram_credentials(self, upserts, deletions) -> None:
        """Cluster mode writes deltas, never a whole set from a possibly stale image: each
        user's /config/users/<user> read, changed and written back conditionally
        (``zk_security``)."""
        zk_security.update_scram_credentials(self, upserts, deletions)

    def update_acls(self, added, removed) -> dict:
        """The same for ACLs: each touched /kafka-acl[-extended/prefixed]/<Type>/<name> znode
        read, changed and written back conditionally, with Kafka's change notifications, one
        resource at a time; returns ACL -> why for each one a resource's failure left undone."""
        return zk_security.update_acls(self, added, removed)

    def set_finalized_features(self, levels) -> int:
        """Kafka's /feature znode, written conditionally on the version this broker read (two
        brokers finalizing at once: the second gets StaleMetadataError and the client retries).
        Returns the new epoch (from the znode version, as Kafka's)."""
        data = zn.encode_features(levels)
        current = self._zk.exists(zn.FEATURE)
        try:
            if current is None:
                self._zk.create(zn.FEATURE, data)
                return zn.features_epoch(0)
            stat = self._zk.set(zn.FEATURE, data, current.version)
        except (BadVersionError, NodeExistsError):
            raise StaleMetadataError("the finalized features changed meanwhile; "
                                     "try again") from None
        return zn.features_epoch(stat.version)

    def allocate_producer_id_block(self, size: int) -> int:
        """Kafka's ZooKeeper-era scheme: read the latest block, claim the next one with a write
        conditional on the version read, retry if another broker claimed it first. The counter
        is shared by every broker, so it is not fenced by the controller epoch."""
        for _ in range(_PRODUCER_ID_RETRIES):
            data, stat = self._zk.get(zn.PRODUCER_ID_BLOCK)
            first = zn.decode_producer_id_block_end(data) + 1
            try:
                self._zk.set(zn.PRODUCER_ID_BLOCK,
                             zn.encode_producer_id_block(self._node_id, first, size), stat.version)
            except BadVersionError:
                continue
            return first
        raise StaleMetadataError(f"could not claim a producer id block in "
                                 f"{_PRODUCER_ID_RETRIES} tries (too much contention)")
