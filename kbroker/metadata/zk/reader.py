"""ZooKeeper -> image and deltas: the reads, whole or of just what a notification names.

Two kinds of read, both asynchronous (kazoo's ``*_async`` calls gathered, :mod:`.client`):

- :meth:`ZkReader.read_image`, everything at once (start-up, and the sync's periodic safety
  net): live brokers (``/brokers/ids`` and their registrations), the controller, every topic
  (``/brokers/topics/T``, ``/config/topics/T`` and each ``.../partitions/P/state``), this
  broker's dynamic configs, the finalized features, SCRAM credentials, ACLs and client quotas
  (:mod:`.security`), delegation tokens, group configs (``/config/groups/G``). A topic marked
  under ``/admin/delete_topics`` is left out (on its way out, as Kafka's brokers stop serving
  it).
- the pieces a notification names, each returned as a :class:`MetadataDelta` against the
  current image: whole topics (a new child of ``/brokers/topics``), one topic's assignment (its
  data watch fired), partition states (an ``/isr_change_notification``), a config entity (a
  ``/config/changes`` notification), one ACL resource, the broker registrations, the
  controller, the features.

**Newer only.** :class:`ZnodeVersions` keeps, per znode read or written, its version (what a
conditional write names) and its ``mzxid`` (the zxid of its last change, which grows across a
delete and re-create). A piece is taken into a delta only if it is newer than what the image
shows: a partition state by its version (within the same topic id), any other znode by its
mzxid. A read that raced with a newer write of this broker, or a notification processed late,
therefore never takes the image back in time.

A znode that vanishes between a listing and its read is left out (it was deleted: the next
read agrees). Reads that set a watch take the watch callback from the caller (:mod:`.sync`).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from kazoo.exceptions import NoNodeError

from kbroker.metadata.delta import Assignment, MetadataDelta
from kbroker.metadata.image import (MISSING_STATE, BrokerInfo, MetadataImage, PartitionState,
                                    TopicMetadata)
from kbroker.metadata.zk import security, tokens
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.client import aio, gather, submit

log = logging.getLogger("kbroker.metadata.zk")

Watch = Callable | None


class ZnodeVersions:
    """path -> (version, mzxid) of every topic, config and state znode read or written."""

    def __init__(self):
        self._known: dict[str, tuple[int, int]] = {}

    def version(self, path: str) -> int | None:
        known = self._known.get(path)
        return known[0] if known is not None else None

    def remember(self, path: str, stat) -> None:
        self._known[path] = (stat.version, stat.mzxid)

    def wrote(self, path: str, version: int) -> None:
        """This broker's own write: its version is known, its zxid is not (a create answers
        none): a later read of the same content is taken (and found equal)."""
        self._known[path] = (version, self._known.get(path, (0, 0))[1])

    def forget(self, path: str) -> None:
        self._known.pop(path, None)

    def forget_under(self, prefix: str) -> None:
        for path in [p for p in self._known if p == prefix or p.startswith(prefix + "/")]:
            del self._known[path]

    def newer(self, path: str, stat) -> bool:
        known = self._known.get(path)
        return known is None or stat.mzxid > known[1]


class ZkReader:
    def __init__(self, client, cluster_id: str, node_id: int, versions: ZnodeVersions):
        self._zk = client
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.versions = versions
        self.reads = 0  # znodes read (data, stat or children), for the scale benchmark

    # --- primitives ------------------------------------------------------------------------------

    async def get_many(self, paths: Iterable[str], watch: Watch = None) -> dict:
        """path -> (data, stat) of each znode of ``paths`` that exists."""
        paths = list(paths)
        self.reads += len(paths)
        zk = self._zk
        results = await gather(submit(zk, [lambda p=p: zk.get_async(p, watch=watch)
                                           for p in paths]))
        found = {}
        for path, result in zip(paths, results):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, Exception):
                raise result
            found[path] = result
        return found

    async def children(self, path: str, watch: Watch = None) -> list[str]:
        self.reads += 1
        try:
            return await aio(self._zk.get_children_async(path, watch=watch))
        except NoNodeError:
            return []

    async def exists_many(self, paths: Iterable[str], watch: Watch = None) -> dict:
        """path -> stat of each znode of ``paths`` that exists (setting ``watch`` on every
        one, present or not)."""
        paths = list(paths)
        self.reads += len(paths)
        zk = self._zk
        results = await gather(submit(zk, [lambda p=p: zk.exists_async(p, watch=watch)
                                           for p in paths]))
        found = {}
        for path, result in zip(paths, results):
            if isinstance(result, Exception):
                raise result
            if result is not None:
                found[path] = result
        return found

    # --- the whole tree --------------------------------------------------------------------------

    async def read_image(self, watches=None) -> MetadataImage:
        """Everything, as one image (versions remembered). ``watches(kind)`` gives the watch to
        arm on each read ("brokers", "controller", "feature", "topics", "deleting", "topic"),
        so that whatever changes after it is read fires one (the sync's first read)."""
        watch = watches or (lambda kind: None)
        ids = [c for c in await self.children(zn.BROKER_IDS, watch("brokers")) if c.isdigit()]
        names = await self.children(zn.TOPICS, watch("topics"))
        deleting = set(await self.children(zn.DELETE_TOPICS, watch("deleting")))
        brokers = await self._brokers(ids)
        for path, kind in ((zn.CONTROLLER, "controller"), (zn.FEATURE, "feature")):
            if watch(kind) is not None:  # an exists watch fires on creation too
                await self.exists_many([path], watch(kind))
        found = await self.get_many([zn.CONTROLLER, zn.FEATURE, zn.broker_config_path(None),
                                     zn.broker_config_path(self.node_id)])
        topics = await self.read_topics([n for n in names if n not in deleting],
                                        watch("topic"))
        credentials, acls, quotas = await security.read_all(self._zk)
        delegation_tokens = await tokens.read_all(self)
        group_configs = await self.read_all_group_configs()
        controller = found.get(zn.CONTROLLER)
        feature = found.get(zn.FEATURE)
        image = MetadataImage.build(
            self.cluster_id, [t for t in topics.values() if t is not None],
            self._broker_configs(found), credentials, acls, client_quotas=quotas,
            delegation_tokens=delegation_tokens, group_configs=group_configs)
        return image.with_brokers(brokers, zn.decode_controller(controller[0])
                                  if controller else None).with_finalized_features(
            zn.decode_features(feature[0] if feature else None),
            zn.features_epoch(feature[1].version if feature else None))

    async def read_all_group_configs(self) -> dict[str, dict[str, str]]:
        """Every group's configs (``/config/groups/G``), group id -> configs."""
        names = await self.children(zn.GROUP_CONFIGS)
        return {g: c for g, c in (await self.read_group_configs(
            [zn.desanitize(n) for n in names])).items() if c}

    async def read_group_configs(self, group_ids) -> dict[str, dict[str, str]]:
        """Group id -> its configs as stored now ({} when it has none); versions remembered."""
        paths = {g: zn.group_config_path(g) for g in group_ids}
        found = await self.get_many(paths.values())
        configs = {}
        for group_id, path in paths.items():
            entry = found.get(path)
            if entry is None:
                self.versions.forget(path)
            else:
                self.versions.remember(path, entry[1])
            configs[group_id] = _group_config(group_id, path, entry)
        return configs

    def _broker_configs(self, found: dict) -> dict:
        configs = {}
        for scope, path in (("cluster", zn.broker_config_path(None)),
                            ("broker", zn.broker_config_path(self.node_id))):
            entry = found.get(path)
            configs[scope] = zn.decode_config(entry[0] if entry else None)
            if entry:
                self.versions.remember(path, entry[1])
            else:
                self.versions.forget(path)
        return configs

    async def _brokers(self, ids) -> list[BrokerInfo]:
        found = await self.get_many([zn.broker_path(int(b)) for b in ids])
        brokers = []
        for b in sorted(ids, key=int):
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
        return brokers

    # --- topics ----------------------------------------------------------------------------------

    async def read_topics(self, names: Iterable[str], watch: Watch = None
                          ) -> dict[str, TopicMetadata | None]:
        """Whole topics: name -> topic, or None when it is gone (or unreadable)."""
        names = list(names)
        found = await self.get_many([zn.topic_path(n) for n in names], watch)
        configs = await self.get_many([zn.topic_config_path(n) for n in names
                                       if zn.topic_path(n) in found])
        decoded, state_paths = {}, []
        for name in names:
            entry = found.get(zn.topic_path(name))
            if entry is None:
                decoded[name] = None
                continue
            topic_id, assignments = zn.decode_topic(entry[0])
            if topic_id is None:
                log.warning("topic %s in ZooKeeper has no topic_id (written by Kafka < 2.8); "
                            "it is skipped", name)
                decoded[name] = None
                continue
            self.versions.remember(zn.topic_path(name), entry[1])
            decoded[name] = (topic_id, assignments, zn.decode_reassignments(entry[0]))
            state_paths += [zn.partition_state_path(name, p) for p in range(len(assignments))]
        states = await self.get_many(state_paths)
        topics = {}
        for name, value in decoded.items():
            if value is None:
                topics[name] = None
                continue
            topic_id, assignments, reassigning = value
            config = configs.get(zn.topic_config_path(name))
            if config:
                self.versions.remember(zn.topic_config_path(name), config[1])
            topics[name] = TopicMetadata(
                name, topic_id, assignments, zn.decode_config(config[0] if config else None),
                tuple(_state(states.get(zn.partition_state_path(name, p)))
                      for p in range(len(assignments))), reassigning)
        return topics
        return PartitionState(s.leader, s.leader_epoch, s.isr, s.zk_version, s.controller_epoch)

    async def read_assignment(self, image: MetadataImage, name: str, watch: Watch = None
                              ) -> MetadataDelta:
        """``/brokers/topics/T`` changed (its data watch fired): the new replica lists and
        reassignments, with the states of partitions it added; the whole topic if it is
        another topic now (deleted and created again)."""
        path = zn.topic_path(name)
        found = await self.get_many([path], watch)
        entry = found.get(path)
        current = image.topic(name)
        if entry is None:
            # Deleted: an exists watch (a failed read leaves none) fires if it comes back.
            await self.exists_many([path], watch)
            return MetadataDelta()
        if current is None or not self.versions.newer(path, entry[1]):
            return MetadataDelta()
        topic_id, assignments = zn.decode_topic(entry[0])
        if topic_id != current.topic_id:
            topic = (await self.read_topics([name]))[name]
            return MetadataDelta(created={name: topic}) if topic is not None else MetadataDelta()
        self.versions.remember(path, entry[1])
        reassigning = zn.decode_reassignments(entry[0])
        if assignments == current.assignments and reassigning == dict(current.reassigning):
            return MetadataDelta()
        added = [(name, p) for p in range(current.num_partitions, len(assignments))]
        grown = current.with_assignments(assignments, reassigning)
        states = await self.read_states(MetadataImage.build("", [grown]), added)
        return MetadataDelta(assignments={name: Assignment(tuple(assignments), reassigning)},
                             states=states)

    async def read_states(self, image: MetadataImage, partitions
                          ) -> dict[tuple[str, int], PartitionState]:
        """The states of ``partitions`` that are newer than the image's."""
        wanted = []
        for name, index in partitions:
            topic = image.topic(name)
            if topic is not None and topic.states and index < topic.num_partitions:
                wanted.append((name, index))
        paths = [zn.partition_state_path(n, p) for n, p in wanted]
        found = await self.get_many(paths)
        states = {}
        for (name, index), path in zip(wanted, paths):
            entry = found.get(path)
            if entry is None:
                continue
            state = _state(entry)
            if state.version > image.topic(name).state(index).version:
                states[(name, index)] = state
        return states

    # --- brokers, controller, features, configs --------------------------------------------------

    async def read_brokers(self, image: MetadataImage, watch: Watch = None) -> MetadataDelta:
        ids = [c for c in await self.children(zn.BROKER_IDS, watch) if c.isdigit()]
        brokers = {b.node_id: b for b in await self._brokers(ids)}
        changes = {node: info for node, info in brokers.items()
                   if image.brokers.get(node) != info}
        changes.update({node: None for node in image.brokers if node not in brokers})
        return MetadataDelta(brokers=changes)

    async def read_controller(self, image: MetadataImage, watch: Watch = None) -> MetadataDelta:
        data = await self._data_if_exists(zn.CONTROLLER, watch)
        controller = zn.decode_controller(data[0]) if data else None
        if controller == image.controller_id:
            return MetadataDelta()
        return MetadataDelta(controller_id=controller)

    async def read_features(self, image: MetadataImage, watch: Watch = None) -> MetadataDelta:
        data = await self._data_if_exists(zn.FEATURE, watch)
        levels = zn.decode_features(data[0] if data else None)
        epoch = zn.features_epoch(data[1].version if data else None)
        if levels == dict(image.finalized_features) and epoch == image.features_epoch:
            return MetadataDelta()
        return MetadataDelta(features=levels, features_epoch=epoch)

    async def _data_if_exists(self, path: str, watch: Watch):
        """(data, stat) of ``path`` or None, with ``watch`` set either way (an exists watch
        fires on creation, a data watch does not)."""
        stat = (await self.exists_many([path], watch)).get(path)
        if stat is None:
            return None
        return (await self.get_many([path])).get(path)

    async def read_entity(self, image: MetadataImage, entity_path: str) -> MetadataDelta:
        """The config entity a ``/config/changes`` notification names: ``topics/T``,
        ``brokers/<default>`` or ``brokers/N``, ``users/U``, ``users/U/clients/C``,
        ``clients/C``, ``ips/IP``, ``groups/G``."""
        kind, _, name = entity_path.partition("/")
        if kind == "topics":
            path = zn.topic_config_path(name)
            entry = (await self.get_many([path])).get(path)
            topic = image.topic(name)
            if entry is None or topic is None or not self.versions.newer(path, entry[1]):
                return MetadataDelta()
            self.versions.remember(path, entry[1])
            configs = zn.decode_config(entry[0])
            if configs == dict(topic.configs):
                return MetadataDelta()
            return MetadataDelta(topic_configs={name: configs})
        if kind == "brokers":
            if name not in (zn.DEFAULT_ENTITY, str(self.node_id)):
                return MetadataDelta()  # another broker's own configs
            scope = "cluster" if name == zn.DEFAULT_ENTITY else "broker"
            path = zn.broker_config_path(None if scope == "cluster" else self.node_id)
            entry = (await self.get_many([path])).get(path)
            if entry is None:
                self.versions.forget(path)
            elif self.versions.newer(path, entry[1]):
                self.versions.remember(path, entry[1])
            else:
                return MetadataDelta()
            configs = zn.decode_config(entry[0] if entry else None)
            if configs == dict(image.dynamic_broker_configs.get(scope, {})):
                return MetadataDelta()
            return MetadataDelta(broker_configs={scope: configs})
        if kind == "groups":
            group_id = zn.desanitize(name)
            path = zn.group_config_path(group_id)
            entry = (await self.get_many([path])).get(path)
            if entry is None:
                self.versions.forget(path)
            elif self.versions.newer(path, entry[1]):
                self.versions.remember(path, entry[1])
            else:
                return MetadataDelta()
            configs = _group_config(group_id, path, entry)
            if configs == dict(image.group_config(group_id)):
                return MetadataDelta()
            return MetadataDelta(group_configs={group_id: configs})
        return await security.read_entity(self._zk, image, entity_path)


def _group_config(group_id: str, path: str, entry) -> dict[str, str]:
    """A group's configs from its znode's (data, stat), {} when absent or unreadable."""
    if entry is None:
        return {}
    try:
        return zn.decode_config(entry[0])
    except (ValueError, AttributeError) as exc:
        log.warning("ignoring the unreadable configs of group %s at %s (%s)", group_id, path,
                    exc)
        return {}


def _state(entry) -> PartitionState:
    """A partition's state from its znode's (data, stat); MISSING_STATE when absent."""
    if entry is None:
        return MISSING_STATE  # being created: not led yet
    s = zn.PartitionState.decode(entry[0], entry[1].version)
    return PartitionState(s.leader, s.leader_epoch, s.isr, s.zk_version, s.controller_epoch,
                          entry[1].mzxid)
