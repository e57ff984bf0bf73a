"""DescribeLogDirs (key 35), v1-5, and AlterReplicaLogDirs (key 34), v1-2.

DescribeLogDirs: one result per configured log dir (absolute path, as Kafka's
ReplicaManager.describeLogDirs), with the partitions whose logs live there: ``partition_size`` is
the log's size in bytes (all segment files), ``offset_lag`` is ``max(HW - LEO, 0)`` for a current
log (0: a log is never behind its own high watermark here) and, for the future log of a move in
progress (``is_future_key`` true, listed under its destination dir), how far it is behind the
current log's end. ``topics`` null means every partition; a requested partition this broker does
not host is simply absent, as in Kafka.
- v3+ top-level ``error_code`` (KIP-784): NONE.
- v4+ ``total_bytes`` / ``usable_bytes`` of the log dir's file system (KIP-827), from statvfs.
- v5 ``is_cordoned`` (KIP-1066): false; log dirs cannot be cordoned here.
A log dir that cannot be read (statvfs fails) is reported with KAFKA_STORAGE_ERROR and no topics.

AlterReplicaLogDirs: ALTER on CLUSTER (else CLUSTER_AUTHORIZATION_FAILED for every partition);
each partition's answer is :meth:`ReplicaManager.alter_log_dir`'s, given at once while the copy
runs in the background (:mod:`kbroker.replica.log_dir_mover`). A partition named under two dirs
gets one answer, for the last.
"""

from __future__ import annotations

import logging
import os

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.log_dirs")


@handles("DescribeLogDirs")
def handle_describe_log_dirs(ctx, request):
    from kbroker.protocol.messages.describe_log_dirs import DescribeLogDirsResponse as R

    if not allowed(ctx, Op.DESCRIBE, ResourceType.CLUSTER):  # Kafka: no results, and v3+ says why
        return R(throttle_time_ms=0, results=[], error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code
                 if ctx.api_version >= 3 else 0)
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    replicas = ctx.partitions
    by_dir: dict[str, dict[str, list]] = {os.path.abspath(d): {} for d in replicas.log_dirs}
    for partition in sorted(replicas.partitions(), key=lambda p: (p.topic, p.index)):
        if wanted is not None and (partition.topic, partition.index) not in wanted:
            continue
        log_dir = replicas.log_dir_of(partition.topic, partition.index)
        if log_dir is None:
            continue
        log_dir = os.path.abspath(log_dir)
        topics = by_dir.setdefault(log_dir, {})
        topics.setdefault(partition.topic, []).append(R.DescribeLogDirsPartition(
            partition_index=partition.index, partition_size=partition.size_in_bytes,
            offset_lag=max(partition.high_watermark - partition.log_end_offset, 0),
            is_future_key=False))
    for (topic, index), future in sorted(replicas.future_logs().items()):
        partition = replicas.get(topic, index)
        if partition is None or wanted is not None and (topic, index) not in wanted:
            continue
        log_dir = os.path.abspath(replicas.log_manager.future_dir_of(topic, index))
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(R.DescribeLogDirsPartition(
            partition_index=index, partition_size=future.size_in_bytes,
            offset_lag=max(partition.log_end_offset - future.log_end_offset, 0),
            is_future_key=True))
    results = []
    for log_dir, topics in by_dir.items():
        try:
            stats = os.statvfs(log_dir)
        except OSError as exc:
            log.warning("cannot read log dir %s: %s", log_dir, exc)
            results.append(R.DescribeLogDirsResult(
                error_code=Errors.KAFKA_STORAGE_ERROR.code, log_dir=log_dir, topics=[],
                total_bytes=-1, usable_bytes=-1))
            continue
        results.append(R.DescribeLogDirsResult(
            error_code=Errors.NONE.code, log_dir=log_dir,
            topics=[R.DescribeLogDirsTopic(name=name, partitions=partitions)
                    for name, partitions in topics.items()],
            total_bytes=stats.f_blocks * stats.f_frsize,
            usable_bytes=stats.f_bavail * stats.f_frsize,
            is_cordoned=False))
    return R(throttle_time_ms=0, error_code=Errors.NONE.code, results=results)



@handles("AlterReplicaLogDirs")
def handle_alter_replica_log_dirs(ctx, request):
    from kbroker.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsResponse as R

    wanted: dict[tuple[str, int], str] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                wanted.pop((topic.name, index), None)  # the last dir named wins, in its place
                wanted[(topic.name, index)] = log_dir.path
    if not allowed(ctx, Op.ALTER, ResourceType.CLUSTER):
        errors = {key: Errors.CLUSTER_AUTHORIZATION_FAILED for key in wanted}
    else:
        errors = {(topic, index): ctx.partitions.alter_log_dir(topic, index, path)
                  for (topic, index), path in wanted.items()}
    by_topic: dict[str, list] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(R.AlterReplicaLogDirPartitionResult(
            partition_index=index, error_code=error.code))
    return R(throttle_time_ms=0, results=[
        R.AlterReplicaLogDirTopicResult(topic_name=topic, partitions=partitions)
        for topic, partitions in by_topic.items()])
