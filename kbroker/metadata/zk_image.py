"""ZooKeeper -> :class:`MetadataImage`: read the whole cluster state, as one image.

What a broker learns from ZooKeeper, read fresh every time (never patched from a notification's
content, so a lost or reordered notification cannot leave a broker with a wrong view; the next
read is the truth):

- live brokers: the children of ``/brokers/ids`` and their registrations (endpoints, rack);
- the active controller: ``/controller``;
- topics: ``/brokers/topics/T`` (id and assignment), ``/config/topics/T`` (overrides) and each
  partition's ``.../partitions/P/state`` (leader, leader epoch, ISR, controller epoch, and the
  znode version a conditional write must name);
- dynamic broker configs: ``/config/brokers/<default>`` and ``/config/brokers/<this id>``;
- SCRAM credentials, ACLs and client quotas (``/config/users``, ``/config/clients``,
  ``/config/ips``, ``/kafka-acl``, ``/kafka-acl-extended``), read by :mod:`zk_security`.

All reads go out at once (kazoo's ``get_async``) and are collected after, so reading a thousand
partitions costs a few round trips' time, not a thousand. The reader blocks: callers run it in a
thread (``asyncio.to_thread``). A znode that vanishes between the listing and the read is left
out (it was deleted: the next read agrees). ``versions`` returns the znode version of every topic
and config znode read, so the store's next conditional write names what this image showed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kbroker.metadata import zk_security
from kbroker.metadata import zk_znodes as zn
from kbroker.metadata.image import BrokerInfo, MetadataImage, PartitionState, TopicMetadata

log = logging.getLogger("kbroker.metadata.zk")


@dataclass(frozen=True)
class ZkSnapshot:
    image: MetadataImage
    versions: dict  # path -> znode version of what the image shows
    # (topic, partition) -> (adding, removing) replicas of each reassignment in progress
    reassignments: dict = None


# The longest one read waits for ZooKeeper (seconds). kazoo fails pending requests when the
# connection drops, but a request can also wait on a server that stalls; a bound keeps the
# reading thread from hanging (the sync loop retries on the error).
READ_TIMEOUT_S = 15


def _collect(pending: dict):
    """path -> (data, version) for every pending get that found its znode."""
    found = {}
    for path, result in pending.items():
        try:
            data, stat = result.get(timeout=READ_TIMEOUT_S)
        except NoNodeError:
            continue
        found[path] = (data, stat.version)
    return found


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return zk.get_children_async(path).get(timeout=READ_TIMEOUT_S)
    except NoNodeError:
        return []


def read_snapshot(zk: KazooClient, cluster_id: str, node_id: int) -> ZkSnapshot:
    broker_ids = [c for c in _children(zk, zn.BROKER_IDS) if c.isdigit()]
    names = [n for n in _children(zk, zn.TOPICS)]
    deleting = set(_children(zk, zn.DELETE_TOPICS))
    pending = {zn.broker_path(int(b)): zk.get_async(zn.broker_path(int(b))) for b in broker_ids}
    pending[zn.CONTROLLER] = zk.get_async(zn.CONTROLLER)
    pending[zn.FEATURE] = zk.get_async(zn.FEATURE)
    for scope in (None, node_id):
        pending[zn.broker_config_path(scope)] = zk.get_async(zn.broker_config_path(scope))
    partition_lists = {n: zk.get_children_async(f"{zn.TOPICS}/{n}/partitions") for n in names}
    for name in names:
        pending[zn.topic_path(name)] = zk.get_async(zn.topic_path(name))
        pending[zn.topic_config_path(name)] = zk.get_async(zn.topic_config_path(name))
    counts = {}
    for name, result in partition_lists.items():
        try:
            counts[name] = len(result.get(timeout=READ_TIMEOUT_S))
        except NoNodeError:
            counts[name] = 0
    for name, count in counts.items():
        for p in range(count):
            path = zn.partition_state_path(name, p)
            pending[path] = zk.get_async(path)
    found = _collect(pending)

    brokers = []
    for b in broker_ids:
        entry = found.get(zn.broker_path(int(b)))
        if entry is None:
            continue
        try:
            endpoints, rack = zn.decode_broker_registration(entry[0])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring broker %s: unreadable registration (%s)", b, exc)
            continue
        brokers.append(BrokerInfo(int(b), {e.listener: (e.host, e.port) for e in endpoints},
                                  rack))
    controller = found.get(zn.CONTROLLER)
    controller_id = zn.decode_controller(controller[0]) if controller else None

    topics, reassignments = [], {}
    for name in sorted(names):
        if name in deleting:
            continue  # on its way out: invisible, as Kafka's brokers stop serving it
        entry = found.get(zn.topic_path(name))
        if entry is None:
            continue
        topic_id, assignments = zn.decode_topic(entry[0])
        for p, moving in zn.decode_reassignments(entry[0]).items():
            reassignments[(name, p)] = moving
        if topic_id is None:
            log.warning("topic %s in ZooKeeper has no topic_id (written by Kafka < 2.8); "
                        "it is skipped", name)
            continue
        config = found.get(zn.topic_config_path(name))
        configs = zn.decode_config(config[0] if config else None)
        states = []
        for p, replicas in enumerate(assignments):
            state = found.get(zn.partition_state_path(name, p))
            if state is None:  # being created: not led yet
                states.append(PartitionState(-1, -1, (), -1, 0))
                continue
            s = zn.PartitionState.decode(state[0], state[1])
            states.append(PartitionState(s.leader, s.leader_epoch, s.isr, s.zk_version,
                                         s.controller_epoch))
        topics.append(TopicMetadata(name, topic_id, assignments, configs, tuple(states)))
    broker_configs = {
        "cluster": zn.decode_config(found.get(zn.broker_config_path(None), (None,))[0]),
        "broker": zn.decode_config(found.get(zn.broker_config_path(node_id), (None,))[0]),
    }
    credentials, acls, quotas = zk_security.read(zk)
    feature = found.get(zn.FEATURE)
    image = MetadataImage.build(cluster_id, topics, broker_configs, credentials, acls,
                                client_quotas=quotas).with_brokers(
        sorted(brokers, key=lambda b: b.node_id), controller_id).with_finalized_features(
        zn.decode_features(feature[0] if feature else None),
        zn.features_epoch(feature[1] if feature else None))
    versions = {path: version for path, (_, version) in found.items()
                if path.startswith((zn.TOPICS, zn.TOPIC_CONFIGS, zn.BROKER_CONFIGS))}
    return ZkSnapshot(image, versions, reassignments)
