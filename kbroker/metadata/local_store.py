"""The embedded single-node metadata store: one JSON file in the first log dir.

File ``<log.dir>/kbroker-metadata.json``::

    {"version": 1, "cluster_id": "<22-char base64url>", "next_producer_id_block": N,
     "broker_configs": {"cluster": {...}, "broker": {...}},
     "scram_credentials": {"<user>": {"SCRAM-SHA-256": "salt=...,stored_key=...,..."}},
     "acls": [[resource_type, name, pattern_type, principal, host, operation, permission], ...],
     "client_quotas": [{"entity": {"user": "alice", "client-id": null},
                        "quotas": {"producer_byte_rate": 1024.0}}, ...],
     "finalized_features": {"epoch": N, "levels": {"transaction.version": 1}},
     "delegation_tokens": {"<token id>": {"owner": "User:alice", "requester": "User:alice",
                           "renewers": ["User:bob"], "issue_ms": N, "max_ms": N,
                           "expiry_ms": N}},
     "group_configs": {"<group id>": {"consumer.heartbeat.interval.ms": "700"}},
     "topics": {"<name>": {"topic_id": "<uuid>", "partitions": N,
                           "replicas": [[node, ...], ...], "configs": {...}}}}

``replicas`` holds each partition's replica list (Kafka's assignment); files written before it
existed have only ``partitions`` and mean ``[this node]`` for each. The file is rewritten
atomically (temporary file, fsync, rename, fsync of the directory) on every commit, so a delta
is either wholly on disk or not at all; the rewrite runs in a thread, so the event loop keeps
serving while a large file is written. Kafka's log-dir scan ignores plain files, so the file
does not disturb Kafka's layout.

Group configs were kept, before they became metadata, in a file of their own
(``<log.dir>/group-configs.json``: {group: {name: value}}); a store that finds one imports it
once at start-up (a group the store already holds keeps its stored configs), then deletes it.

A single node leads every partition with its only replica: partition states are not stored
(a delta's states are dropped, and topics are committed without them), and this broker is
always the controller.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from dataclasses import replace

from kbroker.metadata.delta import NO_CHANGE, MetadataDelta
from kbroker.metadata.image import MetadataImage, TokenInfo, TopicMetadata
from kbroker.metadata.store import Commit, new_cluster_id

FILE_NAME = "kbroker-metadata.json"
# Where group configs were kept before they were metadata (imported once, then deleted).
OLD_GROUP_CONFIGS = "group-configs.json"

log = logging.getLogger("kbroker.metadata")


def write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class LocalMetadataStore:
    replicated = False
    is_controller = True
    controller_epoch = 0

    def __init__(self, log_dir: str, cluster_id: str | None = None, node_id: int = 0):
        os.makedirs(log_dir, exist_ok=True)
        self.path = os.path.join(log_dir, FILE_NAME)
        self._node_id = node_id
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                self._state = json.load(f)
            self.cluster_id = self._state["cluster_id"]
            if cluster_id and cluster_id != self.cluster_id:
                raise ValueError(f"cluster.id {cluster_id} does not match {self.cluster_id} "
                                 f"stored in {self.path}")
        else:
            self.cluster_id = cluster_id or new_cluster_id()
            self._state = {"version": 1, "cluster_id": self.cluster_id,
                           "next_producer_id_block": 0,
                           "broker_configs": {"cluster": {}, "broker": {}}, "topics": {}}
            write_atomically(self.path, self._encode(self._state))
        self._import_group_configs(os.path.join(log_dir, OLD_GROUP_CONFIGS))

    def _import_group_configs(self, old: str) -> None:
        """Take in the group configs of the file they were kept in before (once: the file is
        deleted after the store holding them is written)."""
        if not os.path.exists(old):
            return
        try:
            with open(old, "rb") as f:
                found = json.load(f)
            imported = {str(g): {str(k): str(v) for k, v in c.items()}
                        for g, c in found.items() if c}
        except (OSError, ValueError, AttributeError) as exc:
            log.error("cannot import the group configs of %s (%s); the file is left as it is",
                      old, exc)
            return
        groups = dict(self._state.get("group_configs") or {})
        for group, configs in imported.items():
            groups.setdefault(group, configs)
        self._state = {**self._state, "group_configs": groups}
        write_atomically(self.path, self._encode(self._state))
        os.remove(old)
        log.info("imported the group configs of %d group(s) from %s into %s", len(imported),
                 old, self.path)

    @staticmethod
    def _encode(state: dict) -> bytes:
        # Compact: with 100,000 partitions the replica lists dominate the file.
        return json.dumps(state, separators=(",", ":"), sort_keys=True).encode()

    async def _save(self, state: dict) -> None:
        """Write ``state`` (a new version of the whole file) and only then make it current, so a
        failed write (disk full) changes nothing."""
        await asyncio.to_thread(lambda: write_atomically(self.path, self._encode(state)))
        self._state = state

    async def load(self) -> MetadataImage:
        features = self._state.get("finalized_features") or {}
        topics = []
        for name, t in self._state["topics"].items():
            replicas = t.get("replicas") or [[self._node_id]] * t["partitions"]
            topics.append(TopicMetadata(name, uuid.UUID(t["topic_id"]), replicas,
                                        t.get("configs", {})))
        return MetadataImage.build(self.cluster_id, topics, self._state.get("broker_configs"),
                                   self._state.get("scram_credentials"),
                                   self._state.get("acls", ()),
                                   {tuple(e["entity"].items()): e["quotas"]
                                    for e in self._state.get("client_quotas", ())},
                                   features.get("levels"), features.get("epoch", 1),
                                   [_token(token_id, t) for token_id, t
                                    in (self._state.get("delegation_tokens") or {}).items()],
                                   self._state.get("group_configs"))

    async def reread(self, delta: MetadataDelta) -> MetadataDelta:
        return NO_CHANGE  # one writer, serialised by the controller: never stale

    # --- commit (the controller only) ----------------------------------------------------------

    async def commit(self, delta: MetadataDelta) -> Commit:
        state = dict(self._state)
        stored = delta
        if delta.created or delta.deleted or delta.assignments or delta.topic_configs:
            topics = dict(state["topics"])  # shallow: untouched entries are shared
            for name in delta.deleted:
                topics.pop(name, None)
            for name, topic in delta.created.items():
                topics[name] = {"topic_id": str(topic.topic_id),
                                "partitions": topic.num_partitions,
                                "replicas": [list(r) for r in topic.assignments],
                                "configs": dict(topic.configs)}
            for name, assignment in delta.assignments.items():
                replicas = [list(r) for r in assignment.replicas]
                topics[name] = {**topics[name], "replicas": replicas,
                                "partitions": len(replicas)}
            for name, configs in delta.topic_configs.items():
                topics[name] = {**topics[name], "configs": dict(configs)}
            state["topics"] = topics
            stored = replace(stored, created={name: topic.with_states(()) for name, topic
                                              in delta.created.items()})
        if delta.states:
            stored = replace(stored, states={})
        if delta.broker_configs:
            scopes = dict(state.get("broker_configs") or {"cluster": {}, "broker": {}})
            scopes.update({scope: dict(c) for scope, c in delta.broker_configs.items()})
            state["broker_configs"] = scopes
        if delta.scram:
            credentials = {u: dict(m) for u, m in (state.get("scram_credentials") or {}).items()}
            for (user, mechanism), credential in delta.scram.items():
                if credential is None:
                    credentials.get(user, {}).pop(mechanism, None)
                else:
                    credentials.setdefault(user, {})[mechanism] = credential
            state["scram_credentials"] = {u: m for u, m in credentials.items() if m}
        if delta.acls_added or delta.acls_removed:
            removed = {tuple(a) for a in delta.acls_removed}
            acls = [tuple(a) for a in state.get("acls", ()) if tuple(a) not in removed]
            present = set(acls)
            acls += [a for a in dict.fromkeys(tuple(a) for a in delta.acls_added)
                     if a not in present]
            state["acls"] = [list(a) for a in acls]
        if delta.client_quotas:
            quotas = {tuple(sorted(e["entity"].items(), key=lambda kv: kv[0])): e["quotas"]
                      for e in state.get("client_quotas", ())}
            quotas.update(delta.client_quotas)
            state["client_quotas"] = [{"entity": dict(entity), "quotas": dict(values)}
                                      for entity, values in quotas.items() if values]
        if delta.features is not None:
            epoch = (state.get("finalized_features") or {}).get("epoch", 1) + 1
            state["finalized_features"] = {"epoch": epoch, "levels": dict(delta.features)}
            stored = replace(stored, features_epoch=epoch)
        if delta.tokens:
            tokens = dict(state.get("delegation_tokens") or {})
            for token_id, info in delta.tokens.items():
                if info is None:
                    tokens.pop(token_id, None)
                else:
                    tokens[token_id] = {"owner": info.owner, "requester": info.requester,
                                        "renewers": list(info.renewers),
                                        "issue_ms": info.issue_ms, "max_ms": info.max_ms,
                                        "expiry_ms": info.expiry_ms}
            state["delegation_tokens"] = tokens
        if delta.group_configs:
            groups = dict(state.get("group_configs") or {})
            for group, configs in delta.group_configs.items():
                if configs:
                    groups[group] = {k: str(v) for k, v in configs.items()}
                else:
                    groups.pop(group, None)
            state["group_configs"] = groups
        await self._save(state)
        return Commit(stored)

    async def allocate_producer_ids(self, size: int) -> int:
        """Like Kafka's controller-allocated producer id blocks: reserved durably first."""
        first = self._state.get("next_producer_id_block", 0)
        await self._save({**self._state, "next_producer_id_block": first + size})
        return first


def _token(token_id: str, stored: dict) -> TokenInfo:
    return TokenInfo(token_id, stored["owner"], stored.get("requester", stored["owner"]),
                     tuple(stored.get("renewers", ())), stored["issue_ms"], stored["max_ms"],
                     stored["expiry_ms"])
