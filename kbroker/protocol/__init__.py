"""Pure Kafka protocol codecs: bytes in, objects out, and back. No I/O lives here.

Key files: ``primitives`` (wire primitives and the decode error), ``messages/`` (generated from the
schemas in Apache Kafka 4.4.0's jars: request and response classes, one module per API, loaded on
first use, the header-version rules, and the coordinators' record keys and values), ``records``
(RecordBatch v2), ``compression`` (codecs), ``errors`` (Kafka error codes).
"""
