"""Pure Kafka protocol codecs: bytes in, objects out, and back. No I/O lives here.

Key files: ``primitives`` (wire primitives and the decode error), ``messages/`` (generated request
and response classes, one module per API, loaded on first use), ``records`` (RecordBatch v2),
``compression`` (codecs), ``errors`` (Kafka error codes), ``apis`` (api keys and header versions).
"""
