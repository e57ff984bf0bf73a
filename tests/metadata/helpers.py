"""Raw requests the metadata tests send (generated codecs over a real socket)."""

from __future__ import annotations

from kbroker.protocol import messages
from kbroker.protocol.messages import API_KEY_BY_NAME

CREATE_TOPICS = API_KEY_BY_NAME["CreateTopics"]
DELETE_TOPICS = API_KEY_BY_NAME["DeleteTopics"]
CREATE_PARTITIONS = API_KEY_BY_NAME["CreatePartitions"]
ALTER_CONFIGS = API_KEY_BY_NAME["AlterConfigs"]
FIND_COORDINATOR = API_KEY_BY_NAME["FindCoordinator"]


def create_topic(wire, name: str, partitions: int, configs: dict | None = None,
                 timeout_ms: int = 60000):
    """The CreatableTopicResult of one CreateTopics."""
    cls = messages.request_class(CREATE_TOPICS)
    request = cls(topics=[cls.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=timeout_ms, validate_only=False)
    return wire.call(CREATE_TOPICS, None, request).topics[0]


def delete_topic(wire, name: str, version: int | None = None):
    cls = messages.request_class(DELETE_TOPICS)
    version = wire.version(DELETE_TOPICS, version)
    if version >= 6:
        request = cls(topics=[cls.DeleteTopicState(name=name)], timeout_ms=30000)
    else:
        request = cls(topic_names=[name], timeout_ms=30000)
    return wire.call(DELETE_TOPICS, version, request).responses[0]


def create_partitions(wire, name: str, count: int):
    cls = messages.request_class(CREATE_PARTITIONS)
    request = cls(topics=[cls.CreatePartitionsTopic(name=name, count=count, assignments=None)],
                  timeout_ms=30000, validate_only=False)
    return wire.call(CREATE_PARTITIONS, None, request).results[0]


def alter_topic_config(wire, name: str, configs: dict):
    cls = messages.request_class(ALTER_CONFIGS)
    request = cls(resources=[cls.AlterConfigsResource(
        resource_type=2, resource_name=name,
        configs=[cls.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=False)
    return wire.call(ALTER_CONFIGS, None, request).responses[0]


def find_group_coordinator(wire, group: str):
    cls = messages.request_class(FIND_COORDINATOR)
    version = wire.version(FIND_COORDINATOR)
    if version >= 4:
        request = cls(key_type=0, coordinator_keys=[group])
    else:
        request = cls(key=group, key_type=0)
    return wire.call(FIND_COORDINATOR, version, request)
