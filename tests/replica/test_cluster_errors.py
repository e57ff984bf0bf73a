"""What clients and impostors get from a cluster's data path: NOT_LEADER_OR_FOLLOWER with the
leader's whereabouts (KIP-951), leader epoch fencing, OffsetForLeaderEpoch, replica ids that are
not replicas; and how images drive partitions (stale states ignored, reassignment away deletes,
leadership listeners told)."""

from __future__ import annotations

import asyncio

from kbroker.metadata.image import PartitionState
from kbroker.protocol.errors import Errors
from tests.replica.cluster_harness import InProcessCluster, batch, produce, until


def run(coro):
    asyncio.run(coro)


async def fetch(client, topic_id, topic, index, offset, *, replica_id=-1, version=16,
                current_leader_epoch=-1, last_fetched_epoch=-1):
    from kbroker.protocol.messages.fetch import FetchRequest as Q

    request = Q(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[Q.FetchTopic(
                    topic=topic, topic_id=topic_id, partitions=[Q.FetchPartition(
                        partition=index, current_leader_epoch=current_leader_epoch,
                        fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
                        log_start_offset=-1, partition_max_bytes=1 << 20)])])
    if version >= 15:
        request.replica_state = Q.ReplicaState(replica_id=replica_id, replica_epoch=-1)
    else:
        request.replica_id = replica_id
    response = await client.request("Fetch", request, version)
    return response, response.responses[0].partitions[0]


async def offset_for_leader_epoch(client, topic, index, leader_epoch, current_leader_epoch=-1,
                                  replica_id=-1):
    from kbroker.protocol.messages.offset_for_leader_epoch import \
        OffsetForLeaderEpochRequest as Q

    request = Q(replica_id=replica_id, topics=[Q.OffsetForLeaderTopic(topic=topic, partitions=[
        Q.OffsetForLeaderPartition(partition=index, current_leader_epoch=current_leader_epoch,
                                   leader_epoch=leader_epoch)])])
    response = await client.request("OffsetForLeaderEpoch", request)
    return response.topics[0].partitions[0]


def test_not_leader_answers_name_the_leader_and_its_endpoint(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            topic = await cluster.create_topic("t", [(1, 2)], [PartitionState(1, 5, (1, 2), 0)])
            follower, outsider = await cluster.client(2), await cluster.client(0)
            leader_port = cluster.brokers[1].port()
            try:
                for client in (follower, outsider):  # a follower, and a broker not hosting it
                    response, answer = await produce(client, "t", 0, batch(1), version=12)
                    assert answer.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                    assert (answer.current_leader.leader_id,
                            answer.current_leader.leader_epoch) == (1, 5)
                    assert [(n.node_id, n.port) for n in response.node_endpoints] == \
                        [(1, leader_port)]
                    response, answer = await fetch(client, topic.topic_id, "t", 0, 0)
                    assert answer.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                    assert answer.current_leader.leader_id == 1
                    assert [(n.node_id, n.port) for n in response.node_endpoints] == \
                        [(1, leader_port)]
                # An older Produce version has no room for the hint: the error alone.
                _, answer = await produce(follower, "t", 0, batch(1), version=9)
                assert answer.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                # ListOffsets has no hint fields, only the error.
                from kbroker.protocol.messages.list_offsets import ListOffsetsRequest as Q
                response = await follower.request("ListOffsets", Q(
                    replica_id=-1, isolation_level=0, topics=[Q.ListOffsetsTopic(
                        name="t", partitions=[Q.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
                assert response.topics[0].partitions[0].error_code == \
                    Errors.NOT_LEADER_OR_FOLLOWER
            finally:
                follower.close()
                outsider.close()
    run(scenario())


def test_leader_epoch_fencing_and_offset_for_leader_epoch(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path, size=2) as cluster:
            topic = await cluster.create_topic("t", [(0, 1)], [PartitionState(0, 3, (0, 1), 0)])
            client = await cluster.client(0)
            try:
                await produce(client, "t", 0, batch(4))
                _, answer = await fetch(client, topic.topic_id, "t", 0, 0,
                                        current_leader_epoch=2)
                assert answer.error_code == Errors.FENCED_LEADER_EPOCH
                _, answer = await fetch(client, topic.topic_id, "t", 0, 0,
                                        current_leader_epoch=4)
                assert answer.error_code == Errors.UNKNOWN_LEADER_EPOCH
                _, answer = await fetch(client, topic.topic_id, "t", 0, 0,
                                        current_leader_epoch=3)
                assert answer.error_code == 0 and answer.high_watermark == 4

                answer = await offset_for_leader_epoch(client, "t", 0, 3, 3)
                assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, 3, 4)
                answer = await offset_for_leader_epoch(client, "t", 0, 1)  # before epoch 3
                assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, 1, 0)
                answer = await offset_for_leader_epoch(client, "t", 0, 3, 2)
                assert answer.error_code == Errors.FENCED_LEADER_EPOCH
                assert (answer.leader_epoch, answer.end_offset) == (-1, -1)
                answer = await offset_for_leader_epoch(client, "t", 0, 3, 9)
                assert answer.error_code == Errors.UNKNOWN_LEADER_EPOCH
                answer = await offset_for_leader_epoch(client, "nope", 0, 3)
                assert answer.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
                follower = await cluster.client(1)
                try:
                    answer = await offset_for_leader_epoch(follower, "t", 0, 3)
                    assert answer.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                finally:
                    follower.close()
            finally:
                client.close()
    run(scenario())


def test_a_replica_fetch_from_a_non_replica_is_refused(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            topic = await cluster.create_topic("t", [(0, 1)])
            client = await cluster.client(0)
            try:
                await produce(client, "t", 0, batch(2))
                leader = cluster.partition(0, "t")
                # Broker 2 is not a replica; 0 is the leader itself; 7 does not exist.
                for impostor in (2, 0, 7):
                    for version in (14, 16):
                        _, answer = await fetch(client, topic.topic_id, "t", 0, 2,
                                                replica_id=impostor, version=version)
                        assert answer.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                        assert answer.records is None or len(answer.records) == 0
                assert leader.follower_end_offset(2) == -1 and leader.isr == {0, 1}
                # A consumer on the same connection still reads below the HW.
                _, answer = await fetch(client, topic.topic_id, "t", 0, 0)
                assert answer.error_code == 0 and answer.high_watermark == 2
            finally:
                client.close()
    run(scenario())


def test_a_follower_fetch_diverging_from_the_leader_gets_the_diverging_epoch(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path, size=2) as cluster:
            topic = await cluster.create_topic("t", [(0, 1)], [PartitionState(0, 1, (0, 1), 0)])
            client = await cluster.client(0)
            try:
                await produce(client, "t", 0, batch(3))
                await cluster.set_state("t", 0, 0, 2, (0, 1))
                await produce(client, "t", 0, batch(3))  # epoch 2 starts at 3
                # A fetcher claiming epoch 1 up to offset 5 diverges at 3 (epoch 1's end).
                await cluster.brokers[1].replicas.stop_replication()
                leader = cluster.partition(0, "t")
                reported = leader.follower_end_offset(1)
                _, answer = await fetch(client, topic.topic_id, "t", 0, 5, replica_id=1,
                                        current_leader_epoch=2, last_fetched_epoch=1)
                assert answer.error_code == 0
                assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (1, 3)
                assert answer.records is None or len(answer.records) == 0
                # A diverging fetch says nothing about what the follower shares with the leader.
                assert leader.follower_end_offset(1) == reported
                _, answer = await fetch(client, topic.topic_id, "t", 0, 3, replica_id=1,
                                        current_leader_epoch=2, last_fetched_epoch=1)
                assert answer.diverging_epoch.epoch == -1 and len(answer.records) > 0
                assert leader.follower_end_offset(1) == 3
            finally:
                client.close()
    run(scenario())


def test_images_drive_partitions_stale_states_are_ignored_and_listeners_hear(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path) as cluster:
            heard = {node: [] for node in cluster.brokers}
            for node, broker in cluster.brokers.items():
                broker.replicas.add_leadership_listener(
                    lambda *event, node=node: heard[node].append(event))
            await cluster.create_topic("t", [(0, 1)], [PartitionState(0, 1, (0, 1), 0)])
            assert cluster.partition(2, "t") is None  # not assigned here: not hosted
            assert heard[0] == [("t", 0, True, 1)] and heard[1] == []

            await cluster.set_state("t", 0, 1, 2, (0, 1))  # leadership moves to broker 1
            assert heard[0][-1] == ("t", 0, False, 2) and heard[1] == [("t", 0, True, 2)]
            assert cluster.partition(0, "t").role == "follower"
            assert cluster.partition(1, "t").role == "leader"
            # The new leader records where its epoch starts before it appends (KIP-101).
            assert cluster.partition(1, "t")._log.leader_epoch_cache.entries() == [(2, 0)]

            # A notification from before that change arrives late: broker 1 ignores it.
            stale_image = cluster.image
            topic = stale_image.topic("t")
            stale = stale_image.with_topic(topic.with_states([PartitionState(0, 1, (0, 1), 9)]))
            await cluster.publish_to(1, stale)
            partition = cluster.partition(1, "t")
            assert partition.role == "leader" and partition.leader_epoch == 2
            await cluster.publish_to(1, stale_image)

            # Reassigned away from broker 0: its replica (and log dir) goes.
            topic = cluster.image.topic("t")
            cluster.image = cluster.image.with_topic(
                topic.with_assignments([(1, 2)]).with_states([PartitionState(1, 3, (1,), 2)]))
            await cluster._publish_all()
            assert cluster.partition(0, "t") is None
            assert cluster.brokers[0].replicas.log_dir_of("t", 0) is None
            assert cluster.partition(2, "t").role == "follower"
            assert await until(lambda: cluster.partition(2, "t").leader_id == 1)
            assert heard[1][-1] == ("t", 0, True, 3)
    run(scenario())


def test_a_client_listener_cannot_pose_as_a_replica(tmp_path):
    """With inter.broker.listener.name set, replica fetches belong on that listener: a client
    on another listener claiming a real replica's id gets TOPIC_AUTHORIZATION_FAILED (what
    Kafka answers a follower fetch it does not authorize) and moves nothing."""
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
                 "inter.broker.listener.name": "PLAINTEXT"}

    async def scenario():
        async with InProcessCluster(tmp_path, overrides=overrides) as cluster:
            topic = await cluster.create_topic("t", [(0, 1, 2)])
            client = await cluster.client(0)
            from kbroker.replica.broker_client import BrokerClient
            outsider = BrokerClient("127.0.0.1", cluster.brokers[0].port("CLIENT"),
                                    client_id="impostor", timeout_s=10,
                                    max_response_bytes=1 << 24)
            await outsider.connect()
            try:
                _, answer = await produce(client, "t", 0, batch(2))
                assert answer.error_code == 0
                await cluster.brokers[2].replicas.stop_replication()
                leader = cluster.partition(0, "t")
                reported = leader.follower_end_offset(2)
                _, answer = await fetch(outsider, topic.topic_id, "t", 0, 2, replica_id=2)
                assert answer.error_code == Errors.TOPIC_AUTHORIZATION_FAILED
                assert leader.follower_end_offset(2) == reported
                # The same request on the inter-broker listener is a replica's fetch.
                _, answer = await fetch(client, topic.topic_id, "t", 0, 2, replica_id=2)
                assert answer.error_code == 0 and leader.follower_end_offset(2) == 2
                # Consumers on the client listener read as usual.
                _, answer = await fetch(outsider, topic.topic_id, "t", 0, 0)
                assert answer.error_code == 0 and len(answer.records) > 0
            finally:
                client.close()
                outsider.close()
    run(scenario())


def test_fetch_from_follower_in_the_consumers_rack(tmp_path):
    """KIP-392 with Kafka's RackAwareReplicaSelector: the leader points a consumer in rack r2 to
    the in-sync follower there, which serves it below its own high watermark."""
    selector = {"replica.selector.class":
                "org.apache.kafka.common.replica.RackAwareReplicaSelector"}

    async def scenario():
        async with InProcessCluster(tmp_path, overrides=selector,
                                    racks={0: "r0", 1: "r1", 2: "r2"}) as cluster:
            topic = await cluster.create_topic("t", [(0, 1, 2)])
            leader, follower = await cluster.client(0), await cluster.client(2)
            try:
                _, answer = await produce(leader, "t", 0, batch(3))
                assert answer.error_code == 0
                assert await until(lambda: cluster.partition(2, "t").high_watermark == 3)

                async def consumer_fetch(client, rack):
                    from kbroker.protocol.messages.fetch import FetchRequest as Q
                    request = Q(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                isolation_level=0, session_id=0, session_epoch=-1,
                                rack_id=rack, topics=[Q.FetchTopic(
                                    topic="t", topic_id=topic.topic_id, partitions=[
                                        Q.FetchPartition(partition=0, current_leader_epoch=0,
                                                         fetch_offset=0, last_fetched_epoch=-1,
                                                         log_start_offset=-1,
                                                         partition_max_bytes=1 << 20)])])
                    response = await client.request("Fetch", request, 13)
                    return response.responses[0].partitions[0]

                answer = await consumer_fetch(leader, "r2")
                assert answer.error_code == 0 and answer.preferred_read_replica == 2
                assert answer.records is None or len(answer.records) == 0
                answer = await consumer_fetch(follower, "r2")
                assert answer.error_code == 0 and answer.high_watermark == 3
                assert len(answer.records) > 0
                # A consumer in the leader's rack, or in no rack, reads from the leader.
                for rack in ("r0", "", "elsewhere"):
                    answer = await consumer_fetch(leader, rack)
                    assert answer.preferred_read_replica == -1 and len(answer.records) > 0
            finally:
                leader.close()
                follower.close()
    run(scenario())


def test_without_a_replica_selector_followers_refuse_consumers(tmp_path):
    async def scenario():
        async with InProcessCluster(tmp_path, racks={0: "r0", 1: "r1", 2: "r2"}) as cluster:
            topic = await cluster.create_topic("t", [(0, 1, 2)])
            leader, follower = await cluster.client(0), await cluster.client(2)
            try:
                await produce(leader, "t", 0, batch(3))
                _, answer = await fetch(follower, topic.topic_id, "t", 0, 0)
                assert answer.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                _, answer = await fetch(leader, topic.topic_id, "t", 0, 0)
                assert answer.preferred_read_replica == -1 and len(answer.records) > 0
            finally:
                leader.close()
                follower.close()
    run(scenario())
