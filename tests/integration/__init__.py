"""Broker integration tests over real sockets: real client libraries (confluent-kafka, aiokafka,
kafka-python, kcat) and raw Kafka frames against a ``kbroker serve`` process.

``clients.py`` holds the shared helpers: a raw wire client built on the generated codecs, an
independent RecordBatch v2 encoder/decoder (so that tests can build broken batches on purpose), and
one produce/consume adapter per client library with a common record shape.
"""
