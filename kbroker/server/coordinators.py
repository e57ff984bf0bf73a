"""The broker's coordinators, built when the broker first needs them.

The group, transaction and share coordinators, the share-partition manager and the share groups'
dead-letter writer hang together: the transaction coordinator commits offsets through the group
coordinator, share groups keep their state through the share coordinator's persister, and share
partitions read their group's configs from the group coordinator. Importing and building them
is a third of a broker's start-up, and most brokers a test starts (and many a developer starts)
never see a group or a transaction. So they are built on first use, all at once:

- by the first request that reaches one (``RequestContext.groups``, ``.txn``, ``.share`` ...:
  FindCoordinator, JoinGroup, a transactional produce, ShareFetch ...);
- at start-up when there is something to load or follow: an internal topic
  (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``) in the metadata, or
  a cluster (ZooKeeper mode), where this broker may come to lead a coordinator partition at any
  time;
- when an internal topic appears later by another way (an admin's CreateTopics): on the next turn
  of the event loop, so that their shards load from the image that holds it.

The metrics and the console read what is built (``group``, ``share_partitions`` ... are None
before) and never build anything themselves.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("kbroker")

# The topics whose shards a coordinator replays: their presence means state to load.
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


class Coordinators:
    def __init__(self, broker):
        self._broker = broker
        self.built = False
        self.group = None  # kbroker.coordinator.group.coordinator.GroupCoordinator
        self.txn = None  # kbroker.coordinator.txn.coordinator.TransactionCoordinator
        self.share = None  # kbroker.coordinator.share.coordinator.ShareCoordinator
        self.share_persister = None  # what share partitions and share groups persist through
        self.share_partitions = None  # kbroker.share.manager.SharePartitionManager
        self.dlq_channel = None  # share-group DLQ produces to other brokers (kbroker.share.dlq)

    def ensure(self) -> "Coordinators":
        """Build them if they are not yet; returns self."""
        if not self.built:
            self._build()
        return self

    def needed_at_start(self, image) -> bool:
        return self._broker.cluster is not None or \
            any(image.topic(name) is not None for name in INTERNAL_TOPICS)

    def follow_internal_topics(self, controller) -> None:
        """Build them once an internal topic appears (see the module docstring)."""
        controller.subscribe(_InternalTopicWatch(self))

    def _build(self) -> None:
        self.built = True
        broker = self._broker
        config, controller, replicas = broker.config, broker.controller, broker.replicas
        from kbroker.coordinator.share.coordinator import BrokerPersister, ShareCoordinator
        # Loads the shards of __share_group_state (when it exists) by replaying them, once
        # started; share partitions and share groups keep their state through its persister.
        self.share = ShareCoordinator(config, controller, replicas)
        self.share_persister = BrokerPersister(self.share, config)
        from kbroker.coordinator.group.coordinator import GroupCoordinator
        from kbroker.coordinator.group.share.end_offsets import PartitionEndOffsets
        # Loads the shards of __consumer_offsets (when it exists) by replaying them. Share groups
        # initialize and delete share-partition state through the persister, and read each
        # partition's latest offset from its leader for DescribeShareGroupOffsets' lag.
        self.group = GroupCoordinator(
            config, controller, replicas, share_persister=self.share_persister,
            share_end_offsets=PartitionEndOffsets(
                broker.node_id, replicas, lambda: controller.image,
                config.inter_broker_listener_name, config.get("request.timeout.ms") / 1000,
                lambda: getattr(replicas, "inter_broker_security", None)))
        self.group.start()
        from kbroker.coordinator.txn.coordinator import TransactionCoordinator
        # Loads the shards of __transaction_state (when it exists); resumes markers, timeouts.
        self.txn = TransactionCoordinator(config, controller, replicas, broker.producer_ids,
                                          self.group)
        self.txn.start()
        self.share.start()
        # Coordinator shards follow leadership of their internal-topic partition (on a single
        # node: the topic's creation); listeners run in order, and these come after the replica
        # manager's, so the partition has its new role before its shard loads.
        controller.subscribe(self.group.runtime)
        controller.subscribe(self.txn.runtime)
        controller.subscribe(self.share.runtime)
        controller.subscribe(self.share)  # drops states of deleted topics
        from kbroker.coordinator.interbroker import InterBrokerChannel
        from kbroker.share.dlq import DeadLetterWriter
        from kbroker.share.manager import SharePartitionManager
        # Share groups' dead-letter queues (KIP-1191): the DLQ partition may be led by another
        # broker, reached over the inter-broker listener on a channel of its own.
        self.dlq_channel = InterBrokerChannel(
            broker.node_id, config.get("request.timeout.ms") / 1000, "share-dlq",
            lambda: getattr(replicas, "inter_broker_security", None))
        dead_letters = DeadLetterWriter(broker.node_id, config, lambda: controller.image,
                                        replicas, controller, self.dlq_channel,
                                        config.inter_broker_listener_name)
        # Share partitions (ShareFetch/ShareAcknowledge) keep their state through the persister
        # and read their group's share.* configs from the group coordinator.
        self.share_partitions = SharePartitionManager(
            self.share_persister, self.group.share_group_settings,
            config.get("group.share.max.share.sessions"), replicas.wait_for_news,
            broker.node_id, dead_letters)
        controller.subscribe(self.share_partitions)

    def close_channels(self) -> None:
        """First step of a stop: calls waiting on other brokers end, share sessions close."""
        if self.share_partitions is not None:
            self.share_partitions.close()
        if self.dlq_channel is not None:
            self.dlq_channel.close()
        if self.share_persister is not None:
            self.share_persister.close()  # cancels calls waiting on other brokers
        if self.group is not None and self.group.share_end_offsets:
            self.group.share_end_offsets.close()

    async def stop(self) -> None:
        if self.share is not None:
            await self.share.stop()
        if self.txn is not None:
            await self.txn.stop()
        if self.group is not None:
            await self.group.stop()


class _InternalTopicWatch:
    """Image listener: builds the coordinators when an internal topic appears, on the next turn
    of the loop (their runtimes then load it from the image that holds it, rather than join a
    change already being published)."""

    def __init__(self, coordinators: Coordinators):
        self._coordinators = coordinators

    def apply(self, old, new, delta):
        """A listener's steps (kbroker.metadata.controller): one, that decides."""
        if not self._coordinators.built:
            names = delta.topic_names()
            if any(name in names and new.topic(name) is not None for name in INTERNAL_TOPICS):
                log.info("an internal topic appeared: starting the coordinators")
                asyncio.get_running_loop().call_soon(self._coordinators.ensure)
        return
        yield  # a generator, as every image listener is
