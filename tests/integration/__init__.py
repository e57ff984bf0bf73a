"""Broker integration tests over real sockets: real client libraries (confluent-kafka, aiokafka,
kafka-python, kcat) and raw Kafka frames against a ``kbroker serve`` process.

``clients.py`` holds the shared helpers: a raw wire client built on the generated codecs, the
tests' independent RecordBatch v2 encoder/decoder (``tests/recordbatch.py``, so that tests can
build broken batches on purpose), and the produce/consume adapters of ``compat_tests/clients``
(one per client library, with a common record shape) set up for these tests.
"""
