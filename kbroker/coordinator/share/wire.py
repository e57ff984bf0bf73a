"""The persister's calls as the inter-broker APIs 83-87 carry them, one share partition each:
the request a broker sends to the share coordinator of a key, and the result read back from the
answer (the handlers of those APIs build answers from the same result types)."""

from __future__ import annotations

from kbroker.coordinator.share.persister import (ReadResult, SharePartitionKey, StateBatch,
                                                 SummaryResult, WriteResult)
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kbroker.protocol.messages.initialize_share_group_state import \
    InitializeShareGroupStateRequest
from kbroker.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kbroker.protocol.messages.read_share_group_state_summary import \
    ReadShareGroupStateSummaryRequest
from kbroker.protocol.messages.write_share_group_state import WriteShareGroupStateRequest

INITIALIZE = "InitializeShareGroupState"
READ = "ReadShareGroupState"
WRITE = "WriteShareGroupState"
DELETE = "DeleteShareGroupState"
SUMMARY = "ReadShareGroupStateSummary"

RESULT_TYPES = {INITIALIZE: WriteResult, READ: ReadResult, WRITE: WriteResult,
                DELETE: WriteResult, SUMMARY: SummaryResult}


def initialize_request(key: SharePartitionKey, state_epoch: int, start_offset: int):
    R = InitializeShareGroupStateRequest
    return R(group_id=key.group_id, topics=[R.InitializeStateData(
        topic_id=key.topic_id, partitions=[R.PartitionData(
            partition=key.partition, state_epoch=state_epoch, start_offset=start_offset)])])


def read_request(key: SharePartitionKey, leader_epoch: int):
    R = ReadShareGroupStateRequest
    return R(group_id=key.group_id, topics=[R.ReadStateData(
        topic_id=key.topic_id, partitions=[R.PartitionData(
            partition=key.partition, leader_epoch=leader_epoch)])])


def write_request(key: SharePartitionKey, state_epoch: int, leader_epoch: int,
                  start_offset: int, batches: list[StateBatch], delivery_complete_count: int):
    R = WriteShareGroupStateRequest
    return R(group_id=key.group_id, topics=[R.WriteStateData(
        topic_id=key.topic_id, partitions=[R.PartitionData(
            partition=key.partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
            start_offset=start_offset, delivery_complete_count=delivery_complete_count,
            state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.delivery_state,
                                        delivery_count=b.delivery_count) for b in batches])])])


def delete_request(key: SharePartitionKey):
    R = DeleteShareGroupStateRequest
    return R(group_id=key.group_id, topics=[R.DeleteStateData(
        topic_id=key.topic_id, partitions=[R.PartitionData(partition=key.partition)])])


def summary_request(key: SharePartitionKey, leader_epoch: int):
    R = ReadShareGroupStateSummaryRequest
    return R(group_id=key.group_id, topics=[R.ReadStateSummaryData(
        topic_id=key.topic_id, partitions=[R.PartitionData(
            partition=key.partition, leader_epoch=leader_epoch)])])


def result_of(api: str, key: SharePartitionKey, response):
    """The result for ``key`` in an answer of ``api``; UNKNOWN_SERVER_ERROR when the answer
    does not name it (a coordinator that answered nothing for the partition)."""
    for topic in response.results:
        if topic.topic_id != key.topic_id:
            continue
        for p in topic.partitions:
            if p.partition == key.partition:
                return _result(api, p)
    return RESULT_TYPES[api](Errors.UNKNOWN_SERVER_ERROR,
                             f"the share coordinator's {api} answer has no result for "
                             f"{key.coordinator_key()}")


def _result(api: str, p):
    error = Errors.for_code(p.error_code)
    if api == READ:
        if error is not Errors.NONE:
            return ReadResult(error, p.error_message)
        return ReadResult(state_epoch=p.state_epoch, start_offset=p.start_offset,
                          batches=[StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                              b.delivery_count) for b in p.state_batches])
    if api == SUMMARY:
        if error is not Errors.NONE:
            return SummaryResult(error, p.error_message)
        return SummaryResult(state_epoch=p.state_epoch, leader_epoch=p.leader_epoch,
                             start_offset=p.start_offset,
                             delivery_complete_count=p.delivery_complete_count)
    return WriteResult(error, p.error_message if error is not Errors.NONE else None)
