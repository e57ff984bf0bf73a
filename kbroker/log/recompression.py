"""Rebuilding a produced batch in the topic's codec (Kafka's ``LogValidator.
buildRecordsAndAssignOffsets``), when ``compression.type`` names a codec other than the batch's.

What the rebuilt batch holds, as Kafka writes it:

* the same records, in order, with offset deltas 0..n-1, record attributes 0, and timestamp
  deltas from the first record's timestamp, which becomes the base timestamp;
* the producer id, epoch and base sequence and the transactional flag of the produced batch
  (so idempotence and transactions see the same batch), and the partition leader epoch;
* the base offset the log assigns, lastOffsetDelta n-1;
* CreateTime: the max timestamp of the records; LogAppendTime: the timestamp type bit set and the
  append time as the max timestamp (records keep their own timestamps);
* the records compressed with the topic's codec at its KIP-390 level
  (:func:`kbroker.protocol.compression.level_for`), or uncompressed for ``uncompressed``.

One batch comes out per batch in. A batch whose rebuilt size passes ``max.message.bytes`` is
refused with Kafka's RecordTooLargeException text (MESSAGE_TOO_LARGE).

Cost: when the records are already canonical (every producer writes them so), they are not
re-encoded: the bytes validation decompressed are compressed again under a new header, and the
max timestamp is the produced header's (as kbroker's in-place appends trust it). Otherwise the
records validation decoded (or decodes now) are encoded again one by one.
"""

from __future__ import annotations

from kbroker.log.validation import MAX_UNCOMPRESSED_BATCH_BYTES, ValidBatch
from kbroker.protocol import compression
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.protocol.records import (CREATE_TIME, LOG_APPEND_TIME, RecordBatchBuilder,
                                      assemble_batch, decode_records)

_LEVEL_FIELDS = {compression.GZIP: "compression_gzip_level",
                 compression.LZ4: "compression_lz4_level",
                 compression.ZSTD: "compression_zstd_level"}


def codec_level(codec: int, config) -> int | None:
    """The compressor level for ``codec`` under the topic's KIP-390 setting."""
    field = _LEVEL_FIELDS.get(codec)
    if field is None:
        return None
    return compression.level_for(codec, getattr(config, field))


def rebuild_batch(valid: ValidBatch, config, base_offset: int, leader_epoch: int, now_ms: int,
                  topic_partition: str) -> tuple[bytes, int]:
    """``(batch, max timestamp)``: the validated batch rebuilt in ``valid.target_codec``."""
    header = valid.header
    codec = valid.target_codec
    level = codec_level(codec, config)
    timestamp_type = LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" \
        else CREATE_TIME
    count = header.record_count
    if valid.canonical:
        max_timestamp = now_ms if timestamp_type == LOG_APPEND_TIME else header.max_timestamp
        batch = assemble_batch(
            valid.records, count, compression=codec, compression_level=level,
            timestamp_type=timestamp_type, last_offset_delta=count - 1,
            base_timestamp=header.base_timestamp, max_timestamp=max_timestamp,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, is_transactional=header.is_transactional,
            partition_leader_epoch=leader_epoch, base_offset=base_offset)
    else:
        builder = RecordBatchBuilder(
            compression=codec, compression_level=level, timestamp_type=timestamp_type,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, is_transactional=header.is_transactional,
            partition_leader_epoch=leader_epoch, base_offset=base_offset)
        records = valid.decoded
        if records is None:
            records = decode_records(header, MAX_UNCOMPRESSED_BATCH_BYTES)
        base_timestamp = header.base_timestamp
        max_timestamp = None
        for record in records:
            timestamp = base_timestamp + record.timestamp_delta
            if max_timestamp is None or timestamp > max_timestamp:
                max_timestamp = timestamp
            builder.append(timestamp, record.key, record.value, record.headers)
        batch = builder.build(log_append_time=now_ms)
        if timestamp_type == LOG_APPEND_TIME:
            max_timestamp = now_ms
    if len(batch) > config.max_message_bytes:
        # Kafka's UnifiedLog text, its missing space included.
        raise KafkaError(Errors.MESSAGE_TOO_LARGE,
                         f"Message batch size is {len(batch)} bytes in append topartition "
                         f"{topic_partition} which exceeds the maximum configured size of "
                         f"{config.max_message_bytes}.")
    return batch, max_timestamp
