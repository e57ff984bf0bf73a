"""Raw requests the metadata tests send (generated codecs over a real socket)."""

from __future__ import annotations

import threading
import time

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


def create_while_probing(bootstrap: str, name: str, partitions: int, timeout_s: float,
                         probe_timeout_s: float):
    """Create ``name`` with ``partitions`` partitions on one connection while another keeps
    making ApiVersions + Metadata round trips until it answers: (the CreatableTopicResult, the
    seconds the creation took, each probe round trip's seconds)."""
    from tests.integration.clients import Wire  # the raw-socket client of the tests

    result = {}

    def create():
        with Wire(bootstrap, timeout=timeout_s) as wire:
            started = time.monotonic()
            result["topic"] = create_topic(wire, name, partitions,
                                           timeout_ms=int(timeout_s * 1000))
            result["seconds"] = time.monotonic() - started

    creator = threading.Thread(target=create)
    round_trips = []
    with Wire(bootstrap, timeout=probe_timeout_s) as probe:
        probe.api_versions()
        creator.start()
        while creator.is_alive():
            started = time.monotonic()
            probe.api_versions()
            probe.metadata(["absent-topic"])
            round_trips.append(time.monotonic() - started)
    creator.join()
    return result["topic"], result["seconds"], round_trips


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
