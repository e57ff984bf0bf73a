"""The error codes a response carries, as the request metrics and the trace count them: also
inside Metadata topic entries the handler keeps encoded (kbroker.handlers.metadata)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from kbroker.handlers.metadata import _encode_topic
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.metadata import MetadataResponse as R
from kbroker.server.observe import response_errors

METADATA = 3


def partition(index, error=Errors.NONE):
    return R.MetadataResponsePartition(error_code=error.code, partition_index=index, leader_id=-1,
                                       leader_epoch=0, replica_nodes=[1], isr_nodes=[],
                                       offline_replicas=[1])


def encoded(name, partitions, version=12):
    topic = SimpleNamespace(name=name, topic_id=uuid.uuid4(), is_internal=False)
    return _encode_topic(R, topic, partitions, version)


def test_an_encoded_entry_carries_its_partitions_errors_and_decodes_to_them():
    entry = encoded("offline", [partition(0, Errors.LEADER_NOT_AVAILABLE), partition(1),
                                partition(2, Errors.LEADER_NOT_AVAILABLE)])
    assert entry.error_codes == (Errors.LEADER_NOT_AVAILABLE.code,)
    assert [p.error_code for p in entry.decoded().partitions] == \
        [Errors.LEADER_NOT_AVAILABLE.code, 0, Errors.LEADER_NOT_AVAILABLE.code]


def test_metadata_errors_are_counted_in_encoded_and_plain_entries_alike():
    unknown = R.MetadataResponseTopic(error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                      name="missing", partitions=[])
    healthy = encoded("healthy", [partition(0)])
    offline = encoded("offline", [partition(0, Errors.LEADER_NOT_AVAILABLE)])
    # The first entry decides nothing: encoded first, plain later, and the reverse.
    response = R(brokers=[], topics=[healthy, unknown, offline])
    assert response_errors(METADATA, response) == [Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                   Errors.LEADER_NOT_AVAILABLE.code]
    response = R(brokers=[], topics=[unknown, offline])
    assert response_errors(METADATA, response) == [Errors.UNKNOWN_TOPIC_OR_PARTITION.code,
                                                   Errors.LEADER_NOT_AVAILABLE.code]
    assert response_errors(METADATA, R(brokers=[], topics=[healthy])) == []
