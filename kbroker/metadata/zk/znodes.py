"""Kafka's classic ZooKeeper layout: znode paths and their JSON, exactly as Kafka 3.x writes them.

Checked against Kafka 3.x's ``kafka/zk/ZkData.scala`` (and ``ProducerIdBlockZNode``) so that
Kafka's own tools (``zookeeper-shell``, ``kafka-topics --zookeeper`` of old, a Kafka broker
reading a kbroker-written tree) read what we write::

    /cluster/id                          {"version":"1","id":"<cluster id>"}
    /controller                          {"version":1,"brokerid":N,"timestamp":"<ms>"}  ephemeral
    /controller_epoch                    "<epoch>"  (a plain decimal string, not JSON)
    /brokers/ids/N                       version 5 registration (see broker_registration)  ephemeral
    /brokers/topics/T                    {"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},
                                          "removing_replicas":{},"topic_id":"<base64url uuid>"}
    /brokers/topics/T/partitions/P/state {"version":1,"leader":1,"leader_epoch":0,
                                          "controller_epoch":1,"isr":[1,2]}
    /config/topics/T, /config/brokers/N, /config/brokers/<default>
                                         {"version":1,"config":{"key":"value"}}
    /config/groups/G                     {"version":1,"config":{"consumer.heartbeat.interval.ms":
                                          "700"}}  (KIP-848 group configs: Kafka 3.x's ZooKeeper
                                          mode has none, so kbroker uses the layout of its other
                                          config entities; G sanitized as a user name; deleted
                                          when the group has no config left)
    /config/changes/config_change_NNNNNNNNNN   {"version":2,"entity_path":"topics/T"}  sequential
                                         (entity paths: topics/T, brokers/N, users/U, clients/C,
                                          ips/IP, groups/G)
    /config/users/U, /config/users/U/clients/C, /config/clients/C, /config/ips/IP
                                         {"version":1,"config":{"producer_byte_rate":"1024"}}
                                         (client quotas; U and C sanitized, <default> for the
                                          default entity; /config/users/U also holds SCRAM keys)
    /admin/delete_topics/T               (no data: a topic being deleted)
    /isr_change_notification/isr_change_NNNNNNNNNN  {"version":1,"partitions":[{"topic":"T",
                                          "partition":0}]}  sequential
    /latest_producer_id_block            {"version":1,"broker":N,"block_start":"0","block_end":"999"}
    /kafka-acl/<Type>/<name>             {"version":1,"acls":[{"principal":"User:alice",
                                          "permissionType":"Allow","operation":"Read","host":"*"}]}
                                         (LITERAL patterns; <Type> as Kafka names it: Topic,
                                          Group, Cluster, TransactionalId, DelegationToken, User)
    /kafka-acl-extended/prefixed/<Type>/<name>   the same, for PREFIXED patterns
    /kafka-acl-changes/acl_changes_NNNNNNNNNN    "TOPIC:<name>"  (a literal resource changed)
    /kafka-acl-extended-changes/acl_changes_NNNNNNNNNN   {"version":1,"resourceType":"TOPIC",
                                          "name":"<name>","patternType":"PREFIXED"}
    /delegation_token/tokens/<token id>  {"version":3,"owner":"User%3Aalice","tokenRequester":
                                          "User%3Aalice","renewers":["User%3Abob"],
                                          "issueTimestamp":N,"maxTimestamp":N,
                                          "expiryTimestamp":N,"tokenId":"<id>"}
                                         (principals sanitized; no HMAC: brokers compute it)
    /delegation_token/token_changes/token_change_NNNNNNNNNN   "<token id>"  (UTF-8, sequential)

Kafka quirks kept on purpose: ``/cluster/id``'s version is the *string* "1"; timestamps and
producer-id bounds are strings; a topic id is Kafka's ``Uuid.toString()`` (URL-safe base64 of
the 16 bytes, no padding), not the dashed hex form; ``block_end`` is inclusive.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from typing import Mapping, Sequence

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
GROUP_CONFIGS = "/config/groups"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ISR_CHANGE = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGE + "/isr_change_"
DEFAULT_ENTITY = "<default>"
FEATURE = "/feature"

# The persistent paths a Kafka broker creates at start-up (KafkaZkClient.createTopLevelPaths).
# ACLs (Kafka's ZkAclStore / ZkAclChangeStore): literal patterns under /kafka-acl, prefixed ones
# under /kafka-acl-extended/prefixed, each change announced under its store's change path.
ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_SEQUENCE = "acl_changes_"
# Delegation tokens (Kafka's DelegationTokenManagerZk): a znode per token, and a sequential
# notification naming the token id after every change (creation, renewal, expiry, removal).
TOKENS = "/delegation_token/tokens"
TOKEN_CHANGES = "/delegation_token/token_changes"
TOKEN_CHANGE_PREFIX = TOKEN_CHANGES + "/token_change_"
PERSISTENT_PATHS = ("/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS,
                    "/brokers/seqid", ISR_CHANGE, PRODUCER_ID_BLOCK,
                    "/log_dir_event_notification", TOPIC_CONFIGS, "/config/clients",
                    "/config/users", BROKER_CONFIGS, "/config/ips",
                    ACLS, EXTENDED_ACLS + "/prefixed", ACL_CHANGES, EXTENDED_ACL_CHANGES,
                    TOKENS, TOKEN_CHANGES)


def _json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _parse(data: bytes) -> dict:
    return json.loads(data.decode())


def now_ms() -> str:
    return str(int(time.time() * 1000))


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def group_entity_path(group_id: str) -> str:
    """A group's config entity, as a ``/config/changes`` notification names it."""
    return f"groups/{sanitize(group_id)}"


def group_config_path(group_id: str) -> str:
    return f"/config/{group_entity_path(group_id)}"


def broker_config_path(broker_id: int | None) -> str:
    """``None`` is the cluster-wide default, Kafka's ``<default>`` entity."""
    return f"{BROKER_CONFIGS}/{DEFAULT_ENTITY if broker_id is None else broker_id}"


# --- topic ids: Kafka's Uuid.toString ------------------------------------------------------------

def topic_id_to_kafka(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_kafka(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# --- znode data --------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _parse(data)["id"]


def encode_controller(broker_id: int) -> bytes:
    return _json({"version": 1, "brokerid": broker_id, "timestamp": now_ms()})


def decode_controller(data: bytes) -> int:
    return int(_parse(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


def encode_topic(topic_id: uuid.UUID, assignments: Sequence[Sequence[int]],
                 adding: Mapping[int, Sequence[int]] | None = None,
                 removing: Mapping[int, Sequence[int]] | None = None) -> bytes:
    """``adding``/``removing``: partition -> replicas of a reassignment in progress (KIP-455);
    ``assignments`` then holds the full replica set, target and original."""
    return _json({"version": 2,
                  "partitions": {str(p): list(r) for p, r in enumerate(assignments)},
                  "adding_replicas": {str(p): list(r) for p, r in (adding or {}).items()},
                  "removing_replicas": {str(p): list(r) for p, r in (removing or {}).items()},
                  "topic_id": topic_id_to_kafka(topic_id)})


def decode_reassignments(data: bytes) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """partition -> (adding replicas, removing replicas) of the reassignments in progress."""
    value = _parse(data)
    adding = {int(p): tuple(r) for p, r in (value.get("adding_replicas") or {}).items()}
    removing = {int(p): tuple(r) for p, r in (value.get("removing_replicas") or {}).items()}
    return {p: (adding.get(p, ()), removing.get(p, ())) for p in set(adding) | set(removing)}


def decode_topic(data: bytes) -> tuple[uuid.UUID | None, tuple[tuple[int, ...], ...]]:
    """(topic id, replicas of partition 0..n-1); a topic written before ids has none."""
    value = _parse(data)
    partitions = {int(p): tuple(r) for p, r in (value.get("partitions") or {}).items()}
    assignments = tuple(partitions[p] for p in range(len(partitions)))
    topic_id = value.get("topic_id")
    return (topic_id_from_kafka(topic_id) if topic_id else None), assignments


def encode_config(configs: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": {k: str(v) for k, v in configs.items()}})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (_parse(data).get("config") or {}).items()}


def encode_features(levels: Mapping[str, int]) -> bytes:
    """Kafka's FeatureZNode (version 2, status enabled): each finalized feature with its level
    as both min and max, as a controller finalizes one level."""
    return _json({"version": 2, "status": 1, "features": {
        name: {"min_version_level": level, "max_version_level": level}
        for name, level in sorted(levels.items())}})


def decode_features(data: bytes | None) -> dict[str, int]:
    if not data:
        return {}
    features = _parse(data).get("features") or {}
    return {name: int(v["max_version_level"]) for name, v in features.items()}


def features_epoch(version: int | None) -> int:
    """The finalized-features epoch of a /feature znode at ``version`` (Kafka uses the znode
    version): 1 with no znode, as before any change, and above it from the first write on."""
    return 1 if version is None else version + 2


def encode_config_change(entity_path: str) -> bytes:
    """``entity_path`` as Kafka sanitizes it: ``topics/T``, ``brokers/1``, ``brokers/<default>``."""
    return _json({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path a /config/changes notification names (version 2; version 1 named the
    entity type and name apart)."""
    value = _parse(data)
    if "entity_path" in value:
        return value["entity_path"]
    return f"{value['entity_type']}/{value['entity_name']}"


def encode_isr_change(partitions) -> bytes:
    """Kafka's IsrChangeNotificationSequenceZNode: the partitions whose state changed."""
    return _json({"version": 1, "partitions": [{"topic": t, "partition": p}
                                                for t, p in partitions]})


def decode_isr_change(data: bytes) -> list[dict]:
    """The partitions ({"topic", "partition"}) an ISR change notification names."""
    return list(_parse(data).get("partitions") or ())


def encode_producer_id_block(broker_id: int, first: int, size: int) -> bytes:
    return _json({"version": 1, "broker": broker_id, "block_start": str(first),
                  "block_end": str(first + size - 1)})


def decode_producer_id_block_end(data: bytes | None) -> int:
    """The last id handed out so far, or -1 if none (Kafka starts the first block at 0)."""
    if not data:
        return -1
    return int(_parse(data)["block_end"])


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/T/partitions/P/state`` plus the znode version it was read at: Kafka's
    LeaderIsrAndControllerEpoch, whose ``zk_version`` is the partition epoch a conditional
    update must name."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0

    def encode(self) -> bytes:
        # leader_recovery_state is written only when not RECOVERED (Kafka 3.2+, KIP-704); we
        # never elect uncleanly yet, so it is always absent.
        return _json({"version": 1, "leader": self.leader, "leader_epoch": self.leader_epoch,
                      "controller_epoch": self.controller_epoch, "isr": list(self.isr)})

    @classmethod
    def decode(cls, data: bytes, zk_version: int) -> "PartitionState":
        value = _parse(data)
        return cls(int(value["leader"]), int(value["leader_epoch"]), tuple(value["isr"]),
                   int(value["controller_epoch"]), zk_version)


@dataclass(frozen=True)
class Endpoint:
    listener: str          # listener name, e.g. PLAINTEXT
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def encode_broker_registration(endpoints: Sequence[Endpoint], rack: str | None = None,
                               jmx_port: int = -1, features: Mapping | None = None) -> bytes:
    """Kafka's version 5 registration (BrokerIdZNode.encode). ``host``/``port`` are the first
    PLAINTEXT endpoint's, for old clients; null and -1 when there is none, as Kafka writes."""
    plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
    value = {"version": 5,
             "host": plaintext.host if plaintext else None,
             "port": plaintext.port if plaintext else -1,
             "endpoints": [e.connection_string() for e in endpoints],
             "jmx_port": jmx_port,
             "timestamp": now_ms(),
             "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
             "features": dict(features or {})}
    if rack is not None:
        value["rack"] = rack
    return _json(value)


def decode_broker_registration(data: bytes) -> tuple[list[Endpoint], str | None]:
    value = _parse(data)
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    for text in value.get("endpoints") or ():
        listener, _, address = text.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append(Endpoint(listener, host.strip("[]"), int(port),
                                  protocols.get(listener, listener)))
    return endpoints, value.get("rack")


# --- client quotas ------------------------------------------------------------------------------

QUOTA_ROOTS = {"user": "users", "client-id": "clients", "ip": "ips"}


def sanitize(name: str | None) -> str:
    """Kafka's ``Sanitizer.sanitize`` (URL-encoding where Java's URLEncoder keeps only
    alphanumerics and ``.-*_``, then ``*`` and ``+`` encoded too); None is ``<default>``."""
    if name is None:
        return DEFAULT_ENTITY
    from urllib.parse import quote

    return quote(name, safe="").replace("~", "%7E")


def desanitize(text: str) -> str | None:
    if text == DEFAULT_ENTITY:
        return None
    from urllib.parse import unquote

    return unquote(text)


def quota_entity_path(entity: Sequence[tuple[str, str | None]]) -> str:
    """The entity path under /config of a quota entity: ``users/U``, ``clients/C``,
    ``users/U/clients/C`` or ``ips/IP`` (what /config/changes notifications name)."""
    names = dict(entity)
    if "user" in names and "client-id" in names:
        return f"users/{sanitize(names['user'])}/clients/{sanitize(names['client-id'])}"
    ((kind, name),) = names.items()
    return f"{QUOTA_ROOTS[kind]}/{sanitize(name)}"


def encode_quota_value(key: str, value: float) -> str:
    """As Kafka writes them: whole numbers for the long/int keys, Java's Double.toString for the
    others (``request_percentage`` 50 is "50.0")."""
    if key in ("producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"):
        return str(int(value))
    return repr(float(value))


# --- ACLs (kafka.zk.ZkAclStore, kafka.security.authorizer.AclEntry) -----------------------------
# Kafka's wire codes (org.apache.kafka.common.resource.ResourceType, acl.AclOperation,
# acl.AclPermissionType, resource.PatternType) and their enum names; the znodes use the names in
# Pascal case (SecurityUtils.resourceTypeName / operationName / permissionTypeName).

RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
OPERATIONS = {2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
              12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}
PERMISSIONS = {2: "DENY", 3: "ALLOW"}
LITERAL, PREFIXED = 3, 4


def pascal_case(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in name.split("_"))


def _code(names: Mapping[int, str], text: str) -> int:
    """Kafka's SecurityUtils lookup: the Pascal-case name, or the upper-case enum name."""
    wanted = text.replace("_", "").upper()
    for code, name in names.items():
        if name.replace("_", "") == wanted:
            return code
    raise ValueError(f"unknown name {text!r}")


def acl_store_path(pattern_type: int) -> str:
    return ACLS if pattern_type == LITERAL else f"{EXTENDED_ACLS}/prefixed"


def acl_type_path(pattern_type: int, resource_type: int) -> str:
    return f"{acl_store_path(pattern_type)}/{pascal_case(RESOURCE_TYPES[resource_type])}"


def acl_path(resource_type: int, pattern_type: int, name: str) -> str:
    """``/kafka-acl/Topic/orders`` or ``/kafka-acl-extended/prefixed/Topic/orders-``. Kafka puts
    the resource name in the path as it is (no sanitizing)."""
    return f"{acl_type_path(pattern_type, resource_type)}/{name}"


def resource_type_from_path(type_name: str) -> int:
    return _code(RESOURCE_TYPES, type_name)


def encode_acls(entries) -> bytes:
    """``entries``: (principal, host, operation code, permission code) of one resource."""
    return _json({"version": 1, "acls": [
        {"principal": principal, "permissionType": pascal_case(PERMISSIONS[permission]),
         "operation": pascal_case(OPERATIONS[operation]), "host": host}
        for principal, host, operation, permission in entries]})


def decode_acls(data: bytes | None) -> list[tuple[str, str, int, int]]:
    """(principal, host, operation code, permission code) of a resource znode (empty if none)."""
    if not data:
        return []
    value = _parse(data)
    if value.get("version") != 1:
        raise ValueError(f"ACL znode version {value.get('version')!r} (Kafka writes 1)")
    return [(a["principal"], a["host"], _code(OPERATIONS, a["operation"]),
             _code(PERMISSIONS, a["permissionType"])) for a in value.get("acls") or ()]


def acl_change(resource_type: int, pattern_type: int, name: str) -> tuple[str, bytes]:
    """The sequential notification Kafka's AclAuthorizer writes after changing a resource's
    ACLs: (path prefix, data). Literal: the legacy ``TOPIC:<name>`` string
    (``ResourceType.toString``); prefixed: ExtendedAclChangeEvent's JSON."""
    type_name = RESOURCE_TYPES[resource_type]
    if pattern_type == LITERAL:
        return f"{ACL_CHANGES}/{ACL_CHANGE_SEQUENCE}", f"{type_name}:{name}".encode()
    return (f"{EXTENDED_ACL_CHANGES}/{ACL_CHANGE_SEQUENCE}",
            _json({"version": 1, "resourceType": type_name, "name": name,
                   "patternType": "PREFIXED"}))


# --- SCRAM credentials (ScramCredentialUtils, in /config/users/<sanitized user>) ----------------

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


# --- delegation tokens (DelegationTokenManagerZk.toJsonCompatibleMap / fromBytes) --------------

TOKEN_VERSION = 3


def token_path(token_id: str) -> str:
    return f"{TOKENS}/{token_id}"


def encode_token(info) -> bytes:
    """A :class:`kbroker.metadata.image.TokenInfo` as Kafka 3.x writes it (version 3)."""
    return _json({"version": TOKEN_VERSION, "owner": sanitize(info.owner),
                  "tokenRequester": sanitize(info.requester),
                  "renewers": [sanitize(r) for r in info.renewers],
                  "issueTimestamp": info.issue_ms, "maxTimestamp": info.max_ms,
                  "expiryTimestamp": info.expiry_ms, "tokenId": info.token_id})


def decode_token(data: bytes):
    """A token znode's TokenInfo (versions 1 to 3; before 3 the requester is the owner)."""
    from kbroker.metadata.image import TokenInfo

    doc = _parse(data)
    version = int(doc["version"])
    if not 0 < version <= TOKEN_VERSION:
        raise ValueError(f"unknown delegation token znode version {version}")
    owner = desanitize(doc["owner"])
    requester = desanitize(doc["tokenRequester"]) if version >= 3 else owner
    return TokenInfo(str(doc["tokenId"]), owner, requester,
                     tuple(desanitize(r) for r in doc["renewers"]), int(doc["issueTimestamp"]),
                     int(doc["maxTimestamp"]), int(doc["expiryTimestamp"]))
