"""A Faust (faust-streaming) application: an agent counting records per key in a table, with
``processing_guarantee="exactly_once"``. The table lives in memory and is rebuilt from its
changelog topic at every start. Run by compat_tests/pipeline/test_processors.py in the processors'
virtualenv:

    faust_count.py BOOTSTRAP INPUT OUTPUT APP_ID DATA_DIR

Each input record gives one output record: its key and that key's count so far.
"""

import sys

import faust


def main():
    bootstrap, input_topic, output_topic, app_id, data_dir = sys.argv[1:6]
    app = faust.App(app_id, broker=f"kafka://{bootstrap}", store="memory://",
                    datadir=data_dir, processing_guarantee="exactly_once",
                    topic_partitions=1, topic_replication_factor=1, web_enabled=False,
                    consumer_auto_offset_reset="earliest", broker_commit_interval=0.5,
                    table_cleanup_interval=3600.0)
    source = app.topic(input_topic, key_type=str, value_type=str, value_serializer="raw",
                       key_serializer="raw")
    sink = app.topic(output_topic, key_type=str, value_type=str, value_serializer="raw",
                     key_serializer="raw")
    counts = app.Table("counts", default=int, partitions=1)

    @app.agent(source)
    async def count(stream):
        async for key, _ in stream.items():
            counts[key] += 1
            await sink.send(key=key, value=str(counts[key]))

    sys.argv = [sys.argv[0], "worker", "-l", "info"]
    app.main()


if __name__ == "__main__":
    main()
