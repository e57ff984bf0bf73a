"""A Quix Streams application counting records per key, exactly once, with its state in RocksDB
backed by a changelog topic. Run by compat_tests/pipeline/test_processors.py in the processors'
virtualenv:

    quix_count.py BOOTSTRAP INPUT OUTPUT STATE_DIR GROUP

Each input record gives one output record, its key and {"value": ..., "count": n}, n counting
that key's records; read_committed, each key's counts must be exactly 1..N in order.
"""

import logging
import sys

from quixstreams import Application


def main():
    bootstrap, input_topic, output_topic, state_dir, group = sys.argv[1:6]
    logging.basicConfig(level=logging.INFO)
    app = Application(broker_address=bootstrap, consumer_group=group,
                      processing_guarantee="exactly-once", state_dir=state_dir,
                      auto_offset_reset="earliest", commit_interval=0.5,
                      auto_create_topics=True, use_changelog_topics=True)
    source = app.topic(input_topic, key_deserializer="string", value_deserializer="string")
    sink = app.topic(output_topic, key_serializer="string", value_serializer="json")

    def count(value, state):
        n = state.get("count", 0) + 1
        state.set("count", n)
        return {"value": value, "count": n}

    app.dataframe(source).apply(count, stateful=True).to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
