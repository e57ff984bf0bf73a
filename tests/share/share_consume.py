"""A confluent-kafka ShareConsumer in its own process, for the kill -9 scenario:
``python -m tests.share.share_consume BOOTSTRAP GROUP TOPIC``. It polls in explicit mode and never
acknowledges what it got; it prints "got <offset>" for each record, flushed, then sleeps so the
test can kill it while it holds the records' acquisition locks."""

import sys
import time

from confluent_kafka import ShareConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    while True:
        messages = [m for m in consumer.poll(1.0) if m.error() is None]
        if messages:
            for message in messages:
                print("got", message.offset(), flush=True)
            time.sleep(3600)  # hold the locks until killed


if __name__ == "__main__":
    main()
