"""The JSON the web console reads (``/api/...`` on the HTTP port): read-only views of the broker.

- ``cluster``: cluster id, the controller and every live broker (in cluster mode as ZooKeeper
  says; a single node is its own controller), this broker's listeners, dev mode;
- ``topics``; ``topics/<name>``: partitions with their leader, leader epoch, replicas and ISR (as
  this broker's metadata says) and, for a replica this broker holds, its role, offsets and size
  (a leader's ISR change in flight as ``pending_isr``); configs with their sources;
- ``topics/<name>/messages?partition=P&limit=N``: the latest N records (key, value, headers as
  text when they are UTF-8, else hex), newest last;
- ``groups``; ``groups/<id>``: state, members, committed offsets with lag, and the group's total
  lag over time, sampled every ``_LAG_SAMPLE_S`` seconds while the HTTP port is up;
- ``share-groups``; ``share-groups/<id>``: share groups (KIP-932): members with their assigned
  partitions, and per share partition this broker leads its start offset, in-flight and acquired
  record counts and lag (as /metrics' ``kafka_sharegroup_*``);
- ``clients``: every open client connection (peer, listener, principal, client id and software
  from its ApiVersions) with the telemetry client instance it pushes metrics as (KIP-714);
  ``clients/<instance id>``: that instance's subscription and every metric series it pushed with
  its latest value; ``?series=<key>`` adds one series' recent samples for the plot;
- ``subjects``: the schema registry's subjects (kbroker.schema_registry) with their versions
  and latest id, and its URL; ``subjects/<subject>``: every version with its id, type,
  references and schema. A broker that does not lead ``_schemas`` says which one does.
"""

from __future__ import annotations

import asyncio
import collections
import time

from kbroker.handlers.metadata import broker_endpoint
from kbroker.protocol import compression
from kbroker.protocol.records import iter_batches, read_varint, read_varlong
from kbroker.server.metrics import group_offsets, share_groups, share_partitions

_LAG_SAMPLE_S = 1.0
_LAG_POINTS = 600
_MAX_LIMIT = 500
_READ_BYTES = 4 * 1024 * 1024


class ConsoleApi:
    def __init__(self, broker):
        self.broker = broker
        self.lag_history: dict[str, collections.deque] = {}
        self._sampler: asyncio.Task | None = None
        self.started = time.time()

    def start(self) -> None:
        self._sampler = asyncio.get_running_loop().create_task(self._sample_lag(), name="lag")

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()

    def get(self, path: list[str], query: dict):
        match path:
            case ["cluster"]:
                return self.cluster()
            case ["topics"]:
                return self.topics()
            case ["topics", name]:
                return self.topic(name)
            case ["topics", name, "messages"]:
                return self.messages(name, query)
            case ["groups"]:
                return self.groups()
            case ["groups", group_id]:
                return self.group(group_id)
            case ["share-groups"]:
                return self.share_groups()
            case ["share-groups", group_id]:
                return self.share_group(group_id)
            case ["subjects"]:
                return self.subjects()
            case ["subjects", subject]:
                return self.subject(subject)
            case ["clients"]:
                return self.clients()
            case ["clients", instance_id]:
                return self.client(instance_id, query.get("series"))
        return None

    # --- schema registry ------------------------------------------------------------------------

    def _registry_shard(self):
        """(registry info, its shard or None): None when this broker does not host the state."""
        from kbroker.schema_registry.service import NotHere

        registry = getattr(self.broker, "schema_registry", None)
        if registry is None:
            return {"enabled": False}, None
        info = {"enabled": True, "url": registry.url, "leader": registry.leader()}
        try:
            return info, registry.local_shard()
        except NotHere:
            return {**info, "served_by": registry.registry_url_of(registry.leader())}, None
        except Exception as exc:  # loading
            return {**info, "error": str(exc)}, None

    def subjects(self) -> dict:
        info, shard = self._registry_shard()
        subjects = []
        if shard is not None:
            for subject in shard.subjects(deleted=True):
                entries = shard.subject_entries(subject, deleted=True)
                live = [e for e in entries if not e.deleted]
                latest = (live or entries)[-1]
                subjects.append({"subject": subject, "versions": [e.version for e in live],
                                 "deleted_versions": [e.version for e in entries if e.deleted],
                                 "latest_id": latest.id, "schema_type": latest.schema_type,
                                 "compatibility": shard.compatibility(subject),
                                 "mode": shard.mode(subject)})
        return {**info, "subjects": subjects}

    def subject(self, subject: str) -> dict | None:
        info, shard = self._registry_shard()
        if shard is None:
            return {**info, "subject": subject, "versions": []}
        entries = shard.subject_entries(subject, deleted=True)
        if not entries:
            return None
        return {**info, "subject": subject, "compatibility": shard.compatibility(subject),
                "mode": shard.mode(subject),
                "versions": [{"version": e.version, "id": e.id, "schema_type": e.schema_type,
                              "deleted": e.deleted, "schema": e.schema,
                              "references": [r.as_json() for r in e.references]}
                             for e in entries]}

    # --- cluster and topics ----------------------------------------------------------------------

    def cluster(self) -> dict:
        broker = self.broker
        image = broker.controller.image
        if image.brokers:  # a cluster: every live broker and the elected controller (or none)
            brokers = [{"node_id": b.node_id, "host": endpoint[0], "port": endpoint[1],
                        "rack": b.rack}
                       for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
                       if (endpoint := broker_endpoint(b, None)) is not None]
            controller_id = -1 if image.controller_id is None else image.controller_id
        else:
            host, port = broker.advertised_endpoint(None)
            brokers = [{"node_id": broker.node_id, "host": host, "port": port,
                        "rack": broker.config.get("broker.rack")}]
            controller_id = broker.node_id
        return {"cluster_id": broker.controller.cluster_id, "controller_id": controller_id,
                "node_id": broker.node_id, "brokers": brokers,
                "listeners": {name: f"{h}:{p}" for name, (h, p) in broker.bound.items()},
                "dev_mode": broker.config.get("dev.mode"),
                "connections": len(broker.connections),
                "uptime_s": round(time.time() - self.started, 1)}

    def topics(self) -> list:
        out = []
        for name, topic in sorted(self.broker.controller.image.topics().items()):
            parts = self._partitions(topic)
            out.append({"name": name, "internal": topic.is_internal,
                        "partitions": topic.num_partitions,
                        "messages": sum(p["log_end_offset"] - p["log_start_offset"] for p in parts),
                        "size": sum(p["size"] for p in parts)})
        return out

    def topic(self, name: str) -> dict | None:
        from kbroker.config import TopicConfig

        topic = self.broker.controller.image.topic(name)
        if topic is None:
            return None
        configs = TopicConfig(topic.configs, self.broker.config).describe(None)
        return {"name": name, "topic_id": str(topic.topic_id), "internal": topic.is_internal,
                "partitions": self._partitions(topic),
                "configs": [{"name": e.name, "value": e.value, "source": e.source.name}
                            for e in sorted(configs, key=lambda e: e.name)]}

    def _partitions(self, topic) -> list:
        out = []
        for index in range(topic.num_partitions):
            state = topic.state(index)  # a single node's: itself, alone in the ISR, at epoch 0
            entry = {"partition": index, "leader": state.leader, "leader_epoch": state.leader_epoch,
                     "replicas": list(topic.assignments[index]), "isr": list(state.isr),
                     "log_start_offset": 0, "log_end_offset": 0, "high_watermark": 0, "size": 0}
            partition = self.broker.replicas.get(topic.name, index)
            if partition is None:
                out.append(entry)
                continue
            entry.update(role=partition.role,
                         log_start_offset=partition.log_start_offset,
                         log_end_offset=partition.log_end_offset,
                         high_watermark=partition.high_watermark,
                         size=partition.size_in_bytes)
            if partition.pending_isr is not None:
                entry["pending_isr"] = sorted(partition.pending_isr)
            out.append(entry)
        return out

    def messages(self, name: str, query: dict) -> dict | None:
        topic = self.broker.controller.image.topic(name)
        if topic is None:
            return None
        limit = _int(query, "limit", 20)
        if not 1 <= limit <= _MAX_LIMIT:
            raise ValueError(f"limit must be between 1 and {_MAX_LIMIT}")
        indexes = range(topic.num_partitions)
        if "partition" in query:
            index = _int(query, "partition", 0)
            if index not in indexes:
                raise ValueError(f"topic {name} has no partition {index}")
            indexes = [index]
        records = []
        for index in indexes:
            partition = self.broker.replicas.get(name, index)
            if partition is not None:
                records.extend(latest_records(partition, limit))
        records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
        return {"topic": name, "records": records[-limit:]}

    # --- groups ------------------------------------------------------------------------------------

    def _group_objects(self) -> dict:
        coordinator = self.broker.coordinators.group  # None until built
        found = {}
        for shard in list(coordinator.shards()) if coordinator is not None else ():
            if not getattr(shard, "loading", False):
                found.update((group.group_id, group) for group in shard.groups_of_type("classic"))
        return found

    def _lags(self) -> dict:
        lags: dict[str, list] = {}
        for group, topic, index, committed, lag in group_offsets(self.broker):
            lags.setdefault(group, []).append({"topic": topic, "partition": index,
                                               "committed_offset": committed, "lag": lag})
        return lags

    def groups(self) -> list:
        groups, lags = self._group_objects(), self._lags()
        out = []
        for group_id in sorted(groups.keys() | lags.keys()):
            group = groups.get(group_id)
            out.append({"group_id": group_id,
                        "state": group.state.name if group is not None else "EMPTY",
                        "members": len(group.members) if group is not None else 0,
                        "lag": sum(o["lag"] or 0 for o in lags.get(group_id, []))})
        return out

    def group(self, group_id: str) -> dict | None:
        group = self._group_objects().get(group_id)
        offsets = self._lags().get(group_id, [])
        if group is None and not offsets:
            return None
        members = [] if group is None else [
            {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
             "group_instance_id": m.group_instance_id} for m in group.members.values()]
        return {"group_id": group_id, "state": group.state.name if group else "EMPTY",
                "protocol": group.protocol_name if group else None,
                "generation": group.generation if group else 0,
                "leader": group.leader_id if group else None, "members": members,
                "offsets": offsets, "lag_history": list(self.lag_history.get(group_id, ()))}

    # --- share groups (KIP-932) ---------------------------------------------------------------

    def _share_partitions(self) -> dict[str, list]:
        by_group: dict[str, list] = {}
        for row in share_partitions(self.broker):
            by_group.setdefault(row["group_id"], []).append(
                {k: v for k, v in row.items() if k != "group_id"})
        return by_group

    def share_groups(self) -> list:
        partitions = self._share_partitions()
        return [{"group_id": group_id, "state": group.state.name,
                 "members": len(group.members),
                 "in_flight": sum(p["in_flight"] for p in partitions.get(group_id, [])),
                 "lag": sum(p["lag"] for p in partitions.get(group_id, []))}
                for group_id, group in share_groups(self.broker)]

    def share_group(self, group_id: str) -> dict | None:
        group = dict(share_groups(self.broker)).get(group_id)
        if group is None:
            return None
        names = self._topic_names()
        members = [{"member_id": m.member_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_epoch": m.member_epoch,
                    "subscribed": list(m.subscribed),
                    "assigned": [{"topic": names.get(t, str(t)), "partitions": sorted(ps)}
                                 for t, ps in m.assigned.items()]}
                   for m in group.members.values()]
        return {"group_id": group_id, "state": group.state.name,
                "group_epoch": group.group_epoch, "members": members,
                "partitions": self._share_partitions().get(group_id, [])}

    def _topic_names(self) -> dict:
        """Topic id -> name, from this broker's metadata."""
        return {t.topic_id: name for name, t in self.broker.controller.image.topics().items()}

    # --- client connections and their telemetry (KIP-714) ------------------------------------

    def clients(self) -> list:
        manager = self.broker.client_metrics
        out = []
        for connection in sorted(self.broker.connections, key=lambda c: (c.connected_at, c.peer)):
            software = connection.client_software or ("", "")
            instance = manager.instance_of(connection) if manager is not None else None
            out.append({"peer": connection.peer, "listener": connection.listener_name,
                        "principal": connection.principal, "client_id": connection.client_id,
                        "software": " ".join(filter(None, software)),
                        "connected_s": round(time.time() - connection.connected_at, 1),
                        "telemetry": None if instance is None else
                        _instance_summary(instance, manager.store)})
        return out

    def client(self, instance_id: str, series_key: str | None) -> dict | None:
        import uuid

        manager = self.broker.client_metrics
        try:
            key = uuid.UUID(instance_id)
        except ValueError:
            return None
        instance = manager.instances.get(key) if manager is not None else None
        if instance is None:
            return None
        series_of = manager.store.series.get(key, {})
        listed = sorted(series_of.values(), key=_series_key)
        found = {"instance": _instance_summary(instance, manager.store),
                 "series": [{"key": _series_key(s), "name": s.name,
                             "attributes": dict(s.attributes), "value": s.value,
                             "counter": s.counter} for s in listed]}
        if series_key is not None:
            chosen = next((s for s in listed if _series_key(s) == series_key), None)
            if chosen is None:
                raise ValueError(f"client instance {instance_id} has no series {series_key}")
            found["points"] = [[t / 1000, v] for t, v in zip(chosen.times, chosen.values)]
        return found

    async def _sample_lag(self) -> None:
        while True:
            now = round(time.time(), 3)
            try:
                totals: dict[str, int] = {}
                for group, _, _, _, lag in group_offsets(self.broker):
                    totals[group] = totals.get(group, 0) + (lag or 0)
                for group, total in totals.items():
                    history = self.lag_history.setdefault(group, collections.deque(maxlen=_LAG_POINTS))
                    history.append([now, total])
            except Exception:  # a group shard moving under us: try again next tick
                pass
            await asyncio.sleep(_LAG_SAMPLE_S)


def _int(query: dict, name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {raw!r}") from None


def latest_records(partition, limit: int) -> list:
    """The last ``limit`` records below the high watermark, read from whole batches."""
    end = partition.high_watermark
    start = max(partition.log_start_offset, end - limit)
    out: collections.deque = collections.deque(maxlen=limit)
    offset = start
    while offset < end:
        result = partition.read(offset, _READ_BYTES)
        data = b"".join(region.read() for region in result.regions)
        if not data:
            break
        for batch in iter_batches(memoryview(data), allow_partial_tail=True):
            offset = batch.next_offset
            if batch.is_control:
                continue
            for record in _records(batch):
                if start <= record["offset"] < end:
                    out.append({"partition": partition.index, **record})
    return list(out)


def _records(batch):
    body = compression.decompress(batch.compression, batch.records_view(), 64 * 1024 * 1024)
    pos = 0
    for _ in range(batch.record_count):
        _, pos = read_varint(body, pos)  # record length
        pos += 1  # attributes
        timestamp_delta, pos = read_varlong(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        count, pos = read_varint(body, pos)
        headers = []
        for _ in range(count):
            hkey, pos = _bytes(body, pos)
            hvalue, pos = _bytes(body, pos)
            headers.append([_text(hkey), _text(hvalue)])
        yield {"offset": batch.base_offset + offset_delta,
               "timestamp": batch.base_timestamp + timestamp_delta,
               "key": _text(key), "value": _text(value), "headers": headers}


def _bytes(data, pos: int):
    length, pos = read_varint(data, pos)
    if length < 0:
        return None, pos
    return bytes(data[pos:pos + length]), pos + length


def _text(value: bytes | None):
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()


# --- client connections and their telemetry (KIP-714) -------------------------------------------

def _series_key(series) -> str:
    return series.name + "{" + ",".join(f"{k}={v}" for k, v in series.attributes) + "}"


def _instance_summary(instance, store) -> dict:
    return {"instance_id": str(instance.instance_id), "client_id": instance.info.client_id,
            "software": " ".join(filter(None, (instance.info.software_name,
                                               instance.info.software_version))),
            "subscription_id": instance.subscription_id,
            "requested_metrics": list(instance.metrics), "push_interval_ms": instance.interval_ms,
            "pushes": instance.pushes, "refused": dict(instance.refused),
            "terminating": instance.terminating,
            "series": len(store.series.get(instance.instance_id, {}))}
