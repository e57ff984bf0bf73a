"""One group member in its own process, for tests/integration/test_groups.py:
``python -m tests.integration.group_member CLIENT BOOTSTRAP TOPIC GROUP ASSIGNOR [INSTANCE_ID]``.
It consumes until SIGTERM, then closes (and leaves the group); SIGKILL makes it vanish so that
only the session timeout removes it. Only the standard library and the one client are imported:
the test module's imports (pytest, kbroker, every client) cost each member ~0.3 s of CPU.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

SESSION_MS = 3000


def member_main(client, bootstrap, topic, group, assignor, instance_id):
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if os.environ.get("KPDEBUG"):
        import logging
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
    instance_id = instance_id or None
    if client == "confluent":
        from confluent_kafka import Consumer

        config = {"bootstrap.servers": bootstrap, "group.id": group,
                  "partition.assignment.strategy": assignor, "session.timeout.ms": SESSION_MS,
                  "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"}
        if instance_id:
            config["group.instance.id"] = instance_id
        consumer = Consumer(config)
        consumer.subscribe([topic])
        while not stop.is_set():
            consumer.poll(0.2)
        consumer.close()
    elif client == "kafka-python":
        import kafka.coordinator.assignors as assignors
        from kafka import KafkaConsumer

        module = {"RangePartitionAssignor": "range", "RoundRobinPartitionAssignor": "roundrobin",
                  "CooperativeStickyAssignor": "cooperative_sticky"}[assignor]
        cls = getattr(__import__(f"{assignors.__name__}.{module}", fromlist=[assignor]), assignor)
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                 partition_assignment_strategy=[cls],
                                 session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                                 auto_offset_reset="earliest", group_instance_id=instance_id)
        # kafka-python 3.0.12 stops heartbeating when a poll times out just as its JoinGroup/
        # SyncGroup round completes (join_group_async never re-enables the heartbeat), so poll
        # with a timeout longer than any rebalance here.
        while not stop.is_set():
            consumer.poll(2000)
        consumer.close()
    elif client == "aiokafka":
        import asyncio

        import aiokafka.coordinator.assignors.range as range_
        import aiokafka.coordinator.assignors.roundrobin as roundrobin
        from aiokafka import AIOKafkaConsumer

        cls = getattr(range_, assignor, None) or getattr(roundrobin, assignor)

        async def run():
            consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        partition_assignment_strategy=(cls,),
                                        session_timeout_ms=SESSION_MS,
                                        heartbeat_interval_ms=500,
                                        auto_offset_reset="earliest")
            await consumer.start()
            while not stop.is_set():
                await consumer.getmany(timeout_ms=200)
            await consumer.stop()

        asyncio.run(run())


if __name__ == "__main__":
    member_main(*sys.argv[1:6], sys.argv[6] if len(sys.argv) > 6 else "")
    os._exit(0)  # a client's leftover threads must not hold the exit up
